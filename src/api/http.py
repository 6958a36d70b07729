"""The HTTP API. Routes stay thin: parse, call the service, return."""


from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi import Path as PathParam
from fastapi.responses import PlainTextResponse
from starlette.concurrency import run_in_threadpool

from engram.domain.errors import Forbidden
from engram.domain.scope import Caller
from engram.service.engram import MemoryService
from engram.service.governance import GovernanceService

from . import consistency, problems, reference
from .bootstrap import Engram
from .exports import to_markdown
from .identity import caller_from_token
from .middleware import BodyLimit, JsonRoute
from .models import (
    AdminStatus,
    CandidateList,
    CandidateOut,
    DirectoryOut,
    ExportOut,
    ForgetAccepted,
    ForgetStatus,
    Health,
    History,
    MemoryList,
    MemoryOut,
    PersonSettingsOut,
    RecallOut,
    ReceiptState,
    Rejected,
    Revocation,
    answer,
)
from .reference import STORED_NOT_VISIBLE, answers
from .schemas import ConfirmIn, CorrectIn, DirectoryIn, PersonSettingsIn, RecallIn, ReceiptIn, RememberIn

PathId = Annotated[str, PathParam(max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


def create_app(engram: Engram, token_secret: str) -> FastAPI:
    app = FastAPI(title="Engram", version="1", docs_url=None, redoc_url=None, strict_content_type=False)
    app.router.route_class = JsonRoute
    app.add_middleware(BodyLimit)
    problems.install(app)
    reference.install(app)  # /openapi.json with problems and the bearer scheme; /docs without a CDN
    consistency.install(app, engram.service)  # read-your-writes: 202 + visible: false when stalled
    app.state.engram = engram

    def service() -> MemoryService:
        return engram.service

    max_token_lifetime = timedelta(days=engram.settings.max_token_days)

    def any_caller(request: Request, _scheme: Annotated[Any, Security(reference.BEARER)]) -> Caller:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        return caller_from_token(token_secret, token.strip() if scheme.lower() == "bearer" else None,
                                 max_lifetime=max_token_lifetime)

    def admitted_caller(who: Annotated[Caller, Depends(any_caller)]) -> Caller:
        engram.service.admit(who)
        return who

    Who = Annotated[Caller, Depends(admitted_caller)]
    Anyone = Annotated[Caller, Depends(any_caller)]  # recall and admin work in every rollout mode
    Gov = Annotated[GovernanceService, Depends(lambda: engram.governance)]

    def admin_caller(who: Annotated[Caller, Depends(any_caller)]) -> Caller:
        if not who.is_administrative:
            raise Forbidden("only company admins and operators may do this")
        return who

    Admin = Annotated[Caller, Depends(admin_caller)]
    Svc = Annotated[MemoryService, Depends(service)]

    # Liveness never touches the database (async: not even a worker thread), so an outage can't fail it.
    @app.get("/healthz", response_model=Health)
    async def healthz() -> dict[str, Any]:
        return {"status": "ok"}

    @app.get("/livez", response_model=Health)
    async def livez() -> dict[str, Any]:
        return {"status": "ok"}

    @app.get("/readyz", response_model=Health, responses=answers(None, 503))
    async def readyz() -> Any:
        availability = engram.availability
        if availability.up and await run_in_threadpool(availability.ready):
            return {"status": "ready"}
        return problems.unavailable()

    @app.post("/v1/memories", status_code=201, response_model=MemoryOut, response_description="Remembered",
              responses=answers({200: (MemoryOut, "Already remembered from this source: the stored memory"),
                                 202: (CandidateOut, "Sensitive: a candidate awaiting review (or stored, not yet visible)")},
                                403, 409))
    def remember(body: RememberIn, who: Who, svc: Svc) -> Any:
        memory = svc.remember(
            who, text=body.text, source=body.source.model_dump(), occurred_at=body.occurred_at,
            visibility=body.visibility, team=body.team, valid_from=body.valid_from, valid_to=body.valid_to,
        )
        if memory["status"] == "pending_review":  # sensitive: a candidate awaiting the person's review
            return answer(CandidateOut, memory, status_code=202)
        return memory

    @app.get("/v1/memories", response_model=MemoryList, responses=answers(None, 400))
    def list_memories(
        who: Who, svc: Svc,
        q: Annotated[str | None, Query(max_length=1024)] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        cursor: Annotated[str | None, Query(max_length=512)] = None,
        status: Annotated[Literal["confirmed", "forgotten", "all"] | None, Query()] = None,
    ) -> Any:
        return svc.list_memories(who, q=q, limit=limit, cursor=cursor, status=status)

    @app.get("/v1/memories/{memory_id}", response_model=MemoryOut, responses=answers(None, 404))
    def get_memory(memory_id: PathId, who: Who, svc: Svc) -> Any:
        return svc.get(who, memory_id)

    @app.get("/v1/memories/{memory_id}/history", response_model=History, responses=answers(None, 404))
    def history(memory_id: PathId, who: Who, svc: Svc) -> Any:
        return svc.history(who, memory_id)

    @app.post("/v1/memories/{memory_id}/correct", response_model=MemoryOut,
              responses=answers({202: (MemoryOut, STORED_NOT_VISIBLE)}, 403, 404, 409))
    def correct(memory_id: PathId, body: CorrectIn, who: Who, svc: Svc) -> Any:
        return svc.correct(who, memory_id, text=body.text, valid_from=body.valid_from,
                           valid_to=body.valid_to, reason=body.reason, acknowledge_sensitive=body.acknowledge_sensitive)

    @app.post("/v1/memories/{memory_id}/forget", status_code=202, response_model=ForgetAccepted,
              responses=answers(None, 403, 404, 409))
    def forget(memory_id: PathId, who: Who, svc: Svc) -> Any:
        return svc.forget(who, memory_id)

    @app.get("/v1/forgets/{forget_id}", response_model=ForgetStatus, responses=answers(None, 404))
    def forget_status(forget_id: PathId, who: Who, svc: Svc) -> Any:
        return svc.forget_status(who, forget_id)

    @app.get("/v1/candidates", response_model=CandidateList)
    def candidates(who: Who, svc: Svc) -> Any:
        return svc.candidates(who)

    @app.post("/v1/candidates/{memory_id}/confirm", response_model=MemoryOut,
              responses=answers({202: (MemoryOut, STORED_NOT_VISIBLE)}, 403, 404, 409))
    def confirm(memory_id: PathId, who: Who, svc: Svc, body: ConfirmIn | None = None) -> Any:
        body = body or ConfirmIn()
        return svc.confirm(who, memory_id, text=body.text, acknowledge_sensitive=body.acknowledge_sensitive)

    @app.post("/v1/candidates/{memory_id}/reject", response_model=Rejected,
              responses=answers({202: (Rejected, STORED_NOT_VISIBLE)}, 403, 404, 409))
    def reject(memory_id: PathId, who: Who, svc: Svc) -> Any:
        return svc.reject(who, memory_id)

    @app.post("/v1/recall", response_model=RecallOut)
    def recall(body: RecallIn, who: Anyone, svc: Svc) -> Any:
        return svc.recall(who, query=body.query, as_of=body.as_of, max_bytes=body.max_bytes, limit=body.limit)

    @app.get("/v1/export", response_model=ExportOut,
             responses={200: {"content": {"text/markdown": {"schema": {"type": "string"}}}}})
    def export(who: Who, svc: Svc, format: Literal["json", "markdown"] = "json") -> Any:  # noqa: A002
        data = svc.export(who)
        if format == "markdown":
            return PlainTextResponse(to_markdown(data), media_type="text/markdown; charset=utf-8")
        return data

    @app.post("/v1/receipts", status_code=202, response_model=ReceiptState, responses=answers(None, 403))
    def receive(body: ReceiptIn, who: Who) -> Any:
        return engram.learning.receive(
            who, receipt_id=body.receipt_id, author=body.author, kind=body.kind, text=body.text,
            occurred_at=body.occurred_at, source=body.source.model_dump(), visibility=body.visibility, team=body.team,
        )

    @app.get("/v1/receipts/{receipt_id}", response_model=ReceiptState, responses=answers(None, 404))
    def receipt_status(receipt_id: PathId, who: Who) -> Any:
        return engram.learning.status(who, receipt_id)

    @app.get("/v1/admin/status", response_model=AdminStatus, responses=answers(None, 403))
    def admin_status(who: Anyone) -> Any:
        return engram.admin_status(who)

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(engram.metrics(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/admin/directory", response_model=DirectoryOut, responses=answers(None, 403))
    def get_directory(who: Admin, gov: Gov) -> Any:
        return gov.get_directory(who)

    @app.put("/v1/admin/directory", response_model=DirectoryOut,
             responses=answers({202: (DirectoryOut, STORED_NOT_VISIBLE)}, 403))
    def put_directory(who: Admin, gov: Gov, body: DirectoryIn) -> Any:
        return gov.put_directory(who, body.model_dump())

    @app.post("/v1/sources/{source_id}/revoke", status_code=202, response_model=Revocation,
              responses=answers(None, 403))
    def revoke_source(source_id: PathId, who: Who, gov: Gov) -> Any:
        return gov.revoke_source(who, source_id)

    @app.get("/v1/settings", response_model=PersonSettingsOut, responses=answers(None, 404))
    def get_settings(who: Who, gov: Gov) -> Any:
        return gov.get_settings(who)

    @app.put("/v1/settings", response_model=PersonSettingsOut,
             responses=answers({202: (PersonSettingsOut, STORED_NOT_VISIBLE)}, 403))
    def put_settings(body: PersonSettingsIn, who: Who, gov: Gov) -> Any:
        return gov.put_settings(who, learning_paused=body.learning_paused, use_paused=body.use_paused)

    return app
