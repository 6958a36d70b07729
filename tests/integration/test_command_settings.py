"""A command started with a bad ENGRAM_* value stops with exit code 2, naming the variable and never its
value, in the log format asked for (the installed `engram`, run as an operator runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ENGRAM = str(Path(sys.executable).parent / "engram")


def test_the_command_stops_with_the_variable_named(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "ENGRAM_DATA_DIR": str(tmp_path), "ENGRAM_MODE": "sometimes",
           "ENGRAM_MASTER_KEY": "not-shown-anywhere"}
    r = subprocess.run([ENGRAM, "token", "--company", "acme", "--user", "alice"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert "ENGRAM_MODE" in r.stderr and "sometimes" not in r.stderr and "Traceback" not in r.stderr


def test_a_bad_log_setting_is_reported_as_json_when_json_was_asked_for(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "ENGRAM_DATA_DIR": str(tmp_path), "ENGRAM_LOG_FORMAT": "json",
           "ENGRAM_LOG_LEVEL": "verbose"}
    r = subprocess.run([ENGRAM, "serve"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    [line] = [json.loads(line) for line in r.stderr.splitlines()]
    assert line["level"] == "ERROR" and line["message"].startswith("invalid configuration: ENGRAM_LOG_LEVEL: ")
    assert "verbose" not in r.stderr


def test_serve_refuses_a_token_secret_short_enough_to_guess(tmp_path: Path) -> None:
    """Any token signed with it would let an attacker search for it offline."""
    env = {"PATH": "/usr/bin:/bin", "ENGRAM_DATA_DIR": str(tmp_path), "ENGRAM_TOKEN_SECRET": "hunter2-hunter2"}
    r = subprocess.run([ENGRAM, "serve", "--port", "1"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert "ENGRAM_TOKEN_SECRET: " in r.stderr and "at least 32 bytes" in r.stderr
    assert "hunter2" not in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "pgdata").exists() and not any(tmp_path.iterdir())  # refused before anything started


def test_token_refuses_to_make_a_data_directory_it_did_not_find(tmp_path: Path) -> None:
    """Run in the wrong directory, it used to make ./.engram and sign with a secret no service knew."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run([ENGRAM, "token", "--company", "acme", "--user", "alice"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert "no Engram data directory at" in r.stderr and "--create" in r.stderr and "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []  # nothing made
    made = subprocess.run([ENGRAM, "token", "--company", "acme", "--user", "alice", "--create"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0 and made.stdout.count(".") == 2, made.stderr  # a JWT
    assert any(tmp_path.rglob("master.key"))
    again = subprocess.run([ENGRAM, "token", "--company", "acme", "--user", "alice"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0  # found now
