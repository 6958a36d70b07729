"""AES-GCM sealing of personal fields and wrapping of per-memory data keys."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE = 12


def _seal(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    nonce = os.urandom(NONCE)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def _open(key: bytes, blob: bytes, aad: bytes) -> bytes:
    return AESGCM(key).decrypt(blob[:NONCE], blob[NONCE:], aad)


def new_data_key() -> bytes:
    return AESGCM.generate_key(bit_length=256)


def seal(data_key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    return _seal(data_key, plaintext, aad)


def unseal(data_key: bytes, blob: bytes, aad: bytes) -> bytes:
    return _open(data_key, blob, aad)


class MasterKey:
    """Wraps data keys; never leaves the process. Also derives per-company search keys."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the master key must be 32 bytes")
        self._key = key

    @classmethod
    def from_text(cls, text: str) -> MasterKey:
        return cls(base64.urlsafe_b64decode(text.strip() + "=" * (-len(text.strip()) % 4)))

    @classmethod
    def load_or_create(cls, path: Path) -> MasterKey:
        """The embedded default: a key file beside the data, created once with mode 0600."""
        if path.exists():
            return cls.from_text(path.read_text())
        path.parent.mkdir(parents=True, exist_ok=True)
        key = AESGCM.generate_key(bit_length=256)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(base64.urlsafe_b64encode(key).decode())
        return cls(key)

    def wrap(self, data_key: bytes, key_id: str) -> bytes:
        return _seal(self._key, data_key, key_id.encode())

    def unwrap(self, wrapped: bytes, key_id: str) -> bytes:
        return _open(self._key, wrapped, key_id.encode())

    def search_key(self, company: str) -> bytes:
        return hmac.new(self._key, b"engram-search:" + company.encode(), hashlib.sha256).digest()

    def import_key(self, company: str) -> bytes:
        """Keys the ids of imported memories: the same record gets the same id, and an id reveals no text."""
        return hmac.new(self._key, b"engram-import:" + company.encode(), hashlib.sha256).digest()

    def remember_key(self, company: str) -> bytes:
        """Keys the ids of remembered memories: the same text from the same message gets the same id
        (a repeated request stores nothing new), and an id reveals no text."""
        return hmac.new(self._key, b"engram-remember:" + company.encode(), hashlib.sha256).digest()

    def hindsight_signing_key(self) -> Ed25519PrivateKey:
        """Signs the service tokens Hindsight's Engram guard accepts; only its public half leaves Engram."""
        seed = hmac.new(self._key, b"engram-hindsight-service-token", hashlib.sha256).digest()
        return Ed25519PrivateKey.from_private_bytes(seed)

    def token_secret(self) -> str:
        """Development default for signing tokens when none is configured."""
        return hmac.new(self._key, b"engram-token-secret", hashlib.sha256).hexdigest()
