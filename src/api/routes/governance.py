"""Who sees what: the company directory (admins), source revocation, and the person's own controls."""

from typing import Any

from fastapi import APIRouter

from ..dependencies import Admin, Forgetting, Governance, Who
from ..middleware import JsonRoute
from ..models import DirectoryOut, ForgetAccepted, PersonSettingsOut, Revocation
from ..reference import STORED_NOT_VISIBLE, answers
from ..schemas import DirectoryIn, PathId, PersonSettingsIn

router = APIRouter(route_class=JsonRoute, tags=["governance"])


@router.get("/v1/admin/directory", response_model=DirectoryOut, responses=answers(None, 403))
def get_directory(who: Admin, governance: Governance) -> Any:
    return governance.get_directory(who)


@router.put("/v1/admin/directory", response_model=DirectoryOut,
            responses=answers({202: (DirectoryOut, STORED_NOT_VISIBLE)}, 403))
def put_directory(who: Admin, governance: Governance, body: DirectoryIn) -> Any:
    return governance.put_directory(who, body.model_dump())


@router.post("/v1/admin/people/{person}/forget", status_code=202, response_model=ForgetAccepted,
             responses=answers(None, 403), tags=["forgetting"])
def forget_person(person: PathId, who: Admin, forgetting: Forgetting) -> Any:
    """Everything the person holds in the admin's company, as `POST /v1/me/forget` (ADR 0015)."""
    return forgetting.forget_person(who, person)


@router.post("/v1/sources/{source_id}/revoke", status_code=202, response_model=Revocation,
             responses=answers(None, 403))
def revoke_source(source_id: PathId, who: Who, governance: Governance) -> Any:
    return governance.revoke_source(who, source_id)


@router.get("/v1/settings", response_model=PersonSettingsOut, responses=answers(None, 404))
def get_settings(who: Who, governance: Governance) -> Any:
    return governance.get_settings(who)


@router.put("/v1/settings", response_model=PersonSettingsOut,
            responses=answers({202: (PersonSettingsOut, STORED_NOT_VISIBLE)}, 403))
def put_settings(body: PersonSettingsIn, who: Who, governance: Governance) -> Any:
    return governance.put_settings(who, learning_paused=body.learning_paused, use_paused=body.use_paused)
