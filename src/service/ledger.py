"""The event-sourced application and the one way every service writes through it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import InfrastructureFactory, RecordConflictError

from engram.adapters.crypto import MasterKeys
from engram.adapters.event_recorder import EventRecorder
from engram.adapters.keystore import KeyStore
from engram.adapters.mapper import SealingMapper
from engram.adapters.new_keys import NewKey
from engram.adapters.tombstones import Shred, TombstoneOutbox
from engram.domain.access import Access
from engram.domain.clock import Clock
from engram.domain.credentials import require_current
from engram.domain.errors import Conflict
from engram.domain.rollout import Rollout
from engram.domain.scope import Caller

from .pending_writes import collector
from .ports import Keys, Settler, Standings, Tombstones

A = TypeVar("A")


class EventStore(Application):
    """The write side: eventsourcing's application with the sealing mapper and the data keys."""

    name = "engram"  # the application name every tracking row refers to

    def __init__(self, env: dict[str, str], masters: MasterKeys, fence: Any = frozenset()) -> None:
        self._masters = masters
        self._fence = fence
        super().__init__(env)
        self.outbox = self.construct_outbox()

    def construct_outbox(self) -> TombstoneOutbox | None:
        """The shreds' outbox, which the event recorder writes in the events' transaction."""
        assert isinstance(self.recorder, EventRecorder)  # PostgreSQL's
        outbox = TombstoneOutbox(self.datastore, self.keys)
        self.recorder.shredder = outbox.write
        return outbox

    def construct_keys(self, factory: InfrastructureFactory) -> KeyStore:
        """The data keys, in PostgreSQL beside the events."""
        return KeyStore(factory.datastore, self._masters, self._fence)  # type: ignore[attr-defined]

    def save(self, *objs: Any, shreds: Sequence[Shred] = (), keys: Sequence[NewKey | None] = (),
             **kwargs: Any) -> Any:
        """Save; the shreds (keys destroyed, tombstones recorded) and the new aggregates' data `keys`
        commit in the events' transaction. The events are sealed with the new keys as made, and with
        the other aggregates' keys fetched in one query when there are several."""
        new = [k for k in keys if k is not None]  # None: a tombstoned id, which the mapper refuses to seal
        with self.keys.sealing(new, [getattr(o, "id", None) or o.originator_id for o in objs if o is not None]):
            return self.record(objs, shreds, new, kwargs)

    def record(self, objs: Sequence[Any], shreds: Sequence[Shred], new: Sequence[NewKey],
               kwargs: dict[str, Any]) -> Any:
        """Insert the events, the shreds and the new keys in one transaction (PostgreSQL's recorder)."""
        return super().save(*objs, **({"shreds": shreds} if shreds else {}), **({"keys": new} if new else {}),
                            **kwargs)

    def construct_factory(self, env: Any) -> InfrastructureFactory:
        factory = super().construct_factory(env)
        self.keys: KeyStore = self.construct_keys(factory)
        return factory

    def construct_mapper(self) -> SealingMapper:
        return SealingMapper(self.construct_transcoder(), self.keys)

    @property
    def datastore(self) -> Any:
        return self.factory.datastore  # type: ignore[attr-defined]


class Ledger:
    """What every service shares: one clock, the caller's access (read once per call), aggregates
    loaded and saved (a lost race is a 409; a save is visible to every read model before it returns,
    or handed to the HTTP layer to wait for), and tombstones."""

    def __init__(self, store: EventStore, settler: Settler, standings: Standings, *, modes: Rollout,
                 clock: Clock, tombstones: Tombstones | None = None) -> None:
        self.store = store
        self.keys: Keys = store.keys
        self.settler = settler
        self.standings = standings
        self.modes = modes
        self.clock = clock
        self.tombstones = tombstones
        self.saves = 0  # saves made through this ledger (background work gives way while it moves)

    def access(self, caller: Caller) -> Access:
        """The access policy for this caller as the directory, revocations and pauses stand now; a
        revoked token or a suspended person goes no further (read in the same round trip)."""
        standing = self.standings.standing(caller.company, caller.person, caller.token_id, caller.key_id, caller.bot)
        require_current(caller, standing.signed_out_before, standing.suspended, standing.ended,
                        key_standing=standing.key_ok and (caller.bot or "") in standing.directory.bots)
        return Access(caller, self.modes.mode(caller.company), standing.directory,
                      standing.revoked_sources, standing.learning_paused, standing.use_paused)

    def admin_access(self, caller: Caller, what: str = "do this") -> Access:
        """An admin's or operator's call: the role first (403), then the token and person still standing."""
        Access(caller).require_admin(what)
        return self.access(caller)

    def admit(self, caller: Caller) -> None:
        """Refuse every call of a company whose rollout mode is off; no database read."""
        Access(caller, self.modes.mode(caller.company)).admit()

    def get(self, aggregate_id: UUID, kind: type[A]) -> A | None:
        """The aggregate of this kind with this id; None when there is none (or it is of another kind)."""
        try:
            aggregate: object = self.store.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None
        return aggregate if isinstance(aggregate, kind) else None

    def save(self, *aggregates: Any, shreds: Sequence[Shred] = ()) -> Sequence[Any]:
        """Save the aggregates' new events; `shreds` (made by `shred`) commit in the same transaction.
        A lost race is a 409 with nothing written, keys included."""
        return self._save(aggregates, shreds=shreds)

    def create(self, *aggregates: Any, company: str, visible: bool = True) -> Sequence[Any]:
        """Save new aggregates, each with a new data key of `company` stored in the same transaction
        as its first events (which it seals): one commit, and no key left behind by a save that failed.
        An id that was forgotten gets no key and nothing is saved (MemoryForgotten); a lost race is a 409.
        `visible=False`: return after the commit, the in-process views applying the events in the
        background (receipts, which API.md makes eventually visible; ADR 0063). In distributed mode the
        write still waits for the workers: readers there (an account forget's) have nothing to catch up
        with."""
        return self._save(aggregates, keys=[self.keys.new(a.id, company) for a in aggregates], visible=visible)

    def caught_up(self) -> None:
        """Every event stored so far is applied by the views this process waits for, before background
        work reads what writes saved with `visible=False` (ADR 0063)."""
        self.settler.settle_stored()

    def _save(self, aggregates: Sequence[Any], *, shreds: Sequence[Shred] = (), keys: Sequence[Any] = (),
              visible: bool = True) -> Sequence[Any]:
        self.saves += 1
        try:
            recordings = self.store.save(*aggregates, shreds=shreds, keys=keys)
        except RecordConflictError:
            raise Conflict("the memory changed while this request was handled") from None
        if shreds and self.tombstones is not None:
            self.tombstones.committed(shreds)
        pending = collector()
        if not visible and not self.settler.defers:
            pass  # the in-process views' background loop applies them (woken by the insert's NOTIFY, or its poll)
        elif pending is not None and self.settler.defers:
            pending.add(recordings)  # the HTTP layer waits for visibility without holding this thread
        else:
            self.settler.settle_recordings(recordings)
        return recordings

    def get_many(self, ids: Sequence[UUID], kind: type[A]) -> dict[UUID, A]:
        """The aggregates of this kind among `ids`: one query finds which have events at all, and only
        those are loaded (a batch of new ids costs one round trip, not one load each)."""
        present = getattr(self.store.recorder, "originators_present", None)
        found = present(ids) if present is not None else set(ids)
        loaded = {i: self.get(i, kind) for i in ids if i in found}
        return {i: a for i, a in loaded.items() if a is not None}

    def shred(self, kind: str, aggregate_id: Any, company: str, **fields: Any) -> Shred:
        """A tombstone (content-free: ids and times only) to save with its event; every kind but
        `revoke` destroys the aggregate's data key in that transaction."""
        at = self.clock.now()
        return Shred({"kind": kind, "aggregate_id": str(aggregate_id), "company": company,
                      "at": at.isoformat(), **fields}, at)
