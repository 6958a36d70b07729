"""What the recall terms' covering key (migration 0013, ADR 0035) costs and buys at one size.

    .venv/bin/python -m bench.covering_key [--size 100000] [--queries 300] [--out FILE]

Seeds `--size` memories as bench/scale.py does (the same population, stored through the event store
and projected, then `VACUUM ANALYZE`), puts the terms' key back as it was before 0013, and measures
`RecallService.recall` in this process (no HTTP) for English hits, misses and the busiest person.
Then it runs migration 0013's SQL as `engram migrate` would (timed: the key rebuilt in place under
the table's lock), and measures the same queries again; twice, alternated (old, covering, old,
covering). Prints the key's size and build time with each shape, and p50/p95 per kind, as one JSON
document.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from engram.adapters.migrations import shipped
from engram.domain.scope import Caller

from bench.harness import fresh_engram, pct
from bench.scale import BOT, population, queries, seed

OLD_KEY = ("ALTER TABLE engram_recall_terms DROP CONSTRAINT engram_recall_terms_pkey, "
           "ADD PRIMARY KEY (company, person, term, memory_id, revision)")
KINDS = ("en_hit", "en_miss", "busiest_person")


def key_size_mib(conn: psycopg.Connection[Any]) -> float:
    row = conn.execute("SELECT pg_relation_size(i.indexrelid) FROM pg_index i "
                       "WHERE i.indrelid = 'engram_recall_terms'::regclass AND i.indisprimary").fetchone()
    assert row is not None
    return round(row[0] / 2**20, 1)


def timed_recalls(engram: Any, asked: dict[str, list[Any]]) -> dict[str, dict[str, float]]:
    out = {}
    for kind in KINDS:
        latencies = []
        for person, query in asked[kind]:
            caller = Caller(company=person.company, person=person.id, role="bot", bot=BOT, entry="api")
            started = time.perf_counter()
            engram.recall.recall(caller, query=query, as_of=None, max_bytes=8192, limit=10)
            latencies.append((time.perf_counter() - started) * 1000)
        out[kind] = {"p50_ms": round(pct(latencies, 50), 2), "p95_ms": round(pct(latencies, 95), 2)}
    return out


def keyed(engram: Any, label: str, sql: str, asked: dict[str, list[Any]]) -> dict[str, Any]:
    """The terms' key rebuilt by `sql` (timed, in one transaction as `engram migrate` runs a
    migration), its size, and the recalls timed after a warm-up round."""
    with psycopg.connect(engram.database.conninfo, autocommit=True) as conn:
        started = time.perf_counter()
        with conn.transaction():
            conn.execute(sql.encode())
        shape: dict[str, Any] = {"key": label, "build_s": round(time.perf_counter() - started, 1),
                                 "size_mib": key_size_mib(conn)}
        conn.execute("ANALYZE engram_recall_terms")
    timed_recalls(engram, asked)  # warm: the statements prepared, the pages cached
    shape["recall"] = timed_recalls(engram, asked)
    print(f"# {shape}", file=sys.stderr)
    return shape


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300, help="per kind")
    ap.add_argument("--per-person", type=int, default=100)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    migration = next(m for m in shipped() if m.version == 13)
    report: dict[str, Any] = {"size": args.size, "cores": os.cpu_count(),
                              "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    pop = population(args.size, args.per_person, seed=args.size)
    with fresh_engram(lazy_commit=True) as bench:
        report["seed"] = seed(bench.engram, pop, args.size, seed_=args.size + 1)
        print(f"# seeded: {report['seed']}", file=sys.stderr)
        asked = queries(pop, args.queries, args.size)
        report["rounds"] = []
        for _ in range(2):  # old, covering, old, covering: each shape measured twice, alternated
            report["rounds"] += [keyed(bench.engram, "before 0013", OLD_KEY, asked),
                                 keyed(bench.engram, "migration 0013", migration.sql, asked)]
    report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
