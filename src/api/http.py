"""The HTTP API: the app, its middleware and error handlers, and the routers of `routes/`.

Routes stay thin (parse, call the service, return its document); what they depend on is in
`dependencies.py`, what they answer in `models.py`.
"""

from fastapi import FastAPI

from engram import web

from . import consistency, dependencies, mcp_http, observability, problems, reference
from .dependencies import CompositionRoot
from .middleware import BodyLimit, JsonRoute, NoSniff
from .observability import ObservedApp
from .routes import ROUTERS


def create_app(root: CompositionRoot, token_secret: str) -> FastAPI:
    # operationId: the route function's name (remember, recall, forget_memory, ...), for generated clients
    app = ObservedApp(title="Engram", version="1", docs_url=None, redoc_url=None, strict_content_type=False,
                      generate_unique_id_function=lambda route: route.name)
    app.router.route_class = JsonRoute
    app.add_middleware(BodyLimit)
    app.add_middleware(NoSniff)  # outermost: its 413s too
    problems.install(app)
    reference.install(app)  # /openapi.json with problems and the bearer scheme; /docs without a CDN
    dependencies.install(app, root, token_secret)
    observability.install(app, dependencies.operations_of(root))  # X-Request-Id, a log line per request, /metrics
    # read-your-writes: 202 + visible: false when stalled
    consistency.install(app, dependencies.ledger_of(root).settler)
    for router in ROUTERS:
        app.include_router(router)
    mcp_http.install(app)  # MCP over streamable HTTP at /mcp, for the bearer token's caller (ADR 0028)
    web.install(app)  # the person's page /memory and the pages' sign-in and assets (ADR 0031)
    return app
