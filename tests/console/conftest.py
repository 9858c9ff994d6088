"""Fixtures of the console tests: fast password hashing, a signed-in tenant admin, and the
browser tests' Chromium (``browser``, ``page``).

The browser tests use a transactional database, since the live server reads only what the
test commits. pytest-django empties it after each test with ``flush``; the app role may not
TRUNCATE, so ``owner_flushes`` declares ``default`` a mirror of ``owner``, whose role owns
the tables. Without Chromium (``.ci/run`` installs it) they are skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from tests.console.browser_helpers import CHROMIUM, SCREENSHOTS, TIMEOUT_MS
from tests.console_helpers import FAST_HASHERS, console_user


@pytest.fixture(autouse=True)
def fast_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = FAST_HASHERS


@pytest.fixture
def admin(tenant_a: Any) -> Client:
    """A Django test client signed in as ``alice``, tenant A's console admin."""
    client = Client()
    client.force_login(console_user(tenant_a, "alice", "admin"))
    return client


@pytest.fixture(scope="module")
def orm_beside_playwright(owner_flushes: None) -> Iterator[None]:
    """Let the ORM run while Playwright's event loop exists in this thread (and the owner
    role flush, see ``owner_flushes``)."""
    previous_async = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if previous_async is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous_async


@pytest.fixture(scope="module")
def browser(orm_beside_playwright: None) -> Iterator[Any]:
    """Debian's Chromium, headless, driven by Playwright (one per module)."""
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.skip(f"Chromium not found at {CHROMIUM} (install Debian's `chromium` package "
                    "or set CHROMIUM_PATH): browser tests skipped")
    from playwright.sync_api import sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh desktop-sized tab (1366 × 900)."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    yield tab
    context.close()
