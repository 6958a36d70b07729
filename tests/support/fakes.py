"""In-memory fakes of the service ports, and `build()`: the services composed on them with no server.

The event store is the real `EventStore` (sealing mapper included) on eventsourcing's in-memory
persistence; only the ports around it are fakes. Each fake mirrors its adapter's behaviour where a
service depends on it (a destroyed key is never created again, destroy is idempotent, ...).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from eventsourcing.application import Application

from engram.adapters.blind_index import BlindIndex
from engram.adapters.content_rules import ContentRules
from engram.adapters.crypto import DerivationRoot, MasterKey, MasterKeys
from engram.adapters.new_keys import NewKey
from engram.adapters.tombstones import Shred
from engram.domain.clock import FixedClock
from engram.domain.directory import CompanyDirectory, Directory
from engram.domain.errors import MemoryForgotten
from engram.domain.memory import Memory
from engram.domain.review import NORMAL_CONTENT, ContentPolicy
from engram.domain.rollout import Rollout
from engram.domain.settings import PersonSettings
from engram.projections.governance import EMPTY_DIRECTORY, Standing
from engram.projections.purge import ALWAYS, STOPPED_USING, PurgeTracker
from engram.service.governance import GovernanceService
from engram.service.ledger import EventStore, Ledger
from engram.service.memories import MemoryService

START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
# Both spellings: eventsourcing reads `ENGRAM_<NAME>` before `<NAME>`, and the former could come from os.environ.
IN_MEMORY = {"PERSISTENCE_MODULE": "eventsourcing.popo", "ENGRAM_PERSISTENCE_MODULE": "eventsourcing.popo"}

Log = list[tuple[str, ...]]


class FakeKeys:
    """The key store as a dict of key id -> 32 random bytes."""

    def __init__(self, log: Log | None = None) -> None:
        self.log: Log = log if log is not None else []
        self.keys: dict[str, bytes] = {}
        self.destroyed: dict[str, datetime] = {}
        self.vacuums = 0

    def new(self, key_id: Any, company: str) -> NewKey:
        return NewKey(str(key_id), company, os.urandom(32), b"", "fake")

    def create_in(self, _curs: Any, keys: Sequence[NewKey]) -> None:
        # Like the real one: a destroyed key is never created again, and then nothing is saved.
        if any(k.key_id in self.destroyed for k in keys):
            raise MemoryForgotten("this memory was forgotten; nothing more can change it")
        for k in keys:
            self.keys[k.key_id] = k.secret

    @contextmanager
    def sealing(self, new: Sequence[NewKey], ids: Iterable[Any]) -> Iterator[None]:
        yield

    def get(self, key_id: Any) -> bytes | None:
        return self.keys.get(str(key_id))

    def get_many(self, key_ids: Iterable[Any]) -> dict[str, bytes]:
        return {str(k): self.keys[str(k)] for k in key_ids if str(k) in self.keys}

    @contextmanager
    def prefetched(self, key_ids: Iterable[Any]) -> Iterator[None]:
        yield

    def unwrap_row(self, key_id: Any, wrapped: bytes | None) -> bytes | None:
        return self.get(key_id)

    def destroy(self, key_id: Any, company: str, at: datetime) -> datetime:
        self.log.append(("key_destroyed", str(key_id)))
        self.keys.pop(str(key_id), None)
        return self.destroyed.setdefault(str(key_id), at)

    def vacuum(self) -> None:
        self.vacuums += 1


class FakeTombstones:
    """The tombstone outbox and journal as a list, writing to the log it shares with `FakeKeys`.
    `write` is the event store's shredder: what the real one does inside the events' transaction."""

    def __init__(self, keys: FakeKeys, log: Log | None = None) -> None:
        self.keys = keys
        self.log: Log = log if log is not None else []
        self.recorded: list[dict[str, Any]] = []
        self.commits = 0

    def write(self, _curs: Any, shreds: Sequence[Shred]) -> None:
        for shred in shreds:
            self.recorded.append(shred.tombstone)
            self.log.append(("tombstone", shred.tombstone["kind"], shred.tombstone["aggregate_id"]))
            if shred.key_id is not None:
                self.keys.destroy(shred.key_id, shred.tombstone["company"], shred.at)

    def committed(self, shreds: Sequence[Shred]) -> None:
        self.commits += 1

    def __contains__(self, aggregate_id: object) -> bool:
        return any(t["aggregate_id"] == str(aggregate_id) and t["kind"] != "revoke" for t in self.recorded)


class FakeStandings:
    """The governance view: directories, revocations and pauses a test sets, or the settler applies."""

    def __init__(self) -> None:
        self.directories: dict[str, dict[str, Any]] = {}
        self.revoked: dict[tuple[str, str], set[str]] = {}  # (company, person or "") -> source ids
        self.pauses: dict[tuple[str, str], tuple[bool, bool]] = {}  # -> (learning_paused, use_paused)
        self._owners: dict[UUID, tuple[str, ...]] = {}

    def standing(self, company: str, person: str, token_id: str | None = None, key_id: str | None = None,
                 bot: str | None = None) -> Standing:
        learning, use = self.pauses.get((company, person), (False, False))
        return Standing(directory=Directory.from_document(self.directories.get(company, dict(EMPTY_DIRECTORY))),
                        revoked_sources=frozenset(self.revoked.get((company, ""), set())
                                                  | self.revoked.get((company, person), set())),
                        learning_paused=learning, use_paused=use)

    def set_directory(self, company: str, document: dict[str, Any]) -> None:
        self.directories[company] = document

    def revoke(self, company: str, source_id: str, person: str | None = None) -> None:
        self.revoked.setdefault((company, person or ""), set()).add(source_id)

    def pause(self, company: str, person: str, *, learning: bool = False, use: bool = False) -> None:
        self.pauses[(company, person)] = (learning, use)

    def apply(self, event: Any) -> None:
        """What the governance projection does with each event."""
        if isinstance(event, CompanyDirectory.Opened):
            self._owners[event.originator_id] = (event.company,)
            self.directories.setdefault(event.company, dict(EMPTY_DIRECTORY))
        elif isinstance(event, CompanyDirectory.Replaced):
            self.set_directory(self._owners[event.originator_id][0], event.document)
        elif isinstance(event, CompanyDirectory.SourceRevoked):
            self.revoke(self._owners[event.originator_id][0], event.source_id, event.person)
        elif isinstance(event, PersonSettings.Opened):
            self._owners[event.originator_id] = (event.company, event.person)
        elif isinstance(event, PersonSettings.Changed):
            company, person = self._owners[event.originator_id]
            self.pause(company, person, learning=event.learning_paused, use=event.use_paused)


class FakePurge:
    """The purge tracker: a forget request opens with every copy pending; a test marks copies purged."""

    def __init__(self, copies: tuple[str, ...] = ALWAYS) -> None:
        self.copies = copies
        self.requests: dict[str, dict[str, Any]] = {}
        self.purged_copies: dict[str, set[str]] = {}
        self._owners: dict[UUID, tuple[str, str]] = {}

    def apply(self, event: Any) -> None:
        """What the recall projection reports: it opens the request when it sees the Forgotten event."""
        if isinstance(event, Memory.Created):
            self._owners[event.originator_id] = (event.company, event.person)
        elif isinstance(event, Memory.Forgotten):
            company, person = self._owners[event.originator_id]
            self.requests.setdefault(event.forget_id, {"forget_id": event.forget_id, "memory_id": event.originator_id,
                                                       "company": company, "person": person,
                                                       "requested_at": event.timestamp})

    def purged(self, forget_id: str, *copies: str) -> None:
        self.purged_copies.setdefault(forget_id, set()).update(copies or self.copies)

    def report(self, forget_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        done = self.purged_copies.get(forget_id, set())
        return self.requests.get(forget_id), [
            {"copy": c, "state": "purged" if c in done else "pending", "evidence": "fake" if c in done else None,
             "purged_at": None} for c in self.copies]

    def status(self, forget_id: str | None) -> str:
        if forget_id is None:
            return STOPPED_USING
        return self.status_of(self.report(forget_id)[1])

    status_of = staticmethod(PurgeTracker.status_of)  # the rule itself, not a copy of it


class FakeSettler:
    """Settles in the writer's thread, like the in-process runner: every read model sees each recording."""

    defers = False

    def __init__(self, *read_models: Any) -> None:
        self.read_models = read_models
        self.settled = 0

    def settle_recordings(self, recordings: Sequence[Any]) -> None:
        self.settled += 1
        for recording in recordings:
            for model in self.read_models:
                model.apply(recording.domain_event)

    def settle_stored(self) -> None:
        """Nothing saved here waits for later: these worlds save no receipts."""


class FakeQueries:
    """Only what the commands of `MemoryService` read from the views: the sweeper's due work."""

    def __init__(self) -> None:
        self.due: list[UUID] = []
        self.closed: list[dict[str, Any]] = []

    def due_candidates(self, now: datetime, limit: int) -> list[UUID]:
        return self.due[:limit]

    def closed_candidates_with_keys(self, limit: int) -> list[dict[str, Any]]:
        return self.closed[:limit]


@dataclass
class World:
    clock: FixedClock
    keys: FakeKeys
    tombstones: FakeTombstones
    standings: FakeStandings
    purge: FakePurge
    settler: FakeSettler
    queries: FakeQueries
    store: EventStore
    ledger: Ledger
    memories: MemoryService
    governance: GovernanceService
    log: Log = field(default_factory=list)

    def stored_events(self) -> list[Any]:
        """Every stored event, in order, as the recorder holds them (sealed)."""
        return list(self.store.recorder.select_notifications(start=1, limit=1_000_000))


class AcceptEverything:
    """A content policy for tests of other rules: nothing is sensitive or secret."""

    def classify(self, text: str) -> str:
        return NORMAL_CONTENT

    def is_secret(self, text: str) -> bool:
        return False


class InMemoryEventStore(EventStore):
    """The event store on eventsourcing's in-memory recorder, with fake data keys: having no transactions,
    it makes the new keys before the insert and records the shreds after it, like a commit."""

    def __init__(self, keys: FakeKeys, shredder: Callable[[Any, Sequence[Shred]], None]) -> None:
        self._fake_keys, self._shredder = keys, shredder
        super().__init__(dict(IN_MEMORY), MasterKeys(MasterKey(os.urandom(32))))

    def construct_outbox(self) -> None:
        return None

    def construct_keys(self, factory: Any) -> Any:
        return self._fake_keys

    def record(self, objs: Sequence[Any], shreds: Sequence[Shred], new: Sequence[NewKey],
               kwargs: dict[str, Any]) -> Any:
        self.keys.create_in(None, new)
        recordings = Application.save(self, *objs, **kwargs)
        if shreds:
            self._shredder(None, shreds)
        return recordings


def build(*, mode: Rollout | None = None, policy: ContentPolicy | None = None, max_text_bytes: int = 8192,
          candidate_ttl: timedelta = timedelta(days=30), at: datetime = START) -> World:
    """Composed like `api/bootstrap.py`'s `Engram.open`, with fakes for every port and no database."""
    log: Log = []
    keys = FakeKeys(log)
    tombstones = FakeTombstones(keys, log)
    standings, purge, queries = FakeStandings(), FakePurge(), FakeQueries()
    settler = FakeSettler(standings, purge)
    clock = FixedClock(at)
    store = InMemoryEventStore(keys, tombstones.write)
    ledger = Ledger(store, settler, standings, modes=mode or Rollout(), clock=clock, tombstones=tombstones)
    root = DerivationRoot.new()
    memories = MemoryService(ledger, queries, BlindIndex(root), purge,  # type: ignore[arg-type]
                             policy=policy or ContentRules(), remember_key=root.remember_key,
                             max_text_bytes=max_text_bytes,
                             candidate_ttl=candidate_ttl)
    return World(clock, keys, tombstones, standings, purge, settler, queries, store, ledger, memories,
                 GovernanceService(ledger), log)
