"""Recall by meaning with the real packaged model (ADR 0040), through the HTTP API: a question in other
words or another language finds its memory, a question about something never said finds nothing, a
forgotten memory is never ranked again in any process, the model down leaves recall by words, and no
vector rests in clear."""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest

from engram.adapters.vectors import pack
from engram.api.bootstrap import Engram

from tests.support.helpers import auth, files_containing, pg_dump, remember_body

MEMORIES = [
    "My sister Ana moved to Porto last spring.",
    "I drive a Tesla Model 3.",
    "我女儿每周六上午去学钢琴。",
    "I can't stand meetings before ten in the morning.",
    "Our cat Biscuit naps on the bookshelf every afternoon.",
    "我老家在湖南长沙，每年春节都回去。",
]


def remember_all(client, engram) -> list[str]:
    ids = [client.post("/v1/memories", json=remember_body(t), headers=auth()).json()["id"] for t in MEMORIES]
    assert engram.embedding.work() == len(MEMORIES)
    return ids


def recall(client, query: str, **headers) -> dict:
    r = client.post("/v1/recall", json={"query": query, "limit": 5}, headers=headers or auth())
    assert r.status_code == 200, r.text
    return r.json()


def test_a_question_in_other_words_or_another_language_finds_its_memory(engram, client) -> None:
    ids = remember_all(client, engram)
    for query, expected in (("In which town is my sibling living these days?", 0),  # no word in common
                            ("What kind of car do I have?", 1),
                            ("When does my kid have her music lesson?", 2),  # English asks, Chinese answers
                            ("我家的猫喜欢在哪儿睡觉？", 4),  # Chinese asks, English answers
                            ("Where is my hometown?", 5)):
        answer = recall(client, query)
        assert not answer["degraded"]
        assert ids[expected] in [i["id"] for i in answer["items"]][:3], (query, answer["items"])
        assert all(0.0 <= i["score"] <= 1.0 for i in answer["items"])
    # the words still count: an exact word ranks its memory first
    assert recall(client, "Biscuit")["items"][0]["id"] == ids[4]


def test_a_question_about_something_never_said_is_answered_with_nothing(engram, client) -> None:
    remember_all(client, engram)
    for query in ("What is my blood type?", "Which football team do I support?", "我的护照什么时候过期？"):
        assert recall(client, query)["items"] == [], query


def test_a_memory_is_found_by_its_words_before_it_is_embedded(engram, client) -> None:
    memory = client.post("/v1/memories", json=remember_body("I collect vintage fountain pens"), headers=auth()).json()
    answer = recall(client, "fountain pens")  # not embedded yet: read-your-writes by its words
    assert [i["id"] for i in answer["items"]] == [memory["id"]] and not answer["degraded"]
    engram.embedding.work()
    assert [i["id"] for i in recall(client, "Which antique writing tools do I hoard?")["items"]][:1] == [memory["id"]]


def test_a_forgotten_memory_is_never_ranked_again_in_any_process(engram, client, settings, database) -> None:
    ids = remember_all(client, engram)
    other = Engram.open(settings, database=database, background=False)  # a second serving process
    try:
        from fastapi.testclient import TestClient

        from engram.api.http import create_app

        from tests.support.helpers import SECRET

        with TestClient(create_app(other, SECRET)) as second:
            query = "In which town is my sibling living these days?"
            assert ids[0] in [i["id"] for i in recall(second, query)["items"]]  # the second process holds her vectors now
            forget = client.post(f"/v1/memories/{ids[0]}/forget", headers=auth())
            assert forget.status_code == 202
            for c in (client, second):
                assert ids[0] not in [i["id"] for i in recall(c, query)["items"]]
            near = other.recall.meaning.nearest("acme", "alice", query, as_of=other.ledger.clock.now(), teams=[],
                                                sources=[], revoked=[], depth=50)
            assert ids[0] not in [m for m, _ in near.best]  # not even among the candidates
        with engram.store.datastore.get_connection() as conn:
            assert conn.execute("SELECT count(*) AS n FROM engram_vectors WHERE memory_id = %s",
                                (ids[0],)).fetchone()["n"] == 0
        report = client.get(f"/v1/forgets/{forget.json()['forget_id']}", headers=auth()).json()
        view = next(c for c in report["copies"] if c["copy"] == "recall_view")
        assert "1 vectors" in view["evidence"]
    finally:
        other.close()


class Hung:
    model = "multilingual-e5-small-q4/384"
    max_chars = 1200

    def query(self, text: str):
        time.sleep(3)
        raise AssertionError("never reached in time")


def test_the_model_down_leaves_recall_by_words_marked_degraded(engram, client) -> None:
    ids = remember_all(client, engram)
    engram.recall.meaning.queries.embedder = Hung()
    started = time.monotonic()
    answer = recall(client, "Tesla")
    assert time.monotonic() - started < 2.5  # the deadline (150 ms) plus SQL, not the model's 3 s
    assert answer["degraded"] and [i["id"] for i in answer["items"]] == [ids[1]]


def test_no_vector_rests_in_clear(engram, client, database, postgres) -> None:
    if postgres is None:
        pytest.skip("disk scan needs the embedded server's data directory")
    remember_all(client, engram)
    with engram.store.datastore.long_running(), engram.store.datastore.get_connection() as conn:
        conn.execute("CHECKPOINT")
        types = {r["data_type"] for r in conn.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'engram_vectors'").fetchall()}
        assert not types & {"real", "double precision", "ARRAY", "USER-DEFINED"}  # no float, array or vector column
    vectors = engram.recall.meaning.embedder.passages(MEMORIES)
    needles = []
    for v in vectors:  # what a vector in clear would look like: packed as stored, or as float32
        needles.append(pack(v)[5:37])  # its int8 components as packed
        needles.append(np.asarray(v, dtype=np.float32).tobytes()[:32])
        needles.append(struct.pack("<4f", *v[:4]))
    with engram.store.datastore.long_running(), engram.store.datastore.transaction(commit=True) as curs:
        # control: a vector stored in clear is found by the same scans
        curs.execute("CREATE TABLE scan_control_vectors (v bytea)")
        control = pack(np.random.default_rng(7).normal(size=384))[5:37]  # not any memory's
        curs.execute("INSERT INTO scan_control_vectors VALUES (%s)", (control,))
        curs.execute("CHECKPOINT")
    dump = pg_dump(database, "--data-only", "--inserts")
    assert control.hex().encode() in dump and files_containing(postgres.pgdata, [control])
    with engram.store.datastore.transaction(commit=True) as curs:
        curs.execute("DROP TABLE scan_control_vectors")
    assert b"engram_vectors" in dump
    assert [n for n in needles if n in dump or n.hex().encode() in dump] == []  # bytea is dumped as hex
    assert files_containing(postgres.pgdata, needles) == []  # table files and the write-ahead log


class Failing:
    """The packaged model, except that it is down (`down`) or fails on one text."""

    def __init__(self, real, *, down: bool = False, poison: str | None = None) -> None:
        self.real, self.down, self.poison = real, down, poison
        self.model, self.max_chars = real.model, real.max_chars

    def passages(self, texts):
        from engram.adapters.embedders import EmbedderUnavailable

        if self.down:
            raise EmbedderUnavailable("stopped")
        if self.poison in texts:
            raise RuntimeError("the engine failed on this text")
        return self.real.passages(texts)


def backlog(engram) -> int:
    return engram.embedding.store.backlog()


def test_the_model_down_keeps_the_backlog_and_one_bad_text_never_holds_up_the_others(engram, client) -> None:
    worker = engram.embedding
    worker.lease_seconds = 0.05
    real = worker.embedder
    ids = [client.post("/v1/memories", json=remember_body(t), headers=auth()).json()["id"] for t in MEMORIES[:3]]
    worker.embedder = Failing(real, down=True)
    assert worker.work() == 0 and backlog(engram) == 3  # nothing lost: the leases lapse, the batch comes again
    assert worker.unavailable.count >= 1
    time.sleep(0.1)
    worker.embedder = Failing(real, poison=MEMORIES[1])
    for _ in range(3):  # the others are stored at once; the bad one is tried alone, three times, then left
        worker.work()
        time.sleep(0.1)
    assert backlog(engram) == 0 and worker.failed.count == 1
    with engram.store.datastore.get_connection() as conn:
        stored = {str(r["memory_id"]) for r in conn.execute("SELECT memory_id FROM engram_vectors").fetchall()}
    assert stored == {ids[0], ids[2]}
    assert [i["id"] for i in recall(client, "Tesla")["items"]] == [ids[1]]  # still found by its words


class OwnModel:
    """The operator's own OpenAI-compatible `/embeddings` endpoint: here the packaged model behind HTTP,
    every text embedded as a question (another vector space than the stored passages'), under its own name."""

    def __init__(self) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from engram.adapters.embedders import LocalEmbedder

        model, self.asked = LocalEmbedder(), 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the standard library's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.asked += 1
                data = [{"index": i, "embedding": model.query(t).tolist()} for i, t in enumerate(body["input"])]
                answer = json.dumps({"data": data, "model": body["model"]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def test_a_new_model_re_embeds_while_the_old_vectors_keep_serving(engram, client, settings, database) -> None:
    from fastapi.testclient import TestClient

    from engram.api.http import create_app

    from tests.support.helpers import SECRET

    ids = remember_all(client, engram)  # embedded by the packaged model
    question = "In which town is my sibling living these days?"  # no word in common with the memory
    own = OwnModel()
    moved = Engram.open(settings.model_copy(update={"embeddings": "openai", "embeddings_url": own.url,
                                                    "embeddings_model": "own-model"}),
                        database=database, background=False)
    try:
        with TestClient(create_app(moved, SECRET)) as after, engram.store.datastore.get_connection() as conn:
            def vectors(model: str) -> int:
                return conn.execute("SELECT count(*) AS n FROM engram_vectors WHERE model = %s",
                                    (model,)).fetchone()["n"]

            assert moved.embedding.embedder.model == "own-model/384" and vectors("own-model/384") == 0
            answer = recall(after, question)  # nothing of the new model yet: the packaged model's vectors rank
            assert ids[0] in [i["id"] for i in answer["items"]][:3] and not answer["degraded"]
            fresh = after.post("/v1/memories", json=remember_body("I keep bees on the roof"), headers=auth()).json()
            assert [i["id"] for i in recall(after, "bees")["items"]][:1] == [fresh["id"]]  # by its words meanwhile

            assert moved.embedding.work() == len(MEMORIES) + 1  # every answer re-embedded by the new model
            assert vectors("own-model/384") == len(MEMORIES) + 1
            asked = own.asked
            answer = recall(after, question)  # all re-embedded: the new model ranks, its space alone
            assert own.asked == asked + 1 and not answer["degraded"]
            assert ids[0] in [i["id"] for i in answer["items"]][:3]
            assert moved.embedding.store.tidy("own-model/384") == len(MEMORIES)  # the old space goes
            assert vectors("multilingual-e5-small-q4/384") == 0
            assert ids[0] in [i["id"] for i in recall(after, question)["items"]][:3]
    finally:
        moved.close()
        own.close()
