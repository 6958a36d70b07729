"""What a route gets besides its input: the caller, from the bearer token, and the services, from the
composition root the app keeps on `app.state`.

This is the only module of the HTTP API that knows the composition root's attributes: one function
per service below. Routes name what they need with the `Annotated` aliases.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Protocol

from fastapi import Depends, FastAPI, Request, Security

from engram.adapters.availability import Availability
from engram.domain.access import Access
from engram.domain.bot_keys import parse_key
from engram.domain.scope import Caller
from engram.service.bot_keys import BotKeyService
from engram.service.credentials import CredentialsService
from engram.service.forgetting import ForgettingService
from engram.service.governance import GovernanceService
from engram.service.insights import InsightService
from engram.service.learning import LearningService
from engram.service.ledger import Ledger
from engram.service.memories import MemoryService
from engram.service.operations import Operations as OperationsService
from engram.service.recall import RecallService
from engram.service.settings import Settings

from .identity import caller_from_token
from .limits import ADMITTED, Admission, RequestRates, Turns
from .metrics import Metrics
from .reference import BEARER


class CompositionRoot(Protocol):
    """What the HTTP API reads of the composition root (`bootstrap.Engram`, which builds it): its services
    and its settings. Typed here, not imported: the entry layer points one way (cli -> bootstrap ->
    http, web, mcp -> these dependencies)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def ledger(self) -> Ledger: ...
    @property
    def memories(self) -> MemoryService: ...
    @property
    def recall(self) -> RecallService: ...
    @property
    def governance(self) -> GovernanceService: ...
    @property
    def credentials(self) -> CredentialsService: ...
    @property
    def bot_keys(self) -> BotKeyService: ...
    @property
    def learning(self) -> LearningService: ...
    @property
    def operations(self) -> OperationsService: ...
    @property
    def forgetting(self) -> ForgettingService | None: ...
    @property
    def insights(self) -> InsightService | None: ...


def install(app: FastAPI, root: CompositionRoot, token_secret: str) -> None:
    """Keep the composition root, the token secret and this process's request rates where the
    dependencies below find them."""
    app.state.composition_root = root
    app.state.token_secret = token_secret
    app.state.request_rates = rates = RequestRates(root.settings.rate_person, root.settings.rate_company)
    deployment = root.settings
    app.add_middleware(Admission, rates=rates, refusal_delay=deployment.rate_refusal_delay,
                       turns=Turns(deployment.person_in_flight) if deployment.person_in_flight else None,
                       verify=lambda token: verified(token_secret, token, deployment))


# -- the services: the composition root's attributes are read here and nowhere else in the HTTP API --


def ledger_of(root: CompositionRoot) -> Ledger:
    return root.ledger


def operations_of(root: CompositionRoot) -> OperationsService:
    return root.operations


def _root(request: Request) -> CompositionRoot:
    return request.app.state.composition_root


# async: a dependency that only reads an attribute needs no worker thread (readiness answers without one)
async def memory_service(request: Request) -> MemoryService:
    return _root(request).memories


async def recall_service(request: Request) -> RecallService:
    return _root(request).recall


async def insight_service(request: Request) -> InsightService:
    insights = _root(request).insights
    assert insights is not None, "Engram.open always sets the insight service"
    return insights


async def ledger(request: Request) -> Ledger:
    return ledger_of(_root(request))


async def forgetting_service(request: Request) -> ForgettingService:
    forgetting = _root(request).forgetting
    assert forgetting is not None  # `Engram.open` always builds it
    return forgetting


async def governance_service(request: Request) -> GovernanceService:
    return _root(request).governance


async def credentials_service(request: Request) -> CredentialsService:
    return _root(request).credentials


async def bot_key_service(request: Request) -> BotKeyService:
    return _root(request).bot_keys


async def learning_service(request: Request) -> LearningService:
    return _root(request).learning


async def operations_service(request: Request) -> OperationsService:
    return operations_of(_root(request))


async def app_metrics(request: Request) -> Metrics:
    return request.app.state.metrics  # observability.install


async def database_availability(request: Request) -> Availability:
    return _root(request).operations.availability


async def deployment_settings(request: Request) -> Settings:
    return _root(request).settings


Memories = Annotated[MemoryService, Depends(memory_service)]
Recall = Annotated[RecallService, Depends(recall_service)]
Insights = Annotated[InsightService, Depends(insight_service)]
Writes = Annotated[Ledger, Depends(ledger)]
Forgetting = Annotated[ForgettingService, Depends(forgetting_service)]
Governance = Annotated[GovernanceService, Depends(governance_service)]
Credentials = Annotated[CredentialsService, Depends(credentials_service)]
BotKeys = Annotated[BotKeyService, Depends(bot_key_service)]
Learning = Annotated[LearningService, Depends(learning_service)]
Operations = Annotated[OperationsService, Depends(operations_service)]
DatabaseAvailability = Annotated[Availability, Depends(database_availability)]
Deployment = Annotated[Settings, Depends(deployment_settings)]
AppMetrics = Annotated[Metrics, Depends(app_metrics)]


# -- the caller ------------------------------------------------------------------------------------


def token_secret(request: Request) -> str:
    return request.app.state.token_secret


PERSON_HEADER = "x-engram-person"  # with a bot key: the person the bot acts for


def bearer_token(request: Request) -> str | None:
    """The token of an `Authorization: Bearer` header; None without one."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def verified(secret: str, token: str | None, deployment: Settings) -> Caller:
    """A person's token checked against this deployment's secret, issuers and longest lifetime."""
    return caller_from_token(secret, token, max_lifetime=timedelta(days=deployment.max_token_days),
                             issuers=deployment.token_issuers)


def caller_of(request: Request, token: str | None, deployment: Settings, *, counted: bool = True) -> Caller:
    """The one check of a token, wherever it came from (the header here, a web page's session cookie),
    and of its person's and company's request rates (429 past them). A bearer token `Admission` checked
    and counted ahead of routing is not checked or counted again; `counted=False`: a second token of
    the same request (a page's session beside its sign-in link) is checked, not counted."""
    admitted = request.scope.get("state", {}).get(ADMITTED)
    if admitted is not None and token == bearer_token(request):
        return admitted
    if token is not None and parse_key(token) is not None:  # a bot key, for the person the request names
        caller = _root(request).bot_keys.caller(token, request.headers.get(PERSON_HEADER))
    else:
        caller = verified(token_secret(request), token, deployment)
    if counted:
        request.app.state.request_rates.admit(caller)
    return caller


# The caller's dependencies are async: they only check a token and a setting (no I/O), and a sync
# dependency costs each request a hop to the worker threads and back.
async def any_caller(request: Request, _scheme: Annotated[Any, Security(BEARER)], deployment: Deployment) -> Caller:
    """Whoever the token names, in every rollout mode; 401 without a valid token."""
    return caller_of(request, bearer_token(request), deployment)


Anyone = Annotated[Caller, Depends(any_caller)]  # recall and admin work in every rollout mode


def require_admitted(who: Caller, writes: Ledger) -> Caller:
    """The caller, refused while the company's rollout mode is off (a setting: no database read)."""
    writes.admit(who)
    return who


def require_admin(who: Caller) -> Caller:
    Access(who).require_admin()
    return who


async def admitted_caller(who: Anyone, writes: Writes) -> Caller:
    return require_admitted(who, writes)


async def admin_caller(who: Anyone) -> Caller:
    return require_admin(who)


Who = Annotated[Caller, Depends(admitted_caller)]
Admin = Annotated[Caller, Depends(admin_caller)]


async def reviewer_caller(who: Who) -> Caller:
    """The person, reviewing: a bot is refused (403 `person_only`) before the body is read."""
    Access(who).require_reviewer()
    return who


Reviewer = Annotated[Caller, Depends(reviewer_caller)]
