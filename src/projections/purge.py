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

STOPPED_USING = "stopped_using"
PURGE_COMPLETE = "purge_complete"


class BackupCopies(Protocol):
    """The backup catalog (`adapters.backups.BackupCatalog`): a forget's `backups` copy, read when asked."""

    def copy_state(self, requested_at: datetime) -> BackupsCopy: ...


class PurgeTracker:
    def __init__(self, datastore: Any, copies: tuple[str, ...] = ALWAYS, backups: BackupCopies | None = None) -> None:
        self.datastore = datastore
        self.copies = copies
        self.backups = backups  # nobody reports backups: their copy is read from the catalog at report time

    # -- reports, each in the reporter's own transaction ----------------------

    def opened(self, curs: Cursor[Any], forget_id: str, memory_id: UUID, company: str, person: str,
               at: datetime) -> None:
        curs.execute(
            "INSERT INTO engram_forgets (forget_id, memory_id, company, person, requested_at) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (forget_id, memory_id, company, person, at),
        )

    def purged(self, curs: Cursor[Any], forget_id: str, copy: str, evidence: str, at: datetime) -> None:
        curs.execute(
            "INSERT INTO engram_purge_copies (forget_id, copy, state, evidence, purged_at) "
            "VALUES (%s, %s, 'purged', %s, %s) ON CONFLICT (forget_id, copy) DO UPDATE "
            "SET state = 'purged', evidence = EXCLUDED.evidence, purged_at = EXCLUDED.purged_at",
            (forget_id, copy, evidence, at),
        )

    def withdraw(self, curs: Cursor[Any], copies: tuple[str, ...], *, requests: bool = False) -> None:
        """A reporter's view is being rebuilt: its reports go, and the replay makes them again."""
        curs.execute("DELETE FROM engram_purge_copies WHERE copy = ANY(%s)", (list(copies),))
        if requests:
            curs.execute("DELETE FROM engram_forgets")

    # -- answers ---------------------------------------------------------------

    def report(self, forget_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The request (None when unknown) and one entry per copy of this deployment, pending or purged."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT * FROM engram_forgets WHERE forget_id = %s", (forget_id,))
            head = curs.fetchone()
            curs.execute("SELECT * FROM engram_purge_copies WHERE forget_id = %s", (forget_id,))
            found = {r["copy"]: r for r in curs.fetchall()}
        copies = []
        for name in self.copies:
            row = found.get(name)
            if name == BACKUPS and self.backups is not None and head is not None:
                backups = self.backups.copy_state(head["requested_at"])
                copies.append({"copy": name, "state": backups.state, "evidence": backups.evidence,
                               "purged_at": backups.purged_at})
                continue
            copies.append({"copy": name, "state": row["state"] if row else "pending",
                           "evidence": row["evidence"] if row else None,
                           "purged_at": row["purged_at"] if row else None})
        return head, copies

    def status(self, forget_id: str | None) -> str:
        if forget_id is None:
            return STOPPED_USING
        return self.status_of(self.report(forget_id)[1])

    @staticmethod
    def status_of(copies: list[dict[str, Any]]) -> str:
        return PURGE_COMPLETE if all(c["state"] == "purged" for c in copies) else STOPPED_USING
