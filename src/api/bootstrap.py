"""The composition root: configuration in, a running Engram (service + projectors) out. `open` calls the
builders (`builders.py`) in order and starts what they built; nothing is changed after it is built."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from eventsourcing.postgres import PostgresDatastore

from engram.adapters.crypto import MasterKey
from engram.adapters.database import Database, EmbeddedPostgres
from engram.adapters.keystore import KeyStore
from engram.adapters.migrations import migrate_database
from engram.adapters.sweeper import Sweeper
from engram.adapters.tombstones import TombstonePublisher
from engram.domain.clock import Clock
from engram.projections.base import ViewProjection
from engram.projections.runner import ProjectorRunner
from engram.service.backups import Backups
from engram.service.bot_keys import BotKeyService
from engram.service.credentials import CredentialsService
from engram.service.embedding import EmbeddingWorker
from engram.service.forgetting import ForgettingService
from engram.service.governance import GovernanceService
from engram.service.hindsight_sync import HindsightSyncer
from engram.service.importer import MemoryImporter
from engram.service.insights import InsightService
from engram.service.key_rotation import KeyRotation
from engram.service.learning import LearningService
from engram.service.ledger import EventStore, Ledger
from engram.service.memories import MemoryService
from engram.service.operations import Operations
from engram.service.recall import RecallService
from engram.service.settings import Settings

from .builders import database_of, master_key, master_keys, services, sweepers, write_side

PROJECTIONS = ("recall", "review", "governance", "inbox", "insights", "links")


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


def token_secret(settings: Settings) -> str:
    return settings.token_secret or master_key(settings).token_secret()


@dataclass(frozen=True)
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
    forgetting: ForgettingService
    publisher: TombstonePublisher
    importer: MemoryImporter  # `engram import`
    backups: Backups
    insights: InsightService
    syncer: HindsightSyncer | None
    embedded: EmbeddedPostgres | None
    embedding: EmbeddingWorker | None  # None with ENGRAM_EMBEDDINGS=off
    sweepers: list[Sweeper]
    credentials: CredentialsService
    bot_keys: BotKeyService

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
        database, embedded = database_of(settings, database)
        write = write_side(settings, database, embedded, fenced=fenced)
        built = services(settings, database, write, clock=clock, fenced=fenced, opener=Engram.open)
        assert write.store.outbox is not None
        publisher = TombstonePublisher(write.store.outbox, write.journal, built.ledger.clock, wake=write.published)
        engram = cls(settings, database, write.masters.current, write.store, write.projections, built.runner,
                     built.ledger, built.memories, built.recall, built.governance, built.learning,
                     built.operations, built.forgetting, publisher, built.importer, built.backups, built.insights,
                     built.syncer, embedded, built.embedding,
                     sweepers(settings, built, write.purge) if background else [], built.credentials,
                     built.bot_keys)
        engram.start(catch_up=catch_up and not built.distributed, background=background, notified=notified)
        return engram

    def start(self, *, catch_up: bool, background: bool, notified: bool) -> None:
        """Start the publisher, then (on one node) catch the views up and run the projectors, then the loops."""
        self.publisher.start()
        if not self.settings.kafka_bootstrap:
            if catch_up:
                self.runner.catch_up_all()
            if background:
                self.runner.start(listen=notified)
        for sweeper in self.sweepers:
            sweeper.start()

    def close(self) -> None:
        for sweeper in self.sweepers:
            sweeper.stop()
        self.runner.stop()
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
