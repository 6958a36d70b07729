"""`engram import` throughput and memory: records per second for the check and the writes, a second
run (all duplicates), and the peak resident memory.

    .venv/bin/python -m bench.import_records [--records 2000] [--people 50]

On a fresh embedded PostgreSQL in a temporary directory, in-process (projectors settle each write).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from engram.adapters.database import EmbeddedPostgres
from engram.api.bootstrap import Engram
from engram.service.settings import Settings


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--people", type=int, default=50)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="engram-import-"))
    path = tmp / "prior.jsonl"
    with path.open("w") as f:
        for i in range(args.records):
            f.write(json.dumps({
                "company": "acme", "person": f"p-{i % args.people}", "text": f"I prefer report layout number {i}",
                "source": {"kind": "chat", "id": f"chat-{i % 17}", "message_id": f"m-{i}"},
                "occurred_at": "2022-05-06T07:08:09+02:00", "status": "candidate" if i % 5 == 0 else "confirmed",
            }) + "\n")
    settings = Settings(data_dir=tmp / "data", database_url=None, token_secret="bench-" + "x" * 32,
                        master_key=base64.urlsafe_b64encode(os.urandom(32)).decode())
    pg = EmbeddedPostgres(tmp / "data")
    engram = Engram.open(settings, database=pg.start(), background=False)
    try:
        assert engram.importer is not None
        started = time.perf_counter()
        checked = engram.importer.check(path, "acme")
        check_s = time.perf_counter() - started
        started = time.perf_counter()
        first = engram.importer.run(path, "acme")
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        second = engram.importer.run(path, "acme")
        second_s = time.perf_counter() - started
    finally:
        engram.close()
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    n = args.records
    print(f"records {n}, people {args.people}; check refused {checked.refused}")
    print(f"check only       {check_s:7.2f} s  {n / check_s:8.0f} records/s")
    print(f"first import     {first_s:7.2f} s  {n / first_s:8.0f} records/s  (imported {first.imported}, "
          f"candidates {first.candidates})")
    print(f"second import    {second_s:7.2f} s  {n / second_s:8.0f} records/s  (duplicates {second.duplicates})")
    print(f"peak RSS         {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:7.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
