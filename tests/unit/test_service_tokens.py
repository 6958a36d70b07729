"""Service tokens for Hindsight's Engram guard: signed by Engram's key, naming banks, short-lived."""

from __future__ import annotations

import base64
import os
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.adapters.crypto import MasterKey
from engram.hindsight_guard.tokens import (
    InvalidServiceToken,
    load_public_key,
    load_public_keys,
    public_key_text,
    sign,
    verify,
    verify_any,
)

KEY = MasterKey(os.urandom(32)).hindsight_signing_key()
PUBLIC = load_public_key(public_key_text(KEY))


def test_a_token_names_its_banks() -> None:
    assert verify(PUBLIC, sign(KEY, ["engram-g-1", "engram-r-2"])) == {"engram-g-1", "engram-r-2"}


def test_the_signing_key_is_stable_per_master_key() -> None:
    master = base64.urlsafe_b64encode(os.urandom(32)).decode()
    one = public_key_text(MasterKey.from_text(master).hindsight_signing_key())
    assert one == public_key_text(MasterKey.from_text(master).hindsight_signing_key())
    assert one != public_key_text(KEY)


@pytest.mark.parametrize("token", [
    None, "", "garbage",
    sign(Ed25519PrivateKey.generate(), ["engram-g-1"]),  # another signer
    sign(KEY, ["engram-g-1"], now=time.time() - 3600),  # expired
    jwt.encode({"iss": "engram", "aud": "hindsight", "iat": int(time.time()), "exp": int(time.time()) + 60,
                "banks": ["engram-g-1"]}, "a-shared-secret-long-enough-for-hs256-keys", algorithm="HS256"),  # algorithm confusion
    jwt.encode({"iss": "engram", "aud": "elsewhere", "iat": int(time.time()), "exp": int(time.time()) + 60,
                "banks": ["engram-g-1"]}, KEY, algorithm="EdDSA"),  # another audience
    jwt.encode({"iss": "engram", "aud": "hindsight", "iat": int(time.time()), "exp": int(time.time()) + 60,
                "banks": []}, KEY, algorithm="EdDSA"),  # names no bank
    jwt.encode({"iss": "engram", "aud": "hindsight", "iat": int(time.time()), "exp": int(time.time()) + 60,
                "banks": ["someone-elses-bank"]}, KEY, algorithm="EdDSA"),  # not an Engram bank
    jwt.encode({"iss": "engram", "aud": "hindsight", "iat": int(time.time()), "banks": ["engram-g-1"]},
               KEY, algorithm="EdDSA"),  # never expires
])
def test_anything_else_is_refused_without_echoing_it(token: str | None) -> None:
    with pytest.raises(InvalidServiceToken) as caught:
        verify(PUBLIC, token)
    assert token is None or token == "" or token not in str(caught.value)


def test_while_the_master_key_is_rotated_the_guard_accepts_the_old_and_the_new_key() -> None:
    new = MasterKey(os.urandom(32)).hindsight_signing_key()
    both = load_public_keys(f"{public_key_text(new)}, {public_key_text(KEY)}")

    assert verify_any(both, sign(KEY, ["engram-g-1"]))[0] == {"engram-g-1"}
    assert verify_any(both, sign(new, ["engram-g-2"]))[0] == {"engram-g-2"}
    with pytest.raises(InvalidServiceToken, match="not signed"):
        verify_any(both, sign(Ed25519PrivateKey.generate(), ["engram-g-1"]))
    with pytest.raises(InvalidServiceToken, match="expired"):  # signed by the first key: its own refusal
        verify_any(both, sign(new, ["engram-g-1"], now=time.time() - 3600))
    with pytest.raises(ValueError):
        load_public_keys(" , ")
