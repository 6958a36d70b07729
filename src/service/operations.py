"""What operators ask of a running deployment: projection positions, set-aside events, status, metrics,
rebuilds and the restore fence. Counts and positions only; never memory text."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from engram.adapters.availability import Availability
from engram.adapters.hindsight import HindsightUnavailable
from engram.adapters.tombstones import Fence
from engram.domain.access import Access
from engram.domain.scope import Caller
from engram.projections.base import ViewProjection, safe_decoder
from engram.projections.insights import InsightQueries
from engram.projections.purge import PurgeTracker

from .hindsight_sync import HindsightSyncer
from .learning import LearningService
from .ledger import Ledger
from .restore import apply_fence
from .settings import Settings

BUDGET_DAYS = 14  # the admin status's budget history, today included


class Operations:
    def __init__(self, ledger: Ledger, projections: Mapping[str, ViewProjection], learning: LearningService,
                 fence: Fence, settings: Settings, syncer: HindsightSyncer | None = None,
                 purge: PurgeTracker | None = None, insights: InsightQueries | None = None) -> None:
        self.purge = purge
        self.insights = insights
        self.ledger = ledger
        self.store = ledger.store
        self.projections = projections
        self.learning = learning
        self.fence = fence
        self.settings = settings
        self.syncer = syncer

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
        with self.store.datastore.long_running():  # one transaction over every event: no request timeouts
            return self.projections[name].rebuild(self.store.recorder, self.decode, progress, keys=self.store.keys)

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

    def admin_status(self, caller: Caller) -> dict[str, object]:
        """For company admins and operators: dependencies, backlogs, today's budget. Never memory text."""
        Access(caller).require_admin("see the status")
        lag = max((r["lag"] for r in self.status()), default=0)
        today = self.ledger.clock.now().date()
        s = self.settings
        return {
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
            "budget_today": {**self.learning.budget.today(caller.company, today),
                             "token_limit": s.daily_tokens, "call_limit": s.daily_calls},
            "budget_days": self.learning.budget.days(caller.company, today - timedelta(days=BUDGET_DAYS - 1), today),
        }

    def hindsight_backlogs(self) -> dict[str, dict[str, int]] | None:
        """Hindsight sync wishes by company and state (pending, done); None without Hindsight."""
        return self.syncer.backlogs() if self.syncer is not None else None

    def _purge_backlog(self, company: str | None) -> dict[str, int]:
        """Forgets with a copy not yet purged (backups ageing out aside), and tombstones not yet in the journal."""
        outbox = self.fence.outbox
        return {"forgets_pending": self.purge.backlog(company) if self.purge is not None else 0,
                "tombstones_unpublished": outbox.backlog() if outbox is not None else 0}

    def metrics(self) -> str:
        """Prometheus text: counts and lags only."""
        purge = self._purge_backlog(None)
        lines = ["# HELP engram_purge_pending Forgets with a copy not yet purged (backups ageing out aside)",
                 "# TYPE engram_purge_pending gauge", f"engram_purge_pending {purge['forgets_pending']}",
                 "# HELP engram_tombstones_unpublished Tombstones committed but not yet in the journal",
                 "# TYPE engram_tombstones_unpublished gauge",
                 f"engram_tombstones_unpublished {purge['tombstones_unpublished']}"]
        lines.append("# TYPE engram_projection_lag gauge")
        for r in self.status():
            part = f',partition="{r["partition"]}"' if "partition" in r else ""
            lines.append(f'engram_projection_lag{{projection="{r["projection"]}"{part}}} {r["lag"]}')
        lines.append("# HELP engram_quarantined_events Events a projection set aside because it could not apply them")
        lines.append("# TYPE engram_quarantined_events gauge")
        for name, n in self.quarantined().items():
            lines.append(f'engram_quarantined_events{{projection="{name}"}} {n}')
        if self.syncer is not None:
            lines.append("# HELP engram_hindsight_sync Hindsight sync wishes by state (pending: not yet in Hindsight)")
            lines.append("# TYPE engram_hindsight_sync gauge")
            for state, n in sorted(self.syncer.backlog().items()):
                lines.append(f'engram_hindsight_sync{{state="{state}"}} {n}')
        lines.append("# TYPE engram_inbox_receipts gauge")
        for state, n in sorted(self.learning.inbox.backlog().items()):
            lines.append(f'engram_inbox_receipts{{state="{state}"}} {n}')
        if self.insights is not None:
            lines.append("# HELP engram_insight_backlog People awaiting the proposers; invalidations not yet recorded")
            lines.append("# TYPE engram_insight_backlog gauge")
            for kind, n in sorted(self.insights.backlog(None).items()):
                lines.append(f'engram_insight_backlog{{kind="{kind}"}} {n}')
        lines.append("# HELP engram_model_call_failures_total Model calls (extraction, insights) that failed")
        lines.append("# TYPE engram_model_call_failures_total counter")
        lines.append(f"engram_model_call_failures_total {self.learning.budget.failures()}")
        lines.append("# TYPE engram_events_total counter")
        lines.append(f"engram_events_total {self.store.recorder.max_notification_id() or 0}")
        return "\n".join(lines) + "\n"
