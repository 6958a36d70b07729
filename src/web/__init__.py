"""The web pages, rendered on the server: the person's page `/memory` and the admin page `/admin`.
Pages call the services the JSON routes call, through the API's dependencies; they make no decision
of their own about who sees what (ADR 0031).
"""

from fastapi import FastAPI

from . import admin, memory, pages, sign_in


def install(app: FastAPI) -> None:
    """Mount the pages, sign-in and the pages' own assets (`/web/assets/...`) on the app."""
    app.add_api_route("/web/assets/{name}", pages.asset, methods=["GET"], include_in_schema=False)
    app.include_router(sign_in.router)
    app.include_router(memory.router)
    app.include_router(admin.router)
