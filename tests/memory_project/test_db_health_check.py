"""The database health check (``memory_project.postgresql``): a quiet idle connection is
usable without a round trip, and one the server closed is replaced before a request uses it."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from django.db import close_old_connections, connection
from django.db.backends.postgresql import base as django_base

from memory_project.postgresql.base import socket_quiet

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "owner"])


def _server_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the calls of Django's own ``is_usable`` (the ``SELECT 1`` round trip)."""
    calls: list[int] = []
    original = django_base.DatabaseWrapper.is_usable

    def counted(self: Any) -> bool:
        calls.append(1)
        return bool(original(self))

    monkeypatch.setattr(django_base.DatabaseWrapper, "is_usable", counted)
    return calls


def _terminate_backend() -> None:
    """Have the server end this thread's connection, as a restart would, and wait until its
    socket shows it."""
    connection.ensure_connection()
    raw = connection.connection
    params = connection.get_connection_params()
    with psycopg.connect(**{k: params[k] for k in ("dbname", "user", "password", "host", "port")
                            if params.get(k) is not None}, autocommit=True) as other:
        assert other.execute("SELECT pg_terminate_backend(%s)",
                             [raw.info.backend_pid]).fetchone() == (True,)
    deadline = time.monotonic() + 10
    while socket_quiet(raw.fileno()):
        assert time.monotonic() < deadline, "the server did not close the connection"
        time.sleep(0.01)


def test_a_quiet_idle_connection_is_usable_without_asking_the_server(
        owner_flushes: None, monkeypatch: pytest.MonkeyPatch) -> None:
    connection.ensure_connection()
    calls = _server_checks(monkeypatch)
    assert connection.is_usable() is True
    assert calls == []


def test_a_connection_in_a_transaction_is_checked_by_the_server(
        owner_flushes: None, monkeypatch: pytest.MonkeyPatch) -> None:
    connection.ensure_connection()
    calls = _server_checks(monkeypatch)
    raw = connection.connection
    raw.execute("BEGIN")
    try:
        assert connection.is_usable() is True
        assert calls == [1]
    finally:
        raw.execute("ROLLBACK")


def test_a_connection_the_server_closed_is_not_usable(owner_flushes: None) -> None:
    _terminate_backend()
    assert connection.is_usable() is False


def test_the_request_after_the_server_closed_the_connection_succeeds(
        tenant_a: Any, owner_flushes: None) -> None:
    url = "/api/v1/memories?layer=user&userId=u1"
    assert tenant_a.client.get(url).status_code == 200
    assert connection.connection is not None  # kept between requests (CONN_MAX_AGE)
    before = connection.connection.info.backend_pid
    _terminate_backend()
    # What the WSGI handler does at every request's start (Django's test client skips it):
    # the connection gets a health check before its next use.
    close_old_connections()
    response = tenant_a.client.get(url)
    assert response.status_code == 200, response.content
    assert connection.connection.info.backend_pid != before
