"""A `Statement` works its text's forms out once; comparing through one must answer exactly what comparing
the plain texts answers, however many comparisons share it and in whatever order its forms are asked for."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engram.domain.relation import DUPLICATE, UPDATE, Statement, relate, same_words, search_words, slot

from tests.support.helpers import examples

SAID = [
    "I live in Berlin", "I moved to Lisbon", "As I said before, I live in Porto", "I live in Porto",
    "I live in Porto, and I like it", "I'm based in Lisbon now", "I no longer live in Berlin",
    "I work at Zeta", "I used to work at Zeta", "I joined Acme last month", "My manager is Dana",
    "My manager's Priya now", "Our standup is at 9:30", "The standup moved to 10:00", "I don't drink coffee",
    "My favourite tea is oolong", "我住在上海", "我搬到北京了", "我之前说过,我住在上海", "我在腾讯工作",
    "周会改到周三下午三点", "我最喜欢的茶是乌龙", "I prefer weekly reports as short bullet points",
    "Reports: short bullet points, weekly", "我不再住在上海",
]


def test_the_rules_read_a_statement_as_they_read_its_text() -> None:
    assert relate(Statement("I moved to Lisbon"), "I live in Berlin") == UPDATE
    assert relate(Statement("As I said before, I live in Porto"), Statement("I live in Porto")) == DUPLICATE
    assert relate("I live in Porto, and I like it", Statement("I live in Porto")) is None
    assert relate(Statement("我搬到北京了"), "我住在上海") == UPDATE
    assert search_words(Statement("I moved to Lisbon")) == search_words("I moved to Lisbon") != "I moved to Lisbon"


@settings(max_examples=examples(300), deadline=None)
@given(new=st.sampled_from(SAID) | st.text(max_size=40),
       olds=st.lists(st.sampled_from(SAID) | st.text(max_size=40), max_size=8),
       slot_first=st.booleans())
def test_one_statement_shared_by_many_comparisons_answers_as_the_texts_do(new: str, olds: list[str],
                                                                          slot_first: bool) -> None:
    shared = Statement(new)
    if slot_first:  # its forms asked for in another order than relate asks
        assert shared.slot == slot(new)
    assert [relate(shared, old) for old in olds] == [relate(new, old) for old in olds]
    assert [same_words(shared, Statement(old)) for old in olds] == [same_words(new, old) for old in olds]
    assert search_words(shared) == search_words(new)
