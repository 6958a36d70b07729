"""A first-character prefilter for long alternations (the sensitive rules use it).

Python's matcher tries every alternative of a long alternation at every position of the text; the
Chinese rules' alternations cost milliseconds on an 8 KiB English text where none can start. A
lookahead on the characters a match can start with lets it skip those positions at the speed of a
character class. The class is read off the pattern's own parse; where it cannot be told for sure
(a match may be empty, or start with any character or a negated set), no prefilter; nor where the
matcher finds a literal prefix or a first-character set of its own (it skips ahead faster then).
"""

from __future__ import annotations

import re
from typing import Any

_CATEGORIES = {"CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_SPACE": r"\s",
               "CATEGORY_NOT_SPACE": r"\S", "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W"}


def _first(items: list[tuple[Any, Any]]) -> tuple[list[str], bool] | None:
    """The characters a match of this parsed sequence can start with, as the items of a character class
    (`a`, `a-z`, `\\d`), and whether it can match empty; None when that cannot be told here."""
    from re import _constants as c  # type: ignore[attr-defined]

    firsts: list[str] = []
    for op, av in items:
        if op is c.LITERAL:
            return [*firsts, re.escape(chr(av))], False
        if op is c.IN:
            chars: list[str] = []
            for kind, value in av:
                if kind is c.LITERAL:
                    chars.append(re.escape(chr(value)))
                elif kind is c.RANGE:
                    chars.append(f"{re.escape(chr(value[0]))}-{re.escape(chr(value[1]))}")
                elif kind is c.CATEGORY and str(value) in _CATEGORIES:
                    chars.append(_CATEGORIES[str(value)])
                else:  # NEGATE, or what this does not know: not told here
                    return None
            return firsts + chars, False
        if op is c.AT or op in (c.ASSERT, c.ASSERT_NOT):
            continue  # zero-width: what follows starts the match
        if op is c.SUBPATTERN:
            _group, add_flags, _del_flags, sub = av
            if add_flags & re.IGNORECASE:
                return None
            found = _first(list(sub))
        elif op is c.BRANCH:
            found_all = [_first(list(branch)) for branch in av[1]]
            known = [f for f in found_all if f is not None]
            if len(known) < len(found_all):
                return None
            found = ([r for f in known for r in f[0]], any(f[1] for f in known))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            low, _high, sub = av
            inner = _first(list(sub))
            found = None if inner is None else (inner[0], inner[1] or low == 0)
        else:  # ANY, NOT_LITERAL, group references, ...: not told here
            return None
        if found is None:
            return None
        firsts += found[0]
        if not found[1]:
            return firsts, False
    return firsts, True


def prefiltered(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """The same pattern behind a lookahead on the characters its matches start with, when those can be
    told; the pattern itself otherwise. Same matches, same spans, same groups."""
    if pattern.flags & re.IGNORECASE:
        return pattern
    try:
        from re import _compiler, _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(pattern.pattern, pattern.flags)
        if _compiler._get_literal_prefix(parsed, pattern.flags)[0] or _compiler._get_charset_prefix(
                parsed, pattern.flags) is not None:
            return pattern  # the matcher skips ahead on its own, faster than behind a lookahead
        found = _first(list(parsed))
    except Exception:  # noqa: BLE001 - the parser is the interpreter's own, not a promise: no prefilter
        return pattern
    if found is None or found[1] or not found[0]:
        return pattern
    return re.compile(f"(?=[{''.join(sorted(set(found[0])))}])(?:{pattern.pattern})", pattern.flags)
