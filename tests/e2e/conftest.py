"""Fixtures of the end-to-end tests that drive pages in a browser."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from tests.e2e.browser import chromium
from tests.support.helpers import serving

_no_browser: list[str] = []  # why Chromium did not start, for the summary


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless; the tests that need it skip, with the reason, when it cannot start.

    One a module, never the whole session: Playwright's sync API keeps an event loop running in the main
    thread while it is open, and every later `asyncio.run` (the async client, MCP, Kafka) would fail."""
    with ExitStack() as stack:
        try:
            running = stack.enter_context(chromium())
        except RuntimeError as exc:
            _no_browser.append(str(exc))
            pytest.skip(f"no browser: {exc}")
        yield running


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The reason the page tests skipped, printed even without `-rs`."""
    if _no_browser:
        terminalreporter.write_line(f"page tests skipped, no browser: {_no_browser[0]}", yellow=True)


@pytest.fixture(scope="module")
def web_serve(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`engram serve` on a fresh database for one test module's pages; its URL."""
    with serving(postgres, tmp_path_factory.mktemp("web-serve")) as url:
        yield url
