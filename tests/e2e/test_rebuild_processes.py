"""`engram projections rebuild recall` filled by two processes (ADR 0038) on the embedded default: the
command works as an operator runs it, and its filling processes stop when it is killed, so none of
them writes on into the tables the next rebuild makes anew."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from uuid import uuid4

import psutil
import pytest

from tests.e2e.test_serve import ENGRAM, _env
from tests.support.deployment import pg_ctl, postgres_running

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

PAIRS = 10_001  # a Remembered and a Corrected each: just past the 20,000 events a rebuild fills alone


def _seed(data: Path) -> int:
    """Memories stored straight into the event store, then projected, as `engram serve` would have."""
    from engram.api.bootstrap import Engram
    from engram.domain.evidence import Evidence, Source
    from engram.domain.memory import Memory
    from engram.domain.scope import Scope
    from engram.service.settings import Settings

    # as the command will read it: nothing from this process's environment (`_env` drops ENGRAM_*)
    engram = Engram.open(Settings(data_dir=data, database_url=None, master_key=None, kafka_bootstrap=None,
                                  hindsight_url=None), background=False)
    try:
        now = engram.ledger.clock.now()
        src = Source("chat", "chat-1", "m-1")
        batch: list[Memory] = []
        for i in range(PAIRS):
            said = f"the heron count at weir {i} is high"
            m = Memory.remember(id=uuid4(), scope=Scope("acme", f"p{i % 50}"), source=src.as_dict(), text=said,
                                evidence=[Evidence(said, src, now).as_dict()], valid_from=None, valid_to=None,
                                actor="test", at=now)
            m.correct(text=said + " and rising", valid_from=None, valid_to=None, reason=None, actor="test", at=now)
            batch.append(m)
            if len(batch) == 500 or i == PAIRS - 1:
                engram.ledger.create(*batch, company="acme")  # their data keys in the events' transaction
                batch = []
        engram.runner.catch_up_all()
        return int(engram.store.recorder.max_notification_id() or 0)
    finally:
        engram.close()


def _rebuild(data: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen(ENGRAM + ["projections", "rebuild", "recall"], stdout=sink, stderr=subprocess.STDOUT,
                                env={**_env(data), "ENGRAM_REBUILD_WORKERS": "2", "ENGRAM_LOG_LEVEL": "INFO"})


def test_a_rebuild_filled_by_two_processes_and_its_processes_stop_with_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    head = _seed(data)
    assert head > 20_000

    # killed outright half-way: its filling processes notice and stop themselves
    log = tmp_path / "killed.log"
    main = _rebuild(data, log)
    try:
        deadline = time.monotonic() + 120
        while "2 processes fill the new tables" not in log.read_text(errors="replace"):
            assert main.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)
        fillers = [c for c in psutil.Process(main.pid).children() if "spawn_main" in " ".join(c.cmdline())]
        assert len(fillers) == 2
        main.send_signal(signal.SIGKILL)
        main.wait(timeout=30)
        gone, alive = psutil.wait_procs(fillers, timeout=30)
        assert not alive, log.read_text(errors="replace")
        assert log.read_text(errors="replace").count("ended; stopping rebuild's filling process") == 2
    finally:
        if main.poll() is None:
            main.kill()
        if postgres_running(data / "pg"):  # a killed command leaves its embedded server, as `engram serve` does
            pg_ctl(data / "pg", "-w", "-m", "fast", "stop")

    # run again, to the end: the leftovers go, the view is whole
    log = tmp_path / "rebuild.log"
    again = _rebuild(data, log)
    assert again.wait(timeout=300) == 0, log.read_text(errors="replace")
    output = log.read_text(errors="replace")
    assert "rebuild of recall: 2 processes fill the new tables" in output
    assert f"rebuilt recall: applied {head} events" in output
    assert "Traceback" not in output and "heron" not in output
    assert not postgres_running(data / "pg")
