"""Helpers of the browser tests (``test_console_browser*.py``): signing in through the login
form and saving screenshots. The ``browser`` and ``page`` fixtures are in ``conftest.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.console_helpers import PASSWORD

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
TIMEOUT_MS = 20_000
#: The marks of every browser test module (``pytestmark = BROWSER_TEST``): slow, and a
#: transactional database the live server can read (``conftest.py`` says why).
BROWSER_TEST = [pytest.mark.slow,
                pytest.mark.django_db(transaction=True,
                                      databases=["default", "owner", "platform"])]


def sign_in(page: Page, base: str, username: str) -> None:
    """Sign ``username`` in through the console's login form."""
    page.goto(f"{base}/console/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_load_state()
    expect(page.locator("#user-tools")).to_contain_text(username)


def shot(page: Page, name: str) -> None:
    """Save a full-page screenshot as ``test-artifacts/screenshots/<name>.png``."""
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
