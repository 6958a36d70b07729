"""Co-mention links: from the later start to the earlier end, whichever memory is given first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engram.domain.links import Citation, Link, co_mention

T = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T + timedelta(minutes=minutes)


def both_ways(a: Citation, b: Citation) -> Link | None:
    link = co_mention(a, b)
    assert co_mention(b, a) == link
    return link


def test_open_citations_link_from_the_later_start() -> None:
    assert both_ways(Citation("a", at(0)), Citation("b", at(5))) == Link(at(5), None, None)
    assert Link(at(5), None, None).status == "active"


def test_the_first_end_invalidates_with_its_reason() -> None:
    a = Citation("a", at(0), at(10), "corrected")
    b = Citation("b", at(5), at(20), "forgotten")
    link = both_ways(a, b)
    assert link == Link(at(5), at(10), "corrected") and link is not None and link.status == "invalidated"
    assert both_ways(Citation("a", at(0), at(30), "corrected"), b) == Link(at(5), at(20), "forgotten")


def test_equal_ends_decide_by_memory_id_whatever_the_order() -> None:
    a, b = Citation("a", at(0), at(10), "corrected"), Citation("b", at(0), at(10), "rejected")
    assert both_ways(a, b) == Link(at(0), at(10), "corrected")


def test_citations_that_never_overlapped_make_no_link() -> None:
    assert both_ways(Citation("a", at(0), at(5), "corrected"), Citation("b", at(5))) is None
    assert both_ways(Citation("a", at(0), at(5), "corrected"), Citation("b", at(7), at(9), "expired")) is None
