"""Days a question names, in English and Chinese, resolved against the asking day, and their extremes."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.domain.when import days_named, valid_time

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


# -- a statement's valid time, resolved against when it was said --------------------------------------

MONDAY_9AM_SHANGHAI = datetime(2026, 11, 2, 9, 0, tzinfo=timezone(timedelta(hours=8)))


@pytest.mark.parametrize(("text", "until"), [
    ("next Thursday we have the quarterly offsite in Potsdam", date(2026, 11, 13)),  # the later Thursday it may mean
    ("the move is Saturday the 16th", date(2026, 11, 17)),
    ("flying out December 19th, back January 4th", date(2027, 1, 5)),
    ("in two weeks I start at Zalando", date(2026, 11, 17)),
    ("this weekend we go hiking in Sintra", date(2026, 11, 9)),
    ("下周三要在周会上讲季度数据", date(2026, 11, 12)),
    ("第三次考试约在下个月8号", date(2026, 12, 9)),
    ("我月底搬家", date(2026, 12, 1)),
    ("明年12月底考试", date(2028, 1, 1)),
])
def test_a_plan_is_true_from_when_it_was_said_until_after_the_last_day_it_names(text: str, until: date) -> None:
    start, end = valid_time(text, MONDAY_9AM_SHANGHAI)
    assert start == MONDAY_9AM_SHANGHAI and end == datetime.combine(until, time(), MONDAY_9AM_SHANGHAI.tzinfo)


@pytest.mark.parametrize(("text", "since"), [
    ("I moved to Lisbon last month", date(2026, 10, 1)),
    ("我上个月搬到了杭州", date(2026, 10, 1)),
    ("I started at Zalando two weeks ago", date(2026, 10, 19)),
])
def test_a_change_said_in_the_past_is_true_from_the_day_it_names(text: str, since: date) -> None:
    assert valid_time(text, MONDAY_9AM_SHANGHAI) == (
        datetime.combine(since, time(), MONDAY_9AM_SHANGHAI.tzinfo), None)


@pytest.mark.parametrize("text", [
    "We close Mondays", "我每周三下午开会", "I prefer aisle seats", "never schedule anything before 10:00",
    "Wednesdays 13-16 are my focus time", "the weekly meeting is on Friday", "周会在周五",
    "I'm on shift Friday night",  # this Friday or every Friday: not certain
    "we meet on the 3rd of every month",
])
def test_what_names_no_certain_day_keeps_an_uncertain_time(text: str) -> None:
    assert valid_time(text, MONDAY_9AM_SHANGHAI) == (None, None)


def test_without_the_time_it_was_said_nothing_is_resolved() -> None:
    assert valid_time("next Thursday we have the offsite", None) == (None, None)


@given(st.text(max_size=80), st.datetimes(timezones=st.just(UTC)))
def test_any_text_at_any_time_resolves_to_an_ordered_span_or_nothing(text: str, said: datetime) -> None:
    start, end = valid_time(text, said)
    assert start is None or end is None or start < end
