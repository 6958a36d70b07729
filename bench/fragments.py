"""Fragments among candidates: the share of the rule extractor's candidates that do not stand on their own,
on whole conversations (ADR 0041; issue target: at most 10%).

    .venv/bin/python -m bench.fragments --dump candidates.tsv   # what the rules propose, for a reader to judge
    .venv/bin/python -m bench.fragments                         # the share, from the judged candidates

`bench/data/conversations/{en,zh}.txt` hold conversations written without sight of the rules
(README.md there): the rules were tuned on them. `bench/data/conversations_final/` holds a second set,
written the same way after that tuning and never tuned on: its figures are the evidence (`--set final`).
A reader who had not seen the rules judged each candidate the rules proposed from them, as a person
reviewing it would see it (its text, and its context with the quote):
- `whole`: it says something on its own that the person could decide to keep;
- `fragment`: a bare clause whose meaning rests on words left out (a pronoun without its referent, a
  comment without what it comments on, a time without its event);
- `wrong`: not a memory of the person at all (a question, a rumour passed on as theirs, small talk).
The judgments are `judged_{lang}*.tsv` in each set's folder. The report counts the current rules' candidates against them;
a candidate the rules propose now that no one judged is reported apart, never counted as whole.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from engram.adapters.extractors import RuleExtractor
from engram.domain.extraction import context_of

SETS = {"tune": Path(__file__).resolve().parent / "data" / "conversations",
        "final": Path(__file__).resolve().parent / "data" / "conversations_final",
        "round3": Path(__file__).resolve().parent / "data" / "conversations_round3",
        "round4": Path(__file__).resolve().parent / "data" / "conversations_round4"}
DATA = SETS["tune"]
LANGS = ("en", "zh")


def conversations(lang: str, data: Path = DATA) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for line in (data / f"{lang}.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            out.append((line[3:].strip(), []))
        elif line.strip() and out:
            out[-1][1].append(line.strip())
    return out


def candidates(lang: str, data: Path = DATA) -> list[dict[str, str]]:
    rules = RuleExtractor()
    found = []
    for name, messages in conversations(lang, data):
        for i, message in enumerate(messages, 1):
            for p in rules.extract(message).proposals:
                found.append({"key": f"{lang}-{name}-m{i:02d}", "text": p.text, "quote": p.quote,
                              "context": context_of(message, p.quote) or ""})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", type=Path, help="write the candidates to judge to this file")
    parser.add_argument("--set", choices=[*SETS, "both"], default="both")
    parser.add_argument("--unjudged", action="store_true", help="--dump only the candidates no one judged yet")
    args = parser.parse_args()
    names = list(SETS) if args.set == "both" else [args.set]
    if args.dump:
        with args.dump.open("w", encoding="utf-8") as out:
            out.write("# key\ttext\tquote\tcontext\n")
            for name in names:
                for lang in LANGS:
                    seen = _judged(SETS[name], lang)
                    for c in candidates(lang, SETS[name]):
                        if not (args.unjudged and (c["key"], c["text"]) in seen):
                            out.write("\t".join(c[k].replace("\t", " ") for k in ("key", "text", "quote", "context"))
                                      + "\n")
        return
    for name in names:
        for lang in LANGS:
            judged = _judged(SETS[name], lang)
            now = candidates(lang, SETS[name])
            verdicts = Counter(judged.get((c["key"], c["text"]), "not judged") for c in now)
            total = len(now)
            messages = sum(len(m) for _, m in conversations(lang, SETS[name]))
            print(f"{name} {lang}: {total} candidates from {messages} messages; "
                  + ", ".join(f"{v} {n} ({100 * n / max(total, 1):.1f}%)" for v, n in sorted(verdicts.items())))


def _judged(data: Path, lang: str) -> dict[tuple[str, str], str]:
    """(key, text) -> verdict, from every judged_{lang}*.tsv of the set (a later file adds to an earlier)."""
    judged: dict[tuple[str, str], str] = {}
    for path in sorted(data.glob(f"judged_{lang}*.tsv")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                key, verdict, text = line.split("\t")[:3]
                judged[(key, text)] = verdict
    return judged


if __name__ == "__main__":
    main()
