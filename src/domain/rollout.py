"""Rollout modes per company: off, shadow (learn, but bots get nothing), enabled."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import DomainError

OFF = "off"
SHADOW = "shadow"
ENABLED = "enabled"
MODES = (OFF, SHADOW, ENABLED)


class EngramOff(DomainError):
    code, status, title = "engram_off", 403, "Engram is off for this company"


@dataclass(frozen=True)
class Rollout:
    """`default` applies to allowlisted companies (every company when the allowlist is empty);
    companies outside a non-empty allowlist are off."""

    default: str = ENABLED
    allowlist: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.default not in MODES:
            raise ValueError(f"ENGRAM_MODE must be one of {', '.join(MODES)}")

    def mode(self, company: str) -> str:
        if self.allowlist and company not in self.allowlist:
            return OFF
        return self.default
