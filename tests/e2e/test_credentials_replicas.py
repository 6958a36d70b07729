"""Revocation and suspension across two `engram serve` processes on one database: what one replica
records, the other refuses on its next request, however warm its caches (verified tokens, directories)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.support.helpers import auth, remember_body, running_serve, serve_environment


def test_a_replica_with_warm_caches_refuses_on_the_next_request(postgres: Any, tmp_path: Path) -> None:
    environment = serve_environment(postgres, tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    alice, bob, root = auth(), auth(user="bob"), auth(user="root", role="admin")
    with running_serve({**environment, "ENGRAM_DATA_DIR": str(tmp_path / "a" / "data")}, tmp_path / "a") as a, \
            running_serve({**environment, "ENGRAM_DATA_DIR": str(tmp_path / "b" / "data")}, tmp_path / "b") as b, \
            httpx.Client(base_url=a, timeout=30) as first, httpx.Client(base_url=b, timeout=30) as second:
        assert first.post("/v1/memories", json=remember_body("I cycle to the office"), headers=alice).status_code == 201
        for _ in range(20):  # warm: the token verified and kept, the directory parsed and kept
            assert second.post("/v1/recall", json={"query": "office"}, headers=alice).status_code == 200

        assert first.post("/v1/admin/people/alice/suspend", headers=root).status_code == 200
        refused = second.post("/v1/recall", json={"query": "office"}, headers=alice)
        assert refused.status_code == 403 and refused.json()["code"] == "person_suspended"
        assert second.get("/v1/memories", headers=bob).status_code == 200

        assert second.post("/v1/admin/people/alice/resume", headers=root).status_code == 200
        assert first.post("/v1/recall", json={"query": "office"}, headers=alice).json()["items"]

        assert second.post("/v1/me/sign-out-everywhere", headers=alice).status_code == 200
        for replica in (first, second):
            revoked = replica.get("/v1/memories", headers=alice)
            assert revoked.status_code == 401
            assert (revoked.json()["code"], revoked.json()["reason"]) == ("token_revoked", "revoked")
