"""Ranking hints from the semantic index, and the rule for using them.

The index only ranks. A fact hints at one memory. An observation (a judgment the index derived
from several facts) hints at all of its source memories together, and counts only when every one
of them is a memory the caller may use right now; otherwise it is dropped whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class SemanticIndexUnavailable(Exception):
    """The semantic index did not answer in time; recall falls back to SQL ranking, marked degraded."""


@dataclass
class SemanticHints:
    facts: dict[str, float] = field(default_factory=dict)
    observations: list[tuple[float, frozenset[str | None]]] = field(default_factory=list)

    def add_fact(self, memory_id: str, score: float) -> None:
        self.facts[memory_id] = max(self.facts.get(memory_id, 0.0), score)

    def add_observation(self, score: float, memory_ids: frozenset[str | None]) -> None:
        self.observations.append((score, memory_ids))

    def __bool__(self) -> bool:
        return bool(self.facts or self.observations)

    def memory_ids(self) -> set[str]:
        ids = set(self.facts)
        for _score, sources in self.observations:
            ids.update(m for m in sources if m is not None)
        return ids

    def scores(self, usable: set[str]) -> dict[str, float]:
        """Scores in [0, 1] for usable memories only; observations with any unusable or unknown
        source contribute nothing."""
        out = {m: s for m, s in self.facts.items() if m in usable}
        for score, sources in self.observations:
            if sources and all(m is not None and m in usable for m in sources):
                for m in sources:
                    assert m is not None
                    out[m] = max(out.get(m, 0.0), score)
        top = max(out.values(), default=0.0) or 1.0
        return {m: round(min(1.0, s / top), 4) for m, s in out.items()}
