"""Master-key rotation (ADR 0030): every data key, and the derivation root, re-wrapped under the current
master key in short batches, while the service runs. Resumable: each row names the master key that
wrapped it, so a run stopped anywhere goes on from what is left. Reports counts and key ids only."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .ports import WrappedKeys

FIRST = "00000000-0000-0000-0000-000000000000"  # below every key id
PASSES = 100  # rows a forget holds are looked at again this many times at most
PAUSE = 0.05  # seconds between passes: a forget's transaction ends well within it


class RotationRefused(ValueError):
    """A rotation that would leave keys behind is not started (the CLI exits 2 with the reason)."""


@dataclass(frozen=True)
class KeyStatus:
    """How many data keys each master key wraps (None: wrapped before ids were recorded)."""

    current: str
    configured: tuple[str, ...]  # the current key first, then the previous ones
    wrapped_by: dict[str | None, int]
    root: str | None  # the master key wrapping the derivation root (None before the first start)
    wrapping_elsewhere: int = 0  # running Engram processes that wrap new keys under another master key

    @property
    def remaining(self) -> int:
        """Data keys not yet under the current master key."""
        return sum(n for master_id, n in self.wrapped_by.items() if master_id != self.current)

    @property
    def done(self) -> bool:
        return self.remaining == 0 and self.root in (None, self.current)


@dataclass(frozen=True)
class RotationRun:
    rewrapped: int
    root_rewrapped: bool
    batches: int
    status: KeyStatus


class KeyRotation:
    def __init__(self, keys: WrappedKeys, current: str, configured: tuple[str, ...]) -> None:
        self.keys, self.current, self.configured = keys, current, configured

    def status(self) -> KeyStatus:
        counts, root = self.keys.wrapped_by()
        return KeyStatus(self.current, self.configured, counts, root, self.keys.wrapping_elsewhere())

    def rotate(self, batch_size: int = 500, max_batches: int | None = None,
               progress: Callable[[int], None] | None = None) -> RotationRun:
        """Re-wrap until nothing is left under another master key, or `max_batches` batches are done.
        Refused before anything changes when a wrapped row needs a master key that is not configured, or
        while a running Engram process still wraps new keys under another master key (it would also fail
        to read what this run re-wraps)."""
        self.keys.check_masters()
        elsewhere = self.keys.wrapping_elsewhere()
        if elsewhere:
            raise RotationRefused(f"{elsewhere} running Engram process(es) (serve, relay, worker) do not use master key "
                                  f"{self.current} as their current key: restart them with it (and the previous key "
                                  "in ENGRAM_PREVIOUS_MASTER_KEYS) first, then rotate")
        self.keys.derivation_root()  # stored before anything moves: a first start must not guess it later
        root = self.keys.rewrap_root()
        rewrapped = batches = 0
        for _ in range(PASSES):
            after: str | None = FIRST
            held = 0
            while after is not None:
                if max_batches is not None and batches >= max_batches:
                    return RotationRun(rewrapped, root, batches, self.status())
                n, skipped, after = self.keys.rewrap(after, batch_size)
                if after is not None:
                    rewrapped, held, batches = rewrapped + n, held + skipped, batches + 1
                    if progress is not None:
                        progress(rewrapped)
            if not held:
                break
            time.sleep(PAUSE)  # rows a forget held: look again once it has committed (or deleted them)
        return RotationRun(rewrapped, root, batches, self.status())
