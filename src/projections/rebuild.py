"""Rebuilding a projection's view: every event replayed into shadow tables beside the serving view, in
committed batches (or several processes' parts, ADR 0038), then swapped in under a short lock (ADR 0034)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from eventsourcing.persistence import OperationalError, Tracking
from psycopg import Cursor
from psycopg.errors import DeadlockDetected

from engram.adapters.availability import DatabaseTimeout
from engram.adapters.keystore import prefetched
from engram.adapters.mapper import stored_topics

from .failures import ROLLED_BACK, rolled_back
from .view import APPLICATION, View

log = logging.getLogger("engram.projections")


class Rebuilding:
    """`ViewProjection`'s rebuild: it has the view and applies batches (`_apply_after`), this replays
    the log into the view's shadow with them and swaps it in."""

    name: str

    @property
    def view(self) -> View:
        raise NotImplementedError  # the projection's (`Projection.view`)

    def _apply_after(self, curs: Cursor[Any], position: int, items: Sequence[tuple[Any, Tracking]],
                     quarantined: set[int] | None = None) -> int:
        raise NotImplementedError  # the projection's (`ViewProjection._apply_after`)

    # Every event this projection applies changes one memory's rows (its originator's) and, besides,
    # only rows it adds to in any order (per-person counts written in a fixed order): replaying each
    # memory's events in order, the memories apart and at once, builds the same view. A rebuild may then
    # fill it from several processes, each taking the memories of one part (`replay_part`, ADR 0038).
    partitionable = False
    # The event classes `apply` acts on; None: it decides event by event. A rebuild leaves the others
    # unread (`skipped_topics`): a recall view has no use for the receipts that are most of the log.
    applies_to: tuple[type, ...] | None = None

    def skipped_topics(self) -> list[str]:
        """The stored topics of domain events this projection does nothing with. A topic the domain does
        not know is never among them: such an event is still read, and set aside as it always was."""
        if self.applies_to is None:
            return []
        return sorted(topic for topic, cls in stored_topics().items() if not issubclass(cls, self.applies_to))

    REBUILD_BATCH = 2000  # events a rebuild applies, and commits, at a time
    SWAP_GAP = 2000  # at most this many events behind the head, the rebuild takes the lock and swaps
    SWAP_TRIES = 5  # a swap that waits too long for a lock (readers, a deadlock) gives up and comes again

    def rebuild(self, recorder: Any, decode: Callable[[Any], Any],
                progress: Callable[[int, int], None] | None = None, keys: Any = None,
                fill: Callable[[int], tuple[int, set[int]]] | None = None) -> int:
        """Replay every event into fresh tables beside the view, then swap them in (ADR 0034).

        The new tables live in a schema of their own (`View.shadow`), with the view's DDL and names, so
        the projection's own statements write there when that schema comes first in the search path.
        They fill in batches, each committed, while the old view keeps serving reads and keeps being
        updated by writes. Then, in one short transaction holding the view's tracking row (and, in
        distributed mode, its partition rows): the last events are applied, the old tables are dropped
        and the new ones moved in. A crash before that leaves the old view as it was; the next rebuild
        drops what the crashed one left. Returns how many events were applied.

        `fill(head)`, for a `partitionable` projection, fills the shadow up to `head` first, in several
        processes (each replaying one part's memories with `replay_part`), and returns how many events
        they applied and which they set aside; the events after `head` are then replayed here."""
        view = self.view
        with view.datastore.transaction(commit=True) as curs:
            view.create_shadow(curs)
        position = applied = 0
        quarantined: set[int] = set()
        if fill is not None and self.partitionable:
            head = recorder.max_notification_id() or 0
            if head - position > max(self.FILL_FROM, self.SWAP_GAP):
                applied, quarantined = fill(head)
                position = head
        for attempt in range(self.SWAP_TRIES + 1):
            while True:  # fill, each batch committed, until close enough to the head to swap briefly
                head = recorder.max_notification_id() or 0
                if head - position <= self.SWAP_GAP:
                    break
                position, n = self._replay(recorder, decode, keys, position, head, progress, quarantined)
                applied += n
            seen = set(quarantined)  # what a swap that fails and rolls back set aside is not kept
            started = time.monotonic()
            try:
                with view.datastore.transaction(commit=True) as curs:
                    curs.execute("SET LOCAL lock_timeout = '2s'")  # never stall readers and writers for long
                    live = view.lock_position(curs)
                    curs.execute("SELECT 1 FROM engram_partition_tracking WHERE projection = %s FOR UPDATE",
                                 (self.name,))
                    head = max(recorder.max_notification_id() or 0, live)  # nothing can be applied past it now
                    _, n = self._replay(recorder, decode, keys, position, head, progress, seen, curs=curs)
                    view.swap_in(curs)
                    # set aside again by this replay, or gone: an event the new view applied is no longer
                    curs.execute("DELETE FROM engram_quarantine WHERE projection = %s "
                                 "AND NOT (notification_id = ANY(%s))", (self.name, sorted(seen)))
                    view.set_position(curs, head)
                    curs.execute(
                        "UPDATE engram_partition_tracking SET notification_id = greatest(notification_id, %s) "
                        "WHERE projection = %s",
                        (head, self.name),
                    )
            except (DatabaseTimeout, DeadlockDetected, OperationalError) as e:
                wrapped = isinstance(e, OperationalError) and not isinstance(e.__cause__, DeadlockDetected)
                if wrapped or attempt == self.SWAP_TRIES:
                    raise
                log.warning("rebuild of %s: the swap waited too long for a lock; trying again", self.name)
                continue
            applied += n
            log.info("rebuild of %s swapped in at position %d: %d events applied under the lock, held %.0f ms",
                     self.name, head, n, (time.monotonic() - started) * 1000)
            if progress is not None:
                progress(head, head)
            return applied
        raise AssertionError("unreachable")

    def replay_part(self, recorder: Any, decode: Callable[[Any], Any], keys: Any, head: int, part: int, parts: int,
                    progress: Callable[[int, int], None] | None = None) -> tuple[int, set[int]]:
        """One process's share of a rebuild's fill (`rebuild`'s `fill`): into the shadow tables, which
        exist, the events up to `head` of the memories in `part` of `parts`, each batch committed.
        Returns how many were applied and which were set aside."""
        assert self.partitionable and 0 <= part < parts
        quarantined: set[int] = set()
        _, applied = self._replay(recorder, decode, keys, 0, head, progress, quarantined, part=(part, parts))
        return applied, quarantined

    def _replay(self, recorder: Any, decode: Callable[[Any], Any], keys: Any, position: int, head: int,
                progress: Callable[[int, int], None] | None, quarantined: set[int],
                curs: Cursor[Any] | None = None, part: tuple[int, int] | None = None) -> tuple[int, int]:
        """Apply the events after `position` up to `head` to the shadow tables (only those of the memories
        in `part`, if given): each batch in its own committed transaction, or all in `curs` (the swap's).
        Returns the new position and how many."""
        applied = 0
        skip = self.skipped_topics()
        while position < head:
            # a part's events read, and decoded, by the process whose part they are, and only there; and
            # events this view does not apply not read at all
            notes = recorder.select_replay(position, self.REBUILD_BATCH, head, part=part, skip=skip)
            if not notes:
                break
            last = notes[-1].id
            with prefetched(keys, notes):
                items = [(decode(n), Tracking(APPLICATION, n.id)) for n in notes]
                if curs is not None:
                    self.view.use_shadow(curs)
                    applied += self._apply_after(curs, position, items, quarantined)
                else:
                    applied += self._commit_batch(position, items, quarantined)
            position = last
            if progress is not None and curs is None:
                progress(position, head)
        return max(position, head), applied

    FILL_FROM = 20_000  # events: fewer, and one process replays them before several would have started
    REBUILD_RETRIES = 5  # a batch rolled back by a deadlock is committed again, at most this many times

    def _commit_batch(self, position: int, items: Sequence[tuple[Any, Tracking]], quarantined: set[int]) -> int:
        """One batch of a rebuild's fill into the shadow, in a transaction of its own. Rows outside the
        shadow (a forget's purge report, shared by the memories it forgot) are written by the serving
        catch-up and the other processes of the fill too: rolled back by a deadlock over them, the
        batch is simply committed again."""
        for attempt in range(self.REBUILD_RETRIES + 1):
            seen = set(quarantined)
            try:
                with self.view.datastore.transaction(commit=True) as batch:
                    # lost in a crash, this batch would be dropped with the rest of the shadow anyway
                    batch.execute("SET LOCAL synchronous_commit = off")
                    self.view.use_shadow(batch)
                    applied = self._apply_after(batch, position, items, seen)
            except (*ROLLED_BACK, OperationalError) as e:
                if not rolled_back(e) or attempt == self.REBUILD_RETRIES:
                    raise
                log.warning("rebuild of %s: a batch was rolled back by a deadlock; committing it again", self.name)
                continue
            quarantined |= seen
            return applied
        raise AssertionError("unreachable")
