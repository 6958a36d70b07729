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
import unicodedata
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import snowballstemmer

from .crypto import MasterKey

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_RUN = re.compile(rf"[{_CJK}]+|[^\W_]+(?:'[^\W_]+)*", re.UNICODE)
_IS_CJK = re.compile(rf"[{_CJK}]")
_STOP = frozenset(
    "a an and are as at be but by for from has have i if in into is it its me my of on or our "
    "so that the their them they this to was we were what when which who will with you your".split()
)
_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


def terms(text: str) -> list[str]:
    """Normalised search terms of a text, in order, with repeats."""
    out: list[str] = []
    norm = unicodedata.normalize("NFKC", text).casefold()
    for run in _RUN.findall(norm):
        if _IS_CJK.match(run):
            if len(run) == 1:
                out.append(run)
            else:
                out.extend(run[i : i + 2] for i in range(len(run) - 1))
            continue
        word = run.replace("'", "")
        if word in _STOP:
            continue
        out.append(_stem(word) if word.isascii() else word)
    return out


class BlindIndex:
    def __init__(self, master: MasterKey) -> None:
        self._master = master
        self._keys: dict[str, bytes] = {}

    def _key(self, company: str) -> bytes:
        key = self._keys.get(company)
        if key is None:
            key = self._keys[company] = self._master.search_key(company)
        return key

    def blind(self, company: str, term: str) -> int:
        digest = hmac.new(self._key(company), term.encode(), hashlib.sha256).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def source(self, company: str, source_id: str) -> str:
        """A source id as the views keep it (ADR 0019): keyed like the terms, kept apart from them by
        its own prefix, 128 bits in hex, so equal ids still match and join within one company."""
        digest = hmac.new(self._key(company), b"source\x00" + source_id.encode(), hashlib.sha256).digest()
        return "s" + digest[:16].hex()

    def message(self, company: str, person: str, source: dict[str, Any]) -> str | None:
        """The message a piece of evidence cites, as the links view keeps it (ADR 0020): keyed like
        the sources, per person, with its own prefix; None when the source names no message."""
        if not source.get("message_id"):
            return None
        cited = json.dumps([person, source.get("kind"), source.get("id"), source["message_id"]])
        digest = hmac.new(self._key(company), b"message\x00" + cited.encode(), hashlib.sha256).digest()
        return "m" + digest[:16].hex()

    def sources(self, company: str, source_ids: Iterable[str]) -> list[str]:
        return sorted(self.source(company, s) for s in source_ids)

    def term_counts(self, company: str, text: str) -> Counter[int]:
        return Counter(self.blind(company, t) for t in terms(text))

    def query_terms(self, company: str, text: str) -> list[int]:
        return list(dict.fromkeys(self.blind(company, t) for t in terms(text)))
