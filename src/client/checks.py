"""Arguments checked against each call's annotations before anything is sent: `remember(source="chat")`
raises a `TypeError` that names the argument and shows a valid one, instead of failing inside the client
or reaching the service as a 422."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ConfigDict, ValidationError, validate_call

from engram.contract.examples import ARGUMENTS

F = TypeVar("F", bound=Callable[..., Any])

_STRICT = ConfigDict(strict=True, arbitrary_types_allowed=True)


def _explain(call: Callable[..., Any], error: ValidationError) -> str:
    """One sentence an argument: its name, what was wrong (the type given, never its value), an example."""
    positional = list(inspect.signature(call).parameters)
    found: dict[str, tuple[str, str]] = {}
    for e in error.errors(include_url=False):
        loc = [str(p) for p in e.get("loc", ())]
        argument = loc[0] if loc else "?"
        if argument.isdigit() and int(argument) < len(positional):
            argument = positional[int(argument)]
        inner = [p for p in loc[1:] if p.isdigit() or p.isidentifier()]  # not a union member's tag
        where = argument + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in inner)
        if e.get("type") == "missing_keyword_only_argument" or e.get("type") == "missing_argument":
            wrong = "is required"
        else:
            wrong = f"cannot be {type(e.get('input')).__name__}" + ("" if argument in found else f" ({e.get('msg', '')})")
        found.setdefault(argument, (where, wrong))
    sentences = []
    for argument, (where, wrong) in found.items():
        sentence = f"{call.__name__}(): {where} {wrong}"
        if argument in ARGUMENTS:
            sentence += f"; for example {argument}={json.dumps(ARGUMENTS[argument], ensure_ascii=False)}"
        sentences.append(sentence)
    return "; ".join(sentences)


def checked(call: F) -> F:
    """`call` with its arguments checked strictly against its annotations (no conversion)."""
    validated = validate_call(config=_STRICT)(call)

    @functools.wraps(call)
    def checking(*args: Any, **kwargs: Any) -> Any:
        try:
            return validated(*args, **kwargs)
        except ValidationError as e:
            raise TypeError(_explain(call, e)) from None

    return checking  # type: ignore[return-value]
