"""Path parameters: an id in the path has the bounds of an id in a body (contract.requests.Id)."""

from typing import Annotated

from fastapi import Path
from pydantic import AfterValidator


def _not_a_dot_segment(value: str) -> str:
    """`.` and `..` are not ids: a client that builds a URL from one would reach another route."""
    if value in (".", ".."):
        raise ValueError("an id cannot be . or ..")
    return value


PathId = Annotated[str, Path(max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$"), AfterValidator(_not_a_dot_segment)]
