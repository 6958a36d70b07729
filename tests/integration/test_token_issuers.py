"""Host-signed person tokens (ENGRAM_TOKEN_ISSUERS): a platform's key pair signs its people's tokens,
verified with its public key, and it may sign only the roles it is configured for, so a bot platform's
key can never mint an admin. The HS256 secret stays for development and `engram token`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from pydantic import ValidationError

from engram.service.settings import Settings, describe

from tests.support.helpers import SECRET, auth, remember_body

PLATFORM = ed25519.Ed25519PrivateKey.generate()
CORPORATE = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem(key: Any) -> str:
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


ISSUERS = {"bots.example": {"public_key": _pem(PLATFORM), "roles": ["user", "bot"]},
           "sso.example": {"public_key": _pem(CORPORATE), "roles": ["user", "admin"]}}


@pytest.fixture
def settings(settings: Any) -> Any:
    return settings.replace(token_issuers=ISSUERS)


def signed(key: Any, algorithm: str, **claims: Any) -> dict[str, str]:
    now = int(time.time())
    body = {"sub": "alice", "company": "acme", "role": "user", "iat": now, "exp": now + 600, **claims}
    return {"Authorization": "Bearer " + jwt.encode(body, key, algorithm=algorithm)}


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def refused(r: Any, code: str, reason: str) -> None:
    assert r.status_code == 401, r.text
    assert (r.json()["code"], r.json()["reason"]) == (code, reason), r.text


def test_an_issuers_tokens_act_for_their_people_in_the_roles_it_may_sign(client) -> None:
    person = signed(PLATFORM, "EdDSA", iss="bots.example")
    made = client.post("/v1/memories", json=remember_body("I prefer the window seat"), headers=person)
    assert made.status_code == 201, made.text
    assert client.get("/v1/memories", headers=auth()).json()["items"][0]["id"] == made.json()["id"]  # the same alice
    admin = signed(CORPORATE, "RS256", iss="sso.example", sub="root", role="admin")
    assert client.get("/v1/admin/status", headers=admin).status_code == 200
    # the bot platform's key cannot mint an admin, nor an operator
    for role in ("admin", "operator"):
        refused(client.get("/v1/admin/status", headers=signed(PLATFORM, "EdDSA", iss="bots.example", role=role)),
                "invalid_token", "issuer")


def test_forged_confused_and_unknown_issuers_are_refused(client) -> None:
    other = ed25519.Ed25519PrivateKey.generate()
    refused(client.get("/v1/settings", headers=signed(other, "EdDSA", iss="bots.example")), "invalid_token", "signature")
    # the public key used as an HS256 secret (algorithm confusion), made by hand as PyJWT refuses to
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    now = int(time.time())
    payload = _b64(json.dumps({"sub": "root", "company": "acme", "role": "admin", "iat": now, "exp": now + 600,
                               "iss": "bots.example"}).encode())
    mac = _b64(hmac.new(_pem(PLATFORM).encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest())
    refused(client.get("/v1/admin/status", headers={"Authorization": f"Bearer {header}.{payload}.{mac}"}),
            "invalid_token", "signature")
    # the development secret cannot stand in for an issuer's key
    refused(client.get("/v1/settings", headers=signed(SECRET, "HS256", iss="bots.example")), "invalid_token",
            "signature")
    unknown = client.get("/v1/settings", headers=signed(PLATFORM, "EdDSA", iss="evil<script>.example"))
    refused(unknown, "invalid_token", "issuer")
    assert "evil" not in unknown.text  # never the caller's own text
    # a key pair's token without `iss` is checked against the secret, and fails
    refused(client.get("/v1/settings", headers=signed(PLATFORM, "EdDSA")), "invalid_token", "signature")
    refused(client.get("/v1/settings", headers=signed(PLATFORM, "EdDSA", iss="bots.example", exp=int(time.time()) - 5)),
            "token_expired", "expired")
    assert client.get("/v1/settings", headers=auth()).status_code == 200  # the secret's tokens still work


@pytest.mark.parametrize(("value", "says"), [
    ('{"x": {"public_key": "not a key", "roles": ["user"]}}', "PEM public key"),
    ('{"x": {"public_key": "KEY", "roles": []}}', "at least 1"),
    ('{"x": {"public_key": "KEY", "roles": ["root"]}}', "user"),
    ('{"x": {"public_key": "KEY", "roles": ["user"], "secret": 1}}', "Extra inputs"),
    ("[1, 2", "must be a JSON object"),
])
def test_a_bad_issuer_stops_start_up_naming_the_variable(monkeypatch: pytest.MonkeyPatch, value: str,
                                                         says: str) -> None:
    monkeypatch.setenv("ENGRAM_TOKEN_ISSUERS", value.replace("KEY", _pem(PLATFORM).replace("\n", "\\n")))
    with pytest.raises(ValidationError) as bad:
        Settings()
    assert describe(bad.value).startswith("ENGRAM_TOKEN_ISSUERS") and says in describe(bad.value)
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    monkeypatch.setenv("ENGRAM_TOKEN_ISSUERS", json.dumps({"x": {"public_key": _pem(weak), "roles": ["user"]}}))
    with pytest.raises(ValidationError) as short:
        Settings()
    assert "2048 bits" in describe(short.value)
