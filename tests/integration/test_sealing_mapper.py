"""The sealing mapper: personal fields are ciphertext at rest and None once the key is destroyed."""

from __future__ import annotations

from datetime import UTC, datetime

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
