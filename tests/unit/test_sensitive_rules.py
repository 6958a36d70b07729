"""The sensitive-content rules on their labelled set, and the hard cases one by one.

The thresholds are asserted on every part of bench/data/sensitive/ together, tuning parts
included: this guards against regressions. How well the rules do on text they were not tuned on
is measured by bench/sensitive.py and reported in docs/benchmarks.md.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.adapters.content_rules import ContentRules
from engram.domain.review import NORMAL_CONTENT, SECRET_CONTENT, SENSITIVE_CONTENT

from tests.support.helpers import examples

RULES = ContentRules()


def _bench() -> ModuleType:
    from bench import sensitive

    return sensitive


@pytest.fixture(scope="module")
def scored() -> list:
    bench = _bench()
    rows = bench.load("all")
    assert len(rows) >= 300
    assert abs(sum(r.lang == "en" for r in rows) - sum(r.lang == "zh" for r in rows)) <= len(rows) // 10
    return bench.score(rows, RULES)


@pytest.mark.parametrize("lang", [None, "en", "zh"])
def test_precision_and_recall_are_at_least_090_on_the_labelled_set(scored: list, lang: str | None) -> None:
    bench = _bench()
    figures = bench.figures([s for s in scored if lang is None or s.row.lang == lang])
    assert figures.precision >= 0.9 and figures.recall >= 0.9, figures


def test_every_labelled_secret_is_refused_and_nothing_else_is(scored: list) -> None:
    refused, total, wrongly = _bench().secret_figures(scored)
    assert total > 0 and refused == total
    assert wrongly == []


@pytest.mark.parametrize("text", [
    "The customer wants the report by Friday.",
    "The hospital project deadline moved to next quarter.",
    "We need to finish the patient API before the audit.",
    "Monday is a bank holiday, so the release slips to Tuesday.",
    "Fixing cars is like therapy for me.",
    "We have a lot of technical debt in the billing service.",
    "The pregnancy app client wants a dark mode.",
    "The salary field in the HR export is broken.",
    "Can you diagnose why the build is failing?",
    "I'm allergic to long meetings without an agenda.",
    "My wife is a nurse and works nights.",
    "I had a cold all week, so I'm working from home.",
    "I need to renew my passport before the Japan trip.",
    "Call the support line on 0800 123 4567 if the portal is down.",
    "Send questions to support@example.com.",
    "The office is at 10 Market Street, second floor.",
    "Order 4198 3444 1747 6617 was refunded.",
    "我们的客户希望周五前拿到报告。",
    "医院项目的截止日期推迟到下个季度。",
    "信用卡支付功能昨天上线了。",
    "修车对我来说就像一种心理治疗。",
    "这个系统有很多技术债务。",
    "这个需求改来改去，我都快抑郁了。",
    "客服热线是400-800-1234。",
    "订单号是202611301234567890，请核对。",
    # everyday chat the rules once held: figures of speech, careers, topics, meeting rooms
    "My hard work paid off!",
    "That really warms my heart.",
    "The meeting is at nine, room B12.",
    "I want to work in mental health, maybe as a counsellor one day.",
    "Cooking is basically my therapy at this point.",
    "I'm writing a piece for the student magazine about how therapy is portrayed on TV.",
    "I owe you a coffee.",
    "I'm broke this week lol, beans on toast until Friday.",
    "Family film night after, they want the one with the snowman for the 40th time.",
    "我报的是心理学专硕，以后想做心理咨询",
    "她说急诊科晚上比白天还忙",
    "我同事说现在存款利率又降了",
    "I owe you a bottle of wine after that.",
    "I've been reading about the snowball method, where you pay off the smallest balance first.",
    "The wedding is at a winery near Sonoma.",
    "这熊孩子差点把我气出心脏病",
    "有专家说空腹喝咖啡不好",
])
def test_business_talk_metaphors_and_passing_states_are_ordinary(text: str) -> None:
    assert RULES.classify(text) == NORMAL_CONTENT


@pytest.mark.parametrize("text", [
    "I was diagnosed with type 2 diabetes last spring",
    "I take insulin every morning",
    "Therapy has really helped me since my breakdown.",
    "I'm allergic to penicillin.",
    "The thing my doctor gave me for sleep makes me groggy in the mornings.",
    "My salary is 9,000 a month",
    "Please use my Visa ending 4242 for the booking.",
    "my card is 4111 1111 1111 1111",
    "A scan of my passport is attached for the visa form.",
    "My social security number is 512-48-3306.",
    "The customer Northwind's phone is +1 415 555 0100",
    "Her email is jenny.rao@gmail.com if you need to reach her.",
    "Sam lives at 7 Harbour Road, Falmouth.",
    "Karen from accounts is off for cancer treatment.",
    "我最近在吃抗抑郁的药",
    "心理咨询对我帮助很大，我已经去了半年。",
    "我对青霉素过敏。",
    "我的招行卡尾号是3381，用它付定金。",
    "身份证正反面照片我已经发给你了。",
    "这是我的身份证：440305197511309280。",
    "张伟家住在朝阳区建国路88号3单元502。",
    "我室友最近情绪很不稳定，在吃医生开的药。",
    "I've been seeing a therapist every Thursday since the divorce.",
    "Apparently Greg from sales is going through a messy divorce.",
    "她跟我说她老公出轨了，正在闹离婚",
    "I've got a hospital appointment about my heart on Thursday.",
    "我今年涨薪了，现在一个月一万八。",
    "其实我自己猫毛过敏，每天都得吃氯雷他定",
    "My savings account number, 0071-338204, is the one the refund should go to.",
    "My birthday is 2 May 1987, if the form asks.",
    "Tom and Priya are splitting up, it's been coming for a while.",
    "She's at her sister's until Friday, 28 Elm Road, flat 4.",
    "工行的，6222 0210 0112 3456，户名王芳",
])
def test_health_money_documents_and_other_peoples_details_wait_for_review(text: str) -> None:
    assert RULES.classify(text) == SENSITIVE_CONTENT


@pytest.mark.parametrize("text", [
    "110105198804129548",  # one digit off: the checksum fails
    "110105198813329547",  # month 13: not a birth date
])
def test_a_chinese_id_number_must_pass_its_checksum_and_birth_date(text: str) -> None:
    assert RULES.classify(f"编号 {text}") == NORMAL_CONTENT
    assert RULES.classify("我的身份证号码是110105198804129547") == SENSITIVE_CONTENT


@pytest.mark.parametrize("text", [
    "my password is hunter2-orchid",
    "password: swordfish",
    "My password for the billing portal is plum-Harbor-7731",  # what it is for, in three words
    "the pin code for my old work phone is 0931",
    "my PIN is 6624",
    "我的密码是orchid9981",
    "验证码是 482913",
    "my api key: sk-proj-abcdefghijklmnopqrstuvwxyz123456",
])
def test_secrets_are_still_secrets(text: str) -> None:
    assert RULES.classify(text) == SECRET_CONTENT


@pytest.mark.parametrize("text", [
    "The access token is refreshed automatically by the SDK.",
    "The auth token is cached for five minutes.",
    "The token is still valid for another hour.",
    "The password for the staff travel portal is changed every quarter.",
    "验证码为什么一直收不到？",
    "密码是多少？",
])
def test_words_about_secrets_are_not_secrets(text: str) -> None:
    assert RULES.classify(text) != SECRET_CONTENT


def _case_folding_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from engram.adapters import sensitive_rules

    monkeypatch.setattr(sensitive_rules, "_RULES", [dataclasses.replace(r, folded=None) for r in sensitive_rules._RULES])


def test_the_lowercased_fast_path_decides_as_the_case_folding_patterns_do(scored: list,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """English terms rules match on the lowercased sentence, without IGNORECASE (several times faster on
    long text); every labelled text, and each in capitals, gets the same kind either way."""
    from engram.adapters.sensitive_rules import _RULES, sensitive_kind

    assert sum(r.folded is not None for r in _RULES) >= 5
    texts = [s.row.text for s in scored]
    more = [t.upper() for t in texts] + ["İstanbul: I was DIAGNOSED with Diabetes", "ǅ my SALARY is 5k"]
    fast = [s.kind for s in scored] + [sensitive_kind(t) for t in more]  # the labelled texts' kinds: as scored
    texts += more
    _case_folding_only(monkeypatch)
    assert [sensitive_kind(t) for t in texts] == fast
    assert sensitive_kind("İstanbul: I was DIAGNOSED with Diabetes") == "health"


def _unfiltered(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """A prefiltered rule's own pattern, without the lookahead `_prefiltered` put in front of it."""
    head = re.match(r"\(\?=\[(?:\\.|[^\]\\])*\]\)\(\?:", pattern.pattern)
    assert head is not None and pattern.pattern.endswith(")")
    return re.compile(pattern.pattern[head.end():-1], pattern.flags)


def _prefiltered() -> list[re.Pattern[str]]:
    from engram.adapters.sensitive_rules import _RULES

    return [p for r in _RULES for p in (r.pattern, r.folded) if p is not None and p.pattern.startswith("(?=[")]


def _without_prefilters(rule: Any) -> Any:
    import dataclasses

    plain = {}
    for attr in ("pattern", "folded"):
        pattern = getattr(rule, attr)
        if pattern is not None and pattern.pattern.startswith("(?=["):
            plain[attr] = _unfiltered(pattern)
    return dataclasses.replace(rule, **plain)


def test_the_first_character_prefilter_decides_as_the_rules_alone(scored: list,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Rules whose matches can start with few characters scan behind a lookahead on them (the Chinese
    rules then cost an English text almost nothing; an English rule skips the ends of words); every
    labelled text, in both languages and mixed, gets the same kind with the lookahead as without."""
    from engram.adapters import sensitive_rules
    from engram.adapters.sensitive_rules import sensitive_kind

    assert len(_prefiltered()) >= 10
    texts = [s.row.text for s in scored]
    mixed = [a + " " + b for a, b in zip(texts, reversed(texts), strict=True)]
    fast = [s.kind for s in scored] + [sensitive_kind(t) for t in mixed]  # the labelled texts' kinds: as scored
    texts += mixed
    monkeypatch.setattr(sensitive_rules, "_RULES", [_without_prefilters(r) for r in sensitive_rules._RULES])
    assert not _prefiltered()
    assert [sensitive_kind(t) for t in texts] == fast


def _vocabulary() -> list[str]:
    """The words and characters the prefiltered patterns name, and a few they do not."""
    text = " ".join(p.pattern for p in _prefiltered())
    words = sorted(set(re.findall(r"[a-z]{2,}", text)))
    return words + sorted({c for c in text if ord(c) > 127}) + list("0123456789 ,.，。'-") + ["HIV", "CT", "B超"]


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from(_vocabulary()), max_size=30), st.sampled_from(["", " ", "-"]))
def test_a_prefiltered_rule_finds_exactly_what_it_finds_alone(tokens: list[str], glue: str) -> None:
    text = glue.join(tokens)
    for pattern in _prefiltered():
        alone = _unfiltered(pattern)
        assert [(m.span(), m.groups()) for m in pattern.finditer(text)] == \
            [(m.span(), m.groups()) for m in alone.finditer(text)]


def test_secrets_are_found_the_same_from_many_threads_at_once(scored: list) -> None:
    """detect-secrets' settings are process-wide: set once, a scan in one thread never runs with
    settings another thread is changing."""
    from concurrent.futures import ThreadPoolExecutor

    some = [s for i, s in enumerate(scored) if s.verdict == SECRET_CONTENT or i % 3 == 0]
    texts = [s.row.text for s in some]
    alone = [s.verdict for s in some]  # classified one at a time, in this thread
    assert SECRET_CONTENT in alone
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(RULES.classify, texts)) == alone


LIBRARY_FINDS = [  # one for each kind of detect-secrets plugin we use, each missed by our own patterns
    "deploy with ghp_abcdefghijklmnopqrstuvwxyz0123456789 today",
    "the bot posts as xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
    "charge it to sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "clone https://admin:s3cr3tvalue@git.example.org/repo.git",
    'config has db_pass = "correct-horse-battery"',
    "twilio SK0123456789abcdef0123456789abcdef for sms",
]


def test_the_library_scan_finds_what_its_own_line_scan_finds() -> None:
    """Our scan calls the plugins as detect-secrets' `scan_line` does, minus its per-line set-up: the
    same texts must be found, the labelled set and one text per kind of plugin."""
    from detect_secrets.core.scan import scan_line

    from engram.adapters.content_rules import _library_finds_secret

    texts = [row.text for row in _bench().load("all")] + LIBRARY_FINDS + [
        "first line\nghp_abcdefghijklmnopqrstuvwxyz0123456789", "npm _authToken=npm_abcdefghijklmnopqrstuvwxyz0123"]
    ours = [_library_finds_secret(t) for t in texts]
    theirs = [any(True for line in (t.splitlines() or [t]) for _ in scan_line(line)) for t in texts]
    assert ours == theirs
    assert all(_library_finds_secret(t) for t in LIBRARY_FINDS)

