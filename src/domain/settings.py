"""Per-person controls: pause learning, pause use. Independent of each other."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate


def settings_id(company: str, person: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"engram:settings:{company}:{person}")


class PersonSettings(Aggregate):
    # Set by the events' apply methods; for mypy only, as eventsourcing turns class annotations into __init__ parameters.
    if TYPE_CHECKING:
        company: str
        person: str
        learning_paused: bool
        use_paused: bool

    class Opened(Aggregate.Created):
        company: str
        person: str

        def apply(self, s: PersonSettings) -> None:
            s.company, s.person = self.company, self.person
            s.learning_paused = False
            s.use_paused = False

    class Changed(Aggregate.Event):
        learning_paused: bool
        use_paused: bool
        actor: str

        def apply(self, s: PersonSettings) -> None:
            s.learning_paused, s.use_paused = self.learning_paused, self.use_paused

    @classmethod
    def open(cls, company: str, person: str, at: datetime) -> PersonSettings:
        return cls._create(cls.Opened, id=settings_id(company, person), timestamp=at, company=company, person=person)

    def change(self, *, learning_paused: bool, use_paused: bool, actor: str, at: datetime) -> None:
        if (learning_paused, use_paused) != (self.learning_paused, self.use_paused):
            self.trigger_event(self.Changed, timestamp=at, learning_paused=learning_paused,
                               use_paused=use_paused, actor=actor)

    def document(self) -> dict[str, bool]:
        return {"learning_paused": self.learning_paused, "use_paused": self.use_paused}
