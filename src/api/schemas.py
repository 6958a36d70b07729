"""Request bodies. Strict types: a number where text belongs is a 422, not a coercion."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, StrictBool, StrictStr

from domain.text import is_valid_id

def _printable(value: str) -> str:
    if not is_valid_id(value):
        raise ValueError("must be printable text without control characters")
    return value


Id = Annotated[StrictStr, Field(min_length=1, max_length=200), AfterValidator(_printable)]


class SourceIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: Id
    id: Id
    message_id: Id | None = None


class RememberIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: StrictStr
    explicit: StrictBool = True
    source: SourceIn
    occurred_at: AwareDatetime | None = None
    visibility: Literal["general", "restricted"] = "general"
    team: Id | None = None
    valid_from: AwareDatetime | None = None
    valid_to: AwareDatetime | None = None


class ConfirmIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: StrictStr | None = None
    acknowledge_sensitive: StrictBool = False


class CorrectIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: StrictStr
    valid_from: AwareDatetime | None = None
    valid_to: AwareDatetime | None = None
    reason: StrictStr | None = None
    acknowledge_sensitive: StrictBool = False


class RecallIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    query: StrictStr = ""
    as_of: AwareDatetime | None = None
    max_bytes: Annotated[int, Field(strict=True, ge=0, le=1_000_000)] = 17_500
    limit: Annotated[int, Field(strict=True, ge=1, le=200)] = 20


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
    model_config = ConfigDict(extra="forbid")
    teams: dict[Id, TeamIn] = Field(default_factory=dict)
    sources: dict[Id, DirectorySourceIn] = Field(default_factory=dict)
    bots: dict[Id, BotIn] = Field(default_factory=dict)


class SettingsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    learning_paused: StrictBool
    use_paused: StrictBool


class ReceiptIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    receipt_id: Id
    author: Literal["user", "assistant", "system", "tool"]
    text: StrictStr
    kind: Literal["message", "authorization_request", "input_request"] = "message"
    occurred_at: AwareDatetime | None = None
    source: SourceIn
    visibility: Literal["general", "restricted"] = "general"
    team: Id | None = None
