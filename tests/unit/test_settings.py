"""Configuration comes from ENGRAM_* variables, typed and checked; a bad value stops start-up, naming it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engram.service.settings import Settings, describe


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("ENGRAM_"):
            monkeypatch.delenv(name)


def test_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().max_text_bytes == 8192 and Settings().mode == "enabled"
    monkeypatch.setenv("ENGRAM_MAX_TEXT_BYTES", "4096")
    monkeypatch.setenv("ENGRAM_COMPANY_ALLOWLIST", " acme, globex ,,")
    monkeypatch.setenv("ENGRAM_MODE", "shadow")
    monkeypatch.setenv("ENGRAM_DAILY_TOKENS", "2.5e5")
    monkeypatch.setenv("ENGRAM_PERSON_DAILY_CALLS", "")  # empty means unset
    monkeypatch.setenv("ENGRAM_DB_POOL_SIZE", "3")
    s = Settings()
    assert (s.max_text_bytes, s.company_allowlist, s.mode) == (4096, frozenset({"acme", "globex"}), "shadow")
    assert (s.daily_tokens, s.person_daily_calls, s.db_pool_size) == (250_000, None, 3)
    assert s.replace(max_text_bytes=64).max_text_bytes == 64 and s.max_text_bytes == 4096
    with pytest.raises(ValidationError):
        s.replace(db_pool_size=0)  # a changed copy is checked like the environment


@pytest.mark.parametrize(("name", "value"), [
    ("ENGRAM_MODE", "sometimes"), ("ENGRAM_MAX_TEXT_BYTES", "-1"), ("ENGRAM_DB_POOL_SIZE", "-2"),
    ("ENGRAM_POLL_INTERVAL", "soon"), ("ENGRAM_DAILY_CALLS", "1.5"), ("ENGRAM_MAX_TOKEN_DAYS", "-3"),
    ("ENGRAM_BACKUP_RETENTION_DAYS", "31"), ("ENGRAM_BACKUP_RETENTION_DAYS", "-2"), ("ENGRAM_LOG_FORMAT", "yaml"),
    ("ENGRAM_LOG_LEVEL", "loud"), ("ENGRAM_TOKEN_SECRET", "hunter2"), ("ENGRAM_TOKEN_SECRET", "z" * 31),
    ("ENGRAM_TOKEN_SECRET", "密" * 10),  # 30 bytes: the length counted is the bytes'
])
def test_a_bad_value_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert describe(refused.value).startswith(name + ":") and value not in describe(refused.value)


def test_log_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (Settings().log_format, Settings().log_level) == ("text", "info")
    monkeypatch.setenv("ENGRAM_LOG_FORMAT", " JSON")
    monkeypatch.setenv("ENGRAM_LOG_LEVEL", "Debug")
    assert (Settings().log_format, Settings().log_level) == ("json", "debug")


def test_backup_retention_is_at_most_thirty_days(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().backup_retention_days == 30
    monkeypatch.setenv("ENGRAM_BACKUP_RETENTION_DAYS", "0.5")  # fractions of a day are allowed
    assert Settings().backup_retention_days == 0.5
    monkeypatch.setenv("ENGRAM_BACKUP_RETENTION_DAYS", "30.01")
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert "at most 30 days" in describe(refused.value)


def test_hindsight_answer_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (Settings().hindsight_max_tokens, Settings().hindsight_max_hints) == (1024, 50)  # ADR 0026
    monkeypatch.setenv("ENGRAM_HINDSIGHT_MAX_TOKENS", "2048")
    monkeypatch.setenv("ENGRAM_HINDSIGHT_MAX_HINTS", "80")
    assert (Settings().hindsight_max_tokens, Settings().hindsight_max_hints) == (2048, 80)
    monkeypatch.setenv("ENGRAM_HINDSIGHT_MAX_HINTS", "0")  # no hint at all is switching Hindsight off, not a bound
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert "ENGRAM_HINDSIGHT_MAX_HINTS" in describe(refused.value)
