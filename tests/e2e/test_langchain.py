"""engram.integrations.langchain against a real `engram serve`: the retriever's documents carry the
memory's id, kind, score, valid time and evidence; the tools are the MCP tools (names, descriptions,
schemas), called the way a LangChain agent calls them; a problem reaches the agent as `code: detail`;
and importing `engram` never needs LangChain."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram.client import Client
from engram.integrations.langchain import EngramRetriever, engram_tools, tool_definitions

from tests.support.helpers import auth, serving, token

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def url(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(postgres, tmp_path_factory.mktemp("langchain"), ENGRAM_EMBEDDINGS="off") as served:
        yield served


def test_the_retriever_returns_documents_with_their_evidence(url: str) -> None:
    with Client(url, token(user="lc-alice")) as engram:
        made = engram.remember(text="I prefer weekly reports as short bullet points",
                               source={"kind": "chat", "id": "chat-42", "message_id": "m-1"})
        engram.remember(text="My bike is blue", source={"kind": "chat", "id": "chat-42", "message_id": "m-2"})
    retriever = EngramRetriever(base_url=url, token=token(user="lc-alice"), limit=3)
    [document] = retriever.invoke("how should weekly reports look")
    assert document.page_content == "I prefer weekly reports as short bullet points"
    meta = document.metadata
    assert (meta["id"], meta["kind"]) == (str(made.id), "memory") and meta["score"] > 0
    assert set(meta) == {"id", "kind", "score", "valid_from", "valid_to", "evidence"}
    assert meta["valid_to"] is None  # true since it was said, until changed
    assert meta["evidence"][0]["quote"] == "I prefer weekly reports as short bullet points"
    assert meta["evidence"][0]["source"]["message_id"] == "m-1"
    json.dumps(meta)  # plain JSON values, storable by any vector store or tracer
    assert [d.page_content for d in asyncio.run(retriever.ainvoke("weekly reports"))] == [document.page_content]
    assert EngramRetriever(base_url=url, token=token(user="lc-bob")).invoke("weekly reports") == []  # not bob's


def test_the_tools_are_the_mcp_tools_and_act_through_the_api(url: str) -> None:
    with Client(url, token(user="lc-carol")) as engram:
        tools = {t.name: t for t in engram_tools(engram)}
        assert list(tools) == [d["name"] for d in tool_definitions()]
        for d in tool_definitions():
            assert tools[d["name"]].description == d["description"]
            assert tools[d["name"]].args_schema == d["input_schema"]
        stored = json.loads(tools["remember"].invoke({"text": "I take the 8:15 train", "message_id": "m-7"}))
        assert stored["status"] == "confirmed" and stored["source"] == {"kind": "langchain", "id": "langchain",
                                                                       "message_id": "m-7"}
        recalled = json.loads(tools["recall"].invoke({"query": "which train do I take"}))
        assert [i["id"] for i in recalled["items"]] == [stored["id"]]
        corrected = json.loads(tools["correct_memory"].invoke({"id": stored["id"], "text": "I take the 8:45 train"}))
        assert corrected["revision"] == 2
        assert len(json.loads(tools["memory_history"].invoke({"id": stored["id"]}))["events"]) == 2
        assert json.loads(tools["list_memories"].invoke({"q": "train"}))["items"][0]["id"] == stored["id"]
        forgot = json.loads(tools["forget_memory"].invoke({"id": stored["id"]}))
        status = json.loads(tools["forget_status"].invoke({"forget_id": forgot["forget_id"]}))
        assert status["forget_id"] == forgot["forget_id"]
        # as an agent sees a problem: the code and the detail, not an exception
        missing = tools["get_memory"].invoke({"id": "00000000-0000-4000-8000-000000000000"})
        assert missing.startswith("not_found: ")
        secret = tools["remember"].invoke({"text": "my password is hunter2-hunter2-hunter2"})
        assert secret.startswith("secret_refused: ") and "hunter2" not in secret


def test_a_bot_key_acts_for_the_person_it_names(url: str) -> None:
    import httpx

    admin = auth(company="acme", user="root", role="admin")
    assert httpx.put(url + "/v1/admin/directory", headers=admin, json={
        "teams": {}, "sources": {}, "bots": {"b-lc": {"teams": [], "sources": []}}}).status_code == 200
    key = httpx.post(url + "/v1/admin/bots/b-lc/keys", headers=admin).json()["key"]
    with Client(url, api_key=key, person="lc-dora") as bot:
        json.loads(engram_tools(bot)[1].invoke({"text": "I like quiet carriages", "message_id": "m-1"}))
    [document] = EngramRetriever(base_url=url, api_key=key, person="lc-dora").invoke("quiet carriages")
    assert document.page_content == "I like quiet carriages"


def test_importing_engram_never_needs_langchain() -> None:
    code = ("import sys; import engram, engram.client, engram.contract.responses; "
            "assert not [m for m in sys.modules if m.startswith('langchain')], 'langchain was imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    blocked = ("import sys; sys.modules['langchain_core'] = None; import engram.client; "
               "from engram.client import Client; print('ok')")
    assert subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True,
                          timeout=60).stdout.strip() == "ok"


def test_every_snippet_of_the_page_runs_as_written(url: str, tmp_path: Path) -> None:
    import os
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "integrations" / "langchain.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 2
    said = ""
    for n, block in enumerate(blocks):
        script = tmp_path / f"snippet_{n}.py"
        script.write_text(block.replace("http://127.0.0.1:8080", url))
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}, "T": token(user=f"lc-page-{n}")}
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        said += done.stdout
    assert "I prefer aisle seats on trains | said: I prefer aisle seats on trains" in said
    assert "I take the 8:15 train" in said and "not_found: " in said
