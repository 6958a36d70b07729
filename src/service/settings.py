"""Configuration, read once from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw not in (None, "") else default


def _optional_int(name: str) -> int | None:
    raw = os.environ.get(name)
    return int(float(raw)) if raw not in (None, "") else None


@dataclass(frozen=True)
class Settings:
    data_dir: Path = field(default_factory=lambda: Path(os.environ.get("ENGRAM_DATA_DIR", "./.engram")))
    database_url: str | None = field(default_factory=lambda: os.environ.get("ENGRAM_DATABASE_URL") or None)
    master_key: str | None = field(default_factory=lambda: os.environ.get("ENGRAM_MASTER_KEY") or None)
    token_secret: str | None = field(default_factory=lambda: os.environ.get("ENGRAM_TOKEN_SECRET") or None)
    max_text_bytes: int = field(default_factory=lambda: int(_float("ENGRAM_MAX_TEXT_BYTES", 8192)))
    candidate_ttl_days: float = field(default_factory=lambda: _float("ENGRAM_CANDIDATE_TTL_DAYS", 30))
    poll_interval: float = field(default_factory=lambda: _float("ENGRAM_POLL_INTERVAL", 1.0))
    mode: str = field(default_factory=lambda: os.environ.get("ENGRAM_MODE") or "enabled")
    company_allowlist: frozenset[str] = field(default_factory=lambda: frozenset(
        c.strip() for c in os.environ.get("ENGRAM_COMPANY_ALLOWLIST", "").split(",") if c.strip()))
    sweep_interval: float = field(default_factory=lambda: _float("ENGRAM_SWEEP_INTERVAL", 60.0))
    daily_tokens: int = field(default_factory=lambda: int(_float("ENGRAM_DAILY_TOKENS", 250_000)))
    daily_calls: int = field(default_factory=lambda: int(_float("ENGRAM_DAILY_CALLS", 100)))
    person_daily_tokens: int | None = field(default_factory=lambda: _optional_int("ENGRAM_PERSON_DAILY_TOKENS"))
    person_daily_calls: int | None = field(default_factory=lambda: _optional_int("ENGRAM_PERSON_DAILY_CALLS"))
    llm_base_url: str | None = field(default_factory=lambda: os.environ.get("ENGRAM_LLM_BASE_URL") or None)
    llm_model: str = field(default_factory=lambda: os.environ.get("ENGRAM_LLM_MODEL") or "gpt-4o-mini")
    llm_api_key: str | None = field(default_factory=lambda: os.environ.get("ENGRAM_LLM_API_KEY") or None)
    worker_interval: float = field(default_factory=lambda: _float("ENGRAM_WORKER_INTERVAL", 1.0))
    kafka_bootstrap: str | None = field(default_factory=lambda: os.environ.get("ENGRAM_KAFKA_BOOTSTRAP") or None)
    kafka_partitions: int = field(default_factory=lambda: int(_float("ENGRAM_KAFKA_PARTITIONS", 8)))
    # distributed mode: how long a write waits for the workers before answering 202 with visible: false
    visibility_timeout: float = field(default_factory=lambda: _float("ENGRAM_VISIBILITY_TIMEOUT", 5.0))
    hindsight_url: str | None = field(default_factory=lambda: os.environ.get("ENGRAM_HINDSIGHT_URL") or None)
    hindsight_deadline_ms: float = field(default_factory=lambda: _float("ENGRAM_HINDSIGHT_DEADLINE_MS", 150))
    pool_size: int = field(default_factory=lambda: int(_float("ENGRAM_DB_POOL_SIZE", 8)))
    max_token_days: float = field(default_factory=lambda: _float("ENGRAM_MAX_TOKEN_DAYS", 30))
