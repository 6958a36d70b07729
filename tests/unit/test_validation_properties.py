"""The domain's input rules hold for any value, not just the ones we thought of."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.domain.errors import InvalidText, TextTooLarge
from engram.domain.instant import EARLIEST, LATEST, InvalidTime, check_instant
from engram.domain.text import is_valid_id, validate_text

offsets = st.integers(min_value=-(14 * 60), max_value=14 * 60).map(lambda m: timezone(timedelta(minutes=m)))


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)), offsets)
def test_a_time_is_accepted_exactly_when_it_lies_within_1900_and_2200_utc(naive: datetime, tz: timezone) -> None:
    aware = naive.replace(tzinfo=tz)
    try:
        inside = EARLIEST <= aware.astimezone(UTC) <= LATEST
    except OverflowError:
        inside = False
    if inside:
        assert check_instant(aware) is aware
    else:
        with pytest.raises(InvalidTime):
            check_instant(aware)
    with pytest.raises(InvalidTime):
        check_instant(naive)  # never without an offset


@given(st.text(), st.integers(min_value=1, max_value=64))
def test_text_is_accepted_exactly_when_it_is_clean_and_fits(text: str, limit: int) -> None:
    try:
        size = len(text.encode("utf-8"))
        encodable = True
    except UnicodeEncodeError:
        encodable = False
    acceptable = encodable and "\x00" not in text and size <= limit and bool(text.strip())
    if acceptable:
        assert validate_text(text, limit) == text
    else:
        with pytest.raises((InvalidText, TextTooLarge)) as refused:
            validate_text(text, limit)
        detail = str(refused.value)  # fixed wording, sizes at most: never the text itself
        assert detail in ("text contains a NUL character", "text contains an unpaired surrogate", "text is empty") \
            or detail == f"text is {len(text.encode('utf-8'))} bytes; the limit is {limit}"


@given(st.one_of(st.text(max_size=250), st.integers(), st.none(), st.binary()))
def test_ids_are_printable_bounded_text(value: object) -> None:
    ok = is_valid_id(value)
    if ok:
        assert isinstance(value, str) and 1 <= len(value) <= 200
        assert not any(ord(c) < 0x20 or ord(c) == 0x7F or 0xD800 <= ord(c) <= 0xDFFF for c in value)
