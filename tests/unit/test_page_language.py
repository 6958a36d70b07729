"""The pages' language (ADR 0031 "Language"): `Accept-Language` read by its q-values, dates for each
language, and a Chinese catalogue that has words for every message the pages mark, with the same
placeholders, and nothing left over."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

from engram.web import language, pages

WEB = Path(__file__).resolve().parents[2] / "src" / "web"


@pytest.mark.parametrize(("header", "expected"), [
    (None, "en"), ("", "en"), ("en", "en"), ("zh", "zh"), ("ZH-cn", "zh"), ("zh-Hans", "zh"), ("zh-Hant-TW", "zh"),
    ("zh_CN", "zh"), ("zh-CN,zh;q=0.9,en;q=0.8", "zh"), ("en-US,en;q=0.9,zh;q=0.8", "en"),
    ("en;q=0.5, zh;q=0.9", "zh"), ("fr, de;q=0.9, zh;q=0.1", "zh"), ("zh;q=0, en;q=0.1", "en"), ("zh;q=0", "en"),
    ("fr, de", "en"), ("*", "en"), ("zh;q=abc, en;q=0.2", "en"), ("zh;q=2", "en"), (";;,,;q=", "en"),
    ("x" * 5000, "en"),
])
def test_accept_language_by_its_q_values(header: str | None, expected: str) -> None:
    assert language.from_header(header) == expected


def test_dates_for_each_language() -> None:
    moment = datetime(2026, 11, 3, 18, 30, tzinfo=timezone(timedelta(hours=8)))
    assert language.when(moment, "en") == "2026-11-03 18:30 UTC+08:00"
    assert language.when(moment, "zh") == "2026年11月3日 18:30 UTC+08:00"
    assert language.when(datetime(2026, 1, 5, 7, 5, tzinfo=UTC), "zh") == "2026年1月5日 07:05 UTC"
    assert language.when("2026-01-05T07:05:00-05:30", "en") == "2026-01-05 07:05 UTC-05:30"
    assert language.when(None, "zh") == ""


def _marked() -> set[tuple[str | None, str]]:
    """Every message the pages mark (`_`, `N_`, `ngettext`, `pgettext`), as `pybabel extract` finds it."""
    with open(WEB / "locale" / "babel.cfg", encoding="utf-8") as cfg:
        method_map, options_map = parse_mapping_cfg(cfg)
    found = set()
    for _file, _line, message, _comments, context in extract_from_dir(
            str(WEB), method_map, options_map, keywords={**DEFAULT_KEYWORDS, "N_": None}):
        found.add((context, message[0] if isinstance(message, tuple) else message))
    return found


def _placeholders(text: str) -> list[str]:
    return sorted(re.findall(r"%\((\w+)\)s", text))


def test_the_chinese_catalogue_has_words_for_every_message_and_no_other() -> None:
    with open(WEB / "locale" / "zh" / "LC_MESSAGES" / "messages.po", "rb") as po:
        catalogue = read_po(po, locale="zh")
    entries = {(m.context, m.id[0] if isinstance(m.id, tuple) else m.id): m for m in catalogue if m.id}
    marked = _marked()
    assert len(marked) > 200
    assert sorted(marked - set(entries), key=str) == [], "messages without Chinese words (pybabel update)"
    assert sorted(set(entries) - marked, key=str) == [], "words for messages the pages no longer have"
    for key, entry in entries.items():
        words = entry.string if isinstance(entry.string, tuple) else (entry.string,)
        assert "fuzzy" not in entry.flags and all(words), key
        assert all(_placeholders(w) == _placeholders(key[1]) for w in words), key


def test_the_services_refusals_have_their_titles_in_chinese() -> None:
    from engram.api import http  # noqa: F401  (every refusal a page can meet is defined once this is imported)
    from engram.domain.errors import DomainError

    def every(kind: type[DomainError]) -> list[type[DomainError]]:
        return [kind] + [k for sub in kind.__subclasses__() for k in every(sub)]

    titles = {kind.code: kind.title for kind in every(DomainError)}
    for code in pages.PLAIN_WORDS:
        assert code in titles and titles[code] in pages.TITLES, code
        assert language.translated("zh", titles[code]), code
        assert language.translated("zh", pages.PLAIN_WORDS[code]), code
    assert language.translated("zh", "no such message") is None
    assert language.translated("en", "no such message") == "no such message"
