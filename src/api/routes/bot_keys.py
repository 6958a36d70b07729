"""Bot keys: an admin issues a registered bot its API keys and revokes them (ADR 0059)."""

from typing import Any

from fastapi import APIRouter

from engram.contract.admin import BotKeyIssued, BotKeyList, BotKeyRevoked

from ..dependencies import Admin, BotKeys
from ..middleware import JsonRoute
from ..paths import PathId
from ..reference import answers

router = APIRouter(route_class=JsonRoute, tags=["identity"])


@router.post("/v1/admin/bots/{bot}/keys", summary="Issue a bot key", status_code=201, response_model=BotKeyIssued,
             responses=answers(None, 403, 404))
def issue_key(bot: PathId, who: Admin, keys: BotKeys) -> Any:
    """A new API key for a bot the company directory registers (404 otherwise). The key is in this answer
    only; Engram keeps a digest of it. The bot sends it as `Authorization: Bearer <key>` with
    `X-Engram-Person: <person id>`, and acts for that person as a bot token would.
    """
    return keys.issue(who, bot)


@router.get("/v1/admin/bots/{bot}/keys", summary="List a bot's keys", response_model=BotKeyList,
            responses=answers(None, 403, 404))
def list_keys(bot: PathId, who: Admin, keys: BotKeys) -> Any:
    """Each key's id, when it was issued and whether it was revoked; never a key."""
    return keys.list_keys(who, bot)


@router.delete("/v1/admin/bots/{bot}/keys/{key_id}", summary="Revoke a bot key", response_model=BotKeyRevoked,
               responses=answers(None, 403, 404))
def revoke_key(bot: PathId, key_id: PathId, who: Admin, keys: BotKeys) -> Any:
    """The key answers 401 `key_revoked` from the next request on, in every process."""
    return keys.revoke(who, bot, key_id)
