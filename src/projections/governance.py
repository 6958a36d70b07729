"""Who may see what, as of now: directories, source revocations, per-person settings and credentials."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.persistence import Tracking
from psycopg import Cursor
from psycopg.types.json import Jsonb

from engram.domain.bot_keys import BotKey
from engram.domain.credentials import PersonCredentials
from engram.domain.directory import CompanyDirectory, Directory
from engram.domain.settings import PersonSettings

from .base import ViewProjection
from .view import View

DDL = """
CREATE TABLE IF NOT EXISTS engram_directories (
    directory_id uuid PRIMARY KEY,
    company text NOT NULL UNIQUE,
    document jsonb NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS engram_revocations (
    company text NOT NULL,
    source_id text NOT NULL,
    person text NOT NULL,  -- '' when revoked for everyone in the company
    revoked_at timestamptz NOT NULL,
    PRIMARY KEY (company, source_id, person)
);
CREATE TABLE IF NOT EXISTS engram_settings (
    settings_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    learning_paused boolean NOT NULL,
    use_paused boolean NOT NULL,
    UNIQUE (company, person)
);
CREATE TABLE IF NOT EXISTS engram_credentials (
    credentials_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    signed_out_before bigint,  -- seconds: tokens issued at or before it are revoked
    suspended boolean NOT NULL,
    UNIQUE (company, person)
);
CREATE TABLE IF NOT EXISTS engram_bot_keys (
    key_id text PRIMARY KEY,
    aggregate_id uuid NOT NULL UNIQUE,
    company text NOT NULL,
    bot text NOT NULL,
    digest text NOT NULL,  -- SHA-256 of the key's secret; the key itself is never kept
    revoked boolean NOT NULL,
    issued_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS engram_ended_tokens (
    token_id text PRIMARY KEY,  -- a token's SHA-256, signed out of the pages
    company text NOT NULL,
    person text NOT NULL,
    expires bigint NOT NULL  -- seconds: after it the token fails anyway
);
"""

EMPTY_DIRECTORY: dict[str, dict[str, object]] = {"teams": {}, "sources": {}, "bots": {}}


class GovernanceView(View):
    ddl = DDL
    tables = ("engram_directories", "engram_revocations", "engram_settings", "engram_credentials",
              "engram_ended_tokens", "engram_bot_keys")


class GovernanceProjection(ViewProjection):
    name = "governance"
    view_class = GovernanceView

    def apply(self, curs: Cursor[Any], event: Any, tracking: Tracking) -> None:
        if isinstance(event, CompanyDirectory.Opened):
            curs.execute(
                "INSERT INTO engram_directories (directory_id, company, document, updated_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (event.originator_id, event.company, Jsonb(EMPTY_DIRECTORY), event.timestamp),
            )
        elif isinstance(event, CompanyDirectory.Replaced):
            curs.execute(
                "UPDATE engram_directories SET document = %s, updated_at = %s WHERE directory_id = %s",
                (Jsonb(event.document), event.timestamp, event.originator_id),
            )
        elif isinstance(event, CompanyDirectory.SourceRevoked):
            curs.execute(
                "INSERT INTO engram_revocations (company, source_id, person, revoked_at) "
                "SELECT company, %s, %s, %s FROM engram_directories WHERE directory_id = %s "
                "ON CONFLICT DO NOTHING",
                (event.source_id, event.person or "", event.timestamp, event.originator_id),
            )
        elif isinstance(event, PersonSettings.Opened):
            curs.execute(
                "INSERT INTO engram_settings (settings_id, company, person, learning_paused, use_paused) "
                "VALUES (%s, %s, %s, false, false) ON CONFLICT DO NOTHING",
                (event.originator_id, event.company, event.person),
            )
        elif isinstance(event, PersonSettings.Changed):
            curs.execute(
                "UPDATE engram_settings SET learning_paused = %s, use_paused = %s WHERE settings_id = %s",
                (event.learning_paused, event.use_paused, event.originator_id),
            )
        elif isinstance(event, PersonCredentials.Opened):
            curs.execute(
                "INSERT INTO engram_credentials (credentials_id, company, person, signed_out_before, suspended) "
                "VALUES (%s, %s, %s, NULL, false) ON CONFLICT DO NOTHING",
                (event.originator_id, event.company, event.person),
            )
        elif isinstance(event, PersonCredentials.SignedOut):
            curs.execute(  # never backwards, whatever order a replay brings
                "UPDATE engram_credentials SET signed_out_before = greatest(signed_out_before, %s) "
                "WHERE credentials_id = %s",
                (event.before, event.originator_id),
            )
        elif isinstance(event, BotKey.Issued):
            curs.execute(
                "INSERT INTO engram_bot_keys (key_id, aggregate_id, company, bot, digest, revoked, issued_at) "
                "VALUES (%s, %s, %s, %s, %s, false, %s) ON CONFLICT DO NOTHING",
                (event.key_id, event.originator_id, event.company, event.bot, event.digest, event.timestamp),
            )
        elif isinstance(event, BotKey.Revoked):
            curs.execute("UPDATE engram_bot_keys SET revoked = true WHERE aggregate_id = %s", (event.originator_id,))
        elif isinstance(event, PersonCredentials.SessionEnded):
            curs.execute(
                "INSERT INTO engram_ended_tokens (token_id, company, person, expires) "
                "SELECT %s, company, person, %s FROM engram_credentials WHERE credentials_id = %s "
                "ON CONFLICT DO NOTHING",
                (event.token_id, event.expires, event.originator_id),
            )
            # the tokens that have expired since need no row: the clock refuses them now
            curs.execute("DELETE FROM engram_ended_tokens WHERE expires < %s", (int(event.timestamp.timestamp()),))
        elif isinstance(event, (PersonCredentials.Suspended, PersonCredentials.Resumed)):
            curs.execute(
                "UPDATE engram_credentials SET suspended = %s WHERE credentials_id = %s",
                (isinstance(event, PersonCredentials.Suspended), event.originator_id),
            )


@dataclass(frozen=True)
class Standing:
    """Everything request-time authorization needs about one caller, read in one round trip."""

    directory: Directory = field(default_factory=Directory)
    revoked_sources: frozenset[str] = frozenset()
    learning_paused: bool = False
    use_paused: bool = False
    signed_out_before: int | None = None  # the person's tokens issued at or before it are revoked
    suspended: bool = False
    ended: bool = False  # the caller's own token was signed out of the pages
    key_ok: bool = False  # the caller's bot key is one of this bot's, not revoked


# The directory's row version: the transaction that wrote it, and the row's own id (a rebuilt or
# restored view has new rows). Any change of the document writes a new version of the row.
_STAMP = "xmin::text || '/' || directory_id::text"


class GovernanceQueries:
    """Reads over the governance view. A company's directory (up to 10,000 people, a few hundred KiB of
    JSON) is parsed once for each version of its row and kept, per process, for the companies asked
    about most recently: each request reads the row's version, and the document only when it changed."""

    KEPT = 256  # companies whose parsed directory a process keeps

    def __init__(self, datastore: Any) -> None:
        self.datastore = datastore
        self._directories: OrderedDict[str, tuple[str, Directory]] = OrderedDict()
        self._lock = threading.Lock()

    def standing(self, company: str, person: str, token_id: str | None = None, key_id: str | None = None,
                 bot: str | None = None) -> Standing:
        """`token_id`: the caller's token's digest (a signed-out session?); `key_id` and `bot`: the bot key
        it came with instead (not revoked, and of this bot?)."""
        with self._lock:
            known = self._directories.get(company)
        with self.datastore.get_connection() as conn:
            row = conn.execute(
                f"SELECT (SELECT {_STAMP} FROM engram_directories WHERE company = %(c)s) AS stamp, "
                f"(SELECT document FROM engram_directories WHERE company = %(c)s AND {_STAMP} IS DISTINCT FROM %(k)s) "
                "AS directory, "
                "(SELECT coalesce(array_agg(source_id), '{}') FROM engram_revocations "
                " WHERE company = %(c)s AND person IN ('', %(p)s)) AS revoked, "
                "(SELECT learning_paused FROM engram_settings WHERE company = %(c)s AND person = %(p)s) AS lp, "
                "(SELECT use_paused FROM engram_settings WHERE company = %(c)s AND person = %(p)s) AS up, "
                "(SELECT signed_out_before FROM engram_credentials WHERE company = %(c)s AND person = %(p)s) AS so, "
                "(SELECT suspended FROM engram_credentials WHERE company = %(c)s AND person = %(p)s) AS su, "
                "EXISTS (SELECT 1 FROM engram_ended_tokens WHERE token_id = %(t)s) AS ended, "
                "EXISTS (SELECT 1 FROM engram_bot_keys WHERE key_id = %(kid)s AND company = %(c)s AND bot = %(b)s "
                "AND NOT revoked) AS key_ok",
                {"c": company, "p": person, "k": known[0] if known else None, "t": token_id, "kid": key_id, "b": bot},
                prepare=True,
            ).fetchone()
        assert row is not None
        return Standing(
            directory=self._directory(company, row["stamp"], row["directory"], known),
            revoked_sources=frozenset(row["revoked"]),
            learning_paused=bool(row["lp"]),
            use_paused=bool(row["up"]),
            signed_out_before=row["so"],
            suspended=bool(row["su"]),
            ended=bool(row["ended"]),
            key_ok=bool(row["key_ok"]),
        )

    def bot_key(self, key_id: str) -> dict[str, Any] | None:
        """A bot key's company, bot, digest and whether it was revoked; None for an unknown id."""
        with self.datastore.get_connection() as conn:
            return conn.execute("SELECT company, bot, digest, revoked FROM engram_bot_keys WHERE key_id = %s",
                                (key_id,), prepare=True).fetchone()

    def bot_keys(self, company: str, bot: str) -> list[dict[str, Any]]:
        with self.datastore.get_connection() as conn:
            return conn.execute("SELECT key_id, revoked, issued_at FROM engram_bot_keys WHERE company = %s AND bot = %s "
                                "ORDER BY issued_at, key_id", (company, bot)).fetchall()

    def _directory(self, company: str, stamp: str | None, document: dict[str, Any] | None,
                   known: tuple[str, Directory] | None) -> Directory:
        if stamp is None:  # no directory yet
            return Directory.from_document(EMPTY_DIRECTORY)
        if document is None and known is not None and known[0] == stamp:
            directory = known[1]
        else:
            directory = Directory.from_document(document or EMPTY_DIRECTORY)
        with self._lock:
            self._directories[company] = (stamp, directory)
            self._directories.move_to_end(company)
            while len(self._directories) > self.KEPT:
                self._directories.popitem(last=False)
        return directory
