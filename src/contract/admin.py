"""What admins and operators read: the company's status and budget, its directory, and health.

The same rules as `responses`: each model lists its fields in the order the service builds the
document, and a field the service sometimes leaves out has a default and stays out when left out.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from . import examples
from .examples import extra
from .responses import NOT_VISIBLE, Timestamp


class TeamOut(BaseModel):
    members: list[str]


class DirectorySourceOut(BaseModel):
    team: str
    members: list[str]


class BotOut(BaseModel):
    teams: list[str]
    sources: list[str]


class DirectoryOut(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.DIRECTORY))

    teams: dict[str, TeamOut]
    sources: dict[str, DirectorySourceOut]
    bots: dict[str, BotOut]
    visible: bool | None = Field(default=None, description=NOT_VISIBLE)


class Dependencies(BaseModel):
    database: str
    kafka: str
    llm: str
    hindsight: str


class Backlogs(BaseModel):
    inbox: dict[str, int] = Field(description="the company's receipts by state")
    projector_lag: int
    hindsight_sync: dict[str, int] | None = Field(description="by state; null without Hindsight")
    purge: dict[str, int] = Field(description="forgets_pending: the company's forgets with a copy not yet purged "
                                  "(backups ageing out aside); tombstones_unpublished: committed, not yet in the "
                                  "journal (all companies)")
    insights: dict[str, int] | None = Field(default=None, description="people_to_propose: people whose confirmed "
                                            "memories changed since the proposers last ran; invalidations_to_record: "
                                            "insights already out of use whose Invalidated event (and, after a "
                                            "forget, key destruction) is not yet stored")


class BudgetToday(BaseModel):
    tokens: int
    calls: int
    failed_calls: int = Field(default=0, description="model calls that failed today (charged only the usage the "
                                                      "provider reported, nothing when it reported none)")
    token_limit: int
    call_limit: int


class BudgetDay(BaseModel):
    day: str = Field(description="a UTC date, YYYY-MM-DD")
    tokens: int
    calls: int
    failed_calls: int


class AdminStatus(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.ADMIN_STATUS))

    company: str
    mode: str = Field(description="the company's rollout mode: off, shadow or enabled")
    dependencies: Dependencies
    quarantined_events: dict[str, int] = Field(description="per projection: events set aside")
    backlogs: Backlogs
    budget_today: BudgetToday
    budget_days: list[BudgetDay] = Field(description="the last 14 days' use, oldest first, today last")


class PersonCredentialsOut(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.PERSON_CREDENTIALS))

    person: str
    signed_out_before: int | None = Field(description="seconds since the epoch: the person's tokens issued at or "
                                          "before it answer 401 token_revoked; null if never signed out")
    suspended: bool = Field(description="true: every request by the person's tokens, and by bots acting for "
                            "them, answers 403 person_suspended")


class BotKeyIssued(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.BOT_KEY))

    key_id: str
    key: str = Field(description="shown only now: Engram keeps a digest of it, never the key")
    bot: str


class BotKeyOut(BaseModel):
    key_id: str
    revoked: bool
    issued_at: Timestamp


class BotKeyList(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.BOT_KEYS))

    items: list[BotKeyOut]


class BotKeyRevoked(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.BOT_KEY_REVOKED))

    key_id: str
    bot: str
    revoked: bool


class Health(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.HEALTH))

    status: str = Field(description="ok (the process runs) or ready (the database answers)")
