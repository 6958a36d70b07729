"""The import's record parser holds for any line, not just the ones we thought of."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.domain.instant import EARLIEST, LATEST
from engram.domain.text import is_valid_id
from engram.service.importer import RecordProblem, parse_record

LIMIT = 64
offsets = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))
ids = st.text(st.characters(min_codepoint=0x20, exclude_characters="\x7f", exclude_categories=["Cs"]),
              min_size=1, max_size=40)


def base(**changes: Any) -> dict[str, Any]:
    r = {"company": "acme", "person": "alice", "text": "I like tea",
         "source": {"kind": "chat", "id": "c-1", "message_id": None}, "occurred_at": "2020-01-01T00:00:00+00:00"}
    r.update(changes)
    return r


def parse(data: Any) -> Any:
    return parse_record(json.dumps(data), company="acme", max_text_bytes=LIMIT)


def text_is_acceptable(text: str) -> bool:
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    return "\x00" not in text and size <= LIMIT and bool(text.strip())


@given(st.text(max_size=80))
def test_text_arrives_exactly_as_written_or_the_line_is_refused_without_it(text: str) -> None:
    if text_is_acceptable(text):
        assert parse(base(text=text)).text == text
    else:
        with pytest.raises(RecordProblem) as refused:
            parse(base(text=text))
        assert refused.value.code in ("invalid_text", "text_too_large")
        if text.strip() and len(text) > 3:
            assert text not in refused.value.detail


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)), offsets)
def test_a_time_is_accepted_exactly_when_it_lies_within_1900_and_2200_utc(naive: datetime, tz: timezone) -> None:
    aware = naive.replace(tzinfo=tz)
    try:
        inside = EARLIEST <= aware.astimezone(UTC) <= LATEST
    except OverflowError:
        inside = False
    for field in ("occurred_at", "valid_from"):
        if inside:
            assert getattr(parse(base(**{field: aware.isoformat()})), field) == aware
        else:
            with pytest.raises(RecordProblem) as refused:
                parse(base(**{field: aware.isoformat()}))
            assert refused.value.code == "invalid_time"
    with pytest.raises(RecordProblem):
        parse(base(occurred_at=naive.isoformat()))  # never without an offset


@pytest.mark.parametrize("value", ["+10000-01-01T00:00:00+00:00", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59-23:59",
                                   "0001-01-01T00:00:00+23:59", "2020-01-01T00:00:00+24:00", "2020-02-30T00:00:00Z",
                                   "1899-12-31T23:59:59Z", "2200-01-01T00:00:01Z", "2020-01-01", 1577836800, None, ""])
def test_extreme_and_malformed_times_are_refused(value: Any) -> None:
    with pytest.raises(RecordProblem) as refused:
        parse(base(occurred_at=value))
    assert refused.value.code == "invalid_time"


@given(ids, ids, st.one_of(st.none(), ids), ids)
def test_printable_ids_pass_through(person: str, kind: str, message_id: str | None, source_id: str) -> None:
    parsed = parse(base(person=person, source={"kind": kind, "id": source_id, "message_id": message_id}))
    assert (parsed.person, parsed.source.kind, parsed.source.id, parsed.source.message_id) == \
        (person, kind, source_id, message_id)
    assert parsed.confirmed and parsed.visibility == "general"


@given(st.text(max_size=20))
def test_person_must_be_a_printable_id(person: str) -> None:
    if is_valid_id(person):
        assert parse(base(person=person)).person == person
    else:
        with pytest.raises(RecordProblem) as refused:
            parse(base(person=person))
        assert refused.value.code == "invalid_person"


@given(st.text(max_size=20))
def test_only_the_importing_company(company: str) -> None:
    if company == "acme":
        assert parse(base(company=company)).company == "acme"
    else:
        with pytest.raises(RecordProblem) as refused:
            parse(base(company=company))
        assert refused.value.code == "other_company"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(st.sampled_from(["company", "person", "text", "source", "occurred_at", "status",
                                        "visibility", "team", "valid_from", "valid_to", "extra"]),
                       json_values, max_size=10))
def test_any_json_object_is_a_record_or_a_problem_never_a_crash(changes: dict[str, Any]) -> None:
    try:
        parsed = parse(base(**changes))
    except RecordProblem as e:
        assert e.code and e.detail
        return
    assert parsed.company == "acme" and "extra" not in changes
    assert changes.get("status", "confirmed") in ("confirmed", "candidate")


@given(st.text(max_size=200))
def test_any_line_at_all_is_a_record_or_a_problem(line: str) -> None:
    try:
        parse_record(line, company="acme", max_text_bytes=LIMIT)
    except RecordProblem:
        pass


def test_status_decides_confirmed_or_candidate() -> None:
    assert parse(base()).confirmed is True  # API.md: a record is a prior confirmed memory unless it says otherwise
    assert parse(base(status="confirmed")).confirmed is True
    assert parse(base(status="candidate")).confirmed is False
    for wrong in ("pending_review", "Confirmed", True, None):
        with pytest.raises(RecordProblem):
            parse(base(status=wrong))


def test_restricted_needs_team_and_source_and_valid_time_order() -> None:
    with pytest.raises(RecordProblem) as refused:
        parse(base(visibility="restricted"))
    assert refused.value.code == "invalid_scope"
    assert parse(base(visibility="restricted", team="t-1")).team == "t-1"
    with pytest.raises(RecordProblem) as refused:
        parse(base(valid_from="2021-01-01T00:00:00Z", valid_to="2020-01-01T00:00:00Z"))
    assert refused.value.code == "invalid_valid_time"
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RecordProblem):
        parse_record(deep, company="acme", max_text_bytes=LIMIT)


def test_lines_are_numbered_and_an_overlong_or_undecodable_line_is_a_problem_not_a_load(tmp_path) -> None:
    from engram.service.importer import MAX_LINE_BYTES, lines

    path = tmp_path / "f.jsonl"
    path.write_bytes(b"\xef\xbb\xbf{\"a\": 1}\r\n" + b"x" * (3 * MAX_LINE_BYTES) + b"\n\n   \n" + b"\xff\xfe\n" + b"{}")
    got = list(lines(path))
    assert [n for n, _ in got] == [1, 2, 5, 6]  # blank lines 3 and 4 are skipped, still counted
    assert got[0][1] == '{"a": 1}\r\n'  # a byte-order mark at the start is dropped
    assert isinstance(got[1][1], RecordProblem) and got[1][1].code == "line_too_long"
    assert isinstance(got[2][1], RecordProblem) and got[2][1].code == "invalid_encoding"
    assert got[3][1] == "{}"
