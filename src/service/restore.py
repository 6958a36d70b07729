"""`engram restore --fence`: after a database backup is restored, make every tombstone true again."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.adapters.tombstones import Fence, Shred
from engram.domain.directory import CompanyDirectory
from engram.domain.insight import Insight
from engram.domain.memory import Memory
from engram.domain.memory_rules import EXPIRED, FORGOTTEN, PENDING
from engram.domain.receipt import Receipt

from .ledger import Ledger


def apply_fence(ledger: Ledger, fence: Fence, rebuild_all: Callable[[], None]) -> dict[str, int]:
    """Replay all tombstones, from the journal and the outbox: re-destroy keys, append the events the
    restored database lacks (each with its tombstone back in the outbox, one transaction), then
    rebuild every projection from the (now complete) event store."""
    app = ledger.store
    fence.refresh()
    tombstones = fence.tombstones()
    now = ledger.clock.now()
    counts = {"tombstones": len(tombstones), "keys_destroyed": 0, "events_appended": 0}

    def get(aggregate_id: str) -> Aggregate | None:
        try:
            return ledger.get(UUID(aggregate_id), Aggregate)
        except ValueError:  # a tombstone names a malformed id: nothing to fence
            return None

    for t in tombstones:
        kind, aid = t["kind"], t["aggregate_id"]
        if kind == "revoke":
            directory = get(aid)
            if isinstance(directory, CompanyDirectory):
                before = len(directory.revoked)
                directory.revoke(t["source_id"], person=t.get("person"), actor="restore-fence", at=now)
                if len(directory.revoked) > before:
                    ledger.save(directory, shreds=[Shred(t, now)])
                    counts["events_appended"] += 1
            continue
        try:
            UUID(aid)
        except ValueError:
            continue
        ledger.save(shreds=[Shred(t, now)])  # the key, and the tombstone back in the outbox
        counts["keys_destroyed"] += 1
        aggregate = get(aid)
        if isinstance(aggregate, Memory) and aggregate.status not in (FORGOTTEN, EXPIRED) and not (
                kind == "reject" and aggregate.status == "rejected"):
            if kind == "expire" and aggregate.status == PENDING:
                aggregate.expire(at=now, key_destroyed_at=now)
            elif kind == "reject" and aggregate.status == PENDING:
                aggregate.reject(actor="restore-fence", at=now)
            elif kind == "reject" and aggregate.status == "rejected":
                continue
            else:
                aggregate.forget(forget_id=t.get("forget_id") or f"fg-fence-{aid}", key_destroyed_at=now,
                                 actor="restore-fence", at=now)
            ledger.save(aggregate)
            counts["events_appended"] += 1
        elif isinstance(aggregate, Insight) and aggregate.is_live:  # its key went with a forgotten memory's
            aggregate.invalidate(reason="forgotten", memory_id=None, at=now, key_destroyed_at=now)
            ledger.save(aggregate)
            counts["events_appended"] += 1
        elif isinstance(aggregate, Receipt) and not aggregate.cleared:
            aggregate.clear_payload("restore_fence", now)
            ledger.save(aggregate)
            counts["events_appended"] += 1
    app.keys.vacuum()
    rebuild_all()
    return counts
