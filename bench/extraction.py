"""Extraction quality: precision and recall of an extractor on the labelled EN+ZH message set.

    .venv/bin/python -m bench.extraction                 # the rule extractor
    .venv/bin/python -m bench.extraction --extractor llm # OpenAIExtractor over HTTP against the test double
    .venv/bin/python -m bench.extraction --split heldout --misses

The set is `bench/data/extraction/{en,zh}.txt` (format in its README.md). Matching rule: a proposal
is correct when its quote is in the message and shares at least half of its own content characters
and at least half of an expected quote's content characters (content = not whitespace, not
punctuation), positions compared within the message. Matching is one to one, best overlap first:
each expected memory is matched at most once, and a proposal matching nothing (a duplicate
included) is a false positive. Precision = correct / proposals; recall = matched / expected.

`--extractor llm` (without `--llm-url`) starts the suite's fake OpenAI-compatible server
(tests/support/fake_llm.py), which answers each message with its labelled memories plus, for every fifth
message, a quote that is not in it;
the proposals then pass the server's own checks (`accept_proposals`). It checks the plumbing (exact
quotes kept, invented quotes dropped), not a real model's quality.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "extraction"
FILES = ("en.txt", "zh.txt", "en-fresh.txt", "zh-fresh.txt", "en-fresh2.txt", "zh-fresh2.txt", "en-fresh3.txt",
         "zh-fresh3.txt", "en-fresh4.txt", "zh-fresh4.txt", "en-fresh5.txt", "zh-fresh5.txt")
SPLITS = ("dev", "heldout", "fresh", "fresh2", "fresh3", "fresh4", "fresh5")


@dataclass(frozen=True)
class Expected:
    category: str
    third: bool
    quote: str
    text: str
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.quote)


@dataclass(frozen=True)
class Message:
    id: str
    lang: str
    text: str
    memories: tuple[Expected, ...]
    none_kind: str | None  # why it holds nothing, when it holds nothing
    split: str

    @property
    def kind(self) -> str:
        return self.none_kind or self.memories[0].category


def split_of(message_id: str) -> str:
    """One message in three of the first set is held out, by a hash of its id alone (fixed before any tuning)."""
    return "heldout" if int(hashlib.sha256(message_id.encode()).hexdigest(), 16) % 3 == 0 else "dev"


def parse(lines: Iterable[str], lang: str, split: str | None = None) -> list[Message]:
    messages: list[Message] = []
    current: tuple[str, str] | None = None
    memories: list[Expected] = []
    none_kind: str | None = None

    def close() -> None:
        if current is None:
            return
        if not memories and none_kind is None:
            raise ValueError(f"{current[0]}: neither memories nor a none line")
        messages.append(Message(current[0], lang, current[1], tuple(memories), none_kind, split or split_of(current[0])))

    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        if not line.startswith(" "):
            close()
            mid, text = line.rstrip("\n").split(" | ", 1)
            current, memories, none_kind = (mid, text), [], None
            continue
        if current is None:
            raise ValueError(f"line {n}: a label before any message")
        head, rest = line.strip().split(" | ", 1)
        if head == "none":
            none_kind = rest
            continue
        quote, text = rest.split(" | ", 1)
        start = current[1].find(quote)
        if start < 0:
            raise ValueError(f"{current[0]}: quote not in the message: {quote!r}")
        category, *flags = head.split()
        memories.append(Expected(category, "third" in flags, quote, text, start))
    close()
    return messages


def load(files: Iterable[str] = FILES) -> list[Message]:
    messages = []
    for name in files:
        split = name.split(".")[0][3:] or None  # en-fresh2.txt -> "fresh2"; en.txt -> by id
        messages += parse((DATA / name).read_text(encoding="utf-8").splitlines(), name[:2], split)
    ids = [m.id for m in messages]
    if len(ids) != len(set(ids)):
        raise ValueError("duplicate message ids")
    return messages


def _content(text: str, start: int, end: int) -> set[int]:
    """Positions in [start, end) holding a letter, digit or ideograph (not space or punctuation)."""
    return {i for i in range(start, end) if not text[i].isspace() and unicodedata.category(text[i])[0] not in "PSZ"}


def _overlap(text: str, a: set[int], b: set[int]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return min(shared / len(a), shared / len(b))


@dataclass
class Outcome:
    message: Message
    proposals: list[str]
    matched: list[tuple[str, Expected]] = field(default_factory=list)  # (proposal quote, expected)
    false: list[str] = field(default_factory=list)
    missed: list[Expected] = field(default_factory=list)


def judge(message: Message, quotes: list[str]) -> Outcome:
    """Match proposals to expected memories one to one, best overlap first (threshold 0.5 both ways)."""
    text = message.text
    pairs: list[tuple[float, int, int]] = []
    for p, quote in enumerate(quotes):
        starts = [i for i in range(len(text)) if quote and text.startswith(quote, i)]
        for e, exp in enumerate(message.memories):
            want = _content(text, exp.start, exp.end)
            best = max((_overlap(text, _content(text, s, s + len(quote)), want) for s in starts), default=0.0)
            if best >= 0.5:
                pairs.append((best, p, e))
    out = Outcome(message, quotes)
    used_p: set[int] = set()
    used_e: set[int] = set()
    for _, p, e in sorted(pairs, key=lambda t: (-t[0], t[1], t[2])):
        if p in used_p or e in used_e:
            continue
        used_p.add(p)
        used_e.add(e)
        out.matched.append((quotes[p], message.memories[e]))
    out.false = [q for p, q in enumerate(quotes) if p not in used_p]
    out.missed = [e for i, e in enumerate(message.memories) if i not in used_e]
    return out


@dataclass
class Tally:
    proposals: int = 0
    correct: int = 0
    expected: int = 0
    found: int = 0

    @property
    def precision(self) -> float:
        return self.correct / self.proposals if self.proposals else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else 1.0


def tally(outcomes: Iterable[Outcome]) -> Tally:
    t = Tally()
    for o in outcomes:
        t.proposals += len(o.proposals)
        t.correct += len(o.matched)
        t.expected += len(o.message.memories)
        t.found += len(o.matched)
    return t


def run(messages: list[Message], extract: Callable[[str], list[str]]) -> list[Outcome]:
    return [judge(m, extract(m.text)) for m in messages]


def rule_quotes() -> Callable[[str], list[str]]:
    from engram.adapters.extractors import RuleExtractor

    extractor = RuleExtractor()
    return lambda text: [p.quote for p in extractor.extract(text).proposals]


def wrong_quote(message: Message) -> str:
    """A quote a sloppy model might return: the first expected memory's restatement, or a made-up line."""
    if message.memories and message.memories[0].text not in message.text:
        return message.memories[0].text
    return message.text.rstrip("。.!！") + " (paraphrased)"


def scripted_answers(messages: list[Message]) -> dict[str, list[dict[str, str]]]:
    """What the test double answers for each message: its labels, and every fifth message a quote not in it."""
    answers = {}
    for i, m in enumerate(messages):
        items = [{"text": e.text, "quote": e.quote} for e in m.memories]
        if i % 5 == 0:
            items.append({"text": "Invented", "quote": wrong_quote(m)})
        answers[m.text] = items
    return answers


ADVERSARIAL = {  # 8 KB inputs that would be slow for careless patterns (receipts are at most ENGRAM_MAX_TEXT_BYTES)
    "one 8,000-letter word": "a" * 8000 + ".",
    "680 clauses in one sentence": "I like tea, " * 680,
    "2,000 abbreviations": "Mr. " * 2000,
    "1,100 quoted commas": '"a, b" ' * 1100,
    "2,000 times 1:2": "1:2 " * 2000,
    "540 Chinese clauses": "我喜欢茶，" * 540,
    "8,000 ideographs": "我" * 2700,
}


def adversarial(extract: Callable[[str], list[str]]) -> None:
    print("| adversarial input | bytes | ms |\n|---|---|---|")
    for name, text in ADVERSARIAL.items():
        began = time.perf_counter()
        extract(text)
        print(f"| {name} | {len(text.encode())} | {(time.perf_counter() - began) * 1000:.1f} |")


def print_report(outcomes: list[Outcome], *, misses: bool) -> None:
    def row(label: str, t: Tally) -> str:
        return (f"| {label} | {t.expected} | {t.found} | {t.recall:.3f} | {t.proposals} | {t.correct} | "
                f"{t.precision:.3f} |")

    head = "| {} | expected | found | recall | proposals | correct | precision |\n|---|---|---|---|---|---|---|"
    print(head.format("set"))
    for split in ("all", *SPLITS):
        for lang in ("all", "en", "zh"):
            chosen = [o for o in outcomes if split in ("all", o.message.split) and lang in ("all", o.message.lang)]
            print(row(f"{split} / {lang}", tally(chosen)))
    print()
    print("Recall by memory category (all splits):")
    print("| category | expected | found | recall |\n|---|---|---|---|")
    by_cat: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        for e in o.message.memories:
            for key in (e.category, "third person" if e.third else "first person"):
                by_cat[key][0] += 1
        for _, e in o.matched:
            for key in (e.category, "third person" if e.third else "first person"):
                by_cat[key][1] += 1
    for key in sorted(by_cat):
        n, f = by_cat[key]
        print(f"| {key} | {n} | {f} | {f / n:.3f} |")
    print()
    print("Precision by message kind (all splits; kinds without memories should get no proposals):")
    print("| kind | messages | proposals | correct | precision |\n|---|---|---|---|---|")
    by_kind: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_kind[o.message.kind].append(o)
    for kind in sorted(by_kind):
        t = tally(by_kind[kind])
        print(f"| {kind} | {len(by_kind[kind])} | {t.proposals} | {t.correct} | {t.precision:.3f} |")
    print()
    missed = [o.message.id for o in outcomes if o.missed]
    false = [o.message.id for o in outcomes if o.false]
    print(f"misses ({len(missed)} messages): {' '.join(missed)}")
    print(f"false proposals ({len(false)} messages): {' '.join(false)}")
    if misses:
        for o in outcomes:
            for e in o.missed:
                print(f"  MISS  {o.message.id} [{o.message.split}] {e.quote!r}")
            for q in o.false:
                print(f"  FALSE {o.message.id} [{o.message.split}] {q!r}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--extractor", choices=("rules", "llm"), default="rules")
    ap.add_argument("--split", choices=("all", *SPLITS), default="all")
    ap.add_argument("--misses", action="store_true", help="print each missed and false quote")
    ap.add_argument("--llm-url", help="with --extractor llm: a real OpenAI-compatible endpoint instead of the test double "
                                      "(API key from ENGRAM_LLM_API_KEY)")
    ap.add_argument("--llm-model", default="test-model")
    args = ap.parse_args()
    messages = [m for m in load() if args.split in ("all", m.split)]
    print(f"{len(messages)} messages ({sum(m.lang == 'en' for m in messages)} en, "
          f"{sum(m.lang == 'zh' for m in messages)} zh), {sum(len(m.memories) for m in messages)} expected memories, "
          f"{sum(not m.memories for m in messages)} messages without one")
    stop: Callable[[], None] = lambda: None  # noqa: E731
    if args.extractor == "rules":
        extract = rule_quotes()
    else:
        from engram.adapters.content_rules import ContentRules
        from engram.adapters.extractors import OpenAIExtractor
        from engram.domain.extraction import accept_proposals

        from tests.support.fake_llm import FakeLLM

        url = args.llm_url
        if url is None:
            fake = FakeLLM().start()
            stop, url = fake.stop, fake.url
            fake.proposals.update(scripted_answers(messages))
        llm, policy = OpenAIExtractor(url, args.llm_model, os.environ.get("ENGRAM_LLM_API_KEY")), ContentRules()
        answered = {"proposals": 0}

        def extract(text: str) -> list[str]:
            proposals = llm.extract(text).proposals
            answered["proposals"] += len(proposals)
            return [p.quote for p in accept_proposals(proposals, text, policy)]

    began = time.perf_counter()
    try:
        outcomes = run(messages, extract)
    finally:
        stop()
    took = time.perf_counter() - began
    print(f"extractor {args.extractor}: {took * 1000:.0f} ms for {len(messages)} messages "
          f"({took * 1e6 / len(messages):.0f} us a message)")
    if args.extractor == "llm":
        kept = sum(len(o.proposals) for o in outcomes)
        print(f"the model answered {answered['proposals']} proposals; {kept} passed the server's checks")
    print()
    print_report(outcomes, misses=args.misses)
    if args.extractor == "rules":
        print()
        adversarial(extract)


if __name__ == "__main__":
    main()
