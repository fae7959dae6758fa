"""Driving the web console in a real browser: Debian's Chromium through Playwright, signing in, and
screenshots kept as test artifacts (pytest's basetemp, `console-screenshots/`, shared by every module)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from devtools.chromium import find_chromium

SCREENSHOTS = "console-screenshots"


@contextmanager
def launched_chromium() -> Iterator[Browser]:
    """A headless Chromium (about a second to start), closed on exit."""
    executable = find_chromium()
    with sync_playwright() as playwright:
        # --no-sandbox: the tests may run as root, where Chromium's sandbox refuses to start.
        browser = playwright.chromium.launch(
            executable_path=str(executable), args=["--no-sandbox"], headless=True
        )
        try:
            yield browser
        finally:
            browser.close()


def screenshot_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the session's console screenshots, whichever module shoots first."""
    directory = tmp_path_factory.getbasetemp() / SCREENSHOTS
    directory.mkdir(exist_ok=True)
    return directory


def shoot(page: Page, directory: Path, name: str) -> None:
    page.screenshot(path=str(directory / f"{name}.png"), full_page=True)


def sign_in(page: Page, url: str, client_id: str, secret: str) -> None:
    page.goto(f"{url}/console")
    expect(page).to_have_url(f"{url}/console/sign-in")
    page.get_by_label("Client id").fill(client_id)
    page.get_by_label("Client secret").fill(secret)
    page.get_by_role("button", name="Sign in").click()
