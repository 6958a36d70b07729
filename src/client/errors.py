"""What a refused request raises: the service's problem response as an exception."""

from __future__ import annotations

from typing import Any

import httpx


class EngramError(Exception):
    """A response that is not a success: `status` and `code` (as in application/problem+json), the
    problem's `detail` and `title`, field `errors` for a validation error, and the request's id.

    `code` is the one a program acts on (`not_found`, `validation_error`, `secret_refused`, ...). An
    answer without a problem body (a proxy's error page) gets `http_<status>` as its code.
    """

    def __init__(self, status: int, code: str, detail: str, *, title: str = "", request_id: str | None = None,
                 errors: list[dict[str, Any]] | None = None, retry_after: float | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.title = title
        self.request_id = request_id
        self.errors = errors or []
        self.retry_after = retry_after

    @classmethod
    def of(cls, response: httpx.Response, request_id: str | None, retry_after: float | None) -> EngramError:
        """The problem a response carries; never the body of one that is not a problem (it could be anything)."""
        body: Any = None
        if "json" in response.headers.get("content-type", ""):
            try:
                body = response.json()
            except ValueError:
                body = None
        request_id = response.headers.get("x-request-id") or request_id
        if isinstance(body, dict) and isinstance(body.get("code"), str):
            errors = body.get("errors")
            return cls(response.status_code, body["code"], str(body.get("detail", "")), title=str(body.get("title", "")),
                       request_id=request_id, errors=errors if isinstance(errors, list) else None,
                       retry_after=retry_after)
        return cls(response.status_code, f"http_{response.status_code}", response.reason_phrase,
                   title=response.reason_phrase, request_id=request_id, retry_after=retry_after)
