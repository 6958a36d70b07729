"""Directory, source revocation and per-person controls: the commands that change who sees what."""

from __future__ import annotations

from typing import Any

from engram.contract.admin import DirectoryOut
from engram.contract.responses import PersonSettingsOut, Revocation
from engram.domain.directory import CompanyDirectory, Directory, directory_id
from engram.domain.errors import NotFound
from engram.domain.scope import Caller
from engram.domain.settings import PersonSettings, settings_id
from engram.domain.text import validate_id

from .ledger import Ledger


class GovernanceService:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.clock = ledger.clock

    def _directory(self, company: str) -> CompanyDirectory:
        return self.ledger.get(directory_id(company), CompanyDirectory) or CompanyDirectory.open(company, self.clock.now())

    def _require_admin(self, caller: Caller) -> None:
        self.ledger.admin_access(caller)

    def get_directory(self, caller: Caller) -> DirectoryOut:
        self._require_admin(caller)
        return DirectoryOut.model_validate(self._directory(caller.company).document)

    def put_directory(self, caller: Caller, document: dict[str, Any]) -> DirectoryOut:
        self._require_admin(caller)
        directory = Directory.from_document(document)
        directory.validate()  # size and references are refused before anything is read or stored
        aggregate = self._directory(caller.company)
        aggregate.replace(directory, actor=caller.person, at=self.clock.now())
        self.ledger.save(aggregate)
        return DirectoryOut.model_validate(aggregate.document)

    def revoke_source(self, caller: Caller, source_id: str) -> Revocation:
        """An admin revokes for the whole company; a person (or their bot) for themself."""
        validate_id(source_id, "source id")
        everyone = caller.is_administrative
        if not everyone:
            self.ledger.access(caller).require_may_act()
        aggregate = self._directory(caller.company)
        shred = self.ledger.shred("revoke", aggregate.id, caller.company, source_id=source_id,
                                  person=None if everyone else caller.person)
        aggregate.revoke(source_id, person=None if everyone else caller.person,
                         actor=caller.bot or caller.person, at=self.clock.now())
        self.ledger.save(aggregate, shreds=[shred])
        return Revocation(source_id=source_id, scope="company" if everyone else "person", status="revoked")

    def _settings(self, caller: Caller) -> PersonSettings:
        return self.ledger.get(settings_id(caller.company, caller.person), PersonSettings) or PersonSettings.open(
            caller.company, caller.person, self.clock.now())

    def get_settings(self, caller: Caller) -> PersonSettingsOut:
        if not self.ledger.access(caller).may_read:
            raise NotFound("no settings for this caller")
        return PersonSettingsOut.model_validate(self._settings(caller).document())

    def put_settings(self, caller: Caller, *, learning_paused: bool, use_paused: bool) -> PersonSettingsOut:
        self.ledger.access(caller).require_person("change the person's controls")
        settings = self._settings(caller)
        settings.change(learning_paused=learning_paused, use_paused=use_paused, actor=caller.person,
                        at=self.clock.now())
        self.ledger.save(settings)
        return PersonSettingsOut.model_validate(settings.document())
