"""What operators ask of a running deployment: projection positions, set-aside events, status, metrics,
rebuilds and the restore fence. Counts and positions only; never memory text."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any, Literal

import psycopg

from engram.adapters.availability import UNAVAILABLE_ERRORS, Availability
from engram.adapters.hindsight import HindsightUnavailable
from engram.adapters.tombstones import Fence
from engram.contract.admin import AdminStatus
from engram.domain.scope import Caller
from engram.projections.base import ViewProjection
from engram.projections.failures import safe_decoder
from engram.projections.insight_queries import InsightQueries
from engram.projections.purge import PurgeTracker

from .embedding import EmbeddingWorker
from .hindsight_sync import HindsightSyncer
from .learning import LearningService
from .ledger import Ledger
from .recall import RecallService
from .restore import apply_fence
from .settings import AUTO_REBUILD_WORKERS, Settings
from .tally import Tally

BUDGET_DAYS = 14  # the admin status's budget history, today included

log = logging.getLogger("engram.operations")

Labels = dict[str, str]


@dataclass(frozen=True)
class Reading:
    """One metric family as /metrics shows it: label values are states, kinds, projection names and
    partition numbers only (never a company, a person, an id or any text)."""

    name: str  # as exposed: a counter's ends in _total
    kind: Literal["gauge", "counter"]
    help: str
    samples: list[tuple[Labels, int | float]]


FillsInProcesses = Callable[[str, int, Callable[[int, int], None] | None, int], tuple[int, set[int]]]


class Operations:
    def __init__(self, ledger: Ledger, projections: Mapping[str, ViewProjection], learning: LearningService,
                 fence: Fence, settings: Settings, syncer: HindsightSyncer | None = None,
                 purge: PurgeTracker | None = None, insights: InsightQueries | None = None,
                 recall: RecallService | None = None, *, embedding: EmbeddingWorker | None = None,
                 fill_in_processes: FillsInProcesses | None = None) -> None:
        """`embedding`: the worker when meaning is on. `fill_in_processes`: (name, workers, progress, head)
        fills a rebuild up to head in that many processes (ADR 0038), given by whoever can start processes
        (the API layer's composition root); None where nobody can."""
        self.purge = purge
        self.recall = recall
        self.embedding = embedding
        self.insights = insights
        self.ledger = ledger
        self.store = ledger.store
        self.projections = projections
        self.learning = learning
        self.fence = fence
        self.settings = settings
        self.syncer = syncer
        self.fill_in_processes = fill_in_processes

    @property
    def availability(self) -> Availability:
        return self.store.datastore.availability

    @property
    def decode(self) -> Callable[[Any], Any]:
        """Stored event -> domain event; one that cannot be decoded is marked for quarantine, not raised."""
        return safe_decoder(self.store.mapper.to_domain_event)

    def status(self) -> list[dict[str, Any]]:
        """Position and lag of each projection: in-process (global) and, in distributed mode, per partition."""
        head = self.store.recorder.max_notification_id() or 0
        rows: list[dict[str, Any]] = []
        partitions: dict[str, dict[int, int]] = {}
        with self.store.datastore.get_connection() as conn:
            for r in conn.execute("SELECT projection, partition, notification_id FROM engram_partition_tracking"):
                partitions.setdefault(r["projection"], {})[r["partition"]] = int(r["notification_id"])
        for name, p in self.projections.items():
            if self.settings.kafka_bootstrap:
                parts = partitions.get(name, {})
                for part in range(self.settings.kafka_partitions):
                    pos = parts.get(part, 0)
                    rows.append({"projection": name, "partition": part, "position": pos, "head": head,
                                 "lag": head - pos})
            else:
                pos = p.view.position()
                rows.append({"projection": name, "position": pos, "head": head, "lag": head - pos})
        return rows

    def quarantined(self) -> dict[str, int]:
        """Events each projection set aside because it could not apply them."""
        with self.store.datastore.get_connection() as conn:
            rows = conn.execute("SELECT projection, count(*) AS n FROM engram_quarantine GROUP BY projection")
            found = {r["projection"]: int(r["n"]) for r in rows}
        return {name: found.get(name, 0) for name in self.projections}

    def rebuild(self, name: str, progress: Callable[[int, int], None] | None = None) -> int:
        """Replay every event into new tables, then swap them in (ADR 0034); a partitionable view's
        fill runs in `ENGRAM_REBUILD_WORKERS` processes when there are more than one (ADR 0038)."""
        projection = self.projections[name]
        workers = self.settings.rebuild_workers or min(os.cpu_count() or 1, AUTO_REBUILD_WORKERS)
        fill = None
        if workers > 1 and projection.partitionable and self.fill_in_processes is not None:
            fill = functools.partial(self.fill_in_processes, name, workers, progress)
        with self.store.datastore.long_running():  # one transaction over every event: no request timeouts
            return projection.rebuild(self.store.recorder, self.decode, progress, keys=self.store.keys, fill=fill)

    def replay_part(self, name: str, head: int, part: int, parts: int,
                    progress: Callable[[int, int], None] | None = None) -> tuple[int, set[int]]:
        """One process's share of a rebuild's fill (ADR 0038): see `ViewProjection.replay_part`."""
        with self.store.datastore.long_running():
            return self.projections[name].replay_part(self.store.recorder, self.decode, self.store.keys, head, part,
                                                      parts, progress)

    def restore_fence(self, progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
        def rebuild_all() -> None:
            for name in self.projections:
                self.rebuild(name, progress)

        with self.store.datastore.long_running():
            counts = apply_fence(self.ledger, self.fence, rebuild_all)
        if self.syncer is not None:  # Hindsight may have been restored too: check every deleted document
            try:
                audit = self.syncer.audit(limit=None)
            except HindsightUnavailable:  # the fence holds; `engram serve`'s audit checks Hindsight later
                counts["hindsight_unreachable"] = 1
                return counts
            counts.update(hindsight_checked=audit["checked"], hindsight_found_again=audit["found_again"],
                          hindsight_deleted_again=audit["deleted_again"])
        return counts

    def admin_status(self, caller: Caller) -> AdminStatus:
        """For company admins and operators: dependencies, backlogs, today's budget. Never memory text."""
        self.ledger.admin_access(caller, "see the status")
        lag = max((r["lag"] for r in self.status()), default=0)
        today = self.ledger.clock.now().date()
        days = self.learning.budget.days(caller.company, today - timedelta(days=BUDGET_DAYS - 1), today)
        used_today = {k: days[-1][k] for k in ("tokens", "calls", "failed_calls")}  # the last day is today
        s = self.settings
        return AdminStatus.model_validate({
            "company": caller.company,
            "mode": self.ledger.modes.mode(caller.company),
            "dependencies": {
                "database": "ok",
                "kafka": "configured" if s.kafka_bootstrap else "not used (in-process projectors)",
                "llm": "configured" if s.llm_base_url else "not used (rule-based extraction)",
                "hindsight": "configured" if s.hindsight_url else "not used (SQL ranking)",
            },
            "quarantined_events": self.quarantined(),
            "backlogs": {"inbox": self.learning.inbox.backlog(caller.company), "projector_lag": lag,
                         "hindsight_sync": self.syncer.backlog(caller.company) if self.syncer else None,
                         "purge": self._purge_backlog(caller.company),
                         "insights": self.insights.backlog(caller.company) if self.insights else None},
            "budget_today": {**used_today, "token_limit": s.daily_tokens, "call_limit": s.daily_calls},
            "budget_days": days,
        })

    def hindsight_backlogs(self) -> dict[str, dict[str, int]] | None:
        """Hindsight sync wishes by company and state (pending, done); None without Hindsight."""
        return self.syncer.backlogs() if self.syncer is not None else None

    def _purge_backlog(self, company: str | None) -> dict[str, int]:
        """Forgets with a copy not yet purged (backups ageing out aside), and tombstones not yet in the journal."""
        outbox = self.fence.outbox
        return {"forgets_pending": self.purge.backlog(company) if self.purge is not None else 0,
                "tombstones_unpublished": outbox.backlog() if outbox is not None else 0}

    def tallies(self) -> list[tuple[str, str, Tally]]:
        """This process's own counts for /metrics: name, help and tally."""
        found = [("engram_receipt_processing_failures_total", "Receipt runs that raised (each is retried; a receipt "
                  "failing for good ends as failed)", self.learning.failed_runs)]
        if self.recall is not None:
            found.append(("engram_recall_degraded_total", "Recalls answered without the semantic index (down or "
                          "slower than its deadline)", self.recall.degraded))
        if self.embedding is not None:
            found.append(("engram_vectors_embedded_total", "Vectors this process embedded and stored",
                          self.embedding.embedded))
            found.append(("engram_embedding_failures_total", "Texts the model failed on alone, given up on (found by "
                          "their words only)", self.embedding.failed))
            found.append(("engram_embedding_unavailable_total", "Embedding batches the model did not answer (tried "
                          "again when their lease lapses)", self.embedding.unavailable))
        return found

    def readings(self, *, tallies: bool = True) -> list[Reading]:
        """What /metrics shows of the deployment, read now: counts, states and lags, never a company's
        name or any text. The tallies are this process's (left out with `tallies=False`: several serving
        processes count them in shared files instead); everything else is read from the database and
        is the same in every process. A database that does not answer ends the reads (one failed read is
        enough to know): `engram_database_up` says 0 and what was read before stays."""
        found = [Reading(name, "counter", help, [({}, tally.count)]) for name, help, tally in self.tallies()
                 if tallies]
        up = self.availability.up
        if up:
            try:
                self._read_database(found)
            except UNAVAILABLE_ERRORS + (psycopg.Error,) as e:
                up = False
                log.warning("metrics: a database read failed (%s); answering what was read", type(e).__name__)
        found.append(Reading("engram_database_up", "gauge", "1 when this scrape's database reads answered, else 0",
                             [({}, int(up))]))
        return found

    def _read_database(self, found: list[Reading]) -> None:
        """Appends each family as soon as it is read."""
        purge = self._purge_backlog(None)
        found.append(Reading("engram_purge_pending", "gauge", "Forgets with a copy not yet purged (backups ageing "
                             "out aside)", [({}, purge["forgets_pending"])]))
        found.append(Reading("engram_tombstones_unpublished", "gauge", "Tombstones committed but not yet in the "
                             "journal", [({}, purge["tombstones_unpublished"])]))
        found.append(Reading("engram_projection_lag", "gauge", "Events stored but not yet applied by a projection "
                             "(per partition in distributed mode)", [(_where(r), r["lag"]) for r in self.status()]))
        found.append(Reading("engram_quarantined_events", "gauge", "Events a projection set aside because it could "
                             "not apply them", [({"projection": p}, n) for p, n in self.quarantined().items()]))
        found.append(Reading("engram_inbox_receipts", "gauge", "Receipts by state (queued: not yet learned from)",
                             _by("state", self.learning.inbox.backlog())))
        spent = self.learning.budget.spent_today(self.ledger.clock.now().astimezone(UTC).date(), self.learning.rules.limits)
        found.append(Reading("engram_model_budget_used_today", "gauge", "Model use charged today (UTC) to the daily "
                             "budgets, every company summed: calls and tokens (the rule extractor is never charged)",
                             [({"kind": "calls"}, spent["calls"]), ({"kind": "tokens"}, spent["tokens"])]))
        found.append(Reading("engram_model_budget_daily_limit", "gauge", "Each company's daily model budget "
                             "(ENGRAM_DAILY_CALLS, ENGRAM_DAILY_TOKENS)",
                             [({"kind": "calls"}, self.learning.rules.limits.company_calls),
                              ({"kind": "tokens"}, self.learning.rules.limits.company_tokens)]))
        found.append(Reading("engram_model_budget_spent_companies", "gauge", "Companies whose daily model budget is "
                             "spent today: their receipts wait as `deferred` (reason `budget`) for the next UTC day",
                             [({}, spent["companies_spent"])]))
        failures = self.learning.budget.failures()
        found.append(Reading("engram_model_call_failures_total", "counter", "Model calls that failed (an error or a "
                             "malformed answer): extraction and insights", [({}, sum(failures.values()))]))
        found.append(Reading("engram_extraction_failures_total", "counter", "Extraction model calls that failed (an "
                             "error or a malformed answer); the receipt is tried again later",
                             [({}, failures["extraction"])]))
        if self.syncer is not None:
            found.append(Reading("engram_hindsight_sync", "gauge", "Hindsight sync wishes by state (pending: not yet "
                                 "in Hindsight)", _by("state", self.syncer.backlog())))
        if self.insights is not None:
            found.append(Reading("engram_insight_backlog", "gauge", "People awaiting the proposers; invalidations not "
                                 "yet recorded", _by("kind", self.insights.backlog(None))))
        if self.embedding is not None:
            found.append(Reading("engram_vector_backlog", "gauge", "Answering revisions not yet embedded (found by "
                                 "their words only until they are)", [({}, self.embedding.store.backlog())]))
        found.append(Reading("engram_events_total", "counter", "Events stored (the event store's head position)",
                             [({}, self.store.recorder.max_notification_id() or 0)]))


def _by(label: str, counts: Mapping[str, int]) -> list[tuple[Labels, int | float]]:
    return [({label: key}, n) for key, n in sorted(counts.items())]


def _where(row: Mapping[str, Any]) -> Labels:
    """A projection's lag row as labels: its name, and its partition in distributed mode."""
    return {"projection": row["projection"], **({"partition": str(row["partition"])} if "partition" in row else {})}
