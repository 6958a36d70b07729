"""The person's page `/memory` in Debian's Chromium against a running `engram serve` (issue 16): review ->
confirm -> search -> correct -> history -> forget -> the status reaches purge complete -> export, with
screenshots in build/screenshots/; forms refused without their CSRF token; another person's memory is
the not-found page; Chinese text; axe-core finds no serious violation at desktop and phone width.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.browser import DESKTOP, PHONE, screenshot, scrolls_sideways, serious_violations
from tests.e2e.test_serve import ENGRAM
from tests.support.helpers import running_serve, serve_environment, token, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CHINESE = "我喜欢在星期一上午开会，会议不超过三十分钟。"


class Person:
    """A person of their own (each test sees only what it stored), with the API at hand to seed and check."""

    def __init__(self, url: str) -> None:
        self.name = "p-" + uuid.uuid4().hex[:8]
        self.token = token(company="acme", user=self.name)
        self.api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)

    def remember(self, text: str, **extra: Any) -> dict[str, Any]:
        r = self.api.post("/v1/memories", json={
            "text": text, "source": {"kind": "chat", "id": "chat-web", "message_id": "m-" + uuid.uuid4().hex[:6]},
            "occurred_at": "2026-11-02T09:00:00+08:00", **extra})
        assert r.status_code in (201, 202), r.text
        return r.json()

    def learn(self, text: str) -> dict[str, Any]:
        """A candidate learned in the background from one of the person's messages."""
        receipt = "r-" + uuid.uuid4().hex[:8]
        r = self.api.post("/v1/receipts", json={
            "receipt_id": receipt, "author": "user", "text": text, "occurred_at": "2026-11-03T18:30:00+08:00",
            "source": {"kind": "chat", "id": "chat-web", "message_id": "m-" + receipt}})
        assert r.status_code == 202, r.text
        ids = wait_for(lambda: self.api.get(f"/v1/receipts/{receipt}").json().get("candidate_ids"), 60,
                       "a candidate learned from the receipt")
        return next(c for c in self.candidates() if c["id"] == ids[0])

    def candidates(self) -> list[dict[str, Any]]:
        return self.api.get("/v1/candidates").json()["items"]

    def memory(self, memory_id: str) -> httpx.Response:
        return self.api.get(f"/v1/memories/{memory_id}")


def signed_in(browser: Any, url: str, person: Person, viewport: dict[str, int] = DESKTOP, **options: Any) -> Any:
    context = browser.new_context(viewport=viewport, accept_downloads=True, **options)
    page = context.new_page()
    page.goto(f"{url}/memory?token={person.token}")
    assert page.url == f"{url}/memory"
    return page


def accessible(page: Any, where: str) -> None:
    problems = serious_violations(page)
    assert problems == [], f"{where}: {problems}"
    assert not scrolls_sideways(page), f"{where}: the page scrolls sideways"


def test_review_confirm_search_correct_history_forget_and_export(web_serve: str, browser: Any) -> None:
    alice = Person(web_serve)
    learned = alice.learn("Thanks! By the way, I prefer decaf coffee after 3pm.")
    sensitive = alice.remember("I take blood pressure medication every morning")
    assert sensitive["review"] == "sensitive"
    chinese = alice.remember(CHINESE, tags=["会议"])
    assert chinese["status"] == "confirmed"

    page = signed_in(browser, web_serve, alice)
    outside: list[str] = []
    page.on("request", lambda req: outside.append(req.url) if not req.url.startswith(web_serve) else None)
    refused: list[str] = []  # the page itself breaks no rule of its Content-Security-Policy
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)

    # review: each candidate with its exact quote, source and time; the sensitive one says so in words
    review = page.locator(f"#candidate-{learned['id']}")
    assert learned["evidence"][0]["quote"] in review.locator("blockquote").inner_text()
    assert "From chat chat-web, message m-r-" in review.inner_text() and "2026-11-03 18:30 UTC+08:00" in review.inner_text()
    warning = page.locator(f"#candidate-{sensitive['id']} .sensitive")
    assert warning.is_visible() and warning.inner_text().startswith("Sensitive:")
    assert page.get_by_role("link", name=CHINESE, exact=True).is_visible()
    screenshot(page, "memory-review-desktop")

    # confirm, edited first
    review.get_by_label("Text to remember").fill("I prefer decaf coffee after 3pm, or green tea")
    review.get_by_role("button", name="Confirm").click()
    assert page.get_by_role("status").filter(has_text="Confirmed").is_visible()
    confirmed = alice.memory(learned["id"]).json()
    assert confirmed["status"] == "confirmed" and confirmed["text"] == "I prefer decaf coffee after 3pm, or green tea"

    # a sensitive candidate is not confirmed without the acknowledgement
    card = page.locator(f"#candidate-{sensitive['id']}")
    card.get_by_role("button", name="Confirm").click()
    assert page.locator(f"#candidate-{sensitive['id']}").count() == 1, "the browser asks for the tick first"
    assert any(c["id"] == sensitive["id"] for c in alice.candidates())
    card.get_by_label("I understand this is sensitive").check()
    card.get_by_role("button", name="Confirm").click()
    assert page.locator(f"#candidate-{sensitive['id']}").count() == 0
    assert alice.memory(sensitive["id"]).json()["status"] == "confirmed"

    # search, and the tag filter
    page.get_by_label("Search your memories").fill("decaf")
    page.get_by_role("button", name="Search").click()
    results = page.locator("section[aria-labelledby=memories] ul.cards > li")
    assert results.count() == 1 and "green tea" in results.first.inner_text()
    screenshot(page, "memory-search-desktop")
    page.goto(f"{web_serve}/memory?tag=会议")
    listed = page.locator("section[aria-labelledby=memories] ul.cards > li")
    assert listed.count() == 1 and CHINESE in listed.first.inner_text()

    # the memory's page: evidence, valid time, history; correct it
    page.goto(f"{web_serve}/memory?q=decaf")
    page.get_by_role("link", name="I prefer decaf coffee after 3pm, or green tea", exact=True).click()
    assert page.url == f"{web_serve}/memory/m/{learned['id']}"
    page.get_by_label("Corrected text").fill("I prefer green tea after 3pm")
    page.get_by_label("Valid from (UTC, optional)").fill("2026-11-20T08:00")
    page.get_by_label("Reason (optional)").fill("stopped drinking coffee")
    page.get_by_role("button", name="Save correction").click()
    assert page.get_by_role("status").filter(has_text="Corrected").is_visible()
    history = page.locator("table tbody tr")
    assert history.count() >= 3
    last = history.last.inner_text()
    assert "Corrected" in last and "I prefer green tea after 3pm" in last and "stopped drinking coffee" in last
    assert "2026-11-20 08:00 UTC" in last
    assert "Confirmed" in page.locator("table").inner_text()
    corrected = alice.memory(learned["id"]).json()
    assert corrected["revision"] == 2 and corrected["text"] == "I prefer green tea after 3pm"
    assert corrected["valid_from"].startswith("2026-11-20T08:00")
    screenshot(page, "memory-history-desktop")

    # forget: "stopped using" at once, then every copy reports, and the page follows by itself
    page.get_by_role("button", name="Forget this memory").click()
    assert re.fullmatch(rf"{web_serve}/memory/forgets/fg-[0-9a-f]+", page.url)
    assert page.get_by_text("Stopped using:").is_visible()
    gone = alice.memory(learned["id"]).json()
    assert gone["status"] == "forgotten" and gone["text"] is None, "unusable at once"
    screenshot(page, "memory-forget-stopped-using-desktop")
    page.get_by_text("Purge complete:").wait_for(timeout=90_000)  # without a reload: the script polls
    rows = page.locator("#forget-status tbody tr")
    assert rows.count() >= 4
    for i in range(rows.count()):
        row = rows.nth(i).inner_text()
        assert "purged" in row and "not yet" not in row, row
    assert "Event store" in page.locator("#forget-status").inner_text()
    screenshot(page, "memory-forget-purge-complete-desktop")

    # export: the same documents as the API, as files
    page.goto(f"{web_serve}/memory#controls")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download as JSON").click()
    exported = json.loads(open(download.value.path(), encoding="utf-8").read())
    assert download.value.suggested_filename == "engram-memories.json"
    texts = {m["text"] for m in exported["memories"]}
    assert CHINESE in texts and "I take blood pressure medication every morning" in texts
    assert "I prefer green tea after 3pm" not in texts, "the forgotten memory is not exported"
    assert exported["person"] == alice.name and all(m["history"] for m in exported["memories"])
    with page.expect_download() as download:
        page.get_by_role("link", name="Download as Markdown").click()
    markdown = open(download.value.path(), encoding="utf-8").read()
    assert markdown.startswith(f"# Memories of {alice.name}") and f"## {CHINESE}" in markdown
    screenshot(page, "memory-overview-desktop")
    assert outside == [], f"requests to other hosts: {outside}"
    assert refused == [], refused


def test_a_candidate_is_rejected_without_acknowledging_anything(web_serve: str, browser: Any) -> None:
    jack = Person(web_serve)
    candidate = jack.remember("I take insulin for my diabetes every evening")
    assert candidate["review"] == "sensitive"
    page = signed_in(browser, web_serve, jack)
    page.locator(f"#candidate-{candidate['id']}").get_by_role("button", name="Reject").click()
    assert page.get_by_role("status").filter(has_text="Rejected").is_visible()
    assert page.locator(f"#candidate-{candidate['id']}").count() == 0 and jack.candidates() == []
    assert "insulin" not in page.content()


def test_chinese_text_at_phone_width(web_serve: str, browser: Any) -> None:
    bob = Person(web_serve)
    memory = bob.remember(CHINESE, tags=["会议"])
    bob.remember("我的银行卡密码提示是我母亲的生日")  # a second, kept apart only by its text
    page = signed_in(browser, web_serve, bob, viewport=PHONE)
    assert page.get_by_role("link", name=CHINESE, exact=True).is_visible()
    assert page.evaluate("document.characterSet") == "UTF-8"
    fonts = page.evaluate("getComputedStyle(document.querySelector('.card .text')).fontFamily")
    assert "Noto Sans CJK SC" in fonts and "PingFang SC" in fonts, "CJK fonts follow the Latin ones"
    screenshot(page, "memory-overview-phone")
    page.get_by_role("link", name=CHINESE, exact=True).click()
    assert page.locator("p.text").inner_text() == CHINESE
    assert not scrolls_sideways(page)
    screenshot(page, "memory-detail-phone")
    assert page.url.endswith(memory["id"])


def test_another_persons_memory_is_the_not_found_page(web_serve: str) -> None:
    owner, other = Person(web_serve), Person(web_serve)
    theirs = owner.remember("I keep my spare key under the blue flowerpot")["id"]
    with httpx.Client(base_url=web_serve) as browser_like:
        browser_like.get("/memory", params={"token": other.token})
        foreign = browser_like.get(f"/memory/m/{theirs}")
        unknown = browser_like.get(f"/memory/m/{uuid.uuid4()}")
        garbage = browser_like.get("/memory/m/not-an-id")
        assert foreign.status_code == unknown.status_code == garbage.status_code == 404
        assert foreign.headers["content-type"].startswith("text/html")
        assert foreign.text == unknown.text == garbage.text, "the not-found page tells nothing apart"
        assert "flowerpot" not in foreign.text and "Not found" in foreign.text
        # nor can the other person act on it, with a form of their own session
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', foreign.text).group(1)  # type: ignore[union-attr]
        for action, form in (("forget", {}), ("correct", {"text": "moved"})):
            r = browser_like.post(f"/memory/m/{theirs}/{action}", data={**form, "csrf_token": csrf})
            assert r.status_code == 404 and r.text == unknown.text
    assert owner.memory(theirs).json()["status"] == "confirmed"
    assert owner.memory(theirs).json()["text"] == "I keep my spare key under the blue flowerpot"


def test_forms_posted_without_their_csrf_token_change_nothing(web_serve: str) -> None:
    carol = Person(web_serve)
    memory = carol.remember("I prefer meetings after 10am")
    candidate = carol.remember("My salary is 5000 a month")
    history_before = carol.api.get(f"/v1/memories/{memory['id']}/history").json()
    with httpx.Client(base_url=web_serve) as browser_like:
        browser_like.get("/memory", params={"token": carol.token})
        posts = {
            f"/memory/m/{memory['id']}/correct": {"text": "I prefer meetings after 11am"},
            f"/memory/m/{memory['id']}/forget": {},
            f"/memory/candidates/{candidate['id']}/confirm": {"text": "x", "acknowledge_sensitive": "true"},
            f"/memory/candidates/{candidate['id']}/reject": {},
            "/memory/settings": {"learning_paused": "true", "use_paused": "true"},
            "/memory/forget-everything": {"confirm": "true"},
        }
        for path, form in posts.items():
            for csrf in (None, "f" * 64):
                r = browser_like.post(path, data=form if csrf is None else {**form, "csrf_token": csrf})
                assert r.status_code == 403, (path, r.status_code)
                assert "This form cannot be accepted" in r.text
    assert carol.api.get(f"/v1/memories/{memory['id']}/history").json() == history_before
    assert carol.memory(memory["id"]).json()["text"] == "I prefer meetings after 10am"
    assert [c["id"] for c in carol.candidates()] == [candidate["id"]]
    assert carol.api.get("/v1/settings").json() == {"learning_paused": False, "use_paused": False}
    assert carol.api.get("/v1/forgets").json()["items"] == []


def test_pause_and_forget_everything_with_a_confirmation_step(web_serve: str, browser: Any) -> None:
    dana = Person(web_serve)
    kept = dana.remember("I prefer window seats on trains")
    page = signed_in(browser, web_serve, dana)
    page.get_by_label("Pause use").check()
    page.get_by_role("button", name="Save controls").click()
    assert page.get_by_role("status").filter(has_text="controls are saved").is_visible()
    assert dana.api.get("/v1/settings").json() == {"learning_paused": False, "use_paused": True}
    assert dana.api.post("/v1/recall", json={"query": "window seats"}).json()["paused"] is True
    page.get_by_label("Pause use").uncheck()
    page.get_by_role("button", name="Save controls").click()
    assert dana.api.get("/v1/settings").json()["use_paused"] is False

    page.get_by_role("link", name="Forget everything…").click()
    assert page.get_by_role("heading", name="Forget everything").is_visible()
    screenshot(page, "memory-forget-everything-desktop")
    # without the tick nothing is forgotten (posted as a browser without the form check would)
    csrf = page.locator("input[name=csrf_token]").first.get_attribute("value")
    refused = page.request.post(f"{web_serve}/memory/forget-everything", form={"csrf_token": csrf})
    assert refused.status == 422 and "Nothing was forgotten" in refused.text()
    assert dana.memory(kept["id"]).json()["status"] == "confirmed"
    page.get_by_label("I understand that everything is forgotten").check()
    page.get_by_role("button", name="Forget everything").click()
    page.wait_for_url("**/memory/forgets/fa-*")  # the form's answer: a loaded machine is slower to give it
    assert page.get_by_role("heading", name="Forgetting everything").is_visible()
    assert page.get_by_text("Stopped using:").is_visible()
    assert dana.api.post("/v1/recall", json={"query": "window seats"}).json()["items"] == [], "stopped using at once"
    wait_for(lambda: dana.memory(kept["id"]).json()["status"] == "forgotten", 60, "the account's memory forgotten")


def test_the_status_page_works_without_javascript(web_serve: str, browser: Any) -> None:
    erin = Person(web_serve)
    memory = erin.remember("I prefer paper notebooks")
    page = signed_in(browser, web_serve, erin, java_script_enabled=False)
    page.goto(f"{web_serve}/memory/m/{memory['id']}")
    page.get_by_role("button", name="Forget this memory").click()
    assert page.get_by_text("Stopped using:").is_visible()

    def complete() -> bool:
        if page.get_by_text("Purge complete:").count():
            return True
        page.get_by_role("link", name="Check again").click()
        return False

    wait_for(complete, 90, "purge complete after reloads")


def test_the_status_page_follows_the_purge_by_itself(postgres: Any, tmp_path: Path, browser: Any) -> None:
    """A backup taken before the forget keeps its `backups` copy pending until retention deletes it (here
    after 20 seconds): the page shows "stopped using" and the pending copy first, then, without a reload,
    "purge complete"."""
    environment = serve_environment(postgres, tmp_path, ENGRAM_BACKUP_RETENTION_DAYS=str(20 / 86400),
                                    ENGRAM_SWEEP_INTERVAL="1")
    with running_serve(environment, tmp_path) as url:
        gina = Person(url)
        memory = gina.remember("I prefer the aisle seat on long flights")
        subprocess.run(ENGRAM + ["backup", str(tmp_path / "nightly")], env=environment, check=True,
                       capture_output=True, timeout=120)
        page = signed_in(browser, url, gina)
        page.goto(f"{url}/memory/m/{memory['id']}")
        page.get_by_role("button", name="Forget this memory").click()
        assert page.get_by_text("Stopped using:").is_visible()
        status = page.locator("#forget-status")
        backups = status.locator("tbody tr", has_text="Backups")
        assert "Purging:" in status.inner_text() and "pending" in backups.inner_text()
        assert "1 backup taken before the forget" in backups.inner_text()
        screenshot(page, "memory-forget-purging-desktop")
        page.evaluate("window.sameDocument = true")
        page.get_by_text("Purge complete:").wait_for(timeout=90_000)
        assert page.evaluate("window.sameDocument === true"), "updated in place, not by reloading"
        assert "purged" in backups.inner_text() and "deleted by retention" in backups.inner_text()
        screenshot(page, "memory-forget-purge-complete-live-desktop")


def test_keyboard_focus_is_visible_and_the_skip_link_comes_first(web_serve: str, browser: Any) -> None:
    page = signed_in(browser, web_serve, Person(web_serve))
    page.keyboard.press("Tab")
    focused = page.evaluate("[document.activeElement.textContent, getComputedStyle(document.activeElement).outlineStyle]")
    assert focused == ["Skip to main content", "solid"]
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_no_serious_accessibility_violation_on_any_page(web_serve: str, browser: Any, viewport: dict[str, int]) -> None:
    frank = Person(web_serve)
    frank.learn("I prefer standups at 9:30 on Mondays.")
    frank.remember("My doctor's appointment is on Friday")  # sensitive: a candidate with the warning
    memory = frank.remember(CHINESE, tags=["会议"])
    forgettable = frank.remember("I prefer short emails")
    label = "desktop" if viewport == DESKTOP else "phone"
    page = signed_in(browser, web_serve, frank, viewport=viewport)
    accessible(page, "/memory")
    screenshot(page, f"axe-memory-{label}")
    page.goto(f"{web_serve}/memory/m/{memory['id']}")
    accessible(page, "/memory/m/{id}")
    page.goto(f"{web_serve}/memory/m/{forgettable['id']}")
    page.get_by_role("button", name="Forget this memory").click()
    accessible(page, "/memory/forgets/{id}")
    screenshot(page, f"axe-forget-status-{label}")
    for path in ("/memory/forget-everything", f"/memory/m/{uuid.uuid4()}"):
        page.goto(web_serve + path)
        accessible(page, path)
    page.get_by_role("button", name="Sign out").click()
    accessible(page, "/sign-in")
    screenshot(page, f"axe-sign-in-{label}")


def proposed_insight(person: Person) -> list[dict[str, Any]]:
    """Two confirmed memories saying the same: the local proposer proposes an insight over them."""
    person.remember("从现在起，汇报时风险优先。")
    person.remember("记住：风险优先。")
    return wait_for(lambda: person.api.get("/v1/insights", params={"status": "proposed"}).json()["items"], 60,
                    "a proposed insight")


def test_insights_are_confirmed_and_rejected_on_the_page(web_serve: str, browser: Any) -> None:
    ivan = Person(web_serve)
    rejected = proposed_insight(ivan)
    page = signed_in(browser, web_serve, ivan)
    page.get_by_role("button", name="Reject insight").click()
    assert page.get_by_role("status").filter(has_text="Insight rejected").is_visible()
    assert rejected[0]["id"] not in {i["id"] for i in ivan.api.get("/v1/insights").json()["items"]
                                     if i["status"] in ("proposed", "confirmed")}
    assert page.get_by_text("No insight is waiting for you.").is_visible()

    hana = Person(web_serve)
    proposed = proposed_insight(hana)
    page = signed_in(browser, web_serve, hana)
    card = page.locator("section[aria-labelledby=insights] li.card", has_text=proposed[0]["text"])
    assert "从现在起，汇报时风险优先。" in card.inner_text(), "with the evidence it rests on"
    card.get_by_role("button", name="Confirm insight").click()
    assert page.get_by_role("status").filter(has_text="Insight confirmed").is_visible()
    assert hana.api.get("/v1/insights", params={"status": "confirmed"}).json()["items"][0]["id"] == proposed[0]["id"]
    confirmed = page.locator("section[aria-labelledby=insights] h3:text('Confirmed') + ul li")
    assert proposed[0]["text"] in confirmed.first.inner_text()


def test_the_accessibility_check_finds_a_violation_where_there_is_one(browser: Any) -> None:
    """The axe-core run is real: a page with an unlabelled input and no language fails it."""
    page = browser.new_page()
    page.set_content("<html><body><main><input type='text'></main></body></html>")
    found = serious_violations(page)
    assert any(v.startswith("label ") for v in found) and any(v.startswith("html-has-lang ") for v in found), found
    page.close()


def test_bad_input_on_a_form_is_a_page_with_its_status_and_nothing_written(web_serve: str) -> None:
    kim = Person(web_serve)
    memory = kim.remember("I prefer tea in the afternoon")
    history = kim.api.get(f"/v1/memories/{memory['id']}/history").json()
    with httpx.Client(base_url=web_serve) as browser_like:
        browser_like.get("/memory", params={"token": kim.token})
        csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', browser_like.get("/memory").text).group(1)  # type: ignore[union-attr]
        correct = f"/memory/m/{memory['id']}/correct"
        for form, status in (({"text": "I prefer coffee", "valid_from": "2300-01-01T00:00"}, 422),
                             ({"text": "I prefer coffee", "valid_from": "next tuesday"}, 422),
                             ({"text": "x" * 9000}, 413),
                             ({"text": "bad \x00 text"}, 422)):
            r = browser_like.post(correct, data={**form, "csrf_token": csrf})
            assert r.status_code == status, (form, r.status_code)
            assert r.headers["content-type"].startswith("text/html") and "<h1>" in r.text
            assert "x" * 100 not in r.text, "the page never repeats the submitted text"
    assert kim.api.get(f"/v1/memories/{memory['id']}/history").json() == history


def test_older_memories_are_a_page_further(web_serve: str, browser: Any) -> None:
    lee = Person(web_serve)
    for n in range(23):
        lee.remember(f"I prefer plan number {n:02d} for the offsite")
    page = signed_in(browser, web_serve, lee)
    listed = page.locator("section[aria-labelledby=memories] ul.cards > li h3")
    first = listed.all_inner_texts()
    assert len(first) == 20 and first[0] == "I prefer plan number 22 for the offsite", "newest first"
    page.get_by_role("link", name="Older memories").click()
    rest = listed.all_inner_texts()
    assert rest == [f"I prefer plan number {n:02d} for the offsite" for n in (2, 1, 0)]
    assert page.get_by_role("link", name="Older memories").count() == 0


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_chinese_browser_gets_chinese_pages_and_can_switch_to_english(web_serve: str, browser: Any,
                                                                       viewport: dict[str, int]) -> None:
    """Chromium set to Chinese (its Accept-Language is zh-CN): the pages speak Chinese and pass axe-core;
    the switch in the header turns them English, and the choice stays on every page after it."""
    mei = Person(web_serve)
    memory = mei.remember(CHINESE, tags=["会议"])
    mei.remember("我每天早上吃降压药")  # sensitive: a candidate with its warning
    label = "desktop" if viewport == DESKTOP else "phone"
    page = signed_in(browser, web_serve, mei, viewport=viewport, locale="zh-CN")
    assert page.evaluate("document.documentElement.lang") == "zh"
    assert page.get_by_role("heading", name="我的记忆", level=1).is_visible()
    assert page.locator(".sensitive").first.inner_text().startswith("敏感：")
    accessible(page, "/memory in Chinese")
    screenshot(page, f"memory-overview-zh-{label}")
    page.get_by_role("link", name=CHINESE, exact=True).click()
    assert page.get_by_role("heading", name="记忆详情").is_visible() and "2026年11月2日 09:00 UTC+08:00" in page.content()
    accessible(page, "/memory/m/{id} in Chinese")
    screenshot(page, f"memory-detail-zh-{label}")
    page.get_by_role("button", name="忘记这条记忆").click()
    assert page.get_by_text("已停用：").is_visible()
    page.get_by_text("清除完成：").wait_for(timeout=90_000)
    accessible(page, "/memory/forgets/{id} in Chinese")
    screenshot(page, f"memory-forget-zh-{label}")

    page.goto(f"{web_serve}/memory?tag=会议")
    page.get_by_role("button", name="English").click()
    assert page.url == f"{web_serve}/memory?tag=%E4%BC%9A%E8%AE%AE", "back on the same page"
    assert page.evaluate("document.documentElement.lang") == "en"
    assert page.get_by_role("heading", name="Your memories", level=1).is_visible()
    page.goto(f"{web_serve}/memory/m/{memory['id']}")
    assert page.get_by_role("heading", name="A memory", level=1).is_visible(), "the choice stays"
    page.get_by_role("button", name="中文").click()
    assert page.get_by_role("heading", name="记忆详情").is_visible()
