"""Who sees what: the company directory (admins), source revocation, the person's own controls, and
their credentials (sign out everywhere, suspend and resume)."""

from typing import Any

from fastapi import APIRouter

from engram.contract.admin import DirectoryOut, PersonCredentialsOut
from engram.contract.requests import DirectoryIn, PersonSettingsIn
from engram.contract.responses import ForgetAccepted, PersonSettingsOut, Revocation

from ..dependencies import Admin, Credentials, Forgetting, Governance, Who
from ..middleware import JsonRoute
from ..paths import PathId
from ..reference import STORED_NOT_VISIBLE, answers

router = APIRouter(route_class=JsonRoute, tags=["governance"])


@router.get("/v1/admin/directory", summary="Read the company directory",
            response_model=DirectoryOut, responses=answers(None, 403))
def get_directory(who: Admin, governance: Governance) -> Any:
    """Teams and their members, sources (a channel, a project) with their team and members, and the
    bots allowed to act, with the teams and sources each may read. Admins only.
    """
    return governance.get_directory(who)


@router.put("/v1/admin/directory", summary="Replace the company directory", response_model=DirectoryOut,
            responses=answers({202: (DirectoryOut, STORED_NOT_VISIBLE)}, 403))
def put_directory(who: Admin, governance: Governance, body: DirectoryIn) -> Any:
    """Replaces the whole directory; answers the stored document. Restricted memories are visible to the
    members of their team; a bot that is not listed here cannot act (403 `bot_not_registered`). Over the
    size limit: 413 `directory_too_large`.
    """
    return governance.put_directory(who, body.model_dump())


@router.post("/v1/admin/people/{person}/forget", summary="Forget a person's account",
             status_code=202, response_model=ForgetAccepted,
             responses=answers(None, 403), tags=["forgetting"])
def forget_person(person: PathId, who: Admin, forgetting: Forgetting) -> Any:
    """Everything the person holds in the admin's company, as `POST /v1/me/forget` (ADR 0015)."""
    return forgetting.forget_person(who, person)


@router.post("/v1/sources/{source_id}/revoke", summary="Revoke a source", status_code=202, response_model=Revocation,
             responses=answers(None, 403))
def revoke_source(source_id: PathId, who: Who, governance: Governance) -> Any:
    """Memories from this source stop being used and learning from it stops: the caller's own
    (`scope: person`), or everyone's in the company when an admin asks (`scope: company`).
    """
    return governance.revoke_source(who, source_id)


@router.get("/v1/settings", summary="Read the person's controls", response_model=PersonSettingsOut, responses=answers(None, 404))
def get_settings(who: Who, governance: Governance) -> Any:
    """Whether learning from the person's messages and the use of their memories are paused."""
    return governance.get_settings(who)


@router.put("/v1/settings", summary="Pause or resume learning and use", response_model=PersonSettingsOut,
            responses=answers({202: (PersonSettingsOut, STORED_NOT_VISIBLE)}, 403))
def put_settings(body: PersonSettingsIn, who: Who, governance: Governance) -> Any:
    """`learning_paused` stops new candidates from their messages; `use_paused` makes recall answer
    nothing about them (with `paused: true`) until resumed. Nothing is deleted.
    """
    return governance.put_settings(who, learning_paused=body.learning_paused, use_paused=body.use_paused)


# -- credentials (ADR 0057) ------------------------------------------------------------------------


@router.post("/v1/me/sign-out-everywhere", summary="Sign the person out everywhere",
             response_model=PersonCredentialsOut, responses=answers(None, 403), tags=["identity"])
def sign_out_everywhere(who: Who, credentials: Credentials) -> Any:
    """Every token of the caller's person issued at or before now (whole seconds), this one included,
    answers 401 `token_revoked` from now on, in every process; tokens issued later work. A bot cannot
    sign its person out (403).
    """
    return credentials.sign_out_everywhere(who)


@router.post("/v1/admin/people/{person}/sign-out-everywhere", summary="Sign a person out everywhere",
             response_model=PersonCredentialsOut, responses=answers(None, 403), tags=["identity"])
def sign_out_person(person: PathId, who: Admin, credentials: Credentials) -> Any:
    """As `POST /v1/me/sign-out-everywhere`, for a person of the admin's company."""
    return credentials.sign_out_person(who, person)


@router.post("/v1/admin/people/{person}/suspend", summary="Suspend a person",
             response_model=PersonCredentialsOut, responses=answers(None, 403), tags=["identity"])
def suspend_person(person: PathId, who: Admin, credentials: Credentials) -> Any:
    """Every request by the person's tokens, and by bots acting for them, answers 403 `person_suspended`
    until resumed. Their memories stay. `{person}` is any person id of the admin's company, seen before
    or not; an admin cannot suspend themself.
    """
    return credentials.suspend(who, person)


@router.post("/v1/admin/people/{person}/resume", summary="Resume a suspended person",
             response_model=PersonCredentialsOut, responses=answers(None, 403), tags=["identity"])
def resume_person(person: PathId, who: Admin, credentials: Credentials) -> Any:
    """The person's tokens (those not signed out) and their bots work again."""
    return credentials.resume(who, person)
