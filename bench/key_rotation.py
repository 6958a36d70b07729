"""Master-key rotation (ADR 0030): how fast `engram keys rotate` re-wraps data keys, and what a forget
waits meanwhile.

    .venv/bin/python -m bench.key_rotation [--keys 100000] [--batch-size 500]

Seeds N data keys wrapped by an old master key straight into the key store of an embedded PostgreSQL,
then re-wraps them under a new key with the same code as `engram keys rotate`, while another thread
destroys one key at a time as a forget does (its own transaction: delete the row, note the destruction)
and times each. Prints keys/s and the forget's destruction p50 / p95 / max during the rotation and
without it.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

from engram.adapters.crypto import MasterKey, new_data_key
from engram.adapters.database import EmbeddedPostgres
from engram.api.bootstrap import key_rotation
from engram.service.settings import Settings


def seed(conninfo: str, old: MasterKey, n: int) -> list[str]:
    import psycopg

    ids = [str(uuid4()) for _ in range(n)]
    with psycopg.connect(conninfo) as conn, conn.cursor() as cur:
        with cur.copy("COPY engram_data_keys (key_id, company, wrapped, master_id) FROM STDIN") as copy:
            for i, key_id in enumerate(ids):
                copy.write_row((key_id, f"c{i % 50}", old.wrap(new_data_key(), key_id), old.id))
    return ids


def forgets(conninfo: str, ids: list[str], stop: threading.Event, waits: list[float]) -> None:
    """Destroy keys one by one, as a forget's transaction does, timing each."""
    import psycopg

    from engram.adapters.keystore import KeyStore

    with psycopg.connect(conninfo) as conn:
        for key_id in ids:
            if stop.is_set():
                return
            t = time.perf_counter()
            with conn.transaction(), conn.cursor() as cur:
                KeyStore.destroy_in(cur, key_id, "c0", datetime.now(UTC))
            waits.append(time.perf_counter() - t)
            time.sleep(0.002)


def summary(waits: list[float]) -> str:
    ms = sorted(w * 1000 for w in waits)
    return (f"p50 {statistics.median(ms):.2f} ms, p95 {ms[int(len(ms) * 0.95) - 1]:.2f} ms, max {ms[-1]:.2f} ms "
            f"({len(ms)} forgets)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--batch-size", type=int, default=500)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="engram-rotation-"))
    old_text, new_text = (base64.urlsafe_b64encode(os.urandom(32)).decode() for _ in range(2))
    pg = EmbeddedPostgres(tmp)
    database = pg.start()
    try:
        settings = Settings(data_dir=tmp, master_key=new_text, previous_master_keys=(old_text,))
        with key_rotation(settings, database) as rotation:  # migrates the new database
            rotation.keys.derivation_root()  # as the first start stores it
            ids = seed(database.conninfo, MasterKey.from_text(old_text), args.keys)
            quiet: list[float] = []
            forgets(database.conninfo, ids[:200], threading.Event(), quiet)

            during: list[float] = []
            stop = threading.Event()
            forgetter = threading.Thread(target=forgets, args=(database.conninfo, ids[200:], stop, during))
            forgetter.start()
            t = time.perf_counter()
            run = rotation.rotate(batch_size=args.batch_size)
            elapsed = time.perf_counter() - t
            stop.set()
            forgetter.join()
        assert run.status.done
        print(f"keys {args.keys:,}, batch size {args.batch_size}")
        print(f"re-wrapped {run.rewrapped:,} in {elapsed:.1f} s: {run.rewrapped / elapsed:,.0f} keys/s "
              f"({run.batches} batches)")
        print(f"forget's key destruction without a rotation: {summary(quiet)}")
        print(f"forget's key destruction during the rotation: {summary(during)}")
    finally:
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
