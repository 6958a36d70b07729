"""A master-key rotation with Hindsight (ADR 0030): the guard, given the new and the old public key, accepts
Engram's service tokens before and after the rotation and nobody else's; what was synced before is still
read, deleted and recalled through the new key."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.adapters.crypto import MasterKey
from engram.adapters.hindsight import HindsightClient, bank_for
from engram.api.bootstrap import Engram, key_rotation
from engram.domain.scope import Caller, Scope
from engram.hindsight_guard import tokens
from engram.hindsight_guard.tokens import public_key_text

from tests.support.hindsight_server import HindsightServer, hindsight_binary, start_beside

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600),
              pytest.mark.skipif(hindsight_binary() is None, reason="Hindsight is not installed (make hindsight)")]

OLD, NEW = (base64.urlsafe_b64encode(os.urandom(32)).decode() for _ in range(2))
ALICE = Caller("acme", "alice", "user")


def signing(master: str) -> Ed25519PrivateKey:
    return MasterKey.from_text(master).hindsight_signing_key()


@pytest.fixture(scope="module")
def hindsight(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HindsightServer]:
    both = f"{public_key_text(signing(NEW))},{public_key_text(signing(OLD))}"  # step 3: NEW,OLD
    server = start_beside(postgres, "hindsight_rotation", tmp_path_factory.mktemp("hindsight"), guard_public_key=both)
    yield server
    server.close()


def remember(engram: Engram, text: str, message_id: str) -> str:
    return str(engram.memories.remember(ALICE, text=text, source={"kind": "chat", "id": "chat-1", "message_id":
                                                                  message_id}, occurred_at=None,
                                        visibility="general", team=None, valid_from=None, valid_to=None).id)


def test_the_guard_takes_both_keys_while_engram_moves_to_the_new_one(
        hindsight: HindsightServer, settings: Any, database: Any) -> None:
    before = Engram.open(settings.replace(hindsight_url=hindsight.url, master_key=OLD), database=database,
                         background=False)
    try:
        kept = remember(before, "The harbour festival is in June", "m-1")
        gone = remember(before, "The lighthouse tour starts at noon", "m-2")
        assert before.syncer is not None and before.syncer.sync() == 2
    finally:
        before.close()

    rotated = settings.replace(hindsight_url=hindsight.url, master_key=NEW, previous_master_keys=(OLD,))
    with key_rotation(rotated, database) as rotation:
        assert rotation.rotate().status.done
    after = Engram.open(rotated.replace(previous_master_keys=()), database=database, background=False)
    try:
        assert after.syncer is not None
        new = remember(after, "The ferry leaves at seven", "m-3")
        after.memories.forget(ALICE, gone)
        assert after.syncer.sync() >= 2  # retains the new one, deletes the forgotten one: signed with the new key
        hs = HindsightClient(hindsight.url, signing_key=signing(NEW))
        assert hs.exists(bank_for(Scope("acme", "alice")), kept) and hs.exists(bank_for(Scope("acme", "alice")), new)
        assert not hs.exists(bank_for(Scope("acme", "alice")), gone)
    finally:
        after.close()

    doc = f"{hindsight.url}/v1/default/banks/{bank_for(Scope('acme', 'alice'))}/documents/{kept}"
    for key, status in ((signing(OLD), 200), (signing(NEW), 200), (Ed25519PrivateKey.generate(), 401)):
        token = tokens.sign(key, [bank_for(Scope("acme", "alice"))])
        assert httpx.get(doc, headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code == status
