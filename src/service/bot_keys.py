"""Bot keys: an admin issues one for a bot the company directory registers (shown once, kept as a
digest) and revokes it; a request with it is turned into the bot's caller for the person it names."""

from __future__ import annotations

from collections import OrderedDict
from threading import Lock

from engram.contract.admin import BotKeyIssued, BotKeyList, BotKeyRevoked
from engram.domain.bot_keys import BotKey, bot_key_id, matches, new_key, parse_key
from engram.domain.errors import DomainError, KeyRevoked, NotFound
from engram.domain.scope import Caller
from engram.domain.text import is_valid_id, validate_id

from .ledger import Ledger
from .ports import Standings


class PersonRequired(DomainError):
    code, status, title = "person_required", 400, "Person required"


class BotKeyService:
    KEPT = 4096  # keys whose secret this process has checked once (revocation is read on every request)

    def __init__(self, ledger: Ledger, keys: Standings) -> None:
        self.ledger = ledger
        self.clock = ledger.clock
        self.keys = keys
        self._checked: OrderedDict[str, tuple[str, str, str]] = OrderedDict()  # key -> company, bot, key_id
        self._lock = Lock()

    def issue(self, caller: Caller, bot: str) -> BotKeyIssued:
        """A new key for `bot`, which the admin's company directory must register (404 otherwise)."""
        access = self.ledger.admin_access(caller, "issue bot keys")
        validate_id(bot, "bot id")
        if bot not in access.directory.bots:
            raise NotFound("no such bot in the company directory: register it there first")
        key_id, key = new_key()
        parsed = parse_key(key)
        assert parsed is not None
        aggregate = BotKey.issue(company=caller.company, bot=bot, key_id=key_id, secret=parsed[1], actor=caller.person,
                                 at=self.clock.now())
        self.ledger.save(aggregate)
        return BotKeyIssued(key_id=key_id, key=key, bot=bot)

    def revoke(self, caller: Caller, bot: str, key_id: str) -> BotKeyRevoked:
        """The key stops working on the next request, in every process."""
        self.ledger.admin_access(caller, "revoke bot keys")
        aggregate = self._key(caller, bot, key_id)
        aggregate.revoke(actor=caller.person, at=self.clock.now())
        self.ledger.save(aggregate)
        return BotKeyRevoked(key_id=key_id, bot=bot, revoked=True)

    def list_keys(self, caller: Caller, bot: str) -> BotKeyList:
        """A bot's keys: ids, when issued, whether revoked; never a key."""
        self.ledger.admin_access(caller, "list bot keys")
        validate_id(bot, "bot id")
        return BotKeyList.model_validate({"items": self.keys.bot_keys(caller.company, bot)})

    def _key(self, caller: Caller, bot: str, key_id: str) -> BotKey:
        aggregate = self.ledger.get(bot_key_id(key_id), BotKey) if is_valid_id(key_id) else None
        if aggregate is None or aggregate.company != caller.company or aggregate.bot != bot:
            raise NotFound("no such key for this bot")
        return aggregate

    def caller(self, key: str, person: str | None) -> Caller:
        """The bot's caller for `person` (the X-Engram-Person header), once the key's secret matches what
        was kept. Whether it is still standing (not revoked, its bot registered) `Ledger.access` reads on
        every request; a key never seen is looked up, then remembered."""
        parsed = parse_key(key)
        if parsed is None:
            raise KeyRevoked("not a bot key")
        with self._lock:
            known = self._checked.get(key)
        if known is None:
            row = self.keys.bot_key(parsed[0])
            if row is None or row["revoked"] or not matches(parsed[1], row["digest"]):
                raise KeyRevoked("this bot key is not valid, or was revoked")
            known = (row["company"], row["bot"], parsed[0])
            with self._lock:
                self._checked[key] = known
                while len(self._checked) > self.KEPT:
                    self._checked.popitem(last=False)
        if person is None or not person.strip():
            raise PersonRequired("a request with a bot key names the person it acts for in X-Engram-Person")
        if not is_valid_id(person.strip()):
            raise PersonRequired("X-Engram-Person must be a person id: 1 to 200 printable characters")
        company, bot, key_id = known
        return Caller(company=company, person=person.strip(), role="bot", bot=bot, entry="api", key_id=key_id)
