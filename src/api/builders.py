"""The composition root's builders, in the order `Engram.open` calls them: the write side (the database's
schema, the event store and its fence, the views and their projections), the services over it, and the
background loops. Each builds its part whole and hands it on; none changes what an earlier one built."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from datetime import timedelta

from engram.adapters.blind_index import BlindIndex
from engram.adapters.budget import BudgetLedger, daily_limits
from engram.adapters.chat_model import ChatModel
from engram.adapters.content_rules import ContentRules
from engram.adapters.crypto import DerivationRoot, MasterKey, MasterKeys, previous_key_file
from engram.adapters.database import Database, DatabaseTimeouts, EmbeddedPostgres
from engram.adapters.embedders import Embedder, LocalEmbedder, RemoteEmbedder
from engram.adapters.extractors import OpenAIExtractor, RuleExtractor
from engram.adapters.hindsight import HindsightClient, HindsightDatabase, SemanticIndex
from engram.adapters.insight_local import LocalProposer
from engram.adapters.insight_proposers import insight_proposers
from engram.adapters.kafka_journal import KafkaJournal
from engram.adapters.migrations import migrate, schema_lock
from engram.adapters.relation_model import ModelRelationJudge
from engram.adapters.relation_probe import RelationProbe
from engram.adapters.sensitive_probe import SensitiveProbe
from engram.adapters.sweeper import Sweeper
from engram.adapters.tombstones import Fence, FenceRequired, FileJournal, Journal
from engram.adapters.vector_index import Meaning, VectorIndex
from engram.adapters.vectors import VectorStore
from engram.domain.clock import Clock
from engram.domain.rollout import Rollout
from engram.projections.base import ViewProjection
from engram.projections.failures import safe_decoder
from engram.projections.governance import GovernanceProjection, GovernanceQueries, GovernanceView
from engram.projections.hindsight_sync import HindsightSyncProjection, HindsightSyncView
from engram.projections.inbox import InboxProjection, InboxQueries, InboxView
from engram.projections.insight_queries import InsightQueries
from engram.projections.insights import InsightProjection, InsightView
from engram.projections.links import LinkQueries, LinksProjection, LinksView
from engram.projections.purge import ALWAYS, BACKUPS, HINDSIGHT, KAFKA, AccountForgets, PurgeTracker
from engram.projections.recall import RecallProjection, RecallView
from engram.projections.recall_queries import RecallQueries
from engram.projections.review import ReviewProjection, ReviewView
from engram.projections.runner import ProjectorRunner
from engram.service.backups import BackupCatalog, Backups, catalog_of
from engram.service.bot_keys import BotKeyService
from engram.service.credentials import CredentialsService
from engram.service.embedding import EmbeddingWorker
from engram.service.forgetting import ForgettingService, Pace
from engram.service.governance import GovernanceService
from engram.service.heavy import HeavyReads
from engram.service.hindsight_sync import HindsightSyncer
from engram.service.importer import MemoryImporter
from engram.service.insights import InsightService
from engram.service.learning import LearningRules, LearningService
from engram.service.ledger import EventStore, Ledger
from engram.service.links import MemoryLinks
from engram.service.memories import MemoryService
from engram.service.operations import Operations
from engram.service.ports import Settler
from engram.service.recall import RecallService
from engram.service.relations import Judge, Relations
from engram.service.settings import Settings

from .rebuilds import Opens, fill_in_processes


def master_key(settings: Settings) -> MasterKey:
    if settings.master_key:
        return MasterKey.from_text(settings.master_key)
    return MasterKey.load_or_create(settings.data_dir / "master.key")


def master_keys(settings: Settings) -> MasterKeys:
    """The current master key and the previous ones (ENGRAM_PREVIOUS_MASTER_KEYS, and the key file's
    previous keys that `engram keys new` keeps), accepted for unwrapping until a rotation is done."""
    previous = [MasterKey.from_text(k) for k in settings.previous_master_keys]
    return MasterKeys(master_key(settings), [*previous, *previous_key_file(settings.data_dir / "master.key")])


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


def database_of(settings: Settings, database: Database | None) -> tuple[Database, EmbeddedPostgres | None]:
    """The database given, else ENGRAM_DATABASE_URL's, else the embedded server (started here)."""
    if database is not None:
        return database, None
    if settings.database_url:
        return Database.from_url(settings.database_url), None
    embedded = EmbeddedPostgres(settings.data_dir.resolve())
    return embedded.start(), embedded


def abandon(store: EventStore, journal: object, embedded: EmbeddedPostgres | None) -> None:
    """Close what a start that refuses to go on has opened."""
    store.close()
    close = getattr(journal, "close", None)
    if close is not None:
        close()
    if embedded is not None:
        embedded.stop()


@dataclass(frozen=True)
class WriteSide:
    """The event store behind its fence, the keys' derived parts, and the views with their projections."""

    masters: MasterKeys
    journal: Journal
    fence: Fence
    store: EventStore
    root: DerivationRoot  # the blind index's, remember's and import's keys
    index: BlindIndex
    purge: PurgeTracker
    catalog: BackupCatalog
    projections: dict[str, ViewProjection]
    published: threading.Event  # set by the fence after each commit of tombstones: the publisher's wake-up


def write_side(settings: Settings, database: Database, embedded: EmbeddedPostgres | None, *,
               fenced: bool) -> WriteSide:
    """Migrate the schema and build the store, its fence and the views. `fenced`: refuse a database older
    than the tombstone journal (`FenceRequired`) rather than serve what was forgotten."""
    masters = master_keys(settings)
    journal: Journal = (KafkaJournal(settings.kafka_bootstrap, settings.kafka_partitions) if settings.kafka_bootstrap
                        else FileJournal.beside_data(settings.journal_dir, settings.data_dir))
    published = threading.Event()
    fence = Fence(journal, on_commit=published.set)
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
        try:
            store.keys.check_masters()  # a key a wrapped row needs is missing: say which, start nothing
            root = store.keys.derivation_root()
        except ValueError:
            abandon(store, journal, embedded)
            raise
        assert store.outbox is not None
        fence.attach(store.outbox)
        index = BlindIndex(root)
        purge = PurgeTracker(store.datastore, (*copies, BACKUPS), backups=catalog)
        projections = views(settings, store, index, purge)
    unfenced = fence.unfenced() if fenced else []  # outside the schema lock: its session must end first
    if unfenced:
        abandon(store, journal, embedded)
        raise FenceRequired(len(unfenced))
    return WriteSide(masters, journal, fence, store, root, index, purge, catalog, projections, published)


def views(settings: Settings, store: EventStore, index: BlindIndex,
          purge: PurgeTracker) -> dict[str, ViewProjection]:
    """Every view's table (created if missing) and the projection that keeps it."""
    datastore = store.datastore
    recall, review = RecallView(datastore, "recall"), ReviewView(datastore, "review")
    governance, inbox = GovernanceView(datastore, "governance"), InboxView(datastore, "inbox")
    insights, links = InsightView(datastore, "insights"), LinksView(datastore, "links")
    projections: dict[str, ViewProjection] = {
        "recall": RecallProjection(recall, store.keys, index, purge),
        "review": ReviewProjection(review, store.keys, purge),
        "governance": GovernanceProjection(governance),
        "inbox": InboxProjection(inbox, index, purge),
        "insights": InsightProjection(insights, store.keys, index),
        "links": LinksProjection(links, index),
    }
    if settings.hindsight_url:
        projections["hindsight_sync"] = HindsightSyncProjection(HindsightSyncView(datastore, "hindsight_sync"), index)
    for projection in projections.values():
        projection.view.create_table()
    return projections


@dataclass(frozen=True)
class Services:
    """What the entry layer calls, and what the background loops run."""

    runner: ProjectorRunner
    distributed: bool
    ledger: Ledger
    memories: MemoryService
    recall: RecallService
    governance: GovernanceService
    learning: LearningService
    forgetting: ForgettingService
    importer: MemoryImporter
    insights: InsightService
    backups: Backups
    operations: Operations
    syncer: HindsightSyncer | None
    embedding: EmbeddingWorker | None
    credentials: CredentialsService
    bot_keys: BotKeyService


def services(settings: Settings, database: Database, write: WriteSide, *, clock: Clock | None, fenced: bool,
             opener: Opens) -> Services:
    """The services over the write side. `opener` (`Engram.open`) lets a rebuild fill in other processes."""
    store, index, purge, root = write.store, write.index, write.purge, write.root
    datastore, projections = store.datastore, write.projections
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
                    clock=clock or Clock(), tombstones=write.fence)
    budget = BudgetLedger(datastore)
    embedder = embedder_of(settings)
    meaning = embedding = None
    packaged: LocalEmbedder | None = None  # the shipped model, which the probes read (ADR 0043)
    if embedder is not None:
        vectors = VectorStore(datastore)
        packaged = embedder if isinstance(embedder, LocalEmbedder) else LocalEmbedder()
        # the packaged model's vectors serve those not yet re-embedded by the operator's own (ADR 0040)
        previous = None if packaged is embedder else packaged
        meaning = Meaning(embedder, VectorIndex(vectors, store.keys, most=settings.vector_cache),
                          settings.embeddings_deadline_ms, previous=previous)
        meaning.warm()
        embedding = EmbeddingWorker(vectors, store.keys, embedder, ledger.clock, warm=meaning.warm)
    queries = RecallQueries(datastore)
    heavy = HeavyReads(settings.heavy_reads)  # exports and large recalls: a few at once, one a person
    probe = SensitiveProbe(packaged).ordinary if packaged is not None and settings.sensitive_probe == "on" else None
    memories = MemoryService(ledger, queries, index, purge, policy=ContentRules(probe),
                             max_text_bytes=settings.max_text_bytes,
                             candidate_ttl=timedelta(days=settings.candidate_ttl_days),
                             links=MemoryLinks(ledger, LinkQueries(datastore)), remember_key=root.remember_key,
                             relations=Relations(ledger.keys, queries, index, ledger.clock, meaning,
                                                 judge=relation_judge(settings, budget, ledger.clock, packaged)),
                             heavy=heavy)
    extractor = (OpenAIExtractor(settings.llm_base_url, settings.llm_model, settings.llm_api_key)
                 if settings.llm_base_url else RuleExtractor())
    learning = LearningService(memories, InboxQueries(datastore), budget, extractor, LearningRules(
        limits=daily_limits(settings),
        fallback=RuleExtractor() if settings.budget_fallback == "rules" and settings.llm_base_url else None))
    master = write.masters.current

    def hindsight(url: str) -> HindsightClient:
        return HindsightClient(url, signing_key=master.hindsight_signing_key())

    syncer = semantic = None
    if settings.hindsight_url:
        syncer = HindsightSyncer(ledger, hindsight(settings.hindsight_url), purge,
                                 HindsightDatabase(settings.hindsight_database_url)
                                 if settings.hindsight_database_url else None)
        semantic = SemanticIndex(hindsight(settings.hindsight_url), settings.hindsight_deadline_ms,
                                 max_tokens=settings.hindsight_max_tokens, most=settings.hindsight_max_hints)
    proposers = [LocalProposer(), *insight_proposers(
        settings, budget=budget, clock=ledger.clock,
        hindsight_client=hindsight(settings.hindsight_url) if settings.hindsight_url else None)]
    insights = InsightService(ledger, InsightQueries(datastore), index, proposers,
                              max_text_bytes=settings.max_text_bytes)
    recall = RecallService(ledger, queries, index, semantic, max_text_bytes=settings.max_text_bytes,
                           insights=insights, hint_weight=settings.hindsight_weight, meaning=meaning,
                           floor=settings.recall_floor, heavy=heavy)
    forgetting = ForgettingService(memories, AccountForgets(datastore, purge), queries,
                                   request=Pace(settings.forget_request_members, 2.0))
    operations = Operations(ledger, projections, learning, write.fence, settings, syncer, purge, insights.queries,
                            recall, embedding=embedding,
                            fill_in_processes=fill_in_processes(opener, settings, database, fenced))
    return Services(runner, distributed, ledger, memories, recall, GovernanceService(ledger), learning, forgetting,
                    MemoryImporter(memories, write.fence, root.import_key, write.fence.loaded.wait), insights,
                    Backups(write.catalog, settings, ledger.clock, database), operations, syncer, embedding,
                    CredentialsService(ledger), BotKeyService(ledger, ledger.standings))


def sweepers(settings: Settings, built: Services, purge: PurgeTracker) -> list[Sweeper]:
    """The background loops (not yet started)."""
    ledger, memories, learning, insights = built.ledger, built.memories, built.learning, built.insights
    recall = built.recall
    loops = [Sweeper(memories.expire_due_candidates, settings.sweep_interval),
             Sweeper(built.forgetting.continue_account_forgets, settings.worker_interval),
             Sweeper(learning.clear_processed_payloads, settings.sweep_interval),
             Sweeper(learning.work, settings.worker_interval)]
    if built.syncer is not None:
        loops.append(Sweeper(built.syncer.sync, settings.worker_interval))
        loops.append(Sweeper(built.syncer.audit, settings.hindsight_audit_interval))
    if built.embedding is not None:  # a quarter second between turns: found by meaning well within 2 s
        loops.append(Sweeper(built.embedding.work, min(settings.worker_interval, 0.25)))
    loops.append(Sweeper(insights.settle_invalidations, settings.worker_interval))
    # the proposer reads and unseals a person's memories: while writes or recalls arrive it runs every
    # 10 intervals (a backlog of proposals, after an import say, otherwise shows in every recall's tail)
    loops.append(Sweeper(insights.propose_due, settings.worker_interval,
                         yield_to=lambda: ledger.saves + recall.recalls))
    loops.append(Sweeper(built.backups.expire, settings.sweep_interval))
    loops.append(Sweeper(lambda: purge.vacuum_views(ledger.clock.now()), settings.sweep_interval))
    return loops
