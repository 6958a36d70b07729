"""Configuration, read once from the environment (`ENGRAM_*`) and checked: a bad value stops start-up."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Annotated, Literal

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

Seconds = Annotated[float, Field(gt=0)]
Count = Annotated[int, Field(ge=1)]
MAX_BACKUP_RETENTION_DAYS = 30
MAX_SERVE_PROCESSES = 64
MAX_REBUILD_WORKERS = 32
MIN_SECRET_BYTES = 32
AUTO_REBUILD_WORKERS = 4  # beyond that, measure first: the processes share PostgreSQL's cores


class TokenIssuer(BaseModel):
    """One host platform's key: an Ed25519 or RSA public key in PEM, and the roles it may sign."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    public_key: str
    roles: tuple[Literal["user", "bot", "admin", "operator"], ...] = Field(min_length=1)

    @field_validator("public_key")
    @classmethod
    def _a_public_key(cls, value: str) -> str:
        try:
            key = serialization.load_pem_public_key(value.encode())
        except (ValueError, TypeError):
            raise ValueError("public_key must be a PEM public key (-----BEGIN PUBLIC KEY-----)") from None
        if isinstance(key, rsa.RSAPublicKey):
            if key.key_size < 2048:
                raise ValueError("an RSA public_key must have at least 2048 bits")
        elif not isinstance(key, ed25519.Ed25519PublicKey):
            raise ValueError("public_key must be an Ed25519 (EdDSA) or RSA (RS256) key")
        return value


class Settings(BaseSettings):
    """Every setting is the environment variable `ENGRAM_<NAME>`; docs/operations.md lists them."""

    model_config = SettingsConfigDict(env_prefix="ENGRAM_", frozen=True, extra="ignore", env_ignore_empty=True)

    data_dir: Path = Path("./.engram")
    tombstone_dir: Path | None = None  # default: beside the data directory, see `journal_dir`
    database_url: str | None = None
    master_key: str | None = None
    # master keys a rotation is moving away from: accepted for unwrapping, never for wrapping (ADR 0030)
    previous_master_keys: Annotated[tuple[str, ...], NoDecode] = ()
    token_secret: str | None = None
    # host platforms that sign their people's tokens with their own key pair, and the roles each may sign:
    # {"<iss>": {"public_key": "<PEM>", "roles": ["user", "bot"]}} (ADR 0059)
    token_issuers: Annotated[dict[str, TokenIssuer], NoDecode] = {}  # pydantic copies it for each instance
    max_text_bytes: Count = 8192
    max_token_days: Seconds = 30
    # requests a second per person and per company, bursts of twice that (ADR 0058); 0: no limit
    rate_person: Annotated[int, Field(ge=0)] = 0
    rate_company: Annotated[int, Field(ge=0)] = 0
    # a person's requests being answered at once in a process; more wait their turn (ADR 0061); 0: no bound
    person_in_flight: Annotated[int, Field(ge=0, le=1024)] = 4
    # seconds a request refused by the rates is held before its 429, so a client that retries at once
    # cannot turn refusals into a load of their own (ADR 0061); 0: answered at once
    rate_refusal_delay: Annotated[float, Field(ge=0, le=10)] = 1.0
    # exports and recalls of more than 50 items running at once in a process, one at a time per person
    heavy_reads: Annotated[int, Field(ge=1, le=64)] = 2
    candidate_ttl_days: Seconds = 30
    # a forget reaches every backup within this many days (ADR 0016): more is refused at start-up
    backup_retention_days: Seconds = MAX_BACKUP_RETENTION_DAYS
    mode: Literal["off", "shadow", "enabled"] = "enabled"
    company_allowlist: Annotated[frozenset[str], NoDecode] = frozenset()
    log_format: Literal["text", "json"] = "text"  # json: one JSON object a line
    log_level: Literal["debug", "info", "warning", "error", "critical"] = "info"
    poll_interval: Seconds = 1.0
    sweep_interval: Seconds = 60.0
    worker_interval: Seconds = 1.0
    daily_tokens: Annotated[int, Field(ge=0)] = 250_000
    daily_calls: Annotated[int, Field(ge=0)] = 100
    person_daily_tokens: Annotated[int, Field(ge=0)] | None = None
    person_daily_calls: Annotated[int, Field(ge=0)] | None = None
    # while a model budget is spent: `defer` the receipts that need the model to the next UTC day, or learn
    # from them by `rules` meanwhile (the receipt says so)
    budget_fallback: Literal["defer", "rules"] = "defer"
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_api_key: str | None = None
    kafka_bootstrap: str | None = None
    kafka_partitions: Count = 8
    visibility_timeout: Seconds = 5.0  # distributed mode: a write's wait for the workers before 202 visible:false
    hindsight_url: str | None = None
    hindsight_deadline_ms: Seconds = 150  # a hard cap on recall's whole call to Hindsight (ADR 0026)
    hindsight_max_tokens: Count = 1024  # Hindsight's recall answer: at most this many tokens of fact text
    hindsight_max_hints: Count = 50  # recall reads at most this many of Hindsight's best hints
    # Hindsight's vote against SQL's (1) in recall's rank fusion: 0 lets it only add what SQL misses
    hindsight_weight: Annotated[float, Field(ge=0, le=4)] = 0.5
    hindsight_database_url: str | None = None  # Hindsight's own PostgreSQL: vacuumed after deletes when given
    hindsight_audit_interval: Seconds = 3600.0  # how often deleted documents are re-read in Hindsight
    # recall by meaning (ADR 0040): `local` the multilingual model shipped with Engram, `openai` an
    # OpenAI-compatible /embeddings endpoint at `embeddings_url`, `off` words only
    embeddings: Literal["local", "openai", "off"] = "local"
    embeddings_url: str | None = None
    embeddings_model: str = "text-embedding-3-small"
    embeddings_api_key: str | None = None
    embeddings_deadline_ms: Seconds = 150  # a recall's wait for its question's vector; then words alone
    # what the sensitive rules hold, the shipped model may let through when it finds nothing sensitive in it
    # (ADR 0043); `off`, or `ENGRAM_EMBEDDINGS=off`: the rules decide alone
    sensitive_probe: Literal["on", "off"] = "on"
    # `on`: without a chat model, the shipped model's probe judges whether a learned statement repeats or
    # changes a confirmed memory (ADR 0043); off by default: it also relates statements only worded alike
    relation_probe: Literal["on", "off"] = "off"
    # with meaning, a memory scoring under this is not recalled (ADR 0040): higher leaves more questions
    # about something never said unanswered, and loses more of the memories asked for in other words
    recall_floor: Annotated[float, Field(ge=0, le=1)] = 0.3
    vector_cache: Count = 200_000  # vectors one process holds unsealed in memory, people least recently asked go first
    db_pool_size: Count = 8
    serve_processes: Annotated[int, Field(ge=1, le=MAX_SERVE_PROCESSES)] = 1  # `engram serve`, ADR 0037
    # processes that fill a rebuilt recall view (`engram projections rebuild`, a restore's fence), ADR 0038
    # 0: as many as the machine has cores, at most AUTO_REBUILD_WORKERS
    rebuild_workers: Annotated[int, Field(ge=0, le=MAX_REBUILD_WORKERS)] = 0
    db_statement_timeout: Seconds = 10.0
    db_lock_timeout: Seconds = 5.0
    db_idle_timeout: Seconds = 5.0
    db_connect_timeout: Seconds = 2.0
    forget_request_members: Count = 100  # an account forget request forgets this many, the sweeper the rest

    @field_validator("company_allowlist", "previous_master_keys", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(c.strip() for c in value.split(",") if c.strip())
        return value

    @field_validator("master_key", "previous_master_keys")
    @classmethod
    def _keys_are_32_bytes(cls, value: object) -> object:
        for text in (value,) if isinstance(value, str) else value or ():  # type: ignore[attr-defined]
            try:
                raw = base64.urlsafe_b64decode(text.strip() + "=" * (-len(text.strip()) % 4))
            except ValueError:
                raw = b""
            if len(raw) != 32:
                raise ValueError("each key must be 32 random bytes, base64url-encoded")
        return value

    @field_validator("token_issuers", mode="before")
    @classmethod
    def _issuers_json(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise ValueError('must be a JSON object: {"<iss>": {"public_key": "<PEM>", "roles": ["user"]}}') from None
        return value

    @field_validator("token_secret")
    @classmethod
    def _secret_resists_guessing(cls, value: str | None) -> str | None:
        """An HS256 secret can be searched for offline from any one token it signed: a short one soon falls."""
        if value is not None and len(value.encode()) < MIN_SECRET_BYTES:
            raise ValueError(f"must be at least {MIN_SECRET_BYTES} bytes (for example 32 random bytes, "
                             "base64url-encoded: `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)")
        return value

    @field_validator("embeddings", mode="before")
    @classmethod
    def _embeddings_lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _endpoint_named(self) -> Settings:
        if self.embeddings == "openai" and not self.embeddings_url:
            raise ValueError("ENGRAM_EMBEDDINGS=openai needs ENGRAM_EMBEDDINGS_URL (the endpoint's base URL)")
        return self

    @field_validator("log_format", "log_level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("backup_retention_days")
    @classmethod
    def _backups_age_out(cls, value: float) -> float:
        if value > MAX_BACKUP_RETENTION_DAYS:
            raise ValueError(f"at most {MAX_BACKUP_RETENTION_DAYS} days: a forget must reach every backup within "
                             f"{MAX_BACKUP_RETENTION_DAYS} days, so no backup may be kept longer")
        return value

    @field_validator("daily_tokens", "daily_calls", "person_daily_tokens", "person_daily_calls", "rate_person",
                     "rate_company", "heavy_reads", "max_text_bytes", "kafka_partitions", "db_pool_size",
                     "forget_request_members", mode="before")
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
        if not e.get("loc"):  # a rule across settings names its variables itself
            lines.append(str(e["msg"]).removeprefix("Value error, "))
            continue
        lines.append(f"ENGRAM_{str(e['loc'][0]).upper()}: {e['msg']}")
    return "; ".join(lines)
