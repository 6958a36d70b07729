"""Pages in a real browser: Debian's Chromium driven by Playwright (no browser download), screenshots
kept under build/screenshots/, and axe-core (the copy inside the axe-playwright-python wheel, loaded from
disk, never from another host) for accessibility.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SCREENSHOTS = ROOT / "build" / "screenshots"

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 740}


@contextmanager
def chromium() -> Iterator[Any]:
    """A running headless Chromium; raises RuntimeError with the reason when it cannot start."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError as exc:  # the test extra is not installed
        raise RuntimeError(f"playwright is not installed: {exc}") from None
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing (make test installs Debian's chromium package)")
    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        except Error as exc:
            raise RuntimeError(f"Chromium did not start: {str(exc).splitlines()[0]}") from None
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: Any, name: str) -> Path:
    """A full-page screenshot kept as a test artifact; its path is printed."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{re.sub(r'[^a-z0-9-]+', '-', name.lower())}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def serious_violations(page: Any) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now, one line each."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    found = []
    for violation in results.response.get("violations", []):
        if violation.get("impact") in ("serious", "critical"):
            targets = [str(node.get("target")) for node in violation.get("nodes", [])][:3]
            found.append(f"{violation['id']} ({violation['impact']}): {violation['help']} at {', '.join(targets)}")
    return found


def scrolls_sideways(page: Any) -> bool:
    """True when the page is wider than the window (a phone would scroll sideways)."""
    return bool(page.evaluate("document.documentElement.scrollWidth > window.innerWidth + 1"))
