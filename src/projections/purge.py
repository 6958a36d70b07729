"""The purge tracker: each forget request and, for every copy this deployment holds, the evidence
that the copy no longer has the memory's content.

The copies are given once, when the deployment is composed (the event store, the recall view, the
review queue and the inbox always; Hindsight when it is configured; the Kafka topic in distributed
mode). Whatever deletes a copy reports here in its own transaction: the recall projection opens the
request and reports the event store and its own view (and, applied from Kafka, the topic's records),
the review projection reports its queue, the inbox projection the receipt payload the memory came
from, the Hindsight syncer reports Hindsight once it has checked the document is gone. A forget is
"purge_complete" only when every copy has reported. Its tables come from the numbered migrations
(0003): Hindsight's and Kafka's reports cannot be rebuilt from events.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from psycopg import Cursor

from engram.domain.backup import BackupsCopy

EVENT_STORE = "event_store"
RECALL_VIEW = "recall_view"
REVIEW_QUEUE = "review_queue"
INBOX = "inbox"
HINDSIGHT = "hindsight"
KAFKA = "kafka"
BACKUPS = "backups"

ALWAYS = (EVENT_STORE, RECALL_VIEW, REVIEW_QUEUE, INBOX)

# The tables each view copy's rows live in: vacuumed after purges (`PurgeTracker.vacuum_views`).
VIEW_TABLES = {RECALL_VIEW: ("engram_memories", "engram_recall_revisions", "engram_recall_terms", "engram_vectors"),
               REVIEW_QUEUE: ("engram_candidates",)}
VACUUMED = "tables vacuumed at"

STOPPED_USING = "stopped_using"
PURGE_COMPLETE = "purge_complete"


class BackupCopies(Protocol):
    """The backup catalog (`adapters.backups.BackupCatalog`): a forget's `backups` copy, read when asked."""

    def copy_state(self, requested_at: datetime, committed_by: datetime | None = None) -> BackupsCopy: ...

    def settle(self, forget_id: str, copy: BackupsCopy) -> None: ...

    def settled(self) -> list[dict[str, Any]]: ...


def _settle_backups(curs: Cursor[Any], forget_id: str, evidence: str, purged_at: Any) -> None:
    """A forget's `backups` copy recorded purged; the first answer stands (ADR 0060)."""
    curs.execute("INSERT INTO engram_purge_copies (forget_id, copy, state, evidence, purged_at) "
                 "VALUES (%s, %s, 'purged', %s, %s) ON CONFLICT (forget_id, copy) DO NOTHING",
                 (forget_id, BACKUPS, evidence, purged_at))


class PurgeTracker:
    def __init__(self, datastore: Any, copies: tuple[str, ...] = ALWAYS, backups: BackupCopies | None = None) -> None:
        self.datastore = datastore
        self.copies = copies
        self.backups = backups  # nobody reports backups: their copy is read from the catalog at report time

    # -- reports, each in the reporter's own transaction ----------------------

    def opened(self, curs: Cursor[Any], forget_id: str, memory_id: UUID, company: str, person: str,
               at: datetime) -> None:
        # committed_by: the database's clock, read after the forget's commit (this runs on the committed
        # event), so a backup whose dump began later cannot hold the memory's key (ADR 0060)
        curs.execute(
            "INSERT INTO engram_forgets (forget_id, memory_id, company, person, requested_at, committed_by) "
            "VALUES (%s, %s, %s, %s, %s, clock_timestamp()) ON CONFLICT DO NOTHING",
            (forget_id, memory_id, company, person, at),
        )

    def purged(self, curs: Cursor[Any], forget_id: str, copy: str, evidence: str, at: datetime) -> None:
        curs.execute(
            "INSERT INTO engram_purge_copies (forget_id, copy, state, evidence, purged_at) "
            "VALUES (%s, %s, 'purged', %s, %s) ON CONFLICT (forget_id, copy) DO UPDATE "
            "SET state = 'purged', evidence = EXCLUDED.evidence, purged_at = EXCLUDED.purged_at",
            (forget_id, copy, evidence, at),
        )

    def vacuum_views(self, at: datetime, limit: int = 10_000) -> int:
        """Reclaim the dead row versions purged views leave behind, then note it in their copies'
        evidence. Those versions hold only ciphertext under destroyed keys; this makes them go too.
        Runs from a sweeper, not per forget: one VACUUM covers every forget since the last."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT forget_id, copy FROM engram_purge_copies WHERE copy = ANY(%s) AND state = 'purged' "
                         "AND evidence NOT LIKE %s LIMIT %s", (list(VIEW_TABLES), f"%{VACUUMED}%", limit))
            due = [(r["forget_id"], r["copy"]) for r in curs.fetchall()]
        if not due:
            return 0
        unbounded = getattr(self.datastore, "long_running", contextlib.nullcontext)
        with unbounded(), self.datastore.get_connection() as conn:  # a vacuum may outlast a request's bound
            for copy in sorted({c for _, c in due}):
                for table in VIEW_TABLES[copy]:
                    conn.execute(f"VACUUM {table}")  # names from VIEW_TABLES, never from input
        note = f"; {VACUUMED} {at.isoformat()}"
        with self.datastore.transaction(commit=True) as curs:
            for copy in sorted({c for _, c in due}):
                curs.execute("UPDATE engram_purge_copies SET evidence = evidence || %s WHERE copy = %s "
                             "AND forget_id = ANY(%s)", (note, copy, [f for f, c in due if c == copy]))
        return len(due)

    def resettle(self) -> int:
        """After a restore: every `backups` copy settled since the backup was taken, settled again."""
        if self.backups is None:
            return 0
        entries = self.backups.settled()
        with self.datastore.transaction(commit=True) as curs:
            for e in entries:
                _settle_backups(curs, e["forget_id"], e["evidence"], e["purged_at"])
        return len(entries)

    # -- answers ---------------------------------------------------------------

    def backlog(self, company: str | None = None) -> int:
        """Forgets (of one company, or all) with a reported copy still pending; backups ageing out aside."""
        reported = [c for c in self.copies if c != BACKUPS]
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                "SELECT count(*) AS n FROM engram_forgets f WHERE (%(company)s::text IS NULL OR f.company = %(company)s) "
                "AND (SELECT count(*) FROM engram_purge_copies c WHERE c.forget_id = f.forget_id "
                "AND c.state = 'purged' AND c.copy = ANY(%(copies)s)) < %(wanted)s",
                {"company": company, "copies": reported, "wanted": len(reported)},
            )
            row = curs.fetchone()
        return int(row["n"]) if row else 0

    def report(self, forget_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The request (None when unknown) and one entry per copy of this deployment, pending or purged."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT * FROM engram_forgets WHERE forget_id = %s", (forget_id,))
            head = curs.fetchone()
            curs.execute("SELECT * FROM engram_purge_copies WHERE forget_id = %s", (forget_id,))
            found = {r["copy"]: r for r in curs.fetchall()}
        return head, self._copies(head, found)

    def _copies(self, head: dict[str, Any] | None, found: dict[str, Any]) -> list[dict[str, Any]]:
        copies = []
        for name in self.copies:
            row = found.get(name)
            if name == BACKUPS and self.backups is not None and head is not None and not (row and row["state"] == "purged"):
                backups = self.backups.copy_state(head["requested_at"], head.get("committed_by"))
                if backups.state == "purged":
                    self.settled(head["forget_id"], backups)
                copies.append({"copy": name, "state": backups.state, "evidence": backups.evidence,
                               "purged_at": backups.purged_at})
                continue
            copies.append({"copy": name, "state": row["state"] if row else "pending",
                           "evidence": row["evidence"] if row else None,
                           "purged_at": row["purged_at"] if row else None})
        return copies

    def settled(self, forget_id: str, backups: BackupsCopy) -> None:
        """A `backups` copy once answered purged stays purged (ADR 0060): no later backup can hold the key
        (its dump begins after this), and the catalog's deletions are never undone. Noted beside the
        catalog first, where a restore cannot roll it back (`resettle`)."""
        if self.backups is not None:
            self.backups.settle(forget_id, backups)
        with self.datastore.transaction(commit=True) as curs:
            _settle_backups(curs, forget_id, backups.evidence, backups.purged_at)

    def status(self, forget_id: str | None) -> str:
        if forget_id is None:
            return STOPPED_USING
        return self.status_of(self.report(forget_id)[1])

    @staticmethod
    def status_of(copies: list[dict[str, Any]]) -> str:
        return PURGE_COMPLETE if all(c["state"] == "purged" for c in copies) else STOPPED_USING

    def reports(self, forget_ids: list[str]) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
        """`report` for many forgets in one round trip (lists); unknown ids are left out."""
        if not forget_ids:
            return {}
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT * FROM engram_forgets WHERE forget_id = ANY(%s)", (forget_ids,))
            heads = {r["forget_id"]: r for r in curs.fetchall()}
            curs.execute("SELECT * FROM engram_purge_copies WHERE forget_id = ANY(%s)", (forget_ids,))
            found: dict[str, dict[str, Any]] = {}
            for r in curs.fetchall():
                found.setdefault(r["forget_id"], {})[r["copy"]] = r
        return {forget_id: (head, self._copies(head, found.get(forget_id, {}))) for forget_id, head in heads.items()}


# -- account forgets ---------------------------------------------------------------------------------

NOTHING_HELD = "nothing to purge: the person held no memories here"


class AccountForgets:
    """Account forgets: one request for everything a person holds in a company, whose members are the
    person's memories, each forgotten through the single-memory forget (its own forget id and copies).

    Durable (migration 0005): who asked, which member forgets belong to it, how far it got. Its copies
    aggregate its members': a copy is purged when the account forget is finished and every member's
    copy is purged. The members are read from the recall view, so the request's memories and
    candidates of every status are found whatever the directory says now.
    """

    def __init__(self, datastore: Any, tracker: PurgeTracker) -> None:
        self.datastore = datastore
        self.tracker = tracker

    # -- the request and its progress, each in its own short transaction ------------------------------

    def open(self, forget_id: str, company: str, person: str, requested_by: str, by_admin: bool,
             at: datetime) -> dict[str, Any]:
        """The person's unfinished account forget: this new one, or the one already open (asking again continues it)."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "INSERT INTO engram_account_forgets (forget_id, company, person, requested_by, by_admin, requested_at) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (forget_id, company, person, requested_by, by_admin, at),
            )
            curs.execute("SELECT * FROM engram_account_forgets WHERE company = %s AND person = %s "
                         "AND finished_at IS NULL", (company, person))
            row = curs.fetchone()
        if row is None:  # finished between the insert and the read: the new one it lost to is the answer
            found = self.get(forget_id)
            assert found is not None
            return found
        return dict(row)

    def get(self, forget_id: str) -> dict[str, Any] | None:
        with self.datastore.get_connection() as conn:
            row = conn.execute("SELECT * FROM engram_account_forgets WHERE forget_id = %s", (forget_id,)).fetchone()
        return dict(row) if row else None

    def claim(self, forget_id: str, now: datetime, until: datetime) -> bool:
        """Take the lease of an unfinished account forget whose lease is free or lapsed."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "UPDATE engram_account_forgets SET lease_until = %s WHERE forget_id = %s AND finished_at IS NULL "
                "AND (lease_until IS NULL OR lease_until < %s) RETURNING forget_id",
                (until, forget_id, now),
            )
            return curs.fetchone() is not None

    def release(self, forget_id: str) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("UPDATE engram_account_forgets SET lease_until = NULL WHERE forget_id = %s", (forget_id,))

    def due(self, now: datetime, limit: int) -> list[str]:
        """Unfinished account forgets no one is advancing (the sweeper's work)."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT forget_id FROM engram_account_forgets WHERE finished_at IS NULL "
                "AND (lease_until IS NULL OR lease_until < %s) ORDER BY requested_at LIMIT %s",
                (now, limit),
            ).fetchall()
        return [r["forget_id"] for r in rows]

    def remaining_memories(self, forget_id: str, company: str, person: str, limit: int,
                           skip: Sequence[Any] = ()) -> list[Any]:
        """The person's memories (every status) not yet a member of this account forget, oldest first."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT m.memory_id FROM engram_memories m WHERE m.company = %s AND m.person = %s "
                "AND m.memory_id <> ALL(%s::uuid[]) AND NOT EXISTS (SELECT 1 FROM engram_account_forget_members a "
                "WHERE a.account_forget_id = %s AND a.memory_id = m.memory_id) "
                "ORDER BY m.created_at, m.memory_id LIMIT %s",
                (company, person, [str(s) for s in skip], forget_id, limit),
            ).fetchall()
        return [r["memory_id"] for r in rows]

    def remaining_receipts(self, company: str, person: str, limit: int, skip: Sequence[Any] = ()) -> list[Any]:
        """The person's receipts whose payload is not yet cleared, oldest first."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT receipt_uuid FROM engram_inbox WHERE company = %s AND person = %s AND NOT cleared "
                "AND receipt_uuid <> ALL(%s::uuid[]) ORDER BY received_at, receipt_uuid LIMIT %s",
                (company, person, [str(s) for s in skip], limit),
            ).fetchall()
        return [r["receipt_uuid"] for r in rows]

    def learning_in_flight(self, company: str, person: str, now: datetime) -> bool:
        """A learning worker holds a live lease on one of the person's receipts: it may still propose a
        candidate from text it read before the payload was cleared, so the account forget is not done."""
        with self.datastore.get_connection() as conn:
            return conn.execute(
                "SELECT 1 FROM engram_inbox_leases l JOIN engram_inbox i USING (receipt_uuid) "
                "WHERE i.company = %s AND i.person = %s AND l.lease_until > %s LIMIT 1", (company, person, now),
            ).fetchone() is not None

    def member(self, forget_id: str, memory_id: UUID, member_forget_id: str, earlier: bool) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "INSERT INTO engram_account_forget_members (account_forget_id, memory_id, forget_id, earlier) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (forget_id, memory_id, member_forget_id, earlier),
            )

    def receipts_cleared(self, forget_id: str, count: int) -> None:
        if count:
            with self.datastore.transaction(commit=True) as curs:
                curs.execute("UPDATE engram_account_forgets SET receipts_cleared = receipts_cleared + %s "
                             "WHERE forget_id = %s", (count, forget_id))

    def finish(self, forget_id: str, at: datetime) -> None:
        """committed_by: after every member's forget committed (ADR 0060)."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("UPDATE engram_account_forgets SET finished_at = %s, lease_until = NULL, "
                         "committed_by = clock_timestamp() WHERE forget_id = %s AND finished_at IS NULL",
                         (at, forget_id))

    # -- answers ---------------------------------------------------------------------------------------

    def report(self, forget_id: str) -> tuple[dict[str, Any] | None, int, list[dict[str, Any]]]:
        """The request (None when unknown), how many memories it covers, and one aggregated entry per
        copy of this deployment."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT * FROM engram_account_forgets WHERE forget_id = %s", (forget_id,))
            head = curs.fetchone()
            if head is None:
                return None, 0, []
            curs.execute("SELECT count(*) AS n FROM engram_account_forget_members WHERE account_forget_id = %s",
                         (forget_id,))
            linked = int(curs.fetchone()["n"])
            remaining = 0
            if head["finished_at"] is None:
                curs.execute(
                    "SELECT count(*) AS n FROM engram_memories m WHERE m.company = %s AND m.person = %s "
                    "AND NOT EXISTS (SELECT 1 FROM engram_account_forget_members a "
                    "WHERE a.account_forget_id = %s AND a.memory_id = m.memory_id)",
                    (head["company"], head["person"], forget_id),
                )
                remaining = int(curs.fetchone()["n"])
            curs.execute(
                "SELECT c.copy, count(*) AS purged, max(c.purged_at) AS purged_at, "
                "(array_agg(c.evidence ORDER BY c.purged_at DESC NULLS LAST))[1] AS latest "
                "FROM engram_account_forget_members a JOIN engram_purge_copies c USING (forget_id) "
                "WHERE a.account_forget_id = %s AND c.state = 'purged' GROUP BY c.copy",
                (forget_id,),
            )
            found = {r["copy"]: r for r in curs.fetchall()}
            # its own settled `backups` copy (PurgeTracker.settled), kept under the account forget's id
            curs.execute("SELECT evidence, purged_at FROM engram_purge_copies WHERE forget_id = %s AND copy = %s "
                         "AND state = 'purged'", (forget_id, BACKUPS))
            settled = curs.fetchone()
        head = dict(head)
        total = linked + remaining
        finished = head["finished_at"] is not None
        copies = []
        for name in self.tracker.copies:
            if name == BACKUPS and self.tracker.backups is not None and total > 0:
                # every member was forgotten by the time the account forget finished: backups older
                # than that may hold some of them
                if settled is not None:
                    copies.append({"copy": name, "state": "purged", "evidence": settled["evidence"],
                                   "purged_at": settled["purged_at"]})
                elif finished:
                    backups = self.tracker.backups.copy_state(head["finished_at"], head.get("committed_by"))
                    if backups.state == "purged":
                        self.tracker.settled(forget_id, backups)
                    copies.append({"copy": name, "state": backups.state, "evidence": backups.evidence,
                                   "purged_at": backups.purged_at})
                else:
                    copies.append({"copy": name, "state": "pending", "evidence": None, "purged_at": None})
                continue
            row = found.get(name)
            purged = int(row["purged"]) if row else 0
            done = finished and purged == total
            if total == 0:
                evidence = NOTHING_HELD if finished else None
                at = head["finished_at"]
            else:
                evidence = f"{purged} of {total} memories purged" + (f"; latest: {row['latest']}" if row else "")
                at = row["purged_at"] if row and done else None
            copies.append({"copy": name, "state": "purged" if done else "pending", "evidence": evidence,
                           "purged_at": at if done else None})
        return head, total, copies

    def listing(self, company: str, person: str | None, requested_by: str | None,
                after: tuple[datetime, str] | None, limit: int) -> list[dict[str, Any]]:
        """One page of forgets, newest first: a person's own (each memory forget not made by an account
        forget, and each account forget of them), or the account forgets an admin requested."""
        params: dict[str, Any] = {"company": company, "person": person, "by": requested_by, "limit": limit,
                                  "after_at": after[0] if after else None, "after_id": after[1] if after else None}
        if person is not None:
            sql = (
                "SELECT * FROM ("
                " SELECT f.forget_id, f.requested_at, 'memory' AS kind FROM engram_forgets f"
                " WHERE f.company = %(company)s AND f.person = %(person)s AND NOT EXISTS ("
                "  SELECT 1 FROM engram_account_forget_members a WHERE a.forget_id = f.forget_id AND NOT a.earlier)"
                " UNION ALL"
                " SELECT forget_id, requested_at, 'account' FROM engram_account_forgets"
                " WHERE company = %(company)s AND person = %(person)s) AS f "
            )
        else:
            sql = ("SELECT forget_id, requested_at, 'account' AS kind FROM engram_account_forgets f "
                   "WHERE company = %(company)s AND requested_by = %(by)s AND by_admin ")
        sql += ("WHERE " if person is not None else "AND ") + (
            "(%(after_at)s::timestamptz IS NULL OR (f.requested_at, f.forget_id) < (%(after_at)s, %(after_id)s)) "
            "ORDER BY f.requested_at DESC, f.forget_id DESC LIMIT %(limit)s"
        )
        with self.datastore.get_connection() as conn:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
