"""Search terms for recall that never store text: normalised, stemmed, keyed-hashed.

Each term is HMAC-SHA256 under a per-company search key, truncated to 64 bits.
Within one company, equal terms hash equal (that is what makes search work, and
it is the leak: see docs/adr/0002). Chinese and other CJK runs become bigrams.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import date
from functools import lru_cache
from typing import Any

import snowballstemmer

from .crypto import DerivationRoot

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
# a CJK run, or a run of other letters and digits (never both: "我2025年" is three runs)
_RUN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:'[^\W_{_CJK}]+)*", re.UNICODE)
_IS_CJK = re.compile(rf"[{_CJK}]")
# Function words, and the words questions are made of: a question's "did", "where" or "you" must not
# make the other speaker's question outrank the answer.
_STOP = frozenset("""
a an and are as at be but by for from has have i if in into is it its me my of on or our so that the their
them they this to was we were what when which who will with you your
am been being had do does did doing done how where why whom whose can could would should shall may might
must he she him her his hers herself himself itself us ours ourselves yours yourself yourselves
im ive youre youve weve were theyre theyve hes shes thats theres whats dont doesnt didnt isnt arent wasnt
there here about any some all just also very too then than up out over again more most such only own same
other each both few yes ok okay oh well really much many lot lots get got anything something thing things
""".split())
# Chinese question words and particles go before pairs are formed; characters too common to mean
# anything alone are kept out of the single-character terms.
_ZH_QUESTION = re.compile("为什么|什么|怎么|哪里|哪儿|哪个|哪些|多少|几|谁|吗|呢|吧|啊|呀|嘛")
_ZH_COMMON = frozenset("的了是在我你他她它们这那个吗呢吧啊呀嘛和也都就有")
# Irregular English forms the stemmer leaves apart ("drew" never stems to "draw").
_IRREGULAR = {
    "drew": "draw", "drawn": "draw", "went": "go", "gone": "go", "ate": "eat", "eaten": "eat", "bought": "buy",
    "brought": "bring", "taught": "teach", "thought": "think", "caught": "catch", "ran": "run", "swam": "swim",
    "swum": "swim", "sang": "sing", "sung": "sing", "wrote": "write", "written": "write", "rode": "ride",
    "ridden": "ride", "drove": "drive", "driven": "drive", "flew": "fli", "flown": "fli", "saw": "see",
    "seen": "see", "took": "take", "taken": "take", "made": "make", "met": "meet", "left": "leav", "felt": "feel",
    "kept": "keep", "slept": "sleep", "spent": "spend", "sent": "send", "built": "build", "lost": "lose",
    "won": "win", "began": "begin", "begun": "begin", "broke": "break", "broken": "break", "chose": "choos",
    "chosen": "choos", "forgot": "forget", "forgotten": "forget", "grew": "grow", "grown": "grow", "knew": "know",
    "known": "know", "sold": "sell", "told": "tell", "found": "find", "gave": "give", "given": "give",
    "heard": "hear", "held": "hold", "paid": "pay", "said": "say", "sat": "sit", "stood": "stand",
    "threw": "throw", "wore": "wear", "worn": "wear", "woke": "wake", "fell": "fall", "fallen": "fall",
    "hid": "hide", "led": "lead", "lent": "lend", "meant": "mean", "mice": "mous", "children": "child",
    "feet": "foot", "teeth": "tooth", "men": "man", "women": "woman", "people": "person",
}
PREFIX = 5  # "allergies" and "allergic" stem apart but share "aller": a weak term for near forms
# Query weights of each kind of term (measured on bench/quality.py; ADR 0023).
WEIGHT_PREFIX = 0.3
WEIGHT_DAY = 3.0
_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


def _analyse(text: str) -> tuple[list[str], list[str]]:
    """(exact terms, in order with repeats; looser terms: CJK single characters, irregular base forms,
    English prefixes)."""
    exact: list[str] = []
    loose: list[str] = []
    norm = unicodedata.normalize("NFKC", text).casefold()
    for run in _RUN.findall(norm):
        if _IS_CJK.match(run):
            for part in _ZH_QUESTION.sub(" ", run).split():
                if len(part) == 1:
                    exact.append(part)
                    continue
                exact.extend(part[i : i + 2] for i in range(len(part) - 1))
                loose.extend(c for c in part if c not in _ZH_COMMON)
            continue
        word = run.replace("'", "")
        if word in _STOP:
            continue
        stem = _stem(word) if word.isascii() else word
        exact.append(stem)
        if word.isascii() and word.isalpha():
            base = _IRREGULAR.get(word, stem)
            if base != stem:
                loose.append(base)
            if len(base) > PREFIX:
                loose.append("~" + base[:PREFIX])
    return exact, loose


def terms(text: str) -> list[str]:
    """Normalised search terms of a text, in order, with repeats: what a list's `q` matches."""
    return _analyse(text)[0]


def index_terms(text: str) -> list[str]:
    """Every term a memory is found by: its terms, then the looser ones (with repeats)."""
    exact, loose = _analyse(text)
    return exact + loose


def weighted_terms(text: str) -> list[tuple[str, float]]:
    """A recall query's terms, each once, with its weight: exact and CJK single characters and base
    forms 1, English prefixes `WEIGHT_PREFIX`."""
    exact, loose = _analyse(text)
    weights: dict[str, float] = {}
    for term in exact + loose:
        weights.setdefault(term, WEIGHT_PREFIX if term.startswith("~") else 1.0)
    return list(weights.items())


def day_term(day: date) -> str:
    """The term a memory said on `day` carries, and a question naming that day asks for."""
    return "@" + day.isoformat()


class BlindIndex:
    def __init__(self, root: DerivationRoot) -> None:
        self._root = root
        self._keys: dict[str, bytes] = {}
        self._macs: dict[str, Any] = {}
        self._memo = threading.local()

    def _key(self, company: str) -> bytes:
        key = self._keys.get(company)
        if key is None:
            key = self._keys[company] = self._root.search_key(company)
        return key

    def _mac(self, data: bytes, company: str) -> bytes:
        """HMAC-SHA256 under the company's key, from a keyed state made once (copying it is cheaper than
        keying a new one for every term)."""
        base = self._macs.get(company)
        if base is None:
            base = self._macs[company] = hmac.new(self._key(company), digestmod=hashlib.sha256)
        mac = base.copy()
        mac.update(data)
        return mac.digest()

    @contextmanager
    def remembering(self) -> Iterator[None]:
        """Within this block (one batch of projection work, in this thread) a term blinded once is not
        blinded again. The terms are forgotten when it ends: nothing of a text outlives its batch here."""
        outer = getattr(self._memo, "terms", None)
        if outer is None:
            self._memo.terms = {}
        try:
            yield
        finally:
            if outer is None:
                self._memo.terms = None

    def blind(self, company: str, term: str) -> int:
        memo: dict[tuple[str, str], int] | None = getattr(self._memo, "terms", None)
        if memo is not None:
            found = memo.get((company, term))
            if found is not None:
                return found
        value = int.from_bytes(self._mac(term.encode(), company)[:8], "big", signed=True)
        if memo is not None:
            memo[(company, term)] = value
        return value

    def source(self, company: str, source_id: str) -> str:
        """A source id as the views keep it (ADR 0019): keyed like the terms, kept apart from them by
        its own prefix, 128 bits in hex, so equal ids still match and join within one company."""
        digest = self._mac(b"source\x00" + source_id.encode(), company)
        return "s" + digest[:16].hex()

    def message(self, company: str, person: str, source: dict[str, Any]) -> str | None:
        """The message a piece of evidence cites, as the links view keeps it (ADR 0020): keyed like
        the sources, per person, with its own prefix; None when the source names no message."""
        if not source.get("message_id"):
            return None
        cited = json.dumps([person, source.get("kind"), source.get("id"), source["message_id"]])
        digest = self._mac(b"message\x00" + cited.encode(), company)
        return "m" + digest[:16].hex()

    def tags(self, company: str, tags: Iterable[str]) -> list[int]:
        """Tags as the views keep them for filtering: keyed like the terms, with their own prefix, so a
        tag never equals a word of the text; compared exactly after NFKC and case folding."""
        found = {self.blind(company, "#\x00" + unicodedata.normalize("NFKC", t).casefold()) for t in tags}
        return sorted(found)

    def sources(self, company: str, source_ids: Iterable[str]) -> list[str]:
        return sorted(self.source(company, s) for s in source_ids)

    def term_counts(self, company: str, text: str, day: date | None = None) -> Counter[int]:
        """A memory's blinded terms with their counts; `day`: when it was said (its day term)."""
        counts: Counter[int] = Counter()
        for term, n in Counter(index_terms(text)).items():  # each distinct term blinded once
            counts[self.blind(company, term)] += n
        if day is not None:
            counts[self.blind(company, day_term(day))] += 1
        return counts

    def query_terms(self, company: str, text: str) -> list[int]:
        """The exact terms, each once: what a list's `q` and an insight's words are matched on."""
        return list(dict.fromkeys(self.blind(company, t) for t in terms(text)))

    def recall_terms(self, company: str, text: str, days: Iterable[date] = ()) -> tuple[list[int], list[float]]:
        """A recall query's blinded terms and their weights, the days it names among them."""
        weighted = [*weighted_terms(text), *((day_term(d), WEIGHT_DAY) for d in days)]
        blinded: dict[int, float] = {}
        for term, weight in weighted:
            blinded.setdefault(self.blind(company, term), weight)
        return list(blinded), list(blinded.values())
