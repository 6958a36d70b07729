"""bench/scenarios.py once over its forty frozen scenarios, so that they keep passing as the service
changes: the program starts its own services on the embedded default and reports each scenario's result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_every_frozen_scenario_passes_once(tmp_path: Path) -> None:
    out = tmp_path / "scenarios.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "scenarios.py"), "--runs", "1", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.exists(), done.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    failures = {s["id"]: s["failures"] for s in report["scenarios"] if s["failures"]}
    assert failures == {}, failures
    assert report["summary"]["total"] == {"scenarios": 40, "passed": 40, "failed": 0, "not_exercised": 0}
    assert set(report["summary"]["per_area"]) == {"capture", "review", "recall", "correct", "forget", "isolation",
                                                  "time", "insights", "budgets", "restore"}
    assert all(s["results"] == ["passed"] and s["endpoints"] for s in report["scenarios"])
    assert done.returncode == 0, done.stderr[-3000:]
