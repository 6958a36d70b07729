"""AES-GCM sealing of personal fields and wrapping of per-memory data keys."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Iterable
from pathlib import Path

from cryptography.exceptions import InvalidTag
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


class MasterKeyMissing(ValueError):
    """A wrapped key needs a master key this process was not given. Names the master key by its id
    (never the key) and the setting that supplies it."""


def _decode_key(text: str) -> bytes:
    text = text.strip()
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _derive(key: bytes, label: bytes) -> bytes:
    return hmac.new(key, label, hashlib.sha256).digest()


class MasterKey:
    """Wraps data keys; never leaves the process. Also derives the credentials that rotate with it: the
    signing key of Hindsight's service tokens and the development token secret (ADR 0030)."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the master key must be 32 bytes")
        self._key = key

    @classmethod
    def from_text(cls, text: str) -> MasterKey:
        return cls(_decode_key(text))

    @classmethod
    def load_or_create(cls, path: Path) -> MasterKey:
        """The embedded default: a key file beside the data, created once with mode 0600."""
        if path.exists():
            return cls.from_text(path.read_text())
        path.parent.mkdir(parents=True, exist_ok=True)
        key = AESGCM.generate_key(bit_length=256)
        write_key_file(path, key)
        return cls(key)

    @property
    def id(self) -> str:
        """Names this key in the key store, in status and in errors: keyed, so it reveals nothing of the key."""
        return _derive(self._key, b"engram-master-key-id").hex()[:16]

    def wrap(self, data_key: bytes, key_id: str) -> bytes:
        return _seal(self._key, data_key, key_id.encode())

    def unwrap(self, wrapped: bytes, key_id: str) -> bytes:
        return _open(self._key, wrapped, key_id.encode())

    def legacy_root(self) -> DerivationRoot:
        """What search terms and keyed ids were derived from before the root was stored (ADR 0030)."""
        return DerivationRoot(self._key)

    def hindsight_signing_key(self) -> Ed25519PrivateKey:
        """Signs the service tokens Hindsight's Engram guard accepts; only its public half leaves Engram."""
        return Ed25519PrivateKey.from_private_bytes(_derive(self._key, b"engram-hindsight-service-token"))

    def token_secret(self) -> str:
        """Development default for signing tokens when none is configured."""
        return hmac.new(self._key, b"engram-token-secret", hashlib.sha256).hexdigest()


def previous_key_file(path: Path) -> list[MasterKey]:
    """The previous keys `new_key_file` kept beside the key file, one a line (none when there is no file)."""
    kept = path.with_name(path.name + ".previous")
    if not kept.exists():
        return []
    return [MasterKey.from_text(line) for line in kept.read_text().splitlines() if line.strip()]


def new_key_file(path: Path) -> MasterKey:
    """Replace the key file's key with a new one. The old key is appended to `<name>.previous` (0600) and
    synced first, so a crash at any point leaves both keys readable."""
    old = path.read_text().strip()
    MasterKey.from_text(old)  # a damaged key file is not rotated away
    kept = path.with_name(path.name + ".previous")
    fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a") as f:
        f.write(old + "\n")
        f.flush()
        os.fsync(f.fileno())
    fresh = path.with_name(path.name + ".new")
    fresh.unlink(missing_ok=True)  # left by a crash before the rename: never used
    key = AESGCM.generate_key(bit_length=256)
    write_key_file(fresh, key)
    os.replace(fresh, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return MasterKey(key)


def write_key_file(path: Path, key: bytes) -> None:
    """A new key file, mode 0600 from its creation; never overwrites one."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(base64.urlsafe_b64encode(key).decode())
        f.flush()
        os.fsync(f.fileno())


class MasterKeys:
    """The master key that wraps, and the previous ones still accepted for unwrapping until a rotation
    has re-wrapped everything they wrapped (ADR 0030)."""

    def __init__(self, current: MasterKey, previous: Iterable[MasterKey] = ()) -> None:
        self.current = current
        self.previous = [k for k in dict((k.id, k) for k in previous).values() if k.id != current.id]
        self._by_id = {k.id: k for k in (current, *self.previous)}

    @property
    def ids(self) -> list[str]:
        return list(self._by_id)

    def wrap(self, data_key: bytes, key_id: str) -> tuple[bytes, str]:
        """The data key wrapped under the current master key, and that key's id."""
        return self.current.wrap(data_key, key_id), self.current.id

    def unwrap(self, wrapped: bytes, key_id: str, master_id: str | None = None) -> bytes:
        """Unwrap with the master key named by `master_id`; without one (a row wrapped before ids were
        recorded, or read by a view's join), each configured key in turn: the current one first."""
        if master_id is not None:
            key = self._by_id.get(master_id)
            if key is None:
                raise MasterKeyMissing(missing_message(master_id))
            return key.unwrap(wrapped, key_id)
        for key in self._by_id.values():
            try:
                return key.unwrap(wrapped, key_id)
            except InvalidTag:
                continue
        raise MasterKeyMissing(missing_message(None))

    def holder(self, wrapped: bytes, key_id: str) -> MasterKey | None:
        """The configured master key that wrapped this, if any."""
        for key in self._by_id.values():
            try:
                key.unwrap(wrapped, key_id)
                return key
            except InvalidTag:
                continue
        return None


def missing_message(master_id: str | None, what: str = "data keys are") -> str:
    named = f"master key {master_id}" if master_id else "the master key in use before key ids were recorded"
    return (f"{what} wrapped by {named}, which is not configured: give it in ENGRAM_PREVIOUS_MASTER_KEYS "
            "(or DATA_DIR/master.key.previous) until `engram keys rotate` has re-wrapped them under the current "
            "master key (docs/adr/0030-master-key-rotation.md)")


class DerivationRoot:
    """The secret search terms and keyed ids are derived from. Stored wrapped like a data key and kept
    across master-key rotations: blinded terms, links and the ids of remembered and imported memories
    (and so the fence of forgotten ones) stay valid (ADR 0030)."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the derivation root must be 32 bytes")
        self._key = key

    @classmethod
    def new(cls) -> DerivationRoot:
        return cls(os.urandom(32))

    @property
    def secret(self) -> bytes:
        """For wrapping it (in this process) under the master key; never written anywhere in clear."""
        return self._key

    def search_key(self, company: str) -> bytes:
        return _derive(self._key, b"engram-search:" + company.encode())

    def import_key(self, company: str) -> bytes:
        """Keys the ids of imported memories: the same record gets the same id, and an id reveals no text."""
        return _derive(self._key, b"engram-import:" + company.encode())

    def remember_key(self, company: str) -> bytes:
        """Keys the ids of remembered memories: the same text from the same message gets the same id
        (a repeated request stores nothing new), and an id reveals no text."""
        return _derive(self._key, b"engram-remember:" + company.encode())
