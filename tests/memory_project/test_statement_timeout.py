"""The web workers' statement time limit (``memory_project.postgresql.web_statement_timeout``):
a new connection of a web worker gets ``DATABASE_STATEMENT_TIMEOUT_MS``, and a statement
cancelled by it answers 422 ``WORK_BUDGET_EXCEEDED`` in the envelope, not 503."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, connections

from memories.api.views import memories as memory_views
from tests.helpers import assert_error

pytestmark = pytest.mark.django_db


def _new_connection_timeout() -> str:
    fresh = connections.create_connection("default")
    try:
        with fresh.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            return str(cursor.fetchone()[0])
    finally:
        fresh.close()


def test_a_web_workers_new_connection_gets_the_limit(monkeypatch: pytest.MonkeyPatch,
                                                     settings: Any) -> None:
    settings.DATABASE_STATEMENT_TIMEOUT_MS = 1234
    assert _new_connection_timeout() == "0"  # a worker or a command: PostgreSQL's default
    monkeypatch.setenv("MEMORY_WEB_PROCESS", "1")
    assert _new_connection_timeout() == "1234ms"
    settings.DATABASE_STATEMENT_TIMEOUT_MS = 0
    assert _new_connection_timeout() == "0"


def test_a_statement_over_the_limit_answers_422_and_the_next_request_succeeds(
        tenant_a: Any, monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    settings.DATABASE_STATEMENT_TIMEOUT_MS = 50
    listed = memory_views.selectors.memory_list

    def slow_list(*args: Any, **kwargs: Any) -> Any:
        with connection.cursor() as cursor:  # as the session limit would, for this request
            cursor.execute("SET LOCAL statement_timeout = 50")
            cursor.execute("SELECT pg_sleep(2)")
        return listed(*args, **kwargs)

    tenant_a.add("kept")
    url = "/api/v1/memories?layer=user&userId=u1"
    monkeypatch.setattr(memory_views.selectors, "memory_list", slow_list)
    error = assert_error(tenant_a.client.get(url), 422, "WORK_BUDGET_EXCEEDED")
    assert error["details"] == {"limitSeconds": 0.05}
    monkeypatch.setattr(memory_views.selectors, "memory_list", listed)
    response = tenant_a.client.get(url)
    assert response.status_code == 200
    assert [m["content"] for m in response.json()["memories"]] == ["kept"]
