"""The ports the services depend on. Adapters and projections implement them; tests may pass fakes.

Each is a `typing.Protocol`: what the service calls, nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from engram.adapters.new_keys import NewKey
from engram.adapters.tombstones import Shred
from engram.domain.directory import Directory
from engram.domain.hints import SemanticHints
from engram.domain.insight import Group, Proposal
from engram.domain.scope import Scope


class Settler(Protocol):
    """Makes a write visible to every read model before the writer reads again."""

    defers: bool  # True when the HTTP layer may wait for visibility instead of the request's thread

    def settle_recordings(self, recordings: Sequence[Any]) -> object: ...

    def settle_stored(self) -> object:
        """Every event stored so far is visible to the in-process views; nothing to do in distributed
        mode, where every write waited for the workers before it answered (ADR 0063)."""
        ...


class Keys(Protocol):
    """Per-aggregate data keys: destroying one makes its content unreadable in every copy."""

    def new(self, key_id: Any, company: str) -> NewKey | None: ...

    def get(self, key_id: Any) -> bytes | None: ...

    def destroy(self, key_id: Any, company: str, at: datetime) -> datetime: ...

    def unwrap_row(self, key_id: Any, wrapped: bytes | None) -> bytes | None: ...

    def vacuum(self) -> None: ...


class WrappedKeys(Protocol):
    """The key store as a master-key rotation sees it: which master key wraps what, and re-wrapping."""

    def check_masters(self) -> None: ...

    def wrapping_elsewhere(self) -> int: ...

    def derivation_root(self) -> object: ...

    def rewrap(self, after: str, limit: int) -> tuple[int, int, str | None]: ...

    def rewrap_root(self) -> bool: ...

    def wrapped_by(self) -> tuple[dict[str | None, int], str | None]: ...


class Tombstones(Protocol):
    """Content-free records of destructions, kept where a database restore cannot undo them."""

    def committed(self, shreds: Sequence[Shred]) -> None: ...

    def __contains__(self, aggregate_id: object) -> bool: ...


class InsightProposer(Protocol):
    """Suggests insights over one group of a person's confirmed memories (one scope, never across).

    `name` is stable: it is part of each proposal's id, so a proposer proposes the same insight over
    the same memories once. A proposal citing fewer than two of the group's memories, or any memory
    outside it, is dropped by the service. A proposer that cannot run now (its service is down, its
    budget is spent) returns nothing, or raises, and the group is tried again on the next change.
    """

    name: str

    def propose(self, group: Group) -> list[Proposal]: ...


class SemanticIndex(Protocol):
    """Ranking hints within a deadline; raises `SemanticIndexUnavailable` when it cannot answer in time."""

    def hints(self, scopes: list[Scope], query: str) -> SemanticHints: ...


class Nearness(Protocol):
    """The memories nearest a question (`best`: (memory id, similarity), best first), and the similarity
    of any of the person's answering revisions that has a vector (None: not embedded yet)."""

    best: list[tuple[str, float]]

    def similarity(self, memory_id: str, revision: int) -> float | None: ...


class MeaningIndex(Protocol):
    """The memories nearest a question's meaning among a person's, through the recall query's own
    filters; raises `SemanticIndexUnavailable` when the model did not answer within its deadline. Every
    memory it names is re-read and re-authorized by recall."""

    def start(self, query: str) -> Any:
        """Begin embedding the question (`nearest(started=...)` waits for it, within the deadline)."""

    def nearest(self, company: str, person: str, query: str, *, as_of: Any, teams: list[str],
                sources: list[str], revoked: list[str], depth: int, started: Any = None) -> Nearness: ...


class MemoryQueries(Protocol):
    """The recall and review views, as the memory service reads them (rows come back sealed)."""

    def list_memories(self, *, company: str, person: str, statuses: list[str], terms: list[int] | None,
                      after: tuple[Any, str] | None, limit: int, tags: list[int] | None = None) -> list[dict[str, Any]]: ...

    def candidates(self, *, company: str, person: str, newest: int | None = None) -> list[dict[str, Any]]: ...

    def due_candidates(self, now: Any, limit: int) -> list[Any]: ...

    def closed_candidates_with_keys(self, limit: int) -> list[dict[str, Any]]: ...


class LinkReads(Protocol):
    """The links view (ADR 0020): each link of a memory, whoever may see the memory at its other end."""

    def links_of(self, memory_id: Any) -> list[dict[str, Any]]: ...


class PurgeReports(Protocol):
    """What a forget request has purged so far, copy by copy."""

    def report(self, forget_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]: ...

    def status(self, forget_id: str | None) -> str: ...

    def status_of(self, copies: list[dict[str, Any]]) -> str: ...

    def reports(self, forget_ids: list[str]) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]: ...


class Standing(Protocol):
    @property
    def directory(self) -> Directory: ...

    @property
    def revoked_sources(self) -> frozenset[str]: ...

    @property
    def learning_paused(self) -> bool: ...

    @property
    def use_paused(self) -> bool: ...

    @property
    def signed_out_before(self) -> int | None: ...

    @property
    def suspended(self) -> bool: ...

    @property
    def ended(self) -> bool: ...

    @property
    def key_ok(self) -> bool: ...


class Standings(Protocol):
    """The caller's standing, read in one round trip: directory, revocations, pauses."""

    def standing(self, company: str, person: str, token_id: str | None = None, key_id: str | None = None,
                 bot: str | None = None) -> Standing: ...

    def bot_key(self, key_id: str) -> dict[str, Any] | None: ...

    def bot_keys(self, company: str, bot: str) -> list[dict[str, Any]]: ...
