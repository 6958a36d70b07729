"""The composition root: configuration in, a running Engram (service + projectors) out."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from eventsourcing.postgres import PostgresDatastore

from engram.adapters.blind_index import BlindIndex
from engram.adapters.budget import BudgetLedger, daily_limits
from engram.adapters.chat_model import ChatModel
from engram.adapters.content_rules import ContentRules
from engram.adapters.crypto import MasterKey, MasterKeys, previous_key_file
from engram.adapters.database import Database, DatabaseTimeouts, EmbeddedPostgres
from engram.adapters.embedders import Embedder, LocalEmbedder, RemoteEmbedder
from engram.adapters.extractors import OpenAIExtractor, RuleExtractor
from engram.adapters.hindsight import HindsightClient, HindsightDatabase, SemanticIndex
from engram.adapters.insight_local import LocalProposer
from engram.adapters.insight_proposers import insight_proposers
from engram.adapters.kafka_journal import KafkaJournal
from engram.adapters.keystore import KeyStore
from engram.adapters.migrations import migrate, migrate_database, schema_lock
from engram.adapters.relation_model import ModelRelationJudge
from engram.adapters.relation_probe import RelationProbe
from engram.adapters.sensitive_probe import SensitiveProbe
from engram.adapters.sweeper import Sweeper
from engram.adapters.tombstones import Fence, FenceRequired, FileJournal, TombstonePublisher
from engram.adapters.vector_index import Meaning, VectorIndex
from engram.adapters.vectors import VectorStore
from engram.domain.clock import Clock
from engram.domain.rollout import Rollout
from engram.projections.base import ViewProjection, safe_decoder
from engram.projections.governance import GovernanceProjection, GovernanceQueries, GovernanceView
from engram.projections.hindsight_sync import HindsightSyncProjection, HindsightSyncView
from engram.projections.inbox import InboxProjection, InboxQueries, InboxView
from engram.projections.insights import InsightProjection, InsightQueries, InsightView
from engram.projections.links import LinkQueries, LinksProjection, LinksView
from engram.projections.purge import ALWAYS, BACKUPS, HINDSIGHT, KAFKA, AccountForgets, PurgeTracker
from engram.projections.recall import RecallProjection, RecallView
from engram.projections.recall_queries import RecallQueries
from engram.projections.review import ReviewProjection, ReviewView
from engram.projections.runner import ProjectorRunner
from engram.service.backups import Backups, catalog_of
from engram.service.embedding import EmbeddingWorker
from engram.service.forgetting import ForgettingService, Pace
from engram.service.governance import GovernanceService
from engram.service.hindsight_sync import HindsightSyncer
from engram.service.importer import MemoryImporter
from engram.service.insights import InsightService
from engram.service.key_rotation import KeyRotation
from engram.service.learning import LearningRules, LearningService
from engram.service.ledger import EventStore, Ledger
from engram.service.links import MemoryLinks
from engram.service.memories import MemoryService
from engram.service.operations import Operations
from engram.service.ports import Settler
from engram.service.recall import RecallService
from engram.service.relations import Judge, Relations
from engram.service.settings import Settings

from .rebuilds import fill_in_processes

PROJECTIONS = ("recall", "review", "governance", "inbox", "insights", "links")


def master_key(settings: Settings) -> MasterKey:
    if settings.master_key:
        return MasterKey.from_text(settings.master_key)
    return MasterKey.load_or_create(settings.data_dir / "master.key")


def master_keys(settings: Settings) -> MasterKeys:
    """The current master key and the previous ones (ENGRAM_PREVIOUS_MASTER_KEYS, and the key file's
    previous keys that `engram keys new` keeps), accepted for unwrapping until a rotation is done."""
    previous = [MasterKey.from_text(k) for k in settings.previous_master_keys]
    return MasterKeys(master_key(settings), [*previous, *previous_key_file(settings.data_dir / "master.key")])


@contextmanager
def key_rotation(settings: Settings, database: Database) -> Iterator[KeyRotation]:
    """`engram keys`: the key store alone (nothing served, no projector), beside a running service."""
    migrate_database(database.conninfo)
    masters = master_keys(settings)
    datastore = PostgresDatastore(database.dbname, database.host, database.port, database.user, database.password,
                                  pool_size=2)
    try:
        yield KeyRotation(KeyStore(datastore, masters), masters.current.id, tuple(masters.ids))
    finally:
        datastore.close()


def relation_judge(settings: Settings, budget: BudgetLedger, clock: Clock,
                   packaged: LocalEmbedder | None) -> Judge | None:
    """Who judges, for learning, the pairs the rules and the vectors left open (ADR 0042, 0043): the
    configured model, within the budgets; else the packaged model's probe; else no one."""
    if settings.llm_base_url:
        return ModelRelationJudge(ChatModel(settings.llm_base_url, settings.llm_model, settings.llm_api_key,
                                            max_output_tokens=256), budget, daily_limits(settings), clock)
    if packaged is not None and settings.relation_probe == "on":
        return RelationProbe(packaged)
    return None


def embedder_of(settings: Settings) -> Embedder | None:
    """The embedding model `ENGRAM_EMBEDDINGS` names (ADR 0040); None for `off`."""
    if settings.embeddings == "off":
        return None
    if settings.embeddings == "openai":
        assert settings.embeddings_url is not None  # the settings refuse openai without it
        return RemoteEmbedder(settings.embeddings_url, settings.embeddings_model, settings.embeddings_api_key)
    return LocalEmbedder()


def token_secret(settings: Settings) -> str:
    return settings.token_secret or master_key(settings).token_secret()


def _abandon(store: EventStore, journal: object, embedded: EmbeddedPostgres | None) -> None:
    """Undo a start that is refused."""
    store.close()
    close = getattr(journal, "close", None)
    if close is not None:
        close()
    if embedded is not None:
        embedded.stop()


@dataclass
class Engram:
    """A composed deployment: every service, read model and background loop, built once by `open`."""

    settings: Settings
    database: Database
    master: MasterKey
    store: EventStore
    projections: dict[str, ViewProjection]
    runner: ProjectorRunner
    ledger: Ledger
    memories: MemoryService
    recall: RecallService
    governance: GovernanceService
    learning: LearningService
    operations: Operations
    syncer: HindsightSyncer | None = None
    embedded: EmbeddedPostgres | None = None
    sweepers: list[Sweeper] = field(default_factory=list)
    forgetting: ForgettingService | None = None  # bulk and account forgets (always set by `open`)
    publisher: TombstonePublisher | None = None
    importer: MemoryImporter | None = None  # `engram import`; always set by `open`
    backups: Backups | None = None
    insights: InsightService | None = None  # always set by `open`
    embedding: EmbeddingWorker | None = None  # None with ENGRAM_EMBEDDINGS=off

    @classmethod
    def open(
        cls,
        settings: Settings | None = None,
        *,
        database: Database | None = None,
        clock: Clock | None = None,
        background: bool = True,
        fenced: bool = True,
        notified: bool = True,
        catch_up: bool = True,
    ) -> Engram:
        """`fenced=False` opens a database older than the tombstone journal (for `engram restore`);
        anything else refuses it (`FenceRequired`) rather than serve what was forgotten. `notified=False`
        (the main process of several serving processes): the projectors' background loop polls instead
        of waking at every write (`ProjectorRunner.start`). `catch_up=False` (a process filling a
        rebuild, ADR 0038): the views are not caught up first; that is the business of the process that
        serves them."""
        settings = settings or Settings()
        embedded = None
        if database is None:
            if settings.database_url:
                database = Database.from_url(settings.database_url)
            else:
                embedded = EmbeddedPostgres(settings.data_dir.resolve())
                database = embedded.start()
        masters = master_keys(settings)
        master = masters.current
        journal = (KafkaJournal(settings.kafka_bootstrap, settings.kafka_partitions) if settings.kafka_bootstrap
                   else FileJournal.beside_data(settings.journal_dir, settings.data_dir))
        fence = Fence(journal)
        copies = (*ALWAYS, *((HINDSIGHT,) if settings.hindsight_url else ()),
                  *((KAFKA,) if settings.kafka_bootstrap else ()))
        catalog = catalog_of(settings)  # beside the journal: a restore cannot roll it back
        # API replicas, relays and workers may start together: one of them creates the schema at a time.
        with schema_lock(database.conninfo) as conn:
            migrate(conn, lock_held=True)  # the tables events cannot rebuild
            timeouts = DatabaseTimeouts(statement=settings.db_statement_timeout,
                                        lock=math.ceil(settings.db_lock_timeout),
                                        idle_in_transaction=math.ceil(settings.db_idle_timeout),
                                        connect=settings.db_connect_timeout)
            store = EventStore(database.eventsourcing_env(settings.db_pool_size, timeouts), masters, fence)
            datastore = store.datastore
            try:
                store.keys.check_masters()  # a key a wrapped row needs is missing: say which, start nothing
                root = store.keys.derivation_root()
            except ValueError:
                _abandon(store, journal, embedded)
                raise
            assert store.outbox is not None
            fence.attach(store.outbox)
            index = BlindIndex(root)
            purge = PurgeTracker(datastore, (*copies, BACKUPS), backups=catalog)
            views = {"recall": RecallView(datastore, "recall"), "review": ReviewView(datastore, "review"),
                     "governance": GovernanceView(datastore, "governance"), "inbox": InboxView(datastore, "inbox"),
                     "insights": InsightView(datastore, "insights"),
                     "links": LinksView(datastore, "links")}
            if settings.hindsight_url:
                views["hindsight_sync"] = HindsightSyncView(datastore, "hindsight_sync")
            for view in views.values():
                view.create_table()
            projections: dict[str, ViewProjection] = {
                "recall": RecallProjection(views["recall"], store.keys, index, purge),
                "review": ReviewProjection(views["review"], store.keys, purge),
                "governance": GovernanceProjection(views["governance"]),
                "inbox": InboxProjection(views["inbox"], index, purge),
                "insights": InsightProjection(views["insights"], store.keys, index),
                "links": LinksProjection(views["links"], index),
            }
            if settings.hindsight_url:
                projections["hindsight_sync"] = HindsightSyncProjection(views["hindsight_sync"], index)
        unfenced = fence.unfenced() if fenced else []  # outside the schema lock: its session must end first
        if unfenced:
            _abandon(store, journal, embedded)
            raise FenceRequired(len(unfenced))
        inbox = InboxQueries(datastore)
        budget = BudgetLedger(datastore)
        runner = ProjectorRunner(
            store.recorder, safe_decoder(store.mapper.to_domain_event), list(projections.values()),
            poll_interval=settings.poll_interval, keys=store.keys,
        )
        distributed = bool(settings.kafka_bootstrap)
        settler: Settler = runner
        if distributed:
            from engram.adapters.partition_settle import PartitionSettle

            settler = PartitionSettle(datastore, list(projections), settings.kafka_partitions,
                                      timeout=settings.visibility_timeout)
        ledger = Ledger(store, settler, GovernanceQueries(datastore), modes=Rollout(settings.mode, settings.company_allowlist),
                        clock=clock or Clock(), tombstones=fence)
        embedder = embedder_of(settings)
        vectors = VectorStore(datastore)
        meaning = embedding = None
        packaged: LocalEmbedder | None = None  # the shipped model, which the probes read (ADR 0043)
        if embedder is not None:
            packaged = embedder if isinstance(embedder, LocalEmbedder) else LocalEmbedder()
            # the packaged model's vectors serve those not yet re-embedded by the operator's own (ADR 0040)
            previous = None if packaged is embedder else packaged
            meaning = Meaning(embedder, VectorIndex(vectors, store.keys, most=settings.vector_cache),
                              settings.embeddings_deadline_ms, previous=previous)
            meaning.warm()
            embedding = EmbeddingWorker(vectors, store.keys, embedder, ledger.clock, warm=meaning.warm)
        queries = RecallQueries(datastore)
        probe = SensitiveProbe(packaged).ordinary if packaged is not None and settings.sensitive_probe == "on" else None
        memories = MemoryService(ledger, queries, index, purge, policy=ContentRules(probe),
                                 max_text_bytes=settings.max_text_bytes,
                                 candidate_ttl=timedelta(days=settings.candidate_ttl_days),
                                 links=MemoryLinks(ledger, LinkQueries(datastore)), remember_key=root.remember_key,
                                 relations=Relations(ledger.keys, queries, index, ledger.clock, meaning,
                                                     judge=relation_judge(settings, budget, ledger.clock, packaged)))
        extractor = (OpenAIExtractor(settings.llm_base_url, settings.llm_model, settings.llm_api_key)
                     if settings.llm_base_url else RuleExtractor())
        learning = LearningService(memories, inbox, budget, extractor, LearningRules(
            limits=daily_limits(settings),
            fallback=RuleExtractor() if settings.budget_fallback == "rules" and settings.llm_base_url else None))
        syncer = semantic = None
        if settings.hindsight_url:
            signing_key = master.hindsight_signing_key()
            syncer = HindsightSyncer(ledger, HindsightClient(settings.hindsight_url, signing_key=signing_key), purge,
                                     HindsightDatabase(settings.hindsight_database_url)
                                     if settings.hindsight_database_url else None)
            semantic = SemanticIndex(HindsightClient(settings.hindsight_url, signing_key=signing_key),
                                     settings.hindsight_deadline_ms, max_tokens=settings.hindsight_max_tokens,
                                     most=settings.hindsight_max_hints)
        backups = Backups(catalog, settings, ledger.clock)
        proposers = [LocalProposer(), *insight_proposers(
            settings, budget=budget, clock=ledger.clock,
            hindsight_client=HindsightClient(settings.hindsight_url, signing_key=master.hindsight_signing_key())
            if settings.hindsight_url else None)]
        insights = InsightService(ledger, InsightQueries(datastore), index, proposers,
                                  max_text_bytes=settings.max_text_bytes)
        recall = RecallService(ledger, queries, index, semantic, max_text_bytes=settings.max_text_bytes,
                               insights=insights, hint_weight=settings.hindsight_weight, meaning=meaning,
                               floor=settings.recall_floor)
        forgetting = ForgettingService(memories, AccountForgets(datastore, purge), queries,
                                       request=Pace(settings.forget_request_members, 2.0))
        sweepers = []
        if background:
            sweepers = [Sweeper(memories.expire_due_candidates, settings.sweep_interval),
                        Sweeper(forgetting.continue_account_forgets, settings.worker_interval),
                        Sweeper(learning.clear_processed_payloads, settings.sweep_interval),
                        Sweeper(learning.work, settings.worker_interval)]
            if syncer is not None:
                sweepers.append(Sweeper(syncer.sync, settings.worker_interval))
                sweepers.append(Sweeper(syncer.audit, settings.hindsight_audit_interval))
            if embedding is not None:  # a quarter second between turns: found by meaning well within 2 s
                sweepers.append(Sweeper(embedding.work, min(settings.worker_interval, 0.25)))
            sweepers.append(Sweeper(insights.settle_invalidations, settings.worker_interval))
            # the proposer reads and unseals a person's memories: while writes or recalls arrive it runs every
            # 10 intervals (a backlog of proposals, after an import say, otherwise shows in every recall's tail)
            sweepers.append(Sweeper(insights.propose_due, settings.worker_interval,
                                    yield_to=lambda: ledger.saves + recall.recalls))
            sweepers.append(Sweeper(backups.expire, settings.sweep_interval))
            sweepers.append(Sweeper(lambda: purge.vacuum_views(ledger.clock.now()), settings.sweep_interval))
        engram = cls(settings, database, master, store, projections, runner, ledger, memories, recall,
                     GovernanceService(ledger), learning,
                     Operations(ledger, projections, learning, fence, settings, syncer, purge, insights.queries, recall),
                     syncer, embedded, sweepers, forgetting, backups=backups,
                     importer=MemoryImporter(memories, fence, root.import_key, fence.loaded.wait),
                     insights=insights, embedding=embedding)
        engram.operations.fill_in_processes = fill_in_processes(Engram.open, settings, database, fenced)
        engram.operations.embedding = embedding
        assert store.outbox is not None
        engram.publisher = TombstonePublisher(store.outbox, journal, ledger.clock)
        fence.on_commit = engram.publisher.kick
        engram.publisher.start()
        if not distributed:
            if catch_up:
                runner.catch_up_all()
            if background:
                runner.start(listen=notified)
        for sweeper in sweepers:
            sweeper.start()
        return engram

    def close(self) -> None:
        for sweeper in self.sweepers:
            sweeper.stop()
        self.runner.stop()
        if self.publisher is not None:
            self.publisher.stop()
        self.store.close()
        for index in (self.recall.semantic, self.recall.meaning):  # Hindsight's idle connections, the query threads
            close_index = getattr(index, "close", None)
            if close_index is not None:
                close_index()
        journal = getattr(self.ledger.tombstones, "journal", None)
        if journal is not None and hasattr(journal, "close"):
            journal.close()
        if self.embedded is not None:
            self.embedded.stop()
