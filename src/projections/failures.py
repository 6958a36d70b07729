"""Telling an event's failure from the database's: a failing database or connection is retried, a stored
event that cannot be read or applied is set aside (`Undecodable`, `error_name`) and the rest flows on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg.errors import DeadlockDetected, TransactionRollback
from psycopg_pool import PoolTimeout

from engram.adapters.availability import UNAVAILABLE_ERRORS

# The database or its connection failed, not the event: retry the batch, never set the event aside.
TRANSIENT: tuple[type[BaseException], ...] = (*UNAVAILABLE_ERRORS, PoolTimeout)


ROLLED_BACK = (TransactionRollback, DeadlockDetected)  # psycopg's deadlock is not a TransactionRollback


def rolled_back(error: BaseException) -> bool:
    """PostgreSQL rolled the transaction back (a deadlock, a serialization failure): committing it again
    is right. The event store's datastore wraps psycopg's error in its own `OperationalError`."""
    return isinstance(error, ROLLED_BACK) or isinstance(error.__cause__, ROLLED_BACK)


class Undecodable:
    """A stored event that could not be decoded; each projection quarantines it and moves on."""

    def __init__(self, note: Any, error: BaseException) -> None:
        self.notification_id = note.id
        self.originator_id = note.originator_id
        self.topic = note.topic
        self.error = error


def safe_decoder(decode: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Decode a stored event; one that cannot be read becomes an Undecodable instead of stopping a batch."""

    def decode_or_mark(note: Any) -> Any:
        try:
            return decode(note)
        except TRANSIENT:
            raise
        except Exception as exc:  # noqa: BLE001 - any other failure is this one event's
            return Undecodable(note, exc)

    return decode_or_mark


def error_name(exc: BaseException) -> str:
    """What went wrong, without the message: a database message can quote the data it refused."""
    sqlstate = getattr(getattr(exc, "diag", None), "sqlstate", None)
    return f"{type(exc).__name__} {sqlstate}" if sqlstate else type(exc).__name__
