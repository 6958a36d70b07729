"""Days a question names, in English and Chinese, resolved against the asking day, and their extremes."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.domain.when import days_named

THURSDAY = date(2025, 11, 27)


@pytest.mark.parametrize(("text", "expected"), [
    ("What did I do on 9 December 2024?", [date(2024, 12, 9)]),
    ("what happened on December 9th, 2024", [date(2024, 12, 9)]),
    ("and on the 3rd of March?", [date(2025, 3, 3)]),
    ("on December 9?", [date(2024, 12, 9)]),  # no year: the latest one not after today
    ("2024年12月9日我做了什么？", [date(2024, 12, 9)]),
    ("11月3号呢", [date(2025, 11, 3)]),
    ("2025-11-02", [date(2025, 11, 2)]),
    ("What did I cook yesterday?", [date(2025, 11, 26)]),
    ("我前天晚饭做了什么？", [date(2025, 11, 25)]),
    ("two weeks ago", [date(2025, 11, 13)]),
    ("三天前", [date(2025, 11, 24)]),
    ("两周前我在看什么书？", [date(2025, 11, 13)]),
    ("Where did I go last Sunday?", [date(2025, 11, 23)]),
    ("last Thursday", [date(2025, 11, 20)]),
    ("this Tuesday", [date(2025, 11, 25)]),
    ("我这周三读完了哪本书？", [date(2025, 11, 26)]),
    ("上周六", [date(2025, 11, 22)]),
    ("上上周一", [date(2025, 11, 10)]),
    ("What is my favourite tea?", []),
    ("on 31 February", []),
    ("May I ask 5 questions", []),
])
def test_days_named(text: str, expected: list[date]) -> None:
    assert days_named(text, THURSDAY) == expected


def test_the_calendar_edges_never_raise() -> None:
    assert days_named("99999999999999 days ago, 9999 years ago", date(1, 1, 3)) == []
    assert days_named("这周日, next to nothing", date(9999, 12, 31)) == []
    assert days_named("yesterday", date(1, 1, 1)) == []
    assert days_named("on 1 January 0001", date(1, 1, 1)) == [date(1, 1, 1)]
    assert days_named("on 1 January 0000 and 0 March 2025", date(1, 1, 1)) == []  # no year 0, no day 0


@given(st.text(max_size=200), st.dates())
def test_any_text_on_any_day_gives_real_days(text: str, today: date) -> None:
    for day in days_named(text, today):
        assert isinstance(day, date)
