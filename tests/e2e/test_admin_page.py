"""The admin page of a running `engram serve`, in Debian's Chromium: health, backlogs, the budget
chart and the directory, with numbers and names but never what anyone said; the directory edited
through its form (CSRF-checked, refused input shown with what was typed); only admins and operators.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.browser import DESKTOP, PHONE, screenshot, scrolls_sideways, serious_violations
from tests.support.helpers import token

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

COMPANY = "acme-admin-page"
SAID = ["I prefer the quarterly review on Thursdays, ZEBRA-7731",
        "我的女儿在上海读书，MARKER-斑马",
        "The migraine came back on Monday, OKAPI-2208"]


def admin() -> str:
    return token(company=COMPANY, user="root", role="admin")


def person() -> dict[str, str]:
    return {"Authorization": f"Bearer {token(company=COMPANY, user='alice')}"}


@pytest.fixture(scope="module")
def company(web_serve: str) -> str:
    """A company with a directory, memories and receipts whose text must never reach the admin page."""
    with httpx.Client(base_url=web_serve, timeout=30) as api:
        r = api.put("/v1/admin/directory", headers={"Authorization": f"Bearer {admin()}"}, json={
            "teams": {"t-risk": {"members": ["alice", "bob"]}},
            "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}},
            "bots": {"b-helper": {"teams": ["t-risk"], "sources": ["s-jira"]}}})
        assert r.status_code == 200, r.text
        for i, text in enumerate(SAID):
            source = {"kind": "chat", "id": "chat-admin", "message_id": f"m-{i}"}
            assert api.post("/v1/memories", headers=person(), json={"text": text, "source": source}).status_code in (201, 202)
            receipt = {"receipt_id": f"r-{i}", "author": "user", "text": text, "source": source}
            assert api.post("/v1/receipts", headers=person(), json=receipt).status_code == 202
    return web_serve


def _no_text(html: str) -> None:
    for text in SAID:
        for piece in re.findall(r"[A-Z]+-\d+|斑马|上海|migraine|quarterly", text):
            assert piece not in html, f"the admin page shows what someone said ({piece!r})"


def test_the_admin_page_shows_numbers_and_no_text(company: str, browser: Any) -> None:
    for name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        context = browser.new_context(viewport=viewport)
        page = context.new_page()
        outside: list[str] = []
        page.on("request", lambda req, seen=outside: seen.append(req.url) if not req.url.startswith(company) else None)
        page.goto(f"{company}/admin?token={admin()}")
        assert page.url == f"{company}/admin"
        assert page.get_by_role("heading", name=f"Operations of {COMPANY}").is_visible()
        for heading in ("Health", "Backlogs", "Model budget", "Directory"):
            assert page.get_by_role("heading", name=heading, exact=True).is_visible()
        assert page.get_by_role("img", name=re.compile("Model tokens a day")).is_visible()
        rows = page.locator("#budget ~ table tbody tr, section[aria-labelledby=budget] table tbody tr")
        assert rows.count() == 14, "a row for each of the last 14 days"
        assert page.get_by_text("Receipts to learn from").first.is_visible()
        assert page.locator("#teams-0-name").input_value() == "t-risk"
        assert page.locator("#sources-0-team").input_value() == "t-risk"
        assert page.locator("#bots-0-name").input_value() == "b-helper"
        _no_text(page.content())
        screenshot(page, f"admin-{name}")
        assert not scrolls_sideways(page), f"the admin page scrolls sideways at {viewport['width']} px"
        assert serious_violations(page) == []
        assert outside == [], f"requests to other hosts: {outside}"
        context.close()


def test_the_directory_is_edited_through_its_form(company: str, browser: Any) -> None:
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(f"{company}/admin?token={admin()}")
    page.locator("#teams-new-name").fill("t-ops")
    page.locator("#teams-new-members").fill("carol\ndave, erin")
    page.locator("#bots-new-name").fill("b-pager")
    page.locator("#bots-new-teams").fill("t-ops")
    page.get_by_role("button", name="Save the directory").click()
    expect(page.get_by_text("Done: the directory was saved.")).to_be_visible()
    stored = httpx.get(f"{company}/v1/admin/directory", headers={"Authorization": f"Bearer {admin()}"}).json()
    assert stored["teams"]["t-ops"] == {"members": ["carol", "dave", "erin"]}
    assert stored["bots"]["b-pager"] == {"teams": ["t-ops"], "sources": []}
    assert stored["teams"]["t-risk"] == {"members": ["alice", "bob"]}, "the rows not touched are kept"

    # a source of a team that does not exist: refused, nothing stored, the form keeps what was typed
    page.locator("#sources-new-name").fill("s-wiki")
    page.locator("#sources-new-team").fill("t-nowhere")
    page.get_by_role("button", name="Save the directory").click()
    expect(page.get_by_text(re.compile("^Not saved:"))).to_be_visible()
    assert page.locator("input[value='s-wiki']").count() == 1
    screenshot(page, "admin-directory-refused")
    assert "s-wiki" not in httpx.get(f"{company}/v1/admin/directory",
                                     headers={"Authorization": f"Bearer {admin()}"}).json()["sources"]

    # removing a row
    page.goto(f"{company}/admin")
    index = page.locator("input[name$='-name'][value='t-ops']").get_attribute("name").split("-")[1]  # type: ignore[union-attr]
    page.locator(f"input[name='teams-{index}-remove']").check()
    page.locator("input[value='b-pager']").fill("")  # a row without a name is left out as well
    page.get_by_role("button", name="Save the directory").click()
    expect(page.get_by_text("Done: the directory was saved.")).to_be_visible()
    stored = httpx.get(f"{company}/v1/admin/directory", headers={"Authorization": f"Bearer {admin()}"}).json()
    assert "t-ops" not in stored["teams"] and "b-pager" not in stored["bots"] and "t-risk" in stored["teams"]
    context.close()


def test_only_admins_and_operators_and_only_with_the_forms_csrf_token(company: str) -> None:
    r = httpx.get(f"{company}/admin", headers=person())
    assert r.status_code == 403 and "text/html" in r.headers["content-type"]
    _no_text(r.text)
    operator = token(company=COMPANY, user="ops", role="operator")
    assert httpx.get(f"{company}/admin", headers={"Authorization": f"Bearer {operator}"}).status_code == 200
    assert httpx.get(f"{company}/admin").status_code == 401
    with httpx.Client(base_url=company) as browser_like:
        browser_like.get("/admin", params={"token": admin()})
        before = browser_like.get("/v1/admin/directory", headers={"Authorization": f"Bearer {admin()}"}).json()
        form = {"teams-0-name": "t-forged", "teams-0-members": "mallory"}
        for sent in (form, {**form, "csrf_token": "0" * 64}):
            r = browser_like.post("/admin/directory", data=sent)
            assert r.status_code == 403
        after = browser_like.get("/v1/admin/directory", headers={"Authorization": f"Bearer {admin()}"}).json()
        assert after == before, "a form without its CSRF token changed nothing"
