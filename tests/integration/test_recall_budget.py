"""Recall never drops a matching memory silently for its size: whole while it fits, then cut with
`truncated: true`, then counted in `omitted`."""

from __future__ import annotations

from tests.support.helpers import auth, remember_body

LIMIT = 8192


def _at_limit(word: str, filler: str) -> str:
    text = f"{word} "
    while len((text + filler).encode()) <= LIMIT:
        text += filler
    return text


def test_a_memory_at_the_text_limit_is_recalled_whole_with_the_default_budget(client) -> None:
    me = auth()
    for word, filler in (("lighthouse", "ab"), ("harbour", "\u00e9\"\n"), ("quay", "\U0001F30A")):
        text = _at_limit(word, filler)
        assert len(text.encode()) > LIMIT - 4
        assert client.post("/v1/memories", json=remember_body(text), headers=me).status_code == 201
        body = client.post("/v1/recall", json={"query": word}, headers=me).json()
        assert [i["text"] for i in body["items"]] == [text], word
        assert body["items"][0]["evidence"][0]["quote"] == text
        assert "truncated" not in body["items"][0] and body["omitted"] == 0
        assert body["bytes"] == 2 * len(text.encode()) <= 17_500


def test_items_past_the_budget_are_cut_then_counted(client) -> None:
    me = auth()
    texts = [_at_limit(f"ferry{i}", "\u00fc") for i in range(3)]
    for t in texts:
        assert client.post("/v1/memories", json=remember_body(t), headers=me).status_code == 201
    body = client.post("/v1/recall", json={"query": "ferry0 ferry1 ferry2"}, headers=me).json()
    whole, cut = body["items"]
    assert "truncated" not in whole and whole["text"] in texts
    assert cut["truncated"] is True
    original = next(t for t in texts if t.startswith(cut["text"][:7]))
    assert original.startswith(cut["text"]) and len(cut["text"]) < len(original)
    assert original.startswith(cut["evidence"][0]["quote"])
    assert body["omitted"] == 1
    assert 17_500 - 2 < body["bytes"] <= 17_500  # filled to a character's edge
    none = client.post("/v1/recall", json={"query": "ferry0 ferry1 ferry2", "max_bytes": 0}, headers=me).json()
    assert none["items"] == [] and none["omitted"] == 3 and none["bytes"] == 0
    two = client.post("/v1/recall", json={"query": "ferry0 ferry1 ferry2", "max_bytes": 0, "limit": 2},
                      headers=me).json()
    assert two["omitted"] == 2  # limit bounds what is counted too
