"""What Hindsight should hold, from events: per memory, the document to retain or to delete.

A confirmed memory is retained only while its owner may still use it under the company's directory
and revocations (`domain.visibility.may_use`, as the person themself). Losing the scope (a source
moved to another team, the person removed from its team or source, a revocation) withdraws the
document; regaining it retains it again. Forgetting, expiry and rejection delete it for good.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import Tracking
from psycopg import Cursor
from psycopg.types.json import Jsonb

from engram.adapters.blind_index import BlindIndex
from engram.adapters.hindsight import bank_for
from engram.domain.directory import CompanyDirectory, Directory, directory_id
from engram.domain.memory import Memory, purge_id_of
from engram.domain.scope import GENERAL, Caller, Scope
from engram.domain.visibility import may_use

from .base import ViewProjection
from .view import View

DDL = """
CREATE TABLE IF NOT EXISTS engram_hindsight_sync (
    memory_id uuid PRIMARY KEY,
    action text NOT NULL,            -- retain | withdraw (scope lost, may return) | delete (final)
    revision int NOT NULL,
    generation bigint NOT NULL,      -- the event that made this wish: a syncer's late answer for an older one changes nothing
    forget_id text,
    state text NOT NULL,             -- pending | done
    attempts int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,     -- backoff only; leases are engram_hindsight_leases (migration 0006)
    last_error text,
    synced_at timestamptz,
    changed_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS engram_hindsight_sync_pending ON engram_hindsight_sync ((action = 'retain'), changed_at)
    WHERE state = 'pending';
CREATE TABLE IF NOT EXISTS engram_hindsight_scopes (
    memory_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    visibility text NOT NULL,
    team text,
    source_blind text                -- BlindIndex.source of its source id (ADR 0019)
);
CREATE INDEX IF NOT EXISTS engram_hindsight_scopes_company ON engram_hindsight_scopes (company);
CREATE TABLE IF NOT EXISTS engram_hindsight_directories (
    directory_id uuid PRIMARY KEY,
    company text NOT NULL UNIQUE,
    document jsonb NOT NULL,
    revoked jsonb NOT NULL           -- [{"source_id", "person" (null: everyone)}]: company configuration, in clear
);
"""

class HindsightSyncView(View):
    ddl = DDL
    tables = ("engram_hindsight_sync", "engram_hindsight_scopes", "engram_hindsight_directories")


class HindsightSyncProjection(ViewProjection):
    """Only the wish is projected; `service.hindsight_sync.HindsightSyncer` makes it so and records
    the outcome (attempts, backoff, purge evidence).

    Memory and directory events may be applied by different workers at once (distributed mode):
    a memory's wish reads the directory row `FOR SHARE` and a directory change updates that row
    before re-deciding the company's wishes, so whichever commits second sees the other."""

    name = "hindsight_sync"
    view_class = HindsightSyncView

    def __init__(self, view: View, index: BlindIndex) -> None:
        super().__init__(view)
        self.index = index

    def apply(self, curs: Cursor[Any], e: Any, tracking: Tracking) -> None:
        if isinstance(e, Memory.Created):
            source_id = (e.source or {}).get("id")  # None once the key is gone: it is sealed (ADR 0019)
            curs.execute(
                "INSERT INTO engram_hindsight_scopes (memory_id, company, person, visibility, team, source_blind) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (e.originator_id, e.company, e.person, e.visibility, e.team,
                 self.index.source(e.company, source_id) if source_id else None),
            )
            if source_id is not None or e.visibility == GENERAL:
                # Its bank, while the source can still be read: a forget must find the document after
                # the key (and with it the source) is gone. Not rebuilt: migration 0007 owns the table.
                bank = bank_for(Scope(e.company, e.person, e.visibility, e.team, source_id))
                curs.execute("INSERT INTO engram_hindsight_banks (memory_id, bank) VALUES (%s, %s) "
                             "ON CONFLICT DO NOTHING", (e.originator_id, bank))
            if isinstance(e, Memory.Remembered):
                self._want_retain(curs, e, 1, tracking)
        elif isinstance(e, Memory.Confirmed):
            self._want_retain(curs, e, None, tracking)
        elif isinstance(e, Memory.Corrected):
            self._want_retain(curs, e, e.revision, tracking)
        elif isinstance(e, (Memory.Forgotten, Memory.Expired, Memory.Rejected)):
            self._want(curs, e.originator_id, "delete", None, e.timestamp, tracking.notification_id,
                       purge_id_of(e))
        elif isinstance(e, CompanyDirectory.Opened):
            self._directory(curs, e.company)
        elif isinstance(e, CompanyDirectory.Replaced):
            curs.execute("UPDATE engram_hindsight_directories SET document = %s WHERE directory_id = %s "
                         "RETURNING company, document, revoked", (Jsonb(e.document), e.originator_id))
            self._redecide(curs, curs.fetchone(), e.timestamp, tracking)
        elif isinstance(e, CompanyDirectory.SourceRevoked):
            curs.execute("UPDATE engram_hindsight_directories SET revoked = revoked || %s WHERE directory_id = %s "
                         "RETURNING company, document, revoked",
                         (Jsonb([{"source_id": e.source_id, "person": e.person}]), e.originator_id))
            self._redecide(curs, curs.fetchone(), e.timestamp, tracking)

    @staticmethod
    def _directory(curs: Cursor[Any], company: str, *, share: bool = False) -> dict[str, Any]:
        curs.execute(
            "INSERT INTO engram_hindsight_directories (directory_id, company, document, revoked) "
            "VALUES (%s, %s, %s, '[]') ON CONFLICT DO NOTHING",
            (directory_id(company), company, Jsonb(Directory().document())),
        )
        curs.execute("SELECT company, document, revoked FROM engram_hindsight_directories WHERE company = %s"
                     + (" FOR SHARE" if share else ""), (company,))
        row = curs.fetchone()
        assert row is not None
        return dict(row)

    def _blinded(self, directory: dict[str, Any]) -> tuple[Directory, list[tuple[str, str | None]]]:
        """The company's directory and revocations with every source id blinded as the view keeps the
        memories' (ADR 0019): once per decision round, not per memory."""
        company = directory["company"]

        def blind(source_id: str) -> str:
            return self.index.source(company, source_id)

        return (Directory.from_document(directory["document"]).with_source_ids(blind),
                [(blind(r["source_id"]), r["person"]) for r in directory["revoked"]])

    @staticmethod
    def _usable(scope: dict[str, Any], blinded: tuple[Directory, list[tuple[str, str | None]]]) -> bool:
        """May the owner still use this memory now? The one visibility rule, asked as the person, with
        every source id blinded alike (`_blinded`)."""
        directory, revocations = blinded
        owner = Caller(scope["company"], scope["person"], "user")
        revoked = frozenset(s for s, person in revocations if person in (None, scope["person"]))
        return may_use(owner, Scope(scope["company"], scope["person"], scope["visibility"], scope["team"],
                                    scope["source_blind"], shredded=scope["source_blind"] is None),
                       directory.grants(owner, revoked))

    def _want_retain(self, curs: Cursor[Any], e: Any, revision: int | None, tracking: Tracking) -> None:
        curs.execute("SELECT * FROM engram_hindsight_scopes WHERE memory_id = %s", (e.originator_id,))
        scope = curs.fetchone()
        if scope is None:  # its creation was never seen: nothing to index
            return
        usable = self._usable(scope, self._blinded(self._directory(curs, scope["company"], share=True)))
        self._want(curs, e.originator_id, "retain" if usable else "withdraw", revision, e.timestamp,
                   tracking.notification_id)

    def _redecide(self, curs: Cursor[Any], directory: dict[str, Any] | None, at: Any, tracking: Tracking) -> None:
        """After a directory change or revocation (`directory` is the updated row): withdraw what lost
        its scope, retain what regained it."""
        if directory is None:
            return
        curs.execute(
            "SELECT s.*, h.action FROM engram_hindsight_scopes s JOIN engram_hindsight_sync h USING (memory_id) "
            "WHERE s.company = %s AND h.action <> 'delete' ORDER BY s.memory_id FOR UPDATE OF h",
            (directory["company"],),
        )
        blinded = self._blinded(directory)
        for scope in list(curs.fetchall()):
            action = "retain" if self._usable(scope, blinded) else "withdraw"
            if action != scope["action"]:
                self._want(curs, scope["memory_id"], action, None, at, tracking.notification_id)

    @staticmethod
    def _want(curs: Cursor[Any], memory_id: Any, action: str, revision: int | None, at: Any, generation: int,
              forget_id: str | None = None) -> None:
        """A new wish: pending now, whatever the backoff. It never touches a syncer's lease (that is
        `engram_hindsight_leases`): work in flight finishes, finds a newer generation, and leaves the
        wish for the next claim."""
        curs.execute(
            "INSERT INTO engram_hindsight_sync (memory_id, action, revision, generation, forget_id, state, changed_at) "
            "VALUES (%(id)s, %(action)s, coalesce(%(revision)s, 1), %(generation)s, %(forget_id)s, 'pending', %(at)s) "
            "ON CONFLICT (memory_id) DO UPDATE SET action = EXCLUDED.action, "
            "revision = coalesce(%(revision)s, engram_hindsight_sync.revision), generation = EXCLUDED.generation, "
            "forget_id = coalesce(EXCLUDED.forget_id, engram_hindsight_sync.forget_id), state = 'pending', "
            "attempts = 0, next_attempt_at = NULL, changed_at = EXCLUDED.changed_at "
            "WHERE engram_hindsight_sync.action <> 'delete'",  # a delete is final
            {"id": memory_id, "action": action, "revision": revision, "generation": generation,
             "forget_id": forget_id, "at": at},
        )
