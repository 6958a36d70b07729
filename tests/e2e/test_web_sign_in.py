"""Signing in to the pages of a running `engram serve` (API.md "Web pages", ADR 0031): the bearer header,
or the session cookie `?token=` sets while the address drops the token; no token, an expired or forged
one: the sign-in page with 401; CSRF on every form; nothing from another host.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import httpx
import pytest

from tests.e2e.browser import DESKTOP, screenshot
from tests.support.helpers import SECRET, token

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def person_token(**kwargs: Any) -> str:
    return token(company="acme", user="p-signin", **kwargs)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found, "the page has no CSRF field"
    return found.group(1)


def test_without_a_token_the_page_asks_to_sign_in(web_serve: str) -> None:
    r = httpx.get(web_serve + "/memory")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert r.headers["content-type"].startswith("text/html")
    assert '<form method="post" action="/sign-in"' in r.text and 'name="token"' in r.text
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert r.headers["cache-control"] == "no-store"


def test_the_bearer_header_signs_in_and_other_tokens_do_not(web_serve: str) -> None:
    r = httpx.get(web_serve + "/memory", headers={"Authorization": f"Bearer {person_token()}"})
    assert r.status_code == 200 and "Signed in as <strong>p-signin</strong>" in r.text
    expired = person_token(ttl=timedelta(seconds=-5))
    forged = token(company="acme", user="p-signin", secret="another-" + SECRET)
    too_long = person_token(ttl=timedelta(days=400))
    for bad in (expired, forged, too_long, "not-a-token"):
        r = httpx.get(web_serve + "/memory", headers={"Authorization": f"Bearer {bad}"})
        assert r.status_code == 401 and "Signed in as" not in r.text
        r = httpx.get(web_serve + "/memory", cookies={"engram_session": bad})
        assert r.status_code == 401 and "Signed in as" not in r.text, "a bad cookie is not signed in"
        r = httpx.get(web_serve + "/memory", params={"token": bad})
        assert r.status_code == 401 and "not valid or has expired" in r.text
        assert not any(c.startswith("engram_session=") for c in r.headers.get_list("set-cookie"))


def test_a_link_with_the_token_sets_the_cookie_and_drops_the_token_from_the_address(web_serve: str) -> None:
    link_token = person_token(ttl=timedelta(hours=2))
    r = httpx.get(web_serve + "/memory", params={"token": link_token})
    assert r.status_code == 303 and r.headers["location"] == "/memory"
    cookies = r.headers.get_list("set-cookie")
    session = next(c for c in cookies if c.startswith("engram_session="))
    assert "HttpOnly" in session and "SameSite=lax" in session and "Path=/" in session
    assert "Secure" not in session  # plain http here; over https the cookie is Secure
    max_age = int(re.search(r"Max-Age=(\d+)", session).group(1))  # type: ignore[union-attr]
    assert 7000 < max_age <= 7200, "the cookie lives no longer than the token"
    over_https = httpx.get(web_serve + "/memory", params={"token": link_token}, headers={"X-Forwarded-Proto": "https"})
    assert all("Secure" in c for c in over_https.headers.get_list("set-cookie"))


def test_in_a_browser_sign_in_by_link_by_form_and_sign_out(web_serve: str, browser: Any) -> None:
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    outside: list[str] = []
    page.on("request", lambda req: outside.append(req.url) if not req.url.startswith(web_serve) else None)
    page.goto(f"{web_serve}/memory?token={person_token()}")
    assert page.url == f"{web_serve}/memory", "the token left the address"
    assert page.get_by_text("Signed in as").is_visible()
    cookie = next(c for c in context.cookies() if c["name"] == "engram_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    assert page.evaluate("document.cookie") == "", "no script of the page can read the session"
    screenshot(page, "sign-in-by-link-desktop")

    page.get_by_role("button", name="Sign out").click()
    assert page.get_by_role("heading", name="Sign in").is_visible()
    assert "engram_session" not in {c["name"] for c in context.cookies()}
    page.goto(f"{web_serve}/memory")
    page.get_by_label("Access token").fill(person_token())
    screenshot(page, "sign-in-form-desktop")
    page.get_by_role("button", name="Sign in").click()
    assert page.url == f"{web_serve}/memory" and page.get_by_text("Signed in as").is_visible()
    assert outside == [], f"requests to other hosts: {outside}"
    context.close()


def test_a_form_posted_without_its_csrf_token_is_refused(web_serve: str) -> None:
    with httpx.Client(base_url=web_serve) as browser_like:
        browser_like.get("/memory", params={"token": person_token()})  # signed in: the session and nonce cookies
        page = browser_like.get("/memory")
        assert page.status_code == 200
        right = csrf_of(page.text)
        wrong_by_one = right[:-1] + ("1" if right.endswith("0") else "0")  # (one token in 16 ends in "0")
        for form in ({}, {"csrf_token": "0" * 64}, {"csrf_token": wrong_by_one}):
            r = browser_like.post("/sign-out", data=form)
            assert r.status_code == 403 and "This form cannot be accepted" in r.text
            assert browser_like.get("/memory").status_code == 200, "still signed in: the sign-out did not happen"
        r = browser_like.post("/sign-out", data={"csrf_token": right})
        assert r.status_code == 303
        assert browser_like.get("/memory").status_code == 401
    # another session's token does not fit this one
    with httpx.Client(base_url=web_serve) as first, httpx.Client(base_url=web_serve) as second:
        first.get("/memory", params={"token": person_token()})
        second.get("/memory", params={"token": person_token()})
        r = second.post("/sign-out", data={"csrf_token": csrf_of(first.get("/memory").text)})
        assert r.status_code == 403


def test_signing_in_by_form_needs_the_csrf_token_too(web_serve: str) -> None:
    with httpx.Client(base_url=web_serve) as browser_like:
        form = browser_like.get("/sign-in")
        r = browser_like.post("/sign-in", data={"token": person_token()})
        assert r.status_code == 403 and "engram_session" not in browser_like.cookies
        r = browser_like.post("/sign-in", data={"token": person_token(), "csrf_token": csrf_of(form.text),
                                                "next": "//elsewhere.example/steal"})
        assert r.status_code == 303 and r.headers["location"] == "/memory", "only a path of this service"
        assert browser_like.get("/memory").status_code == 200


def test_the_pages_assets_are_served_here(web_serve: str) -> None:
    css = httpx.get(web_serve + "/web/assets/engram.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "Noto Sans CJK SC" in css.text
    assert httpx.get(web_serve + "/web/assets/forget-status.js").headers["content-type"].startswith("text/javascript")
    assert httpx.get(web_serve + "/web/assets/..%2Fpages.py").status_code == 404
