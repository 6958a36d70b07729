"""HTTP edges: the body limit however a body is sent, 405 with Allow, 415, the OpenAPI document, /docs.

The body-limit tests run against a real `engram serve` on 127.0.0.1 and talk raw HTTP/1.1 over a
socket: an in-process TestClient buffers whole bodies and would hide what the server reads.
"""

from __future__ import annotations

import base64
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.support.helpers import SECRET, auth, fresh_database, remember_body, token, wait_until_ready

ENGRAM = str(Path(sys.executable).parent / "engram")
LIMIT = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """`engram serve` on a free loopback port, on the test's own database."""

    def __init__(self, database: Any, data_dir: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
        env.update(ENGRAM_DATA_DIR=str(data_dir), ENGRAM_DATABASE_URL=database.conninfo,
                   ENGRAM_TOKEN_SECRET=SECRET,
                   ENGRAM_MASTER_KEY=base64.urlsafe_b64encode(os.urandom(32)).decode())
        self.log = open(data_dir.parent / "serve.log", "wb")
        self.proc = subprocess.Popen([ENGRAM, "serve", "--host", "127.0.0.1", "--port", str(self.port)],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_until_ready(self.proc, self.url, (data_dir.parent / "serve.log").read_text)

    def rss(self) -> int:
        return psutil.Process(self.proc.pid).memory_info().rss

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture(scope="module")
def served(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for the module (its tests store nothing), on a database of its own."""
    server = Served(fresh_database(postgres), tmp_path_factory.mktemp("served") / "data")
    yield server
    server.stop()


def _read_response(sock: socket.socket, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response with a Content-Length body."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a full response head: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, headers, rest[:length]


def _closed_by_peer(sock: socket.socket, timeout: float = 5) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(65536) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _stream_until_answered(port: int, head: bytes, chunk: bytes, total: int, *, chunked: bool,
                           rss: Any = None) -> tuple[int, int, bytes, int]:
    """Send `head`, then the body in `chunk`s up to `total` bytes, stopping as soon as the server
    answers. Returns (bytes of body sent when the answer was first readable, status, body, peak RSS).

    The client's send buffer is kept small, so "sent" is close to what the server has taken in.
    """
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    peak = rss() if rss else 0
    sent = 0
    try:
        sock.sendall(head)
        sock.setblocking(False)
        frame = (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n") if chunked else chunk
        pending = b""
        answered_at = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock] if sent < total or pending else [], [], 1.0)
            if readable:
                answered_at = sent
                break
            if writable:
                if not pending:
                    if sent >= total:
                        if chunked:
                            pending = b"0\r\n\r\n"
                        else:
                            continue
                    else:
                        pending = frame
                        sent += len(chunk)
                try:
                    n = sock.send(pending)
                except (BrokenPipeError, ConnectionResetError):
                    answered_at = sent
                    break
                pending = pending[n:]
                if rss and sent % (8 * len(chunk)) == 0:
                    peak = max(peak, rss())
        assert answered_at is not None, "the server never answered"
        if rss:
            peak = max(peak, rss())
        sock.setblocking(True)
        status, headers, body = _read_response(sock)
        assert headers.get("connection", "").lower() == "close" or status < 400 or status == 401, headers
        return answered_at, status, body, peak
    finally:
        sock.close()


def _post_head(port: int, path: str, extra: str) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"{extra}\r\n").encode()


def test_chunked_body_past_the_limit_is_refused_early_before_authentication(served: Served) -> None:
    """An unauthenticated chunked upload of 128 MiB: 413 after about 1 MiB, RSS stays low."""
    before = served.rss()
    head = _post_head(served.port, "/v1/memories", "Transfer-Encoding: chunked\r\n")
    sent, status, body, peak = _stream_until_answered(served.port, head, b"x" * 65536, 128 * LIMIT,
                                                      chunked=True, rss=served.rss)
    print(f"answered after {sent} body bytes; server RSS {before // LIMIT} MiB -> peak {peak // LIMIT} MiB")
    problem = json.loads(body)
    assert (status, problem["code"]) == (413, "body_too_large"), body
    assert {"type", "title", "status", "detail", "code"} <= problem.keys()
    assert LIMIT < sent <= 8 * LIMIT, f"the answer came after {sent} bytes"
    assert peak - before < 48 * LIMIT, f"server RSS grew by {(peak - before) // LIMIT} MiB"
    # the server still serves everyone else
    assert httpx.get(served.url + "/healthz", timeout=5).status_code == 200


def test_declared_length_past_the_limit_is_refused_without_reading_and_closed(served: Served) -> None:
    sock = socket.create_connection(("127.0.0.1", served.port))
    try:
        sock.sendall(_post_head(served.port, "/v1/recall", f"Content-Length: {400 * LIMIT}\r\n"))
        status, headers, body = _read_response(sock, timeout=10)  # nothing of the body was sent
        assert (status, json.loads(body)["code"]) == (413, "body_too_large")
        assert headers["content-type"].startswith("application/problem+json")
        assert headers.get("connection", "").lower() == "close"
        assert _closed_by_peer(sock)
    finally:
        sock.close()


def test_content_length_body_streamed_past_the_limit_is_refused_early(served: Served) -> None:
    """A lying or huge Content-Length is decided on the header; the answer comes before the rest."""
    head = _post_head(served.port, "/v1/memories", f"Content-Length: {64 * LIMIT}\r\n")
    sent, status, body, _ = _stream_until_answered(served.port, head, b"x" * 65536, 64 * LIMIT, chunked=False)
    assert (status, json.loads(body)["code"]) == (413, "body_too_large")
    assert sent <= 8 * LIMIT


def _recall_body(size: int) -> bytes:
    """A valid recall body of exactly `size` bytes (JSON whitespace pads it)."""
    core = b'{"query": "tea", "limit": 5'
    return core + b" " * (size - len(core) - 1) + b"}"


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_bodies_at_exactly_the_limit_work_and_one_byte_more_does_not(served: Served, chunked: bool) -> None:
    def send(body: bytes, headers: dict[str, str]) -> httpx.Response:
        content: Any = body
        if chunked:
            content = (body[i:i + 100_000] for i in range(0, len(body), 100_000))
        return httpx.post(served.url + "/v1/recall", content=content, timeout=30,
                          headers={"content-type": "application/json", **headers})

    exact, over = _recall_body(LIMIT), _recall_body(LIMIT + 1)
    assert len(exact) == LIMIT and len(over) == LIMIT + 1
    r = send(exact, auth())
    assert r.status_code == 200, r.text
    assert r.json()["items"] == []
    r = send(exact, {})
    assert (r.status_code, r.json()["code"]) == (401, "unauthenticated")  # read, then authenticated
    for headers in (auth(), {}):
        r = send(over, headers)
        assert (r.status_code, r.json()["code"]) == (413, "body_too_large"), r.text
        assert r.headers["connection"].lower() == "close"


# -- 405, 415 (in-process) ------------------------------------------------------------------------


def _is_problem(r: Any, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["code"] == code and body["status"] == status
    assert {"type", "title", "detail"} <= body.keys()
    return body


def test_405_names_the_allowed_methods(client) -> None:
    r = client.delete("/v1/memories", headers=auth())
    _is_problem(r, 405, "method_not_allowed")
    assert set(re.split(r",\s*", r.headers["allow"])) == {"GET", "POST"}
    # GET and PUT of the directory are separate routes: Allow lists both
    r = client.post("/v1/admin/directory", json={}, headers=auth(role="admin"))
    _is_problem(r, 405, "method_not_allowed")
    assert set(re.split(r",\s*", r.headers["allow"])) == {"GET", "PUT"}
    r = client.get("/v1/recall", headers=auth())
    _is_problem(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "POST"


def test_a_json_route_refuses_other_media_types_with_415(engram, client) -> None:
    before = engram.store.recorder.max_notification_id() or 0
    body = json.dumps(remember_body("I like green tea")).encode()
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                         "application/xml", "text/json"):
        r = client.post("/v1/memories", content=body, headers={**auth(), "content-type": content_type})
        problem = _is_problem(r, 415, "unsupported_media_type")
        assert "application/json" in problem["detail"]
        assert "green tea" not in r.text
    # before authentication, like the body limit: no token needed to learn the media type is wrong
    _is_problem(client.post("/v1/recall", content=b'{"query": "x"}', headers={"content-type": "text/plain"}),
                415, "unsupported_media_type")
    assert (engram.store.recorder.max_notification_id() or 0) == before
    # JSON and its +json / charset variants are accepted
    for content_type in ("application/json", "application/json; charset=utf-8", "Application/JSON",
                         "application/merge-patch+json"):
        r = client.post("/v1/recall", content=b'{"query": "x"}', headers={**auth(), "content-type": content_type})
        assert r.status_code == 200, (content_type, r.text)


def test_a_json_body_without_content_type_is_read_as_json(client) -> None:
    """A bot developer's minimal client (a raw socket, `fetch` with a Blob, some HTTP libraries) may
    omit Content-Type: the body is then read as JSON. Authentication is a bearer header only (never
    a cookie), so this opens no cross-site request path. Declaring any other type is a 415."""
    r = client.post("/v1/memories", content=json.dumps(remember_body("I like oolong")).encode(), headers=auth())
    assert r.status_code == 201, r.text
    assert "content-type" not in r.request.headers
    r = client.post("/v1/recall", content=b'{"query": "oolong"}', headers=auth())
    assert r.status_code == 200 and [i["text"] for i in r.json()["items"]] == ["I like oolong"]
    # and a body that is not JSON at all, without a type: 400 malformed_json, as with the JSON type
    _is_problem(client.post("/v1/recall", content=b"query=oolong", headers=auth()), 400, "malformed_json")


def test_bodiless_posts_ignore_the_content_type(client) -> None:
    memory_id = client.post("/v1/memories", json=remember_body("I like rooibos"), headers=auth()).json()["id"]
    r = client.post(f"/v1/memories/{memory_id}/forget", headers={**auth(), "content-type": "text/plain"})
    assert r.status_code == 202, r.text


# -- the OpenAPI document and /docs ---------------------------------------------------------------

PROBLEM_FIELDS = {"type", "title", "status", "detail", "code"}


def test_openapi_declares_bearer_models_and_problems(client) -> None:
    doc = client.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
        "description": doc["components"]["securitySchemes"]["bearer"]["description"]}
    problem = schemas["Problem"]
    assert PROBLEM_FIELDS <= set(problem["required"]) and PROBLEM_FIELDS <= problem["properties"].keys()
    assert "HTTPValidationError" not in schemas  # FastAPI's own 422 shape is never what we answer

    operations = [(path, method, op) for path, ops in doc["paths"].items() for method, op in ops.items()]
    assert len(operations) >= 20
    for path, method, op in operations:
        responses = op["responses"]
        where = f"{method.upper()} {path}"
        successes = [code for code in responses if code.startswith("2")]
        assert successes, where
        for code in successes:
            content = responses[code].get("content", {})
            assert content, where
            for media, body in content.items():
                schema = body.get("schema", {})
                for choice in schema.get("anyOf") or [schema]:  # one model, or one of several
                    assert choice.get("$ref") or choice.get("type"), f"{where} {code} {media} has no model"
        for code, response in responses.items():
            if code[0] in "45":
                assert list(response["content"]) == ["application/problem+json"], (where, code)
                assert response["content"]["application/problem+json"]["schema"] == {
                    "$ref": "#/components/schemas/Problem"}, (where, code)
        if path.startswith("/v1/"):
            assert op.get("security") == [{"bearer": []}], where
            assert {"401", "503"} <= responses.keys(), where
        if "requestBody" in op:
            assert list(op["requestBody"]["content"]) == ["application/json"], where
            assert {"400", "413", "415", "422"} <= responses.keys(), where
        if "{" in path and method == "get":
            assert "404" in responses, where
    # route-specific problems
    paths = doc["paths"]
    assert {"403", "409"} <= paths["/v1/memories"]["post"]["responses"].keys()
    assert {"201", "200", "202"} <= paths["/v1/memories"]["post"]["responses"].keys()
    assert "409" in paths["/v1/candidates/{memory_id}/confirm"]["post"]["responses"]
    assert "403" in paths["/v1/admin/directory"]["put"]["responses"]
    assert "text/markdown" in paths["/v1/export"]["get"]["responses"]["200"]["content"]


def test_openapi_declares_input_bounds(client) -> None:
    doc = client.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]

    def prop(model: str, name: str) -> dict[str, Any]:
        p = schemas[model]["properties"][name]
        return next((s for s in p.get("anyOf", [p]) if s.get("type") != "null"), p)

    for model, name in [("RememberIn", "text"), ("CorrectIn", "text"), ("CorrectIn", "reason"),
                        ("ConfirmIn", "text"), ("RecallIn", "query"), ("ReceiptIn", "text")]:
        assert prop(model, name)["maxLength"] == 8192, (model, name)
    for model, name in [("SourceIn", "id"), ("SourceIn", "kind"), ("ReceiptIn", "receipt_id"), ("RememberIn", "team")]:
        assert (prop(model, name)["minLength"], prop(model, name)["maxLength"]) == (1, 200), (model, name)
        assert "pattern" in prop(model, name)
    assert (prop("RecallIn", "limit")["minimum"], prop("RecallIn", "limit")["maximum"]) == (1, 200)
    assert (prop("RecallIn", "max_bytes")["minimum"], prop("RecallIn", "max_bytes")["maximum"]) == (0, 1_000_000)
    for model, name in [("RememberIn", "occurred_at"), ("RememberIn", "valid_from"), ("RecallIn", "as_of"),
                        ("CorrectIn", "valid_to"), ("ReceiptIn", "occurred_at")]:
        assert prop(model, name)["format"] == "date-time", (model, name)
    params = {p["name"]: p["schema"] for p in doc["paths"]["/v1/memories"]["get"]["parameters"]}
    assert (params["limit"]["minimum"], params["limit"]["maximum"]) == (1, 200)
    assert params["q"]["anyOf"][0]["maxLength"] == 1024
    for path in ("/v1/memories/{memory_id}", "/v1/forgets/{forget_id}", "/v1/receipts/{receipt_id}"):
        (param,) = doc["paths"][path]["get"]["parameters"]
        assert param["schema"]["maxLength"] == 200, path


def test_docs_page_is_interactive_and_self_contained(client) -> None:
    r = client.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    assert "SwaggerUIBundle" in page and "/openapi.json" in page
    # every asset the page loads is served here, and the browser is told to load nothing from elsewhere
    refs = re.findall(r'(?:src|href)\s*=\s*["\']([^"\']+)["\']', page) + re.findall(r"url:\s*'([^']+)'", page)
    assert refs
    for ref in refs:
        assert ref.startswith("/") and not ref.startswith("//"), ref
        asset = client.get(ref)
        assert asset.status_code == 200, ref
        assert len(asset.content) > 100, ref
    assert not re.search(r"https?://", page), "the page names another host"
    policy = r.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy and "script-src 'self'" in policy
    assert "validatorUrl\": null" in page.replace("'", '"')  # no badge fetched from a validator service
    assert client.get("/docs/assets/../../etc/passwd").status_code == 404
    assert client.get("/docs/assets/nothing.js").status_code == 404


def test_every_answer_forbids_content_sniffing(client) -> None:
    """An export or an answer quoting a person's text is never read by a browser as HTML or script."""
    alice = auth()
    client.post("/v1/memories", json=remember_body("<script>alert(1)</script> I like tea"), headers=alice)
    client.get("/memory", params={"token": token()})  # a page session, for the page's own download
    answers = [
        client.get("/v1/export", params={"format": "markdown"}, headers=alice),
        client.get("/v1/export", headers=alice),
        client.get("/memory/export", params={"format": "markdown"}),
        client.get("/memory/export"),
        client.post("/v1/recall", json={"query": "tea"}, headers=alice),
        client.get("/v1/memories/nothing-here", headers=alice),  # a problem
        client.get("/v1/memories"),  # a 401
        client.post("/v1/memories", content=b"x" * (2 * 1024 * 1024), headers=alice),  # the body limit's 413
        client.get("/metrics"), client.get("/healthz"), client.get("/openapi.json"), client.get("/docs"),
    ]
    for r in answers:
        assert r.headers.get("x-content-type-options") == "nosniff", (r.request.url, r.status_code)
    assert {r.status_code for r in answers} >= {200, 401, 404, 413}
