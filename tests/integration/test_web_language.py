"""The person's pages in Chinese and English, through HTTP (ADR 0031 "Language"): the browser's
`Accept-Language` decides by default, the person's choice (`POST /language`, CSRF-checked, a cookie of
its own) wins over it, `<html lang>` says which, and a value that is not a language is never reflected."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.helpers import auth, remember_body, token

CHINESE = {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}
ENGLISH = {"Accept-Language": "en-US,en;q=0.9"}


def lang_of(html: str) -> str:
    found = re.search(r'<html lang="([^"]*)">', html)
    assert found, "the page has no <html lang>"
    return found.group(1)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found, "the page has no CSRF field"
    return found.group(1)


def language_cookie(response: Any) -> str | None:
    return next((c for c in response.headers.get_list("set-cookie") if c.startswith("engram_lang=")), None)


def signed_in_by_cookie(client: TestClient, user: str) -> str:
    """A browser-like session (the session and nonce cookies, as `?token=` sets them); the page's CSRF token."""
    assert client.get("/memory", params={"token": token(user=user)}).status_code == 200
    return csrf_of(client.get("/memory").text)


@pytest.mark.parametrize("header", ["zh", "zh-CN,zh;q=0.9,en;q=0.8", "zh-Hans", "zh-TW", "en;q=0.4, zh-HK;q=0.8"])
def test_a_chinese_browser_gets_the_memory_page_in_chinese(client: TestClient, header: str) -> None:
    r = client.get("/memory", headers={**auth(user="p-lang-zh"), "Accept-Language": header})
    assert r.status_code == 200 and lang_of(r.text) == "zh"
    assert "<h1>我的记忆</h1>" in r.text and "待审核" in r.text and "洞察" in r.text
    assert "没有待审核的内容。" in r.text and "还没有已确认的记忆。" in r.text, "the empty states too"
    assert "Your memories" not in r.text and "Nothing to review." not in r.text
    assert 'value="en" lang="en"' in r.text and ">English</button>" in r.text, "the switch offers English"


@pytest.mark.parametrize("header", [None, "en", "en-US,en;q=0.9,zh;q=0.8", "fr-FR, de;q=0.9", "zh;q=0, en", "*",
                                    "zh;q=not-a-number"])
def test_english_otherwise(client: TestClient, header: str | None) -> None:
    headers = {**auth(user="p-lang-en"), **({"Accept-Language": header} if header is not None else {})}
    r = client.get("/memory", headers=headers)
    assert r.status_code == 200 and lang_of(r.text) == "en"
    assert "<h1>Your memories</h1>" in r.text and "Nothing to review." in r.text and "我的记忆" not in r.text
    assert 'value="zh" lang="zh"' in r.text and ">中文</button>" in r.text


def test_a_memory_its_history_and_its_forgetting_in_chinese(client: TestClient) -> None:
    who = auth(user="p-lang-detail")
    memory_id = client.post("/v1/memories", json=remember_body("我喜欢简短的周报", tags=["周报"]), headers=who).json()["id"]
    listed = client.get("/memory", headers={**who, **CHINESE})
    assert "第 1 版。" in listed.text and "来自 chat chat-42，消息 m-" in listed.text
    assert "2026年11月2日 09:00 UTC+08:00" in listed.text, "dates as a Chinese reader writes them"
    found = client.get("/memory", params={"tag": "周报"}, headers={**who, **CHINESE})
    assert "找到 1 条带有标签“周报”的记忆。" in found.text

    detail = client.get(f"/memory/m/{memory_id}", headers={**who, **CHINESE})
    assert detail.status_code == 200 and lang_of(detail.text) == "zh"
    assert "<h1>记忆详情</h1>" in detail.text and "<dd>已确认</dd>" in detail.text and "已记下" in detail.text
    assert "保存更正" in detail.text and "忘记这条记忆" in detail.text and "Remembered" not in detail.text
    english = client.get(f"/memory/m/{memory_id}", headers={**who, **ENGLISH})
    assert "<h1>A memory</h1>" in english.text and "2026-11-02 09:00 UTC+08:00" in english.text

    forget = client.post(f"/memory/m/{memory_id}/forget", headers={**who, **CHINESE}, follow_redirects=False)
    assert forget.status_code == 303
    status = client.get(forget.headers["location"], headers={**who, **CHINESE})
    assert status.status_code == 200 and lang_of(status.text) == "zh"
    assert "<strong>已停用：</strong> 任何机器人都不会再获得这条记忆。" in status.text
    assert "事件存储" in status.text and "Stopped using" not in status.text
    recent = client.get("/memory", headers={**who, **CHINESE})
    assert "最近的忘记请求" in recent.text and "一条记忆</a>：" in recent.text


def test_confirmations_and_refusals_in_chinese(client: TestClient) -> None:
    who = {**auth(user="p-lang-done"), **CHINESE}
    saved = client.post("/memory/settings", data={"use_paused": "true"}, headers=who, follow_redirects=False)
    assert saved.status_code == 303
    page = client.get(saved.headers["location"], headers=who)
    assert "<strong>完成：</strong> 你的设置已保存。" in page.text
    assert "<strong>已暂停：</strong>" in page.text and "机器人不会获得你的任何记忆。" in page.text
    assert "当前：学习<strong>已开启</strong>，使用<strong>已暂停</strong>。" in page.text
    missing = client.get("/memory/forgets/fg-0000", headers=who)
    assert missing.status_code == 404 and "<h1>未找到</h1>" in missing.text and "你无权查看" in missing.text
    assert client.get("/memory/m/not-an-id", headers=who).text == client.get(f"/memory/m/{uuid.uuid4()}", headers=who).text
    refused = client.post("/memory/forget-everything", headers=who)
    assert refused.status_code == 422 and "未忘记任何内容：" in refused.text
    sensitive = client.post("/v1/memories", json=remember_body("我每天早上吃降压药"), headers=auth(user="p-lang-done"))
    assert sensitive.json()["review"] == "sensitive"
    shown = client.get("/memory", headers=who).text
    assert "<strong>敏感：</strong>" in shown and "我明白这是敏感内容，仍希望记住它" in shown
    unacknowledged = client.post(f"/memory/candidates/{sensitive.json()['id']}/confirm", headers=who)
    assert unacknowledged.status_code == 409 and "涉及敏感信息" in unacknowledged.text


def test_the_switch_sets_a_cookie_and_the_choice_wins_over_the_header(client: TestClient) -> None:
    csrf = signed_in_by_cookie(client, "p-lang-switch")
    r = client.post("/language", data={"lang": "zh", "next": "/memory?q=weekly", "csrf_token": csrf},
                    headers=ENGLISH, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/memory?q=weekly", "back to the same page"
    cookie = language_cookie(r)
    assert cookie is not None and cookie.startswith("engram_lang=zh;")
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/" in cookie and "Secure" not in cookie
    assert int(re.search(r"Max-Age=(\d+)", cookie).group(1)) >= 180 * 86400, "a choice kept, not a session"  # type: ignore[union-attr]

    page = client.get("/memory", headers=ENGLISH)
    assert lang_of(page.text) == "zh" and "<h1>我的记忆</h1>" in page.text, "the choice wins over Accept-Language"
    back = client.post("/language", data={"lang": "en", "csrf_token": csrf_of(page.text)}, headers=CHINESE,
                       follow_redirects=False)
    assert back.status_code == 303 and back.headers["location"] == "/memory"
    page = client.get("/memory", headers=CHINESE)
    assert lang_of(page.text) == "en" and "<h1>Your memories</h1>" in page.text


def test_the_cookie_is_secure_over_https(client: TestClient) -> None:
    csrf = signed_in_by_cookie(client, "p-lang-https")
    r = client.post("https://testserver/language", data={"lang": "zh", "csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303 and "Secure" in (language_cookie(r) or "")


@pytest.mark.parametrize("value", ["fr", "ZH", "zh-CN", "<script>alert(1)</script>", "", "en\r\nSet-Cookie: x=1"])
def test_a_value_that_is_not_a_language_is_refused_and_not_reflected(client: TestClient, value: str) -> None:
    csrf = signed_in_by_cookie(client, "p-lang-bad")
    r = client.post("/language", data={"lang": value, "csrf_token": csrf}, headers=ENGLISH, follow_redirects=False)
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html")
    assert language_cookie(r) is None
    assert "alert(1)" not in r.text and "x=1" not in r.text and "Not a valid request" in r.text
    # a cookie some other way holding something else is ignored: the header decides, nothing is echoed
    client.cookies.set("engram_lang", "<b>klingon</b>")
    page = client.get("/memory", headers=CHINESE)
    assert lang_of(page.text) == "zh" and "klingon" not in page.text
    client.cookies.delete("engram_lang")


def test_the_switch_needs_the_csrf_token(client: TestClient) -> None:
    signed_in_by_cookie(client, "p-lang-csrf")
    for form in ({"lang": "zh"}, {"lang": "zh", "csrf_token": "0" * 64}):
        r = client.post("/language", data=form, headers=ENGLISH, follow_redirects=False)
        assert r.status_code == 403 and "This form cannot be accepted" in r.text
        assert language_cookie(r) is None
    assert lang_of(client.get("/memory", headers=ENGLISH).text) == "en"
    # refused in Chinese for a Chinese browser
    r = client.post("/language", data={"lang": "en"}, headers=CHINESE, follow_redirects=False)
    assert r.status_code == 403 and "<h1>无法接受此表单</h1>" in r.text and language_cookie(r) is None


def test_the_sign_in_page_speaks_chinese_and_offers_the_switch_before_signing_in(client: TestClient) -> None:
    form = client.get("/sign-in", params={"next": "/memory"}, headers=CHINESE)
    assert form.status_code == 200 and lang_of(form.text) == "zh"
    assert "<h1>登录</h1>" in form.text and "访问令牌" in form.text and 'action="/language"' in form.text
    assert 'name="next" value="/sign-in?next=%2Fmemory"' in form.text
    r = client.post("/language", data={"lang": "en", "next": "//elsewhere.example/", "csrf_token": csrf_of(form.text)},
                    headers=CHINESE, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/memory", "only a path of this service"
    assert (language_cookie(r) or "").startswith("engram_lang=en;")
    assert "<h1>Sign in</h1>" in client.get("/sign-in", headers=CHINESE).text
    bad = client.get("/memory", params={"token": "not-a-token"}, headers={"Accept-Language": "zh"})
    assert bad.status_code == 401 and lang_of(bad.text) == "en", "the choice holds on every page"
    client.cookies.delete("engram_lang")
    bad = client.get("/memory", params={"token": "not-a-token"}, headers={"Accept-Language": "zh"})
    assert bad.status_code == 401 and "该令牌无效或已过期。" in bad.text


def test_the_admin_page_stays_english(client: TestClient) -> None:
    r = client.get("/admin", headers={**auth(user="root", role="admin"), **CHINESE})
    assert r.status_code == 200 and lang_of(r.text) == "en" and 'action="/language"' not in r.text
