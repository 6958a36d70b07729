"""Log lines: one JSON object a line (or text), the request id when there is one, exceptions as
types and frames without their messages, warnings without theirs, payload-writing libraries held at info."""

from __future__ import annotations

import io
import json
import logging
import warnings

from engram.adapters import logs

PERSONAL = "the personal text"


def lines_of(stream: io.StringIO, *loggers: str) -> list[str]:
    """The stream's lines from these loggers: threads left running by other tests in the same process
    (a Kafka client retrying, a background loop) may write to the root handler meanwhile."""
    return [line for line in stream.getvalue().splitlines()
            if any(f'"logger": "{name}"' in line or f" {name}:" in line or f" {name} [" in line for name in loggers)]


def failing() -> None:
    """Raises with personal text in the messages (the frames show source lines: the text is not in them)."""
    try:
        raise ValueError(f"SELECT ... '{PERSONAL}'")
    except ValueError as e:
        raise KeyError(PERSONAL.replace("text", "quote")) from e


def test_json_lines_carry_the_level_and_the_request_id_and_no_exception_message(log_stream: io.StringIO) -> None:
    logs.configure("json", "debug", stream=log_stream)
    log = logging.getLogger("engram.somewhere")
    log.debug("outside a request")
    token = logs.request_id.set("req-1")
    try:
        failing()
    except KeyError:
        log.exception("the call failed")
    finally:
        logs.request_id.reset(token)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn(f"Expected `str` but got `int` with value `{PERSONAL}`", UserWarning, stacklevel=1)
    first, second, third = [json.loads(line) for line in lines_of(log_stream, "engram.somewhere", "py.warnings")]
    assert first["level"] == "DEBUG" and first["logger"] == "engram.somewhere" and "request_id" not in first
    assert second["level"] == "ERROR" and second["request_id"] == "req-1" and second["message"] == "the call failed"
    assert "builtins.ValueError" in second["exc_info"] and "builtins.KeyError" in second["exc_info"]
    assert "in failing" in second["exc_info"]  # the frames stay
    assert third["logger"] == "py.warnings" and "UserWarning" in third["message"]
    assert "personal text" not in log_stream.getvalue() and "personal quote" not in log_stream.getvalue()


def test_text_lines_and_their_request_id(log_stream: io.StringIO) -> None:
    logs.configure("text", "info", stream=log_stream)
    token = logs.request_id.set("req-2")
    logging.getLogger("engram.x").info("hello")
    logs.request_id.reset(token)
    logging.getLogger("engram.x").debug("not at info")
    logging.getLogger("engram.x").warning("outside")
    first, second = lines_of(log_stream, "engram.x")
    assert first.endswith(" INFO engram.x [req-2]: hello") and first[:4].isdigit() and "+00:00" in first
    assert second.endswith(" WARNING engram.x: outside")


def test_other_libraries_write_at_info_at_most_and_httpx_at_warning(log_stream: io.StringIO) -> None:
    logs.configure("json", "debug", stream=log_stream)
    logging.getLogger("mcp.server").debug("Received message: the personal text")
    logging.getLogger("sse_starlette.sse").debug("chunk: the personal text")
    logging.getLogger("httpx").info("HTTP Request: GET /v1/memories?q=the+personal+text")
    logging.getLogger("httpx2").info("HTTP Request: POST /v1/default/banks/b/memories/recall")  # Hindsight's client
    logging.getLogger("uvicorn.error").info("Uvicorn running", extra={"color_message": "\x1b[1mUvicorn\x1b[0m"})
    [line] = [json.loads(line) for line in lines_of(log_stream, "mcp.server", "sse_starlette.sse", "httpx", "httpx2",
                                                          "uvicorn.error")]
    assert line["message"] == "Uvicorn running" and "color_message" not in line
    logs.configure("json", "warning", stream=log_stream)
    logging.getLogger("engram.x").info("quiet")
    assert "quiet" not in log_stream.getvalue()
