"""Faults under a steady mixed load (remember, receipts, confirm, forget, recall of live and forgotten
memories' words) on the distributed deployment as separate processes: PostgreSQL restarted, then a
worker killed. `bench/faults.py` runs the same machinery with the broker, Hindsight and the API failing
too, and prints the figures; here, for each fault: every write acknowledged with a 2xx is in the event
store and the views as acknowledged, no forgotten memory is ever recalled or read back, and the service
and its projections recover by themselves."""

from __future__ import annotations

import pytest

from bench import faults
from tests.support.broker import tansu_binary

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600),
              pytest.mark.skipif(tansu_binary() is None, reason="no Kafka-protocol broker installed")]


def test_a_postgres_restart_and_a_killed_worker_lose_nothing_acknowledged_and_serve_nothing_forgotten() -> None:
    record = faults.Record()
    with faults.deployment(hindsight=False) as stack:
        reports = {name: faults.run_fault(stack, name, record, clients=3, baseline=3, outage=4, recovery=16, seed=i)
                   for i, name in enumerate(("postgres", "worker"))}
        logs = {name: stack.system.log(name) for name in stack.system.procs}
    print("\n" + "\n".join(f"{name}: {report}" for name, report in reports.items()))

    for name, report in reports.items():
        checked = report["acknowledged"]
        assert checked["lost"] == 0, (name, checked)
        assert checked["forgotten_served"] == 0 and report["forgotten_served_during_load"] == 0, (name, report)
        assert report["first_ok_after_back_s"] is not None, (name, report)
        assert report["first_visible_write_after_back_s"] is not None, (name, report)
        assert report["projector_lag"]["backlog_applied"], (name, report["projector_lag"])
        assert report["projector_lag"]["back_to_zero"], (name, report["projector_lag"])
    # the load did what it is there for: forgets acknowledged and recalled after, candidates confirmed
    assert checked["forgotten"] >= 5 and checked["receipts"] >= 5, checked
    assert any(op.startswith("confirm 200") for r in reports.values() for op in r["requests"]["after"]["ok"])

    # no 500: whatever failed while the database was away failed as 503. A request is counted in the phase
    # it ended in, and one that waited out the whole outage for its connection ends after it (or succeeds)
    outage = reports["postgres"]["requests"]
    failed = [key for phase in ("during", "after") for key in outage[phase]["failed"]]
    assert all(" 503 unavailable" in key for key in failed), outage
    assert all(reports["postgres"]["processes_running"].values())
    running = reports["worker"]["processes_running"]
    assert not running["worker-1"] and running["worker-2"] and running["relay"] and running["api"]
    assert reports["worker"]["projector_lag"]["max"] > 0  # the killed worker's partitions did fall behind
    for name, text in logs.items():
        assert "Traceback" not in text, (name, text[-3000:])
