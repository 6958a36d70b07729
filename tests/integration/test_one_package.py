"""Engram installs as one package, `engram`, and events stored under the old module names still load."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path
from uuid import UUID

from tests.support.helpers import auth, remember_body

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_installs_one_top_level_package(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=300)
    wheel = next(tmp_path.glob("engram-*.whl"))
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith((".dist-info", ".data"))} == {"engram"}
    names = zipfile.ZipFile(wheel).namelist()
    assert "engram/domain/memory.py" in names and "engram/api/cli.py" in names
    assert {"engram/adapters/schema/0001_baseline.sql", "engram/adapters/schema/0002_relay_row.sql"} <= set(names)
    # the pages' templates, assets and catalogues ship with the distribution (ADR 0031)
    assert {"engram/web/templates/base.html", "engram/web/templates/memory/index.html",
            "engram/web/static/engram.css", "engram/web/static/forget-status.js",
            "engram/web/locale/zh/LC_MESSAGES/messages.po"} <= set(names)


def test_events_stored_under_the_old_module_names_still_load(engram, client) -> None:
    memory_id = client.post("/v1/memories", json=remember_body("Old topics still load"), headers=auth()).json()["id"]
    table = engram.store.recorder.events_table_name
    with engram.store.datastore.transaction(commit=True) as curs:
        # as a version before the one package wrote it
        curs.execute(f"UPDATE {table} SET topic = replace(topic, 'engram.domain.', 'domain.') "
                     "WHERE originator_id = %s RETURNING topic", (UUID(memory_id),))
        assert [r["topic"] for r in curs.fetchall()] == ["domain.memory:Memory.Remembered"]
    loaded = engram.store.repository.get(UUID(memory_id))
    assert type(loaded).__module__ == "engram.domain.memory" and loaded.current["text"] == "Old topics still load"
    assert engram.operations.rebuild("recall") >= 1 and engram.operations.quarantined()["recall"] == 0
