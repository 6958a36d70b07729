"""The composition root: configuration in, a running Engram (service + projectors) out."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg

from engram.adapters.availability import UNAVAILABLE_ERRORS, Availability
from engram.adapters.blind_index import BlindIndex
from engram.adapters.budget import BudgetLedger, Limits
from engram.adapters.content_rules import ContentRules
from engram.adapters.crypto import MasterKey
from engram.adapters.database import Database, DatabaseTimeouts, EmbeddedPostgres, GuardedDatastore
from engram.adapters.extractors import OpenAIExtractor, RuleExtractor
from engram.adapters.hindsight import HindsightClient
from engram.adapters.migrations import migrate_database
from engram.adapters.outage import Outage
from engram.adapters.tombstones import Fence, FileJournal, KafkaJournal
from engram.domain.clock import Clock
from engram.domain.errors import Forbidden
from engram.domain.rollout import Rollout
from engram.domain.scope import Caller
from engram.projections.base import EngramProjection, ProjectorRunner, safe_decoder
from engram.projections.governance import GovernanceProjection, GovernanceQueries, GovernanceView
from engram.projections.hindsight_sync import HindsightSyncProjection, HindsightSyncView
from engram.projections.inbox import InboxProjection, InboxQueries, InboxView
from engram.projections.recall import RecallProjection, RecallQueries, RecallView
from engram.projections.review import ReviewProjection, ReviewView
from engram.service.engram import EngramApplication, MemoryService
from engram.service.governance import GovernanceService
from engram.service.hindsight_sync import HindsightSyncer, SemanticIndex
from engram.service.learning import LearningService, LearningSettings
from engram.service.settings import Settings

log = logging.getLogger("engram")

PROJECTIONS = ("recall", "review", "governance", "inbox")


@contextmanager
def schema_lock(database: Database) -> Iterator[None]:
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(727274)")
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(727274)")


def master_key(settings: Settings) -> MasterKey:
    if settings.master_key:
        return MasterKey.from_text(settings.master_key)
    return MasterKey.load_or_create(settings.data_dir / "master.key")


def token_secret(settings: Settings) -> str:
    return settings.token_secret or master_key(settings).token_secret()


class Sweeper:
    """Runs periodic housekeeping (candidate expiry) in the background."""

    def __init__(self, task: Callable[[], object], interval: float) -> None:
        self.task, self.interval = task, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engram-sweeper", daemon=True)
        self._outage = Outage(log, f"database (sweep {getattr(task, '__qualname__', 'task')})", first=interval)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        delay = self.interval
        while not self._stop.wait(delay):
            delay = self.interval
            try:
                self.task()
            except UNAVAILABLE_ERRORS as exc:  # an outage: one line when it starts, a growing pause meanwhile
                delay = max(self.interval, self._outage.failed(exc))
                continue
            except Exception:  # noqa: BLE001 - housekeeping must outlive a bad item
                log.exception("sweep failed; will retry")
            self._outage.ok()


@dataclass
class Engram:
    settings: Settings
    database: Database
    master: MasterKey
    app: EngramApplication
    projections: dict[str, EngramProjection]
    runner: ProjectorRunner
    service: MemoryService
    governance: GovernanceService
    learning: LearningService
    embedded: EmbeddedPostgres | None = None
    background: bool = field(default=False)
    sweepers: list[Sweeper] = field(default_factory=list)
    syncer: HindsightSyncer | None = None

    @classmethod
    def open(
        cls,
        settings: Settings | None = None,
        *,
        database: Database | None = None,
        clock: Clock | None = None,
        background: bool = True,
    ) -> Engram:
        settings = settings or Settings()
        embedded = None
        if database is None:
            if settings.database_url:
                database = Database.from_url(settings.database_url)
            else:
                embedded = EmbeddedPostgres(settings.data_dir.resolve())
                database = embedded.start()
        master = master_key(settings)
        journal = (KafkaJournal(settings.kafka_bootstrap, settings.kafka_partitions) if settings.kafka_bootstrap
                   else FileJournal(settings.data_dir / "tombstones.jsonl"))
        fence = Fence(journal)
        # API replicas, relays and workers may start together: one of them creates the schema at a time.
        with schema_lock(database):
            migrate_database(database.conninfo, lock_held=True)  # the tables events cannot rebuild
            timeouts = DatabaseTimeouts(statement=settings.db_statement_timeout,
                                        lock=math.ceil(settings.db_lock_timeout),
                                        idle_in_transaction=math.ceil(settings.db_idle_timeout),
                                        connect=settings.db_connect_timeout)
            app = EngramApplication(database.eventsourcing_env(settings.db_pool_size, timeouts), master, fence)
            datastore = app.factory.datastore  # type: ignore[attr-defined]
            index = BlindIndex(master)
            recall_view = RecallView(datastore, "recall")
            review_view = ReviewView(datastore, "review")
            governance_view = GovernanceView(datastore, "governance")
            inbox_view = InboxView(datastore, "inbox")
            for view in (recall_view, review_view, governance_view, inbox_view):
                view.create_table()
            projections: dict[str, EngramProjection] = {
                "recall": RecallProjection(recall_view, app.keys, index),
                "review": ReviewProjection(review_view, app.keys),
                "governance": GovernanceProjection(governance_view),
                "inbox": InboxProjection(inbox_view),
            }
            if settings.hindsight_url:
                sync_view = HindsightSyncView(datastore, "hindsight_sync")
                sync_view.create_table()
                projections["hindsight_sync"] = HindsightSyncProjection(sync_view)
        runner = ProjectorRunner(
            app.recorder, safe_decoder(app.mapper.to_domain_event), list(projections.values()),
            poll_interval=settings.poll_interval, keys=app.keys,
        )
        settler: object = runner
        if settings.kafka_bootstrap:
            from engram.adapters.kafka import PartitionSettle

            settler = PartitionSettle(datastore, list(projections), settings.kafka_partitions,
                                      timeout=settings.visibility_timeout)
        service = MemoryService(
            app, settler, RecallQueries(datastore), index, clock or Clock(),
            max_text_bytes=settings.max_text_bytes,
            candidate_ttl=timedelta(days=settings.candidate_ttl_days),
            governance=GovernanceQueries(datastore),
            modes=Rollout(settings.mode, settings.company_allowlist),
            policy=ContentRules(),
            tombstones=fence,
        )
        inbox = InboxQueries(datastore)
        budget = BudgetLedger(datastore)
        extractor = (OpenAIExtractor(settings.llm_base_url, settings.llm_model, settings.llm_api_key)
                     if settings.llm_base_url else RuleExtractor())
        learning = LearningService(service, inbox, budget, extractor, LearningSettings(limits=Limits(
            settings.daily_tokens, settings.daily_calls, settings.person_daily_tokens, settings.person_daily_calls)))
        syncer = None
        if settings.hindsight_url:
            signing_key = master.hindsight_signing_key()
            syncer = HindsightSyncer(service, HindsightClient(settings.hindsight_url, signing_key=signing_key))
            service.purged_copies = (*service.purged_copies, "hindsight")
            service.semantic = SemanticIndex(HindsightClient(settings.hindsight_url, signing_key=signing_key),
                                             settings.hindsight_deadline_ms)
        engram = cls(settings, database, master, app, projections, runner, service, GovernanceService(service),
                     learning, embedded, background, syncer=syncer)
        distributed = bool(settings.kafka_bootstrap)
        if not distributed:
            runner.catch_up_all()
        if background:
            if not distributed:
                runner.start()
            engram.sweepers = [
                Sweeper(service.expire_due_candidates, settings.sweep_interval),
                Sweeper(learning.clear_processed_payloads, settings.sweep_interval),
                Sweeper(learning.work, settings.worker_interval),
            ]
            if syncer is not None:
                engram.sweepers.append(Sweeper(syncer.sync, settings.worker_interval))
            for sweeper in engram.sweepers:
                sweeper.start()
        return engram

    def status(self) -> list[dict[str, object]]:
        """Position and lag of each projection: in-process (global) and, in distributed mode, per partition."""
        head = self.app.recorder.max_notification_id() or 0
        rows: list[dict[str, object]] = []
        partitions: dict[str, dict[int, int]] = {}
        with self.app.factory.datastore.get_connection() as conn:  # type: ignore[attr-defined]
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
        with self.app.factory.datastore.get_connection() as conn:  # type: ignore[attr-defined]
            rows = conn.execute("SELECT projection, count(*) AS n FROM engram_quarantine GROUP BY projection")
            found = {r["projection"]: int(r["n"]) for r in rows}
        return {name: found.get(name, 0) for name in self.projections}

    @property
    def availability(self) -> Availability:
        return self.datastore.availability

    @property
    def datastore(self) -> GuardedDatastore:
        return self.app.factory.datastore  # type: ignore[attr-defined, no-any-return]

    def rebuild(self, name: str, progress: Callable[[int, int], None] | None = None) -> int:
        with self.datastore.long_running():  # one transaction over every event: no request timeouts
            return self.projections[name].rebuild(self.app.recorder, self.decode, progress, keys=self.app.keys)

    @property
    def decode(self) -> Callable[[Any], Any]:
        """Stored event -> domain event; one that cannot be decoded is marked for quarantine, not raised."""
        return safe_decoder(self.app.mapper.to_domain_event)

    def admin_status(self, caller: Caller) -> dict[str, object]:
        """For company admins and operators: dependencies, backlogs, today's budget. Never memory text."""
        if not caller.is_administrative:
            raise Forbidden("only company admins and operators may see the status")
        lag = max((int(r["lag"]) for r in self.status()), default=0)  # type: ignore[call-overload]
        today = self.service.clock.now().date()
        return {
            "company": caller.company,
            "mode": self.service.modes.mode(caller.company),
            "dependencies": {
                "database": "ok",
                "kafka": "configured" if self.settings.kafka_bootstrap else "not used (in-process projectors)",
                "llm": "configured" if self.settings.llm_base_url else "not used (rule-based extraction)",
                "hindsight": "configured" if self.settings.hindsight_url else "not used (SQL ranking)",
            },
            "quarantined_events": self.quarantined(),
            "backlogs": {"inbox": self.learning.inbox.backlog(caller.company), "projector_lag": lag,
                         "hindsight_sync": self.syncer.backlog() if self.syncer else None},
            "budget_today": {**self.learning.budget.today(caller.company, today),
                             "token_limit": self.settings.daily_tokens, "call_limit": self.settings.daily_calls},
        }

    def metrics(self) -> str:
        """Prometheus text: counts and lags only."""
        lines = ["# TYPE engram_projection_lag gauge"]
        for r in self.status():
            part = f',partition="{r["partition"]}"' if "partition" in r else ""
            lines.append(f'engram_projection_lag{{projection="{r["projection"]}"{part}}} {r["lag"]}')
        lines.append("# HELP engram_quarantined_events Events a projection set aside because it could not apply them")
        lines.append("# TYPE engram_quarantined_events gauge")
        for name, n in self.quarantined().items():
            lines.append(f'engram_quarantined_events{{projection="{name}"}} {n}')
        lines.append("# TYPE engram_inbox_receipts gauge")
        for state, n in sorted(self.learning.inbox.backlog().items()):
            lines.append(f'engram_inbox_receipts{{state="{state}"}} {n}')
        lines.append("# TYPE engram_events_total counter")
        lines.append(f"engram_events_total {self.app.recorder.max_notification_id() or 0}")
        return "\n".join(lines) + "\n"

    def restore_fence(self, progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
        from engram.service.restore import apply_fence

        def rebuild_all() -> None:
            for name in self.projections:
                self.rebuild(name, progress)

        with self.datastore.long_running():
            return apply_fence(self.service, rebuild_all)

    def close(self) -> None:
        for sweeper in self.sweepers:
            sweeper.stop()
        self.runner.stop()
        self.app.close()
        journal = getattr(self.service.tombstones, "journal", None)
        if hasattr(journal, "close"):
            journal.close()
        if self.embedded is not None:
            self.embedded.stop()
