"""The HTTP API. Routes stay thin: parse, call the service, return."""


import json
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.middleware.base import BaseHTTPMiddleware

from domain.errors import Forbidden
from domain.scope import Caller
from service.engram import MemoryService
from service.governance import GovernanceService

from . import problems
from .bootstrap import Engram
from .exports import to_markdown
from .identity import caller_from_token
from .schemas import ConfirmIn, CorrectIn, DirectoryIn, ReceiptIn, RecallIn, RememberIn, SettingsIn

MAX_BODY_BYTES = 1024 * 1024


class BodyLimit(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: Any) -> Response:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return problems.problem(413, "body_too_large", "Body too large",
                                    f"request bodies are limited to {MAX_BODY_BYTES} bytes")
        return await call_next(request)


PathId = Annotated[str, PathParam(max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


def create_app(engram: Engram, token_secret: str) -> FastAPI:
    app = FastAPI(title="Engram", version="1", docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimit)
    problems.install(app)
    app.state.engram = engram

    def service() -> MemoryService:
        return engram.service

    def any_caller(request: Request) -> Caller:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        return caller_from_token(token_secret, token.strip() if scheme.lower() == "bearer" else None)

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

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        engram.app.recorder.max_notification_id()
        return {"status": "ok"}

    @app.post("/v1/memories", status_code=201)
    def remember(body: RememberIn, who: Who, svc: Svc) -> Any:
        memory = svc.remember(
            who, text=body.text, source=body.source.model_dump(), occurred_at=body.occurred_at,
            visibility=body.visibility, team=body.team, valid_from=body.valid_from, valid_to=body.valid_to,
        )
        if memory["status"] == "pending_review":  # sensitive: a candidate awaiting the person's review
            return JSONResponse(jsonable(memory), status_code=202)
        return memory

    @app.get("/v1/memories")
    def list_memories(
        who: Who, svc: Svc,
        q: Annotated[str | None, Query(max_length=1024)] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        cursor: Annotated[str | None, Query(max_length=512)] = None,
        status: Annotated[Literal["confirmed", "forgotten", "all"] | None, Query()] = None,
    ) -> Any:
        return svc.list_memories(who, q=q, limit=limit, cursor=cursor, status=status)

    @app.get("/v1/memories/{memory_id}")
    def get_memory(memory_id: str, who: Who, svc: Svc) -> Any:
        return svc.get(who, memory_id)

    @app.get("/v1/memories/{memory_id}/history")
    def history(memory_id: str, who: Who, svc: Svc) -> Any:
        return svc.history(who, memory_id)

    @app.post("/v1/memories/{memory_id}/correct")
    def correct(memory_id: str, body: CorrectIn, who: Who, svc: Svc) -> Any:
        return svc.correct(who, memory_id, text=body.text, valid_from=body.valid_from,
                           valid_to=body.valid_to, reason=body.reason, acknowledge_sensitive=body.acknowledge_sensitive)

    @app.post("/v1/memories/{memory_id}/forget", status_code=202)
    def forget(memory_id: str, who: Who, svc: Svc) -> Any:
        return svc.forget(who, memory_id)

    @app.get("/v1/forgets/{forget_id}")
    def forget_status(forget_id: PathId, who: Who, svc: Svc) -> Any:
        return svc.forget_status(who, forget_id)

    @app.get("/v1/candidates")
    def candidates(who: Who, svc: Svc) -> Any:
        return svc.candidates(who)

    @app.post("/v1/candidates/{memory_id}/confirm")
    def confirm(memory_id: str, who: Who, svc: Svc, body: ConfirmIn | None = None) -> Any:
        body = body or ConfirmIn()
        return svc.confirm(who, memory_id, text=body.text, acknowledge_sensitive=body.acknowledge_sensitive)

    @app.post("/v1/candidates/{memory_id}/reject")
    def reject(memory_id: str, who: Who, svc: Svc) -> Any:
        return svc.reject(who, memory_id)

    @app.post("/v1/recall")
    def recall(body: RecallIn, who: Anyone, svc: Svc) -> Response:
        result = svc.recall(who, query=body.query, as_of=body.as_of, max_bytes=body.max_bytes, limit=body.limit)
        # The service answers in plain JSON types; skip the generic encoder on the hot path.
        return Response(json.dumps(result, ensure_ascii=False, separators=(",", ":")), media_type="application/json")

    @app.get("/v1/export")
    def export(who: Who, svc: Svc, format: Literal["json", "markdown"] = "json") -> Any:  # noqa: A002
        data = svc.export(who)
        if format == "markdown":
            return PlainTextResponse(to_markdown(data), media_type="text/markdown; charset=utf-8")
        return JSONResponse(jsonable(data))

    @app.post("/v1/receipts", status_code=202)
    def receive(body: ReceiptIn, who: Who) -> Any:
        return engram.learning.receive(
            who, receipt_id=body.receipt_id, author=body.author, kind=body.kind, text=body.text,
            occurred_at=body.occurred_at, source=body.source.model_dump(), visibility=body.visibility, team=body.team,
        )

    @app.get("/v1/receipts/{receipt_id}")
    def receipt_status(receipt_id: PathId, who: Who) -> Any:
        return engram.learning.status(who, receipt_id)

    @app.get("/v1/admin/status")
    def admin_status(who: Anyone) -> Any:
        return engram.admin_status(who)

    @app.get("/metrics")
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(engram.metrics(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/admin/directory")
    def get_directory(who: Admin, gov: Gov) -> Any:
        return gov.get_directory(who)

    @app.put("/v1/admin/directory")
    def put_directory(who: Admin, gov: Gov, body: DirectoryIn) -> Any:
        return gov.put_directory(who, body.model_dump())

    @app.post("/v1/sources/{source_id}/revoke", status_code=202)
    def revoke_source(source_id: PathId, who: Who, gov: Gov) -> Any:
        return gov.revoke_source(who, source_id)

    @app.get("/v1/settings")
    def get_settings(who: Who, gov: Gov) -> Any:
        return gov.get_settings(who)

    @app.put("/v1/settings")
    def put_settings(body: SettingsIn, who: Who, gov: Gov) -> Any:
        return gov.put_settings(who, learning_paused=body.learning_paused, use_paused=body.use_paused)

    return app


def jsonable(data: Any) -> Any:
    from fastapi.encoders import jsonable_encoder

    return jsonable_encoder(data)
