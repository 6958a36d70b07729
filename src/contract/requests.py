"""Request bodies. Strict types: a number where text belongs is a 422, not a coercion."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StrictStr,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from engram.domain.instant import InvalidTime, check_instant
from engram.domain.text import is_valid_id

from . import examples
from .examples import extra

_AWARE = TypeAdapter(AwareDatetime)


def _instant(value: Any) -> datetime:
    """RFC 3339 with an offset, 1900-2200 in UTC: the domain's rule, reported as `invalid_time`."""
    try:
        if not isinstance(value, (str, datetime)):  # no epoch numbers: RFC 3339 text only
            raise InvalidTime("not a time")
        parsed = _AWARE.validate_python(value)
        check_instant(parsed)
    except (ValidationError, InvalidTime):
        raise PydanticCustomError(
            "invalid_time", "must be an RFC 3339 time with an offset, between 1900-01-01 and 2200-01-01 UTC"
        ) from None
    return parsed


Instant = Annotated[datetime, PlainValidator(_instant),
                    WithJsonSchema({"type": "string", "format": "date-time"})]

def _printable(value: str) -> str:
    if not is_valid_id(value):
        raise ValueError("must be printable text without control characters")
    return value


Id = Annotated[StrictStr, Field(min_length=1, max_length=200, json_schema_extra={"pattern": r"^[^\x00-\x1f\x7f]+$"}),
               AfterValidator(_printable)]

# Personal text. The limit is in bytes of UTF-8 and configurable (ENGRAM_MAX_TEXT_BYTES), and going over
# it is a 413 `text_too_large`, not a validation error: so maxLength is declared for the default limit
# (no valid text has more characters than bytes) and enforced by the domain, not here.
Text = Annotated[StrictStr, Field(
    json_schema_extra={"maxLength": 8192},
    description="at most 8 KiB of UTF-8 by default (longer: 413 text_too_large); "
                "U+0000 or an unpaired surrogate: 422 invalid_text",
)]


class SourceIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: Id
    id: Id
    message_id: Id | None = None


Tag = Annotated[StrictStr, Field(min_length=1, max_length=64, json_schema_extra={"pattern": r"^[^\x00-\x1f\x7f]+$"})]
Tags = Annotated[list[Tag], Field(max_length=16, description="up to 16 tags of 1 to 64 characters; stored sealed like "
                                                               "the text; as a filter a memory matches when it has all")]


class RememberIn(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra=extra(examples.REMEMBER_IN))
    text: Text
    tags: Tags = Field(default_factory=list)
    explicit: StrictBool = True
    source: SourceIn
    occurred_at: Instant | None = None
    visibility: Literal["general", "restricted"] = "general"
    team: Id | None = None
    valid_from: Instant | None = None
    valid_to: Instant | None = None


class ConfirmIn(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra=extra(examples.CONFIRM_IN))
    text: Text | None = None
    acknowledge_sensitive: StrictBool = False


class CorrectIn(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra=extra(examples.CORRECT_IN))
    text: Text
    valid_from: Instant | None = None
    valid_to: Instant | None = None
    reason: Text | None = None
    source: SourceIn | None = None  # where the correction was said; by default kind "correction", id the actor
    acknowledge_sensitive: StrictBool = False


class RecallIn(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra=extra(examples.RECALL_IN))
    query: Text  # required: a body without it is a mistake, answered 422 naming it (API.md)
    as_of: Instant | None = None
    max_bytes: Annotated[int, Field(strict=True, ge=0, le=1_000_000)] = 17_500
    limit: Annotated[int, Field(strict=True, ge=1, le=200)] = 20
    tags: Tags = Field(default_factory=list)


class TeamIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    members: list[Id] = Field(default_factory=list, max_length=100_000)


class DirectorySourceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    team: Id
    members: list[Id] = Field(default_factory=list, max_length=100_000)


class BotIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    teams: list[Id] = Field(default_factory=list)
    sources: list[Id] = Field(default_factory=list)


class DirectoryIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=extra(examples.DIRECTORY_IN))
    teams: dict[Id, TeamIn] = Field(default_factory=dict)
    sources: dict[Id, DirectorySourceIn] = Field(default_factory=dict)
    bots: dict[Id, BotIn] = Field(default_factory=dict)


class PersonSettingsIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=extra(examples.SETTINGS_IN))
    learning_paused: StrictBool
    use_paused: StrictBool


class ReceiptIn(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra=extra(examples.RECEIPT_IN))
    receipt_id: Id
    author: Literal["user", "assistant", "system", "tool"]
    text: Text
    kind: Literal["message", "authorization_request", "input_request"] = "message"
    occurred_at: Instant | None = None
    source: SourceIn
    visibility: Literal["general", "restricted"] = "general"
    team: Id | None = None


class ReceiptBatchIn(BaseModel):
    """A whole conversation: every message is checked, then the new ones are stored together."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=extra(examples.RECEIPT_BATCH_IN))
    messages: list[ReceiptIn] = Field(min_length=1, max_length=100)


class ForgetManyIn(BaseModel):
    """Exactly one of `ids` and `source_id`."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=extra(examples.FORGET_MANY_IN))
    ids: list[Id] | None = Field(default=None, min_length=1, max_length=100,
                                 description="1 to 100 memory ids; all or nothing")
    source_id: Id | None = Field(default=None, description="every memory of the caller from this source")

    @model_validator(mode="after")
    def _exactly_one(self) -> ForgetManyIn:
        if (self.ids is None) == (self.source_id is None):
            raise ValueError("give either ids or source_id")
        return self
