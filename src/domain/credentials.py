"""A person's credentials as the company stands on them: the moment before which every token of theirs
is revoked (sign out everywhere), and whether an admin suspended them. Their memories are not touched."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

from .errors import KeyRevoked, PersonSuspended, TokenRevoked
from .scope import Caller


def credentials_id(company: str, person: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"engram:credentials:{company}:{person}")


def revoked(issued_at: int | None, signed_out_before: int | None) -> bool:
    """A token issued at or before the last sign-out (in whole seconds) is revoked; one that does not
    say when it was issued cannot show it came later."""
    if signed_out_before is None:
        return False
    return issued_at is None or issued_at <= signed_out_before


def require_current(caller: Caller, signed_out_before: int | None, suspended: bool, ended: bool = False,
                    key_standing: bool = True) -> None:
    """A request's credential still stands: not revoked by a sign-out everywhere, nor `ended` by signing
    out of the pages with it (401); a bot key not revoked and its bot still registered (`key_standing`,
    401); its person not suspended (403, bots acting for them included). A person's sign-out ends their
    tokens, not their company's bot keys. Engram's own work for a person carries none."""
    if caller.key_id is not None:
        if not key_standing:
            raise KeyRevoked("this bot key was revoked, or its bot is no longer in the company directory")
    elif caller.issued_at is None:
        return
    elif revoked(caller.issued_at, signed_out_before):
        raise TokenRevoked("this token was issued before its person signed out everywhere: sign in again")
    if ended:
        raise TokenRevoked("this token's session was signed out: sign in again")
    if suspended:
        raise PersonSuspended("an admin of the company suspended this person; nothing acts for them until resumed")


class PersonCredentials(Aggregate):
    # Set by the events' apply methods; for mypy only, as eventsourcing turns class annotations into __init__ parameters.
    if TYPE_CHECKING:
        company: str
        person: str
        signed_out_before: int | None
        suspended: bool

    class Opened(Aggregate.Created):
        company: str
        person: str

        def apply(self, c: PersonCredentials) -> None:
            c.company, c.person = self.company, self.person
            c.signed_out_before, c.suspended = None, False

    class SignedOut(Aggregate.Event):
        before: int  # seconds since the epoch: tokens issued at or before it are revoked
        actor: str

        def apply(self, c: PersonCredentials) -> None:
            c.signed_out_before = max(self.before, c.signed_out_before or self.before)

    class SessionEnded(Aggregate.Event):
        token_id: str  # the digest of one token, signed out of the pages: never the token
        expires: int  # seconds: when the token would have expired anyway (its row may go then)
        actor: str

        def apply(self, c: PersonCredentials) -> None:
            pass  # the view keeps the ended tokens; the aggregate need not

    class Suspended(Aggregate.Event):
        actor: str

        def apply(self, c: PersonCredentials) -> None:
            c.suspended = True

    class Resumed(Aggregate.Event):
        actor: str

        def apply(self, c: PersonCredentials) -> None:
            c.suspended = False

    @classmethod
    def open(cls, company: str, person: str, at: datetime) -> PersonCredentials:
        return cls._create(cls.Opened, id=credentials_id(company, person), timestamp=at, company=company,
                           person=person)

    def sign_out(self, *, actor: str, at: datetime) -> None:
        """Every token issued up to `at` stops working; a later sign-out only moves the moment forward."""
        before = int(at.timestamp())
        if self.signed_out_before is None or before > self.signed_out_before:
            self.trigger_event(self.SignedOut, timestamp=at, before=before, actor=actor)

    def end_session(self, token_id: str, *, expires: int, actor: str, at: datetime) -> None:
        """One token stops working everywhere, the person's others go on."""
        self.trigger_event(self.SessionEnded, timestamp=at, token_id=token_id, expires=expires, actor=actor)

    def suspend(self, *, actor: str, at: datetime) -> None:
        if not self.suspended:
            self.trigger_event(self.Suspended, timestamp=at, actor=actor)

    def resume(self, *, actor: str, at: datetime) -> None:
        if self.suspended:
            self.trigger_event(self.Resumed, timestamp=at, actor=actor)
