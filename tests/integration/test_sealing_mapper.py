"""The sealing mapper: personal fields are ciphertext at rest and None once the key is destroyed."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from engram.adapters.crypto import seal
from engram.adapters.mapper import _aad
from engram.domain.memory import Memory
from engram.domain.scope import Scope

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def test_stored_event_is_sealed_and_decodes_after_shredding(engram) -> None:
    keys, mapper = engram.store.keys, engram.store.mapper
    memory = Memory.remember(scope=Scope("acme", "alice"), source={"kind": "chat", "id": "c-1"},
                             text="pelican-4471 likes jazz", evidence=[{"quote": "pelican-4471 likes jazz"}],
                             valid_from=None, valid_to=None, actor="alice", at=T0)
    keys.create(memory.id, "acme")
    event = memory.collect_events()[0]
    stored = mapper.to_stored_event(event)
    assert b"pelican-4471" not in stored.state and b"_sealed" in stored.state
    assert b"acme" in stored.state  # metadata stays readable for audits and rebuilds

    decoded = mapper.to_domain_event(stored)
    assert decoded.text == "pelican-4471 likes jazz" and decoded.evidence == [{"quote": "pelican-4471 likes jazz"}]

    # a ciphertext moved to another position does not open
    moved = type(stored)(stored.originator_id, stored.originator_version + 1, stored.topic, stored.state)
    assert mapper.to_domain_event(moved).text is None

    keys.destroy(memory.id, "acme", T0)
    shredded = mapper.to_domain_event(stored)
    assert shredded.text is None and shredded.evidence is None
    assert shredded.company == "acme" and shredded.timestamp == T0


def test_source_is_sealed_and_an_old_event_keeps_its_clear_source(engram) -> None:
    keys, mapper = engram.store.keys, engram.store.mapper
    source = {"kind": "chat", "id": "chat-mapper-3301", "message_id": "msg-mapper-3302"}
    memory = Memory.remember(scope=Scope("acme", "alice"), source=source, text="osprey-3390 likes jazz",
                             evidence=[{"quote": "osprey-3390 likes jazz"}], valid_from=None, valid_to=None,
                             actor="alice", at=T0)
    keys.create(memory.id, "acme")
    stored = mapper.to_stored_event(memory.collect_events()[0])
    assert b"chat-mapper-3301" not in stored.state and b"msg-mapper-3302" not in stored.state
    assert mapper.to_domain_event(stored).source == source

    # As events were stored before the source was sealed (ADR 0019): text and evidence sealed, the
    # source beside them in clear.
    state = mapper.json.decode(stored.state)
    del state["_sealed"]
    blob = seal(keys.get(memory.id), mapper.json.encode({"text": "osprey-3390 likes jazz", "evidence": []}),
                _aad(stored.originator_id, stored.originator_version))
    old = type(stored)(stored.originator_id, stored.originator_version, stored.topic, mapper.json.encode(
        {**state, "source": source, "_sealed": base64.b64encode(blob).decode()}))
    decoded = mapper.to_domain_event(old)
    assert decoded.source == source and decoded.text == "osprey-3390 likes jazz"

    keys.destroy(memory.id, "acme", T0)
    assert mapper.to_domain_event(stored).source is None  # shredded with the key
    shredded_old = mapper.to_domain_event(old)
    assert shredded_old.text is None and shredded_old.source == source  # what was written in clear stays
