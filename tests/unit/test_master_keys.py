"""The master keys a rotation moves between (ADR 0030): which one wraps, which ones unwrap, how they are
named, and the key file `engram keys new` rotates. No key ever appears in a message."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.adapters.crypto import (
    DerivationRoot,
    MasterKey,
    MasterKeyMissing,
    MasterKeys,
    new_data_key,
    new_key_file,
    previous_key_file,
)

from tests.support.helpers import examples

OLD, NEW, OTHER = (MasterKey(os.urandom(32)) for _ in range(3))


def text(key: MasterKey) -> str:
    return base64.urlsafe_b64encode(key._key).decode()


def test_the_current_key_wraps_and_every_configured_key_unwraps() -> None:
    before, during = MasterKeys(OLD), MasterKeys(NEW, [OLD])
    data_key = new_data_key()
    wrapped, master_id = before.wrap(data_key, "k1")
    assert master_id == OLD.id and during.wrap(data_key, "k1")[1] == NEW.id

    assert during.unwrap(wrapped, "k1", master_id) == data_key
    assert during.unwrap(wrapped, "k1") == data_key  # id unknown (a view's join, a row from before ids)
    with pytest.raises(MasterKeyMissing) as missing:
        MasterKeys(NEW).unwrap(wrapped, "k1", master_id)
    assert OLD.id in str(missing.value) and "ENGRAM_PREVIOUS_MASTER_KEYS" in str(missing.value)
    assert text(OLD) not in str(missing.value) and text(OLD).rstrip("=") not in str(missing.value)
    with pytest.raises(MasterKeyMissing):
        MasterKeys(NEW, [OTHER]).unwrap(wrapped, "k1")


def test_a_key_id_names_a_key_without_revealing_it() -> None:
    assert OLD.id == MasterKey.from_text(text(OLD)).id != NEW.id
    assert len(OLD.id) == 16 and OLD.id not in text(OLD)
    assert MasterKeys(NEW, [OLD, NEW, OLD]).ids == [NEW.id, OLD.id]  # the current one first, each once


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(st.sampled_from(["old", "new", "other"]), min_size=1, max_size=6), st.binary(min_size=1, max_size=40))
def test_a_row_unwraps_exactly_when_the_key_that_wrapped_it_is_configured(previous: list[str], key_id: bytes) -> None:
    keys = {"old": OLD, "new": NEW, "other": OTHER}
    ring = MasterKeys(keys[previous[0]], [keys[p] for p in previous[1:]])
    data_key, aad = new_data_key(), key_id.hex()
    wrapped = OLD.wrap(data_key, aad)
    if "old" in previous:
        assert ring.unwrap(wrapped, aad) == data_key == ring.unwrap(wrapped, aad, OLD.id)
        assert ring.holder(wrapped, aad) is not None
    else:
        with pytest.raises(MasterKeyMissing):
            ring.unwrap(wrapped, aad)
        assert ring.holder(wrapped, aad) is None


def test_credentials_rotate_with_the_master_key_and_derivations_stay_with_the_root() -> None:
    root = DerivationRoot.new()
    assert OLD.hindsight_signing_key().public_key() != NEW.hindsight_signing_key().public_key()
    assert OLD.token_secret() != NEW.token_secret()
    # the old derivation, for databases from before the root was stored: the master key itself
    assert OLD.legacy_root().search_key("acme") == DerivationRoot(OLD._key).search_key("acme")
    assert root.remember_key("acme") != root.remember_key("globex") != root.import_key("globex")


def test_the_key_file_is_replaced_and_its_previous_key_kept(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    first = MasterKey.load_or_create(path)
    assert previous_key_file(path) == []

    second = new_key_file(path)
    third = new_key_file(path)

    assert MasterKey.load_or_create(path).id == third.id != second.id != first.id
    assert [k.id for k in previous_key_file(path)] == [first.id, second.id]
    for f in (path, path.with_name("master.key.previous")):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert not path.with_name("master.key.new").exists()


def test_previous_keys_are_a_comma_separated_setting_and_a_bad_one_is_named_never_shown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from engram.service.settings import Settings, describe

    monkeypatch.setenv("ENGRAM_PREVIOUS_MASTER_KEYS", f" {text(OLD)} , {text(NEW)},")
    assert Settings().previous_master_keys == (text(OLD), text(NEW))
    monkeypatch.setenv("ENGRAM_PREVIOUS_MASTER_KEYS", f"{text(OLD)},c2hvcnQ")
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert describe(refused.value).startswith("ENGRAM_PREVIOUS_MASTER_KEYS:")
    assert "c2hvcnQ" not in describe(refused.value) and text(OLD) not in describe(refused.value)
