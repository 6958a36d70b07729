"""Signing out everywhere, and suspending and resuming a person: the commands on a person's credentials.

Each takes effect on the next request in every process: `Ledger.access` reads the person's credentials
with the rest of their standing, and a write returns only once the views have it (API.md "Consistency").
"""

from __future__ import annotations

from engram.contract.admin import PersonCredentialsOut
from engram.domain.credentials import PersonCredentials, credentials_id
from engram.domain.errors import Forbidden
from engram.domain.scope import Caller
from engram.domain.text import validate_id

from .ledger import Ledger


class CredentialsService:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.clock = ledger.clock

    def _credentials(self, company: str, person: str) -> PersonCredentials:
        return self.ledger.get(credentials_id(company, person), PersonCredentials) or PersonCredentials.open(
            company, person, self.clock.now())

    def _answer(self, credentials: PersonCredentials) -> PersonCredentialsOut:
        return PersonCredentialsOut(person=credentials.person, signed_out_before=credentials.signed_out_before,
                                    suspended=credentials.suspended)

    def sign_out_everywhere(self, caller: Caller) -> PersonCredentialsOut:
        """The caller's own person: every token of theirs issued until now stops working (this one too)."""
        self.ledger.access(caller).require_person("sign its person out")
        return self._sign_out(caller, caller.person)

    def sign_out_person(self, caller: Caller, person: str) -> PersonCredentialsOut:
        """An admin signs a person of their company out everywhere."""
        self._require_admin(caller, person, "sign a person out everywhere")
        return self._sign_out(caller, person)

    def _sign_out(self, caller: Caller, person: str) -> PersonCredentialsOut:
        credentials = self._credentials(caller.company, person)
        credentials.sign_out(actor=caller.person, at=self.clock.now())
        self.ledger.save(credentials)
        return self._answer(credentials)

    def end_session(self, caller: Caller) -> None:
        """Signing out of the pages: the session's token stops working everywhere, at once."""
        if caller.token_id is None or caller.expires_at is None:
            return
        credentials = self._credentials(caller.company, caller.person)
        credentials.end_session(caller.token_id, expires=caller.expires_at, actor=caller.person, at=self.clock.now())
        self.ledger.save(credentials)

    def suspend(self, caller: Caller, person: str) -> PersonCredentialsOut:
        """Nothing acts for the person, their bots included, until resumed; their memories stay."""
        self._require_admin(caller, person, "suspend a person")
        if person == caller.person:
            raise Forbidden("an admin cannot suspend themself: another admin or an operator can")
        credentials = self._credentials(caller.company, person)
        credentials.suspend(actor=caller.person, at=self.clock.now())
        self.ledger.save(credentials)
        return self._answer(credentials)

    def resume(self, caller: Caller, person: str) -> PersonCredentialsOut:
        self._require_admin(caller, person, "resume a person")
        credentials = self._credentials(caller.company, person)
        credentials.resume(actor=caller.person, at=self.clock.now())
        self.ledger.save(credentials)
        return self._answer(credentials)

    def _require_admin(self, caller: Caller, person: str, what: str) -> None:
        self.ledger.admin_access(caller, what)
        validate_id(person, "person id")
