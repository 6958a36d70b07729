"""What the `engram` commands share: the settings, a progress line and bar, a database for a one-shot command."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from engram.adapters.database import Database, EmbeddedPostgres

log = logging.getLogger("engram")


def load_settings():
    from engram.service.settings import Settings

    return Settings()


def progress_count(label: str):
    """A line on stderr every 10,000: a long rotation shows it is alive."""
    shown = {"step": 0}

    def progress(done: int) -> None:
        if done // 10_000 != shown["step"]:
            shown["step"] = done // 10_000
            print(f"{label} {done}", file=sys.stderr, flush=True)

    return progress


def progress_bar(label: str):
    """A bar on stderr, redrawn at most every 1%: long rebuilds show they are alive."""
    shown = {"pct": -1}

    def progress(done: int, total: int) -> None:
        pct = 100 if total <= 0 else int(done * 100 / total)
        if pct != shown["pct"]:
            shown["pct"] = pct
            bar = "#" * (pct // 4) + "." * (25 - pct // 4)
            end = "\n" if pct >= 100 else ""
            print(f"\r{label} [{bar}] {pct:3d}% ({done}/{total})", end=end, file=sys.stderr, flush=True)

    return progress


@contextmanager
def one_shot_database() -> Iterator[Database]:
    """The database `engram serve` would use (ENGRAM_DATABASE_URL, or the embedded server), nothing else started."""
    settings = load_settings()
    if settings.database_url:
        yield Database.from_url(settings.database_url)
        return
    embedded = EmbeddedPostgres(settings.data_dir.resolve())
    try:
        yield embedded.start()
    finally:
        embedded.stop()
