"""Path parameters: an id in the path has the bounds of an id in a body (contract.requests.Id)."""

from typing import Annotated

from fastapi import Path

PathId = Annotated[str, Path(max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
