"""Fuzzing the HTTP API from its own /openapi.json (schemathesis + hypothesis), in-process over ASGI.

Every operation of the document is driven with schema-valid (positive) and schema-invalid (negative)
cases, each sent as a user, a bot registered in the directory, an admin, or without a token; path
parameters sometimes name objects that exist (memories, candidates, forgets, receipts). On top,
explicit strategies send what a schema cannot express: times in year 1 and 9999 and with +-14:00
offsets, sizes at and just past each limit, NUL, unpaired surrogates (as raw JSON escapes and as raw
bytes), right-to-left and combining text, emoji, and huge integers.

No answer may be a 5xx, every 4xx must be application/problem+json with a `code`, and every answer,
to valid, invalid and extreme requests alike, must be one the document declares for its operation
(status, content type, body schema): the reference lists every problem a client can get.

The case counts are set by ENGRAM_FUZZ_EXAMPLES (per operation and mode; default 40) and
ENGRAM_FUZZ_EXTREMES (default 600): about 2,200 cases, about a minute on a 2-core machine. The cases
are the same on every run (derandomized); ENGRAM_FUZZ_RANDOM=1 draws new ones. bench/fuzz.py runs the same
harness with larger counts.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core import NotSet
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.helpers import auth, next_second, remember_body

BOT = "b-fuzz"
DERANDOMIZE = os.environ.get("ENGRAM_FUZZ_RANDOM") != "1"
ROLES = ("user", "bot", "admin", "anonymous")
PATH_IDS = ("memory_id", "forget_id", "receipt_id", "source_id")


def role_headers(role: str, company: str = "acme") -> dict[str, str]:
    if role == "anonymous":
        return {}
    if role == "bot":
        return auth(company=company, user="alice", role="bot", bot=BOT)
    if role == "admin":
        return auth(company=company, user="root", role="admin")
    return auth(company=company, user="alice")


# -- extremes the schema cannot express ----------------------------------------------------------

EXTREME_TIMES = [
    "0001-01-01T00:00:00Z", "0001-01-01T00:00:00+14:00", "0001-01-01T00:00:00-14:00",
    "9999-12-31T23:59:59Z", "9999-12-31T23:59:59-14:00", "9999-12-31T23:59:59.999999+14:00",
    "1899-12-31T23:59:59Z", "1900-01-01T00:00:00Z", "1900-01-01T00:00:00+14:00",
    "2199-12-31T23:59:59Z", "2200-01-01T00:00:00Z", "2200-01-01T00:00:00-14:00",
    "2026-11-02T09:00:00+14:00", "2026-11-02T09:00:00-14:00", "2026-11-02T09:00:00+23:59",
    "2026-11-02T09:00:00+24:00", "2026-11-02T09:00:00", "2026-02-30T00:00:00Z",
    "2026-11-02T24:00:00Z", "2026-11-02T23:59:60Z", "2026-11-02", "1e10", "", "now",
    "+002026-11-02T09:00:00Z", "2026-11-02T09:00:00.1234567891234Z", "2026-W45-1T00:00:00Z",
]
EXTREME_TIME_VALUES: list[Any] = [*EXTREME_TIMES, 0, -1, 2**63, 1e308, True, None, [], {}]

TEXT_LIMIT = 8192
EXTREME_TEXTS = [
    "a" * TEXT_LIMIT, "a" * (TEXT_LIMIT + 1),
    "\U0001F600" * (TEXT_LIMIT // 4), "\U0001F600" * (TEXT_LIMIT // 4) + "a",  # 4-byte UTF-8 at and past
    "\u00e9" * (TEXT_LIMIT // 2), "\u00e9" * (TEXT_LIMIT // 2 + 1),
    "nul \u0000 inside", "\u0000", " ", "", "\ufeffbom first", "\uffff\ufffe noncharacters", "\U0010ffff",
    "\u202eRTL override\u202c", "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627", "\u200f\u200e\u061c",
    "e" + "\u0301" * 4000, "Z\u0351\u0352\u0357\u0358" * 500, "\U0001F468\u200d\U0001F469\u200d\U0001F467" * 300,
    "\U0001F3F3\ufe0f\u200d\U0001F308", "I prefer \u2028 line \u2029 separators", "tab\tnew\nline\rcr",
    "password: hunter2 api_key=sk-" + "x" * 40, "' OR 1=1; --", "%s%n%x", "{{7*7}}", "<script>x</script>",
]
EXTREME_IDS: list[Any] = [
    "a" * 200, "a" * 201, "\u00e9" * 200, "\U0001F600" * 200, "\U0001F600" * 201, "", " ", "x\u0000y", "x\u007fy",
    "\u202eevil", "e\u0301", "../../etc/passwd", "%00", "a/b", "?", "#", 0, 2**64, None, [], {"id": "x"},
]
HUGE_INTEGERS: list[Any] = [0, -1, 1, 200, 201, 1_000_000, 1_000_001, 2**31, 2**63, 2**64, 10**100, -(10**100),
                            9007199254740993, 1.0, 1.5, 1e308, -0.0, True, "20", None]

# raw JSON fragments: what json.dumps cannot produce from Python text
RAW_STRINGS = [
    b'"lone \\ud800 high"', b'"lone \\udfff low"', b'"\\udc00\\ud800 reversed"', b'"\\u0000"',
    b'"ok \\ud83d\\ude00 pair"', b'"raw surrogate \xed\xa0\x80"', b'"overlong \xc0\xaf"', b'"cont \x80\x80"',
    b'"latin1 \xe9"', b'"\xf4\x90\x80\x80 past U+10FFFF"', b'"' + b"\\u0301" * 3000 + b'"',
]
RAW_NUMBERS = [b"1e400", b"-1e400", b"NaN", b"Infinity", b"1" + b"0" * 5000, b"-0", b"0.0000001", b"1E2"]


@dataclass
class Stats:
    cases: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    per_operation: Counter[str] = field(default_factory=Counter)
    other_failures: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def record(self, status: int, shape: str) -> None:
        self.cases += 1
        self.statuses[status] += 1
        if status >= 500:
            self.server_errors.append(f"{status} {shape}")

    def failure(self, kind: str, example: str) -> None:
        """One line per distinct failure, with its first example."""
        if not any(line.startswith(kind + " (e.g.") for line in self.other_failures):
            self.other_failures.append(f"{kind} (e.g. {example})")

    def histogram(self) -> str:
        return ", ".join(f"{code}: {n}" for code, n in sorted(self.statuses.items()))


def _shape(method: str, path: str, body: Any) -> str:
    """A request's shape for a report: field names and value kinds, never long values."""
    def kind(v: Any) -> Any:
        if isinstance(v, dict):
            return {k[:40]: kind(x) for k, x in list(v.items())[:12]}
        if isinstance(v, list):
            return [kind(x) for x in v[:3]] + (["..."] if len(v) > 3 else [])
        if isinstance(v, str):
            return v if len(v) <= 40 else f"<str {len(v)} chars>"
        if isinstance(v, bytes):
            return f"<bytes {len(v)}>"
        return v
    return f"{method} {path} {json.dumps(kind(body), ensure_ascii=True, default=str)[:300]}"


class AsServed:
    """In front of the app as a server is: an exception the app raises (after Starlette answered 500)
    is counted and logged by type, not raised into the client, so one bug does not end a run."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.raised: Counter[str] = Counter()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        started = False

        async def tracking(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception as exc:  # noqa: BLE001
            self.raised[type(exc).__name__] += 1
            if not started and scope["type"] == "http":
                await send({"type": "http.response.start", "status": 500,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": type(exc).__name__.encode()})


class Fuzzer:
    """Drives one app in-process; counts every case."""

    def __init__(self, app: Any, *, conformance: bool = True) -> None:
        app = self.served = AsServed(app)
        self.app = app
        self.stats = Stats()
        self.conformance = conformance
        self.session = asgi.get_client(app).__enter__()
        self.schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        self.operations = [r.ok() for r in self.schema.get_all_operations()]
        self.known: dict[str, list[str]] = {name: [] for name in PATH_IDS}
        self.signing_out = False  # the sign-out operations' turn: tokens before it are revoked
        document = self.session.get("/openapi.json").json()
        # (method, path pattern, the statuses the document declares) for the raw requests' answers
        self.declared = [(method.upper(), re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$"),
                          set(op["responses"])) for path, ops in document["paths"].items() for method, op in ops.items()]

    def close(self) -> None:
        self.session.__exit__(None, None, None)

    def reset_directory(self) -> None:
        """The bot registered again (fuzzed directories replace it), so its writes get past 403; once
        people were signed out everywhere, with tokens of a later second than the last sign-out."""
        if self.signing_out:
            next_second()
        r = self.session.request("PUT", "/v1/admin/directory", headers=role_headers("admin"), json={
            "teams": {"t-risk": {"members": ["alice", "bob"]}},
            "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}},
            "bots": {BOT: {"teams": ["t-risk"], "sources": ["s-jira"]}}})
        assert r.status_code == 200, r.text

    # the state the path parameters can name
    def seed(self) -> None:
        def send(method: str, path: str, role: str = "user", body: Any = None) -> Any:
            r = self.session.request(method, path, json=body, headers=role_headers(role))
            assert r.status_code < 300, (method, path, r.status_code, r.text)
            return r.json()

        self.reset_directory()
        for i in range(4):
            memory = send("POST", "/v1/memories", "user", remember_body(f"I prefer fuzzed tea number {i}"))
            self.known["memory_id"].append(memory["id"])
        restricted = send("POST", "/v1/memories", "user", remember_body(
            "the risk review is on Thursdays", visibility="restricted", team="t-risk",
            source={"kind": "jira", "id": "s-jira", "message_id": "m-1"}))
        self.known["memory_id"].append(restricted["id"])
        candidate = send("POST", "/v1/memories", "user", remember_body("my diagnosis is type 2 diabetes"))
        self.known["memory_id"].append(candidate["id"])
        forgotten = send("POST", "/v1/memories", "user", remember_body("I used to like coffee"))
        self.known["forget_id"].append(send("POST", f"/v1/memories/{forgotten['id']}/forget")["forget_id"])
        self.known["memory_id"].append(forgotten["id"])
        send("POST", "/v1/receipts", "user", {"receipt_id": "r-fuzz", "author": "user", "text": "I like tea.",
                                               "source": {"kind": "chat", "id": "chat-fuzz", "message_id": "m-1"}})
        self.known["receipt_id"].append("r-fuzz")
        self.known["source_id"] += ["chat-42", "s-jira", "chat-fuzz"]

    # schema-driven cases
    def run_operation(self, operation: Any, mode: GenerationMode, examples: int) -> None:
        stats, known = self.stats, self.known
        checks = [not_a_server_error]
        if self.conformance:  # invalid requests too: each problem they get is one the document declares
            checks += [status_code_conformance, content_type_conformance, response_schema_conformance]

        @settings(max_examples=examples, deadline=None, database=None, derandomize=DERANDOMIZE,
                  phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy(generation_mode=mode), role=st.sampled_from(ROLES), data=st.data())
        def one(case: Any, role: str, data: Any) -> None:
            for name in list(case.path_parameters or {}):
                if name in known and known[name] and data.draw(st.booleans(), label="known id"):
                    case.path_parameters[name] = data.draw(st.sampled_from(known[name]), label=name)
            response = case.call(session=self.session, headers=role_headers(role))
            shape = _shape(case.method, case.formatted_path, None if isinstance(case.body, NotSet) else case.body)
            stats.record(response.status_code, f"{mode.value} as {role}: {shape}")
            stats.per_operation[f"{operation.method.upper()} {operation.path}"] += 1
            self._check_problem(response, shape)
            try:
                case.validate_response(response, checks=checks, headers=role_headers(role))
            except (Exception, BaseExceptionGroup) as failure:  # noqa: BLE001 - collected, reported together
                if response.status_code < 500:
                    what = " / ".join(str(e).splitlines()[0] for e in getattr(failure, "exceptions", [failure]))
                    stats.failure(f"{operation.method.upper()} {operation.path} {response.status_code}: {what}",
                                  f"{mode.value} as {role}: {shape}")

        try:
            one()
        except Unsatisfiable:  # nothing in this operation can be made invalid (e.g. no parameters)
            if mode == GenerationMode.POSITIVE:
                raise

    # raw requests for what the schema cannot express
    def send_raw(self, method: str, path: str, body: bytes | None, role: str,
                 content_type: str | None = "application/json") -> int:
        headers = role_headers(role)
        if content_type:
            headers["content-type"] = content_type
        response = self.session.request(method, path, data=body, headers=headers)
        shape = _shape(method, path, body[:200].decode("utf-8", "backslashreplace") if body else None)
        self.stats.record(response.status_code, f"extreme as {role}: {shape}")
        self._check_problem(response, shape)
        self._check_declared(method, path, response.status_code, shape)
        return response.status_code

    def _check_declared(self, method: str, path: str, status: int, shape: str) -> None:
        """A raw request's answer is one its operation declares (a path no route takes aside: 404/405)."""
        bare = unquote(path.split("?", 1)[0])  # routed as the server decodes it: an id "a%2Fb" takes no route
        for declared_method, pattern, statuses in self.declared:
            if declared_method == method and pattern.match(bare):
                if str(status) not in statuses:
                    self.stats.failure(f"{method} {pattern.pattern} {status}: not declared", shape)
                return

    def _check_problem(self, response: Any, shape: str) -> None:
        if 400 <= response.status_code < 600:
            content_type = response.headers.get("content-type", "")
            if isinstance(content_type, list):  # schemathesis' responses: lists of values
                content_type = content_type[0] if content_type else ""
            ok = content_type.startswith("application/problem+json")
            try:
                document = response.json()
                ok = ok and isinstance(document, dict) and isinstance(document.get("code"), str)
            except ValueError:
                ok = False
            if not ok:
                self.stats.failure(f"{response.status_code} not a problem document", shape)

    def run_extremes(self, examples: int) -> None:
        self.reset_directory()
        templates = extreme_templates(self.known)

        @settings(max_examples=examples, deadline=None, database=None, derandomize=DERANDOMIZE,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        @given(request=extreme_requests(templates), role=st.sampled_from(ROLES))
        def one(request: tuple[str, str, bytes | None, str | None], role: str) -> None:
            method, path, body, content_type = request
            self.send_raw(method, path, body, role, content_type)

        one()
        # the body limit itself, exactly at and one past
        core = b'{"query": "tea"'
        for size in (1024 * 1024, 1024 * 1024 + 1):
            self.send_raw("POST", "/v1/recall", core + b" " * (size - len(core) - 1) + b"}", "user")


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def extreme_templates(known: dict[str, list[str]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, a valid body) for every operation that takes a body, plus bodiless ones."""
    memory = known["memory_id"][0] if known.get("memory_id") else "00000000-0000-0000-0000-000000000000"
    receipt = {"receipt_id": "r-x", "author": "user", "text": "I like tea.",
               "source": {"kind": "chat", "id": "c-1", "message_id": "m-1"}, "occurred_at": "2026-11-02T09:00:00Z"}
    return [
        ("POST", "/v1/memories", remember_body("I like extreme tea", valid_from="2026-01-01T00:00:00Z",
                                                valid_to="2027-01-01T00:00:00Z")),
        ("POST", "/v1/recall", {"query": "tea", "as_of": "2026-11-02T09:00:00Z", "max_bytes": 17500, "limit": 20}),
        ("POST", "/v1/receipts", receipt),
        ("POST", f"/v1/memories/{memory}/correct", {"text": "I like green tea", "valid_from": "2026-12-01T00:00:00Z",
                                                   "valid_to": None, "reason": "changed"}),
        ("POST", f"/v1/candidates/{memory}/confirm", {"text": "I like tea", "acknowledge_sensitive": False}),
        ("PUT", "/v1/settings", {"learning_paused": False, "use_paused": False}),
        ("PUT", "/v1/admin/directory", {"teams": {"t-1": {"members": ["alice"]}},
                                        "sources": {"s-1": {"team": "t-1", "members": ["alice"]}},
                                        "bots": {BOT: {"teams": ["t-1"], "sources": ["s-1"]}}}),
    ]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every location of a value in a JSON document (to replace one of them)."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _replace(obj: Any, where: tuple[Any, ...], value: Any) -> Any:
    if not where:
        return value
    obj = json.loads(json.dumps(obj))
    target = obj
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = value
    return obj


_MARK = "\u0000__RAW__\u0000"


TIME_FIELDS = {"occurred_at", "valid_from", "valid_to", "as_of"}
TEXT_FIELDS = {"text", "query", "reason"}
NUMBER_FIELDS = {"limit", "max_bytes"}
TRICKY = "\u0000\u0001\u007f\u0085\u00a0\u00ad\u0301\u034f\u061c\u200b\u200d\u200e\u200f\u202a\u202e\u2028\u2066" \
         "\ufeff\ufffd\uffff\U0001F600\U0001F3FD\U000E0041\U0010FFFF\ud800\udfff\u05d0\u0627e\"\\/<>&%'"

any_time = st.builds(lambda d, offset: d.isoformat() + offset, st.datetimes(),  # years 1 to 9999
                     st.sampled_from(["Z", "+14:00", "-14:00", "+00:00", "-00:00", "+05:45", "-23:59", ""]))
tricky_text = st.text(alphabet=st.sampled_from(TRICKY) | st.characters(), max_size=80)


def _leaves(body: Any, names: set[str] | None = None) -> list[tuple[Any, ...]]:
    found = [p for p in _paths(body) if p and not isinstance(_get(body, p), (dict, list))]
    return [p for p in found if names is None or str(p[-1]) in names]


def _get(obj: Any, where: tuple[Any, ...]) -> Any:
    for step in where:
        obj = obj[step]
    return obj


@st.composite
def extreme_requests(draw: Any, templates: list[tuple[str, str, dict[str, Any]]]
                     ) -> tuple[str, str, bytes | None, str | None]:
    """One request carrying one extreme: chosen by kind first, so each kind gets its share."""
    kind = draw(st.sampled_from(["time"] * 4 + ["text"] * 4 + ["number"] * 2 + ["id"] * 2 + ["raw"] * 3
                                + ["path"] * 2 + ["query"] * 2 + ["content_type", "directory", "anything"]), label="kind")
    content_type: str | None = "application/json"
    if kind == "path":
        segment = draw(st.sampled_from(EXTREME_IDS + EXTREME_TEXTS[6:]) | tricky_text, label="path id")
        quoted = re.sub(r"[^A-Za-z0-9._~-]", lambda m: "".join(f"%{b:02X}" for b in m.group().encode(
            "utf-8", "surrogatepass")), str(segment))
        method, path = draw(st.sampled_from([("GET", "/v1/memories/{}"), ("GET", "/v1/memories/{}/history"),
                                             ("GET", "/v1/memories/{}/links"),
                                             ("POST", "/v1/memories/{}/forget"), ("GET", "/v1/forgets/{}"),
                                             ("GET", "/v1/receipts/{}"), ("POST", "/v1/sources/{}/revoke"),
                                             ("POST", "/v1/candidates/{}/reject"),
                                             ("POST", "/v1/memories/{}/correct"),
                                             ("POST", "/v1/admin/people/{}/forget")]))
        return method, path.format(quoted or "%20"), None, None
    if kind == "query":
        def quote(value: Any) -> str:
            return re.sub(r"[^A-Za-z0-9._~-]", lambda m: "".join(
                f"%{b:02X}" for b in m.group().encode("utf-8", "surrogatepass")), str(value))
        name = draw(st.sampled_from(["limit", "q", "cursor", "status", "format"]), label="query parameter")
        value = draw(st.sampled_from(HUGE_INTEGERS + EXTREME_IDS + ["a" * 1024, "a" * 1025, "a" * 512, "a" * 513])
                     | tricky_text, label="query value")
        path = "/v1/export" if name == "format" else draw(
            st.sampled_from(["/v1/memories", "/v1/forgets"] if name in ("limit", "cursor") else ["/v1/memories"]),
            label="listing")
        return "GET", f"{path}?{name}={quote(value)}", None, None
    if kind == "directory":  # the person-id limit: at it and one past, in teams or in sources
        size = draw(st.sampled_from([10_000, 10_001]), label="distinct people")
        members = [f"p{i}" for i in range(size)]
        document: dict[str, Any] = draw(st.sampled_from([
            {"teams": {"t-1": {"members": members}}, "sources": {}, "bots": {}},
            {"teams": {"t-1": {"members": members[:5000]}},
             "sources": {"s-1": {"team": "t-1", "members": members[5000:]}}, "bots": {}},
        ]))
        return "PUT", "/v1/admin/directory", _dumps(document), content_type
    wanted = {"time": TIME_FIELDS, "text": TEXT_FIELDS, "number": NUMBER_FIELDS}.get(kind)
    usable = [t for t in templates if _leaves(t[2], wanted)] if wanted else templates
    method, path, body = draw(st.sampled_from(usable), label="operation")
    if kind == "content_type":
        content_type = draw(st.sampled_from(["text/plain", "application/x-www-form-urlencoded", None,
                                             "application/json; charset=latin-1", "application/json; charset=utf-16",
                                             "application/vnd.api+json", "multipart/form-data; boundary=--x",
                                             "*/*", "application/json;;;", "application/"]))
        return method, path, _dumps(body), content_type
    where = draw(st.sampled_from(_leaves(body, wanted) if wanted else _leaves(body)), label="field")
    if kind == "raw":
        fragment = draw(st.sampled_from(RAW_STRINGS + RAW_NUMBERS), label="raw value")
        text = json.dumps(_replace(body, where, _MARK), ensure_ascii=False).replace(json.dumps(_MARK), "\x01")
        return method, path, text.encode().replace(b"\x01", fragment), content_type
    strategies: dict[str, Any] = {
        "time": st.sampled_from(EXTREME_TIME_VALUES) | any_time,
        "text": st.sampled_from(EXTREME_TEXTS) | tricky_text,
        "number": st.sampled_from(HUGE_INTEGERS) | st.integers(min_value=-(2**80), max_value=2**80),
        "id": st.sampled_from(EXTREME_IDS) | tricky_text,
        "anything": st.sampled_from(EXTREME_TIME_VALUES + EXTREME_TEXTS + EXTREME_IDS + HUGE_INTEGERS),
    }
    strategy = strategies[kind]
    if kind == "id":
        where = draw(st.sampled_from([p for p in _leaves(body) if str(p[-1]) not in TIME_FIELDS | TEXT_FIELDS
                                      | NUMBER_FIELDS] or _leaves(body)), label="id field")
    return method, path, _dumps(_replace(body, where, draw(strategy, label="value"))), content_type


# -- the test ------------------------------------------------------------------------------------


def _count(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def run_fuzz(app: Any, examples: int, extremes: int, *, conformance: bool = True,
             progress: Callable[[str], None] | None = None) -> Stats:
    fuzzer = Fuzzer(app, conformance=conformance)
    try:
        fuzzer.seed()
        # signing out everywhere revokes the fuzzer's own tokens of that second: those operations go last,
        # after the extremes, each case with tokens issued after the one before it (`later`)
        ordered = sorted(fuzzer.operations, key=lambda op: op.path.endswith("/sign-out-everywhere"))
        for operation in ordered:
            if operation.path.endswith("/sign-out-everywhere") and not fuzzer.signing_out:
                fuzzer.run_extremes(extremes)
                fuzzer.signing_out = True
            inputs = [operation.path_parameters, operation.query, operation.headers, operation.body]
            modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if any(map(len, inputs)) else [])
            for mode in modes:  # an operation without any input has nothing to make invalid
                fuzzer.reset_directory()
                fuzzer.run_operation(operation, mode, examples)
            if progress:
                progress(f"{operation.method.upper()} {operation.path}: {fuzzer.stats.cases} cases so far")
        if not fuzzer.signing_out:
            fuzzer.run_extremes(extremes)
    finally:
        fuzzer.close()
    for name, n in fuzzer.served.raised.items():
        fuzzer.stats.server_errors.append(f"the app raised {name} {n} time(s)")
    return fuzzer.stats


def test_fuzz_every_operation_with_every_role(engram: Any) -> None:
    from engram.api.http import create_app

    from tests.support.helpers import SECRET

    app = create_app(engram, SECRET)
    stats = run_fuzz(app, _count("ENGRAM_FUZZ_EXAMPLES", 40), _count("ENGRAM_FUZZ_EXTREMES", 600))
    elapsed = time.monotonic() - stats.started
    print(f"\nfuzz: {stats.cases} cases in {elapsed:.0f} s; statuses {stats.histogram()}; "
          f"5xx: {len(stats.server_errors)}")
    print("per operation: " + ", ".join(f"{op} {n}" for op, n in sorted(stats.per_operation.items())))
    assert len(stats.per_operation) >= 20
    assert not stats.server_errors, "5xx answers:\n" + "\n".join(stats.server_errors[:40])
    assert not stats.other_failures, "other failures:\n" + "\n".join(stats.other_failures[:40])
