"""How the rule extractor cuts a message (ADR 0025): into sentences, a sentence into clauses, and which
sentences are not statements at all (a question, a supposition, an assistant's answer).

Every span is a slice of the message, so what is read from it is quoted exactly. Which clauses hold a
memory is `extraction_rules`' business.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .extraction_standing import HAN

# -- sentences and clauses ------------------------------------------------------------------

_ABBREVIATIONS = ("mr", "mrs", "ms", "dr", "st", "vs", "e.g", "i.e", "etc", "no", "jr", "sr", "prof")
_SENTENCE_END = re.compile(r"[.!?](?=[\s\"')\]]|$)|[。！？；;\n]")
_CLAUSE_CUT = re.compile(r"(?:(?<!\d),|,(?!\d{3}(?!\d))|[，：])\s*|(?<!\d):(?!\d)\s*"  # "2,800 acres" is one number
                         r"|\s+(?=(?i:and|but|so)\s+(?:(?i:my|our|i|i'm|we|we're|he|she|he's|she's)\b"
                         r"|[A-Z][a-z]+ (?:is|are)\b))")
# A clause that only announces what follows ("From now on,", "请记住：") joins the next one; one that only
# says "and always so" ("以后都这样") joins the one before.
_HEADING = re.compile(r"(?i:(?:hey|hi|ok|okay|so)?[,. ]*(?:quick |some |a bit of |a little |for |more )?(?:context|background|"
                      r"rules?|notes?|instructions?|standing instructions?|one (?:more )?thing|another thing|update|fyi|"
                      r"ps|p\.s|reminder|about me|preferences|heads up|correction|important))$")
_LEAD_ONLY = re.compile(r"^(?i:also|and|oh|btw|by the way|plus|fyi|note|remember|please remember|"
                        r"from now on|going forward|in future|in the future|for the record|just so you know)$"
                        r"|^(?:请记住|记住|另外|还有|对了|以后|今后|"
                        r"从现在起|从今以后|顺便说一下|注意)$")
# ... and so does a clause that only says when what follows applies ("whenever I ask about food for Noah,",
# 以后你给我做行程的时候，)
_HEAD_ONLY = re.compile(r"^(?i:(?:and |also |so )?(?:from now on|going forward|in future|in the future)?,? ?"
                        r"(?:when|whenever|every time|each time|any time|anytime) (?:i|we|you)\b[^,]*)$"
                        r"|^(?:以后|今后|从现在起|下次)?[\u4e00-\u9fff]{1,20}(?:的时候|时候)(?:记住几条|记住|注意)?$"
                        r"|^(?:以后|今后|下次|每次)你?(?:给我|帮我|我问你|回答我|问你|跟我)[\u4e00-\u9fff]{1,16}"
                        r"(?:的东西|的事|的问题|问题|方面的|类的)$")
_TAIL_ONLY = re.compile(r"^(?i:always|every time|each time|from now on|going forward|ever|please)$"
                        r"|^(?:以后都这样|以后也是|以后都是|每次都这样|一直这样|谢谢)$")

# "my wife Noor and our son are flying in": a subject of two people joined by "and" is not cut there
_PAIRED_SUBJECT = re.compile(r"(?i:(?:just )?me)$|(?:(?i:my|our)\s+)?(?:[\w'’-]+\s+){0,2}?[A-Z][\w'’-]*$|(?i:my|our)\s+[\w'’-]+$")
_PAIRED_VERB = re.compile(r"(?<=(?i:me))\s+(?i:and)\b"
                          r"|\s+(?i:and)\s+(?:[\w'’-]+\s+){0,3}?(?i:are|were|have|both|each|'re|’re|'ve|’ve)\b")
# "... the house my late husband Harold and I bought": a named person and I, whatever we did
_PAIRED_NAMED = re.compile(r"(?:^|\s)(?i:my|our|his|her)\s+(?:[\w'’-]+\s+){0,2}?[A-Z][\w'’-]*$")
_PAIRED_I = re.compile(r"\s+(?i:and)\s+(?i:i|we)\s+(?!(?i:am|'m|’m|was|have|'ve|’ve)\b)[a-z]+")
# "we live in Brunswick, me and my partner Sam": who "we" are belongs to the clause before
_WHO_ELSE = re.compile(r"^(?i:(?:just )?me and|me,|and me)\b")
# "it's me, my partner Anh and two casuals": who "me" is with belongs to it
_WHO_WE_ARE = re.compile(r"(?i:it's|it’s|it is|there's|there’s|there is|we're|we are)\s+(?:just\s+)?me$")


def sentences(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each sentence, terminal punctuation included, whitespace excluded."""
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if m.group() == ".":
            word = re.search(r"([\w.]+)$", text[max(start, m.start() - 8):m.start()])  # bounded: stays linear
            if word and (word.group(1).lower() in _ABBREVIATIONS or len(word.group(1)) == 1):
                continue  # "Mr. Chen", "Best, R." : not the end of a sentence
            if m.end() < len(text) and text[m.end()].isdigit():
                continue
        end = m.end()
        while end < len(text) and text[end] in ".!?。！？\"'”’)":
            end += 1
        yield from _trimmed(text, start, end)
        start = end
    yield from _trimmed(text, start, len(text))


def _trimmed(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start < end:
        yield start, end


def clauses(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Clauses of one sentence, without the separators and terminal punctuation."""
    while end > start and text[end - 1] in ".!?。！？；;\"'”’ ":
        end -= 1
    cuts, pos = [], start
    for m in _CLAUSE_CUT.finditer(text, start, end):
        if (_PAIRED_SUBJECT.match(text, pos, m.start()) and _PAIRED_VERB.match(text, m.start(), end)) \
                or (_PAIRED_NAMED.search(text, pos, m.start()) and _PAIRED_I.match(text, m.start(), end)):
            continue  # "Judy and I are off to Tasmania": one subject of two people, not two clauses
        if not _inside_quotes(text, start, m.start()):
            if m.group().startswith((":", "：")) and len(text[pos:m.start()].split()) <= 3 \
                    and not HAN.search(text, pos, m.start()) and not _HEADING.match(text[pos:m.start()].strip()):
                continue  # "deadline this week: 14,000 words ...": a heading belongs to what it heads
            cuts.append((pos, m.start()))
            pos = m.end()
    cuts.append((pos, end))
    cuts = _named_between(text, [(a, b) for a, b in cuts if b > a and text[a:b].strip()])
    merged: list[tuple[int, int]] = []
    lead: int | None = None
    for a, b in cuts:
        piece = text[a:b].strip()
        if _HEADING.match(piece) and text.startswith((":", "："), b):
            continue  # "Quick context: I'm Jonas": the heading says nothing of its own
        if lead is not None:
            a, lead = lead, None
        if (_LEAD_ONLY.match(piece) or _HEAD_ONLY.match(piece)) and b < end:
            lead = a
        elif (_TAIL_ONLY.match(piece) or _WHO_ELSE.match(piece)
              or _WHO_WE_ARE.search(text[merged[-1][0]:merged[-1][1]] if merged else "")) and merged:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    if lead is not None:
        merged.append((lead, end))
    return merged


_BARE_NAME = re.compile(r"(?:(?:Mr|Mrs|Ms|Dr)\.?\s+)?[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?$")
_GOES_ON = re.compile(r"(?:is|was|has|had|does|did|will|can|can't|won't|isn't|doesn't|'s|’s|just|also|still|"
                      r"[a-z]+s|[a-z]+ed)\b")


def _named_between(text: str, cuts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """"one kid, Mason, has a peanut allergy": a name set off by commas, with what it names before it and its
    verb after it, is one clause."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(cuts):
        if out and i + 1 < len(cuts) and _BARE_NAME.match(text[cuts[i][0]:cuts[i][1]].strip()) \
                and not _BARE_NAME.match(text[out[-1][0]:out[-1][1]].strip()) \
                and len(text[out[-1][0]:out[-1][1]].split()) <= 5 and _GOES_ON.match(text, cuts[i + 1][0]):
            out[-1] = (out[-1][0], cuts[i + 1][1])
            i += 2
            continue
        out.append(cuts[i])
        i += 1
    return out


def _inside_quotes(text: str, start: int, at: int) -> bool:
    return text.count('"', start, at) % 2 == 1


# -- what a sentence must not be --------------------------------------------------------------

_EN_QUESTION = re.compile(
    r"^(?:what|what's|how|why|when|where|who|which|whose|is|are|am|was|were|do|does|did|can|could|would|"
    r"will|shall|should|have|has|any)\b(?!['’]t)", re.IGNORECASE)
_EN_NOT_A_STATEMENT = re.compile(
    r"(?<!even )\b(?:if(?! (?:possible|you can|it's possible))|imagine|suppose|supposing|pretend|let's say|"
    r"in theory|i wish|wish i|what if|as an ai|in an ideal world|someday|some day|one day|they say|people say|"
    r"here is|here's|here are|let me|happy to help|hope this helps|you're welcome|let me know|"
    r"remind me to|as a language model|as requested|for you|to your|attached)\b"
    r"|^(?:sure|certainly|of course|absolutely|great question|good question)\b",
    re.IGNORECASE)
_ZH_QUESTION = re.compile(r"[吗呢么]$|什么(?![\u4e00-\u9fff]{0,4}都)|"
                          r"怎么|怎样|哪|谁|几点|多少|有没有|是不是|能不能|可不可以|请问|吃了没")
_ZH_NOT_A_STATEMENT = re.compile(
    r"^(?:希望|但愿)|如有|随时|的话.{0,8}就|理想情况下|如果|假如|要是|假设|设想|万一|就好了|"
    r"以下是|这是您|为您|希望对您|当然可以|作为一个|人工智能助手|"
    r"^(?:请)?(?:帮我|给我|麻烦)(?![\u4e00-\u9fff]{0,10}的时候)|您")


def asks(sentence: str) -> bool:
    """A question, marked as one."""
    return sentence.rstrip(" \"'”’)").endswith(("?", "？"))


def skipped(sentence: str) -> bool:
    s = sentence.strip().rstrip(".!。！")
    if s.endswith(("?", "？")) or _EN_QUESTION.match(s) or _ZH_QUESTION.search(s):
        return True
    return bool(_EN_NOT_A_STATEMENT.search(s) or _ZH_NOT_A_STATEMENT.search(s))
