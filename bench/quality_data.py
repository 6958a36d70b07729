"""Builds the recall-quality benchmark (bench/data/quality/{en,zh}.json) from the seed text in
bench/quality_text_en.py and bench/quality_text_zh.py. Deterministic: the same seed text gives the same files.

    .venv/bin/python -m bench.quality_data        # rewrites bench/data/quality/*.json

Each person has twelve sessions with the assistant over about four months. Into them go the person's
facts (stated by the person, or given as the reply to the assistant's question), facts that a later
session changes, pairs of facts in two sessions that only together answer a question, and recurring
diary topics (dinner, outings, ...) that only the session's date tells apart; around them small talk,
help with everyday tasks and lines that share words with the facts but say something else.

Question kinds: fact (the question shares words with the evidence), paraphrase (it does not), reply
(the evidence is the person's answer to the assistant's question; that question is never evidence),
date_absolute and date_relative (a diary entry named by its date), multi_hop (two turns in two
sessions), update (only the latest statement is evidence).
"""

from __future__ import annotations

import json
import random
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from bench import quality_text_en, quality_text_zh

OUT = Path(__file__).resolve().parent / "data" / "quality"
SESSIONS = 12
UPDATES, FACTS, REPLIES, CHAINS, DIARIES, DATED = 3, 15, 5, 3, 3, 6
KINDS = ("fact", "paraphrase", "reply", "date_absolute", "date_relative", "multi_hop", "update")


class Episode:
    """Turns in order; `marks` names the turns a question will cite."""

    def __init__(self) -> None:
        self.turns: list[tuple[str, str]] = []
        self.marks: dict[str, int] = {}

    def add(self, speaker: str, text: str, mark: str | None = None) -> Episode:
        if mark is not None:
            self.marks[mark] = len(self.turns)
        self.turns.append((speaker, text))
        return self


def fill(template: str, **slots: str) -> str:
    v = slots.get("v", "")
    return template.format_map({**slots, "V": v[:1].upper() + v[1:]})


class PersonBuilder:
    def __init__(self, t: ModuleType, person: str, rng: random.Random) -> None:
        self.t, self.person, self.rng = t, person, rng
        first = datetime.combine(date(2025, 9, 1) + timedelta(days=rng.randint(0, 20)), time(0), UTC)
        self.days: list[datetime] = []
        for _ in range(SESSIONS):
            self.days.append(first)
            first += timedelta(days=rng.randint(6, 13))
        self.sessions: list[list[Episode]] = [[] for _ in range(SESSIONS)]
        self.questions: list[dict[str, Any]] = []  # evidence as (session, episode, mark) until ids exist

    def pick(self, options: list[str]) -> str:
        return self.rng.choice(options)

    def put(self, session: int, episode: Episode) -> Episode:
        self.sessions[session].append(episode)
        return episode

    def ask(self, kind: str, text: str, evidence: list[tuple[int, Episode, str]], answer: str,
            asked: datetime | None = None) -> None:
        if asked is None:
            asked = self.days[-1] + timedelta(days=self.rng.randint(1, 10))
        asked = asked.replace(hour=self.rng.randint(8, 22), minute=self.rng.randint(0, 59))
        self.questions.append({"kind": kind, "question": text, "asked_at": asked, "evidence": evidence, "answer": answer})

    def fact_episode(self, fact: dict[str, Any], value: str, reply: bool, state_key: str = "state",
                     old: str = "") -> Episode:
        ep = Episode()
        if reply:
            ep.add("assistant", fill(self.pick(fact["ask"]), v=value))
            ep.add("user", fill(self.pick(fact["answer"]), v=value), "evidence")
        else:
            ep.add("user", fill(self.pick(fact[state_key]), v=value, old=old), "evidence")
        if self.rng.random() < 0.8:
            ep.add("assistant", fill(self.pick(fact["ack"]), v=value))
        return ep

    def facts(self) -> None:
        t, rng = self.t, self.rng
        updatable = [f for f in t.FACTS if f.get("update")]
        updates = rng.sample(updatable, UPDATES)
        rest = [f for f in t.FACTS if f not in updates]
        plain = rng.sample(rest, FACTS)
        kinds = ["reply"] * REPLIES + ["fact", "paraphrase"] * ((FACTS - REPLIES) // 2)
        rng.shuffle(kinds)
        for fact, kind in zip(plain, kinds, strict=True):
            value = self.pick(fact["values"])
            session = rng.randrange(SESSIONS - 1)
            ep = self.put(session, self.fact_episode(fact, value, kind == "reply"))
            questions = fact["q_para"] if kind == "paraphrase" else fact["q_fact"]
            self.ask(kind, self.pick(questions), [(session, ep, "evidence")], value)
        for fact in updates:
            old, new = rng.sample(fact["values"], 2)
            first, later = rng.randrange(5), rng.randrange(6, SESSIONS)
            self.put(first, self.fact_episode(fact, old, rng.random() < 0.4))
            ep = self.put(later, self.fact_episode(fact, new, False, "update_state", old))
            self.ask("update", self.pick(fact["q_update"]), [(later, ep, "evidence")], new)
        for fact in t.FACTS:  # lines that share the facts' words but say something else
            if rng.random() < 0.6:
                others = [v for v in fact["values"]]
                ep = Episode().add("user", fill(self.pick(fact["near"]), x=self.pick(others)))
                ep.add("assistant", self.pick(t.REACTIONS))
                self.put(rng.randrange(SESSIONS), ep)

    def chains(self) -> None:
        t, rng = self.t, self.rng
        for chain in rng.sample(t.CHAINS, CHAINS):
            name, value = self.pick(chain["names"]), self.pick(chain["values"])
            first = rng.randrange(SESSIONS // 2)
            later = rng.randrange(first + 2, SESSIONS)
            a = self.put(first, Episode().add("user", fill(self.pick(chain["a"]), n=name), "a")
                         .add("assistant", self.pick(t.REACTIONS)))
            b = self.put(later, Episode().add("user", fill(self.pick(chain["b"]), n=name, v=value), "b")
                         .add("assistant", self.pick(t.REACTIONS)))
            self.ask("multi_hop", self.pick(chain["q"]), [(first, a, "a"), (later, b, "b")], f"{name}: {value}")

    def diaries(self) -> None:
        t, rng = self.t, self.rng
        entries: list[tuple[dict[str, Any], int, Episode, str]] = []
        for topic in rng.sample(t.DIARY, DIARIES):
            sessions = sorted(rng.sample(range(SESSIONS), rng.randint(6, min(8, len(topic["values"])))))
            values = rng.sample(topic["values"], len(sessions))
            for session, value in zip(sessions, values, strict=True):
                ep = Episode()
                if rng.random() < 0.5:
                    ep.add("assistant", self.pick(topic["ask"]))
                    ep.add("user", fill(self.pick(topic["answer"]), v=value), "evidence")
                else:
                    ep.add("user", fill(self.pick(topic["state"]), v=value), "evidence")
                if rng.random() < 0.6:
                    ep.add("assistant", self.pick(t.REACTIONS))
                entries.append((topic, session, self.put(session, ep), value))
        for i, (topic, session, ep, value) in enumerate(rng.sample(entries, DATED)):
            day = self.days[session]
            if i % 2 == 0:
                self.ask("date_absolute", fill(self.pick(topic["q_abs"]), date=t.absolute(day)),
                         [(session, ep, "evidence")], value)
                continue
            while True:
                asked = day + timedelta(days=rng.choice([1, 2, 3, 4, 5, 6, 7, 14]))
                if (rel := t.relative(day.date(), asked.date())) is not None:
                    break
            self.ask("date_relative", fill(self.pick(topic["q_rel"]), rel=rel), [(session, ep, "evidence")], value, asked)

    def filler(self) -> None:
        t, rng = self.t, self.rng
        tasks = rng.sample(t.TASKS, len(t.TASKS))
        talk = rng.sample(t.SMALL_TALK, len(t.SMALL_TALK))
        for session in range(SESSIONS):
            for _ in range(rng.randint(1, 2)):
                task = tasks.pop() if tasks else rng.choice(t.TASKS)
                slots = {k: self.pick(v) for k, v in task["slots"].items()}
                ep = Episode()
                for speaker, text in task["turns"]:
                    ep.add(speaker, text.format_map(slots))
                self.put(session, ep)
            for _ in range(rng.randint(1, 2)):
                chat = talk.pop() if talk else rng.choice(t.SMALL_TALK)
                ep = Episode()
                for speaker, text in chat:
                    ep.add(speaker, text)
                self.put(session, ep)

    def render(self) -> tuple[list[dict[str, Any]], dict[int, str]]:
        """Conversations with ids and times; the ids of every marked turn by (id(episode), mark)."""
        conversations, ids = [], {}
        for s, episodes in enumerate(self.sessions):
            self.rng.shuffle(episodes)
            opener, closer = Episode(), Episode()
            for speaker, text in self.rng.choice(self.t.OPENERS):
                opener.add(speaker, text)
            for speaker, text in self.rng.choice(self.t.CLOSERS):
                closer.add(speaker, text)
            at = self.days[s].replace(hour=self.rng.randint(7, 20), minute=self.rng.randint(0, 59))
            conv_id = f"{self.person}-s{s + 1:02d}"
            messages = []
            for ep in [opener, *episodes, closer]:
                for i, (speaker, text) in enumerate(ep.turns):
                    msg_id = f"{conv_id}-t{len(messages) + 1:03d}"
                    at += timedelta(seconds=self.rng.randint(15, 180))
                    messages.append({"id": msg_id, "speaker": speaker, "occurred_at": at.isoformat(), "text": text})
                    for mark, index in ep.marks.items():
                        if index == i:
                            ids[(id(ep), mark)] = msg_id
            conversations.append({"id": conv_id, "person": self.person, "messages": messages})
        return conversations, ids  # type: ignore[return-value]


def build(t: ModuleType) -> dict[str, Any]:
    conversations, questions = [], []
    for person, _ in t.PEOPLE:
        rng = random.Random(f"{t.LANG}-{person}")
        builder = PersonBuilder(t, person, rng)
        builder.facts()
        builder.chains()
        builder.diaries()
        builder.filler()
        convs, ids = builder.render()
        conversations += convs
        for q in builder.questions:
            questions.append({"id": "", "person": person, "kind": q["kind"], "question": q["question"],
                              "asked_at": q["asked_at"].isoformat(), "answer": q["answer"],
                              "evidence": [ids[(id(ep), mark)] for _, ep, mark in q["evidence"]]})
    for i, q in enumerate(questions):
        q["id"] = f"{t.LANG}-q{i + 1:03d}"
    return {"language": t.LANG, "people": [{"id": p, "name": n} for p, n in t.PEOPLE],
            "conversations": conversations, "questions": questions}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for t in (quality_text_en, quality_text_zh):
        data = build(t)
        path = OUT / f"{t.LANG}.json"
        path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        turns = sum(len(c["messages"]) for c in data["conversations"])
        print(f"{path.name}: {len(data['people'])} people, {turns} turns, {len(data['questions'])} questions")


if __name__ == "__main__":
    main()
