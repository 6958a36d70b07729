"""Vectors at rest and the query's vector under a deadline (ADR 0040), with deterministic fake embeddings."""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.adapters.crypto import new_data_key
from engram.adapters.embedders import EmbedderUnavailable, QueryEmbeddings, RemoteEmbedder
from engram.adapters.vectors import CJK, LATIN, pack, script_of, seal_vector, unpack, unseal_vector
from engram.service.recall import Fusion

from tests.support.helpers import examples


class SlowEmbedder:
    """A fake model: a hash of the text as a unit vector, after `delay` seconds (or until released)."""

    model = "fake/8"
    max_chars = 100

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.release = threading.Event()
        self.calls = 0

    def _vector(self, text: str) -> np.ndarray:
        v = np.random.default_rng(abs(hash(text)) % (2**32)).normal(size=8).astype(np.float32)
        return v / np.linalg.norm(v)

    def query(self, text: str) -> np.ndarray:
        self.calls += 1
        if self.delay:
            self.release.wait(self.delay)
        return self._vector(text)

    def passages(self, texts: list[str]) -> np.ndarray:
        return np.vstack([self._vector(t) for t in texts])

    def warm(self) -> None:
        pass


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=64))
def test_a_packed_vector_keeps_its_direction(values: list[float]) -> None:
    v = np.asarray(values, dtype=np.float32)
    if not np.linalg.norm(v):
        return
    v = v / np.linalg.norm(v)
    back, script = unpack(pack(v, CJK))
    assert back.shape == v.shape and script == CJK
    assert float(back @ v) > 0.99  # int8 with one scale: the cosine moves by well under 0.01


def test_a_sealed_vector_opens_only_with_its_key_memory_revision_and_model() -> None:
    key, other = new_data_key(), new_data_key()
    v = np.ones(384, dtype=np.float32) / np.sqrt(384)
    blob = seal_vector(key, "m-1", 2, "model/384", v)
    assert len(blob) == 1 + 4 + 384 + 12 + 16  # script, scale, int8 components, nonce, tag: no float array at rest
    back, script = unseal_vector(key, "m-1", 2, "model/384", blob)
    assert float(back @ v) > 0.999 and script == LATIN
    for args in ((other, "m-1", 2, "model/384"), (key, "m-2", 2, "model/384"), (key, "m-1", 1, "model/384"),
                 (key, "m-1", 2, "other/384")):
        with pytest.raises(Exception):  # noqa: B017 - AES-GCM refuses any other key or binding
            unseal_vector(*args, blob)


def test_a_texts_script_is_cjk_when_a_fifth_of_its_letters_are() -> None:
    assert script_of("I live in Berlin") == LATIN
    assert script_of("我住在柏林") == CJK
    assert script_of("我下个月去 San Francisco 出差") == CJK  # Chinese naming an English place
    assert script_of("I ate 饺子 yesterday at the new place downtown") == LATIN
    assert script_of("12:30 !!") == LATIN


def test_the_fusion_keeps_scores_in_range_and_floors_what_is_unrelated() -> None:
    fusion = Fusion()
    assert fusion.scaled(fusion.low - 0.1) == 0.0 and fusion.scaled(fusion.high + 0.1) == 1.0
    for words in (0.0, 0.3, 1.0):
        for meaning in (None, 0.0, 0.5, 1.0):
            for hint in (None, 0.0, 1.0):
                assert 0.0 <= fusion.score(words, meaning, hint) <= 1.0
    assert fusion.score(0.0, 0.0, None) < fusion.floor  # found by neither: never returned
    assert fusion.score(0.6, None, None) == 0.6  # not embedded yet: its words alone, at their full value
    assert fusion.score(0.6, 0.0, None) < 0.6  # embedded, and meaning says it is unrelated
    assert fusion.score(0.5, 0.5, None) > fusion.score(0.5, 0.0, None)  # found both ways ranks higher


def test_a_query_the_model_does_not_answer_in_time_is_unavailable_and_holds_no_request() -> None:
    model = SlowEmbedder(delay=5.0)
    queries = QueryEmbeddings(model, deadline_ms=50, threads=1, most_waiting=2)
    started = time.monotonic()
    with pytest.raises(EmbedderUnavailable):
        queries.vector("where do I live")
    assert time.monotonic() - started < 1.0
    with pytest.raises(EmbedderUnavailable):
        queries.vector("what do I eat")  # queued behind the first, also cut at its deadline
    with pytest.raises(EmbedderUnavailable, match="busy"):
        queries.vector("third")  # more waiting than allowed: told at once
    model.release.set()
    time.sleep(0.2)
    model.delay = 0.0
    assert queries.vector("where do I live").shape == (8,)
    calls = model.calls
    queries.vector("where do I live")
    assert model.calls == calls  # the same question again: its vector is remembered
    queries.close()


def test_the_remote_embedder_reads_openai_answers_and_refuses_broken_ones() -> None:
    answers: list[httpx.Response] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/embeddings" and request.headers["authorization"] == "Bearer k"
        return answers.pop(0)

    remote = RemoteEmbedder("http://embed.test/v1", "m", "k", transport=httpx.MockTransport(handler))
    answers.append(httpx.Response(200, json={"data": [{"index": 1, "embedding": [0, 2]}, {"index": 0, "embedding": [3, 4]}]}))
    rows = remote.passages(["a", "b"])
    assert remote.model == "m/2" and np.allclose(rows, [[0.6, 0.8], [0.0, 1.0]])  # in input order, unit length
    for broken in (httpx.Response(500), httpx.Response(200, text="not json"),
                   httpx.Response(200, json={"data": [{"index": 0, "embedding": [1, 2, 3]}]}),  # dimension changed
                   httpx.Response(200, text='{"data": [{"index": 0, "embedding": [NaN, 1]}]}'),
                   httpx.Response(200, json={"data": []})):
        answers.append(broken)
        with pytest.raises(EmbedderUnavailable):
            remote.query("x")
