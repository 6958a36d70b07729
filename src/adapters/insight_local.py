"""The local proposer: the same preference or instruction said again, in English or in Chinese.

Deterministic and offline. A memory counts when it reads as a preference or an instruction (a
marker word such as "should", "always", "first", "prefer", or 要, 应该, 优先, 希望, 请). Two such
memories say the same thing when they share at least two content terms, one's terms are all among
the other's (one that swaps a term for another says something else: "list blockers first" is not
"list wins first" again, nor "under 100 words" "under 300 words"), and both or neither are
negated. English terms are lower-cased words without stop words and a plural "s", and numbers;
Chinese ones are character pairs, without filler such as 记住. Memories that say the same
thing, directly or through others, form one insight: "Said N times: <the shortest wording>".

Meaning does not join them (ADR 0040, bench/insights.py): the packaged model finds a different
preference on the same topic ("reply in English" and 请用中文回复我) more alike than the same one
said in other words, so its similarity would propose more wrong insights than right ones.
"""

from __future__ import annotations

import re
import unicodedata

from engram.domain.insight import Fact, Group, Proposal

NAME = "local"

_WORD = re.compile(r"[^\W\d_]+|\d+(?:[.,]\d+)*", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_EN_MARKERS = frozenset({
    "should", "must", "always", "never", "first", "prefer", "prefers", "preferred", "please", "want", "wants",
    "like", "likes", "put", "keep", "use", "avoid", "don't", "dont", "need", "needs", "only", "instead",
})
_ZH_MARKERS = ("要", "应该", "应", "优先", "喜欢", "希望", "请", "总是", "必须", "不要", "别", "先", "偏好")
_STOP = frozenset({
    "a", "an", "the", "and", "or", "but", "to", "of", "in", "on", "at", "for", "with", "by", "from", "as", "is",
    "are", "be", "was", "were", "been", "it", "its", "this", "that", "these", "those", "i", "me", "my", "we", "our",
    "you", "your", "he", "she", "they", "them", "their", "his", "her", "again", "also", "so", "do", "does", "did",
    "should", "must", "always", "please", "want", "wants", "like", "likes", "put", "keep", "need", "needs",
    "prefer", "prefers", "preferred", "come", "comes", "go", "goes", "there", "here", "when", "if", "all",
    "any", "some", "very", "just", "really", "re", "s", "t", "say", "said", "says", "tell", "told",
    "remember", "now", "every", "each", "going", "forward", "future", "ok", "okay", "thanks",
})
_ZH_STOP = frozenset("的了是在和也都就要请说把给")
_ZH_FILLER = re.compile("请记住|记住|从现在起|从今以后|以后|今后|另外|还有|对了")
_NEGATIONS = frozenset({"never", "not", "no", "don't", "dont", "doesn't", "without"})
_ZH_NEGATIONS = ("不要", "别", "不", "没", "勿")
# words with those characters that negate nothing: 别人 is "other people", 不错 "good"
_ZH_NOT_NEGATIONS = re.compile("别人|别的|别处|特别|区别|分别|告别|差别|级别|类别|性别|识别|不错|不过|不仅|不断|不久|差不多")
MIN_SHARED = 2


def _normal(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def terms(text: str) -> frozenset[str]:
    """The content terms two wordings of one preference share."""
    text = _normal(text)
    found: set[str] = set()
    for word in _WORD.findall(_CJK.sub(" ", text)):
        if word in _STOP or (len(word) < 2 and not word.isdigit()):
            continue
        found.add(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)
    for run in _CJK.findall(_ZH_FILLER.sub(" ", text)):
        chars = "".join(c for c in run if c not in _ZH_STOP)
        found.update(chars[i:i + 2] for i in range(len(chars) - 1))
    return frozenset(found)


def is_preference(text: str) -> bool:
    text = _normal(text)
    if any(marker in text for marker in _ZH_MARKERS):
        return True
    return any(word in _EN_MARKERS for word in re.findall(r"[a-z']+", text))


def is_negated(text: str) -> bool:
    """"Never put risks first" is not "put risks first" again."""
    text = _normal(text)
    zh = _ZH_NOT_NEGATIONS.sub(" ", text)
    return any(n in zh for n in _ZH_NEGATIONS) or any(w in _NEGATIONS for w in re.findall(r"[a-z']+", text))


def same_thing(a: frozenset[str], b: frozenset[str]) -> bool:
    # one adding words to the other says it again; each with a term of its own is the same frame around
    # another value: another preference
    return len(a & b) >= MIN_SHARED and (a <= b or b <= a)


def wording(facts: list[Fact]) -> str:
    shortest = min(facts, key=lambda f: (len(f.text), f.memory_id)).text.strip()
    if _CJK.search(shortest):
        return f"多次提到（{len(facts)} 次）：{shortest}"
    return f"Said {len(facts)} times: {shortest}"


class LocalProposer:
    name = NAME

    def __init__(self, max_facts: int = 500) -> None:
        self.max_facts = max_facts

    def propose(self, group: Group) -> list[Proposal]:
        facts = [f for f in group.facts[: self.max_facts] if f.text and is_preference(f.text)]
        keyed = [(f, terms(f.text), is_negated(f.text)) for f in facts]
        parent = list(range(len(keyed)))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for i in range(len(keyed)):
            for j in range(i + 1, len(keyed)):
                if keyed[i][2] == keyed[j][2] and same_thing(keyed[i][1], keyed[j][1]):
                    parent[root(j)] = root(i)
        clusters: dict[int, list[Fact]] = {}
        for i, (fact, _terms, _negated) in enumerate(keyed):
            clusters.setdefault(root(i), []).append(fact)
        return [Proposal(wording(members), tuple(sorted(f.memory_id for f in members)), NAME)
                for members in clusters.values() if len({f.memory_id for f in members}) >= 2]
