"""An event mapper that seals each event's personal fields under its memory's data key.

The built-in cipher is one key per application; forgetting needs one key per memory.
A stored event keeps its metadata in the clear and its personal fields in `_sealed`.
When the key is gone the event still decodes, with those fields set to None.
"""

from __future__ import annotations

import base64
import importlib
import pkgutil
from collections.abc import Iterator
from types import ModuleType
from typing import Any, cast

from cryptography.exceptions import InvalidTag
from eventsourcing.domain import Aggregate, DomainEvent
from eventsourcing.persistence import Mapper, StoredEvent, Transcoder
from eventsourcing.utils import get_topic, register_topic, resolve_topic

from engram.domain.errors import MemoryForgotten

from .crypto import seal, unseal
from .keystore import KeyStore

SEALED = "_sealed"


def _aad(originator_id: Any, version: int) -> bytes:
    return f"{originator_id}:{version}".encode()


class _AsIs:
    """A transcoder that leaves the state a dict: eventsourcing's mapping around it, without JSON."""

    @staticmethod
    def encode(state: Any) -> Any:
        return state

    @staticmethod
    def decode(state: Any) -> Any:
        return state


class SealingMapper(Mapper):
    def __init__(self, transcoder: Transcoder, keys: KeyStore) -> None:
        super().__init__(transcoder=transcoder)
        self.keys = keys
        self.json = transcoder
        # eventsourcing's own mapping (topic, ids, class versions) on the state as a dict, so an event with
        # sealed fields is encoded once and decoded once, not encoded, decoded and encoded again
        self._as_is: Mapper[Any] = Mapper(transcoder=cast(Transcoder, _AsIs()))

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        personal = getattr(type(domain_event), "personal_fields", ())
        if not personal:
            return super().to_stored_event(domain_event)
        if all(getattr(domain_event, name) is None for name in personal):
            return super().to_stored_event(domain_event)  # nothing personal to seal
        stored = self._as_is.to_stored_event(domain_event)
        state: dict[str, Any] = dict(cast(dict[str, Any], stored.state))
        secret = {name: state.pop(name) for name in personal}
        key = self.keys.get(stored.originator_id)
        if key is None:
            # Raced with a forget: the key is gone, so nothing new may be written about it.
            raise MemoryForgotten("this memory was forgotten; nothing more can change it")
        blob = seal(key, self.json.encode(secret), _aad(stored.originator_id, stored.originator_version))
        state[SEALED] = base64.b64encode(blob).decode()
        return StoredEvent(
            originator_id=stored.originator_id,
            originator_version=stored.originator_version,
            topic=stored.topic,
            state=self.json.encode(state),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        state = self.json.decode(stored_event.state)
        if SEALED not in state:
            return super().to_domain_event(stored_event)
        blob = base64.b64decode(state.pop(SEALED))
        personal = getattr(resolve_topic(stored_event.topic), "personal_fields", ())
        # A field stored in clear stays as stored: events written before it was personal (ADR 0019).
        secret: dict[str, Any] = {name: None for name in personal if name not in state}
        key = self.keys.get(stored_event.originator_id)
        if key is not None:
            try:
                secret.update(
                    self.json.decode(
                        unseal(key, blob, _aad(stored_event.originator_id, stored_event.originator_version))
                    )
                )
            except InvalidTag:
                pass  # a tampered or foreign ciphertext reads like a shredded one
        state.update(secret)
        return self._as_is.to_domain_event(
            StoredEvent(
                originator_id=stored_event.originator_id,
                originator_version=stored_event.originator_version,
                topic=stored_event.topic,
                state=cast(bytes, state),
            )
        )


def _domain_modules() -> Iterator[tuple[str, ModuleType]]:
    """(name, module) of each module of `engram.domain`."""
    from engram import domain

    for info in pkgutil.iter_modules(domain.__path__):
        yield info.name, importlib.import_module(f"engram.domain.{info.name}")


def register_moved_topics() -> None:
    """Events stored before Engram installed as one package name their classes `domain.<module>:...`;
    those topics still resolve, to the same classes under `engram.domain`."""
    for name, module in _domain_modules():
        register_topic(f"domain.{name}", module)


def stored_topics() -> dict[str, type]:
    """Every topic an event of Engram's domain can be stored under, with its class: its own, and the
    `domain.<module>:` one of events stored before Engram installed as one package."""
    topics: dict[str, type] = {}
    for name, module in _domain_modules():
        for aggregate in vars(module).values():
            if not (isinstance(aggregate, type) and issubclass(aggregate, Aggregate)
                    and aggregate.__module__ == module.__name__):
                continue
            for event in vars(aggregate).values():
                if isinstance(event, type) and issubclass(event, DomainEvent):
                    topics[get_topic(event)] = event
                    topics[f"domain.{name}:{event.__qualname__}"] = event
    return topics


register_moved_topics()
