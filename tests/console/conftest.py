"""Fixtures of the console tests: fast password hashing, and a signed-in tenant admin."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

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
