"""Configuration, read once from the environment (`ENGRAM_*`) and checked: a bad value stops start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

Seconds = Annotated[float, Field(gt=0)]
Count = Annotated[int, Field(ge=1)]


class Settings(BaseSettings):
    """Every setting is the environment variable `ENGRAM_<NAME>`; README lists them."""

    model_config = SettingsConfigDict(env_prefix="ENGRAM_", frozen=True, extra="ignore", env_ignore_empty=True)

    data_dir: Path = Path("./.engram")
    tombstone_dir: Path | None = None  # default: beside the data directory, see `journal_dir`
    database_url: str | None = None
    master_key: str | None = None
    token_secret: str | None = None
    max_text_bytes: Count = 8192
    max_token_days: Seconds = 30
    candidate_ttl_days: Seconds = 30
    mode: Literal["off", "shadow", "enabled"] = "enabled"
    company_allowlist: Annotated[frozenset[str], NoDecode] = frozenset()
    poll_interval: Seconds = 1.0
    sweep_interval: Seconds = 60.0
    worker_interval: Seconds = 1.0
    daily_tokens: Annotated[int, Field(ge=0)] = 250_000
    daily_calls: Annotated[int, Field(ge=0)] = 100
    person_daily_tokens: Annotated[int, Field(ge=0)] | None = None
    person_daily_calls: Annotated[int, Field(ge=0)] | None = None
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_api_key: str | None = None
    kafka_bootstrap: str | None = None
    kafka_partitions: Count = 8
    visibility_timeout: Seconds = 5.0  # distributed mode: a write's wait for the workers before 202 visible:false
    hindsight_url: str | None = None
    hindsight_deadline_ms: Seconds = 150
    hindsight_database_url: str | None = None  # Hindsight's own PostgreSQL: vacuumed after deletes when given
    hindsight_audit_interval: Seconds = 3600.0  # how often deleted documents are re-read in Hindsight
    db_pool_size: Count = 8
    db_statement_timeout: Seconds = 10.0
    db_lock_timeout: Seconds = 5.0
    db_idle_timeout: Seconds = 5.0
    db_connect_timeout: Seconds = 2.0

    @field_validator("company_allowlist", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return frozenset(c.strip() for c in value.split(",") if c.strip())
        return value

    @field_validator("daily_tokens", "daily_calls", "person_daily_tokens", "person_daily_calls",
                     "max_text_bytes", "kafka_partitions", "db_pool_size", mode="before")
    @classmethod
    def _whole(cls, value: object) -> object:
        """Counts may be written like 2.5e5, as they always could; a fraction of one is refused."""
        if isinstance(value, str) and value.strip():
            try:
                number = float(value)
            except ValueError:
                return value
            return int(number) if number.is_integer() else value
        return value

    @property
    def journal_dir(self) -> Path:
        """Where the tombstone journal (and the backup catalog) live: never inside the data directory
        or a backup, so restoring either cannot roll them back. Default `<data_dir>-tombstones`."""
        if self.tombstone_dir is not None:
            return self.tombstone_dir
        data = self.data_dir.absolute()
        return data.parent / f"{data.name}-tombstones"

    def replace(self, **changes: object) -> Settings:
        """A copy with some values changed, checked like the environment's."""
        return type(self).model_validate({**self.model_dump(), **changes})


def describe(error: ValidationError) -> str:
    """Which variables are wrong and why, named as the operator set them (never their values)."""
    lines = []
    for e in error.errors():
        field = str(e["loc"][0]) if e.get("loc") else "?"
        lines.append(f"ENGRAM_{field.upper()}: {e['msg']}")
    return "; ".join(lines)
