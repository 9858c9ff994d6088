"""Helpers shared by the REST test modules (assertions on the error envelope, snapshots)."""

from __future__ import annotations

import json
import time
from typing import Any

from django.db import connection

from tenants.context import tenant_scope

ENVELOPE_KEYS = {"code", "message", "operation", "details", "retryable"}


def body(response: Any) -> Any:
    """The decoded JSON body of a test-client response (DRF or plain Django)."""
    return json.loads(response.content)


def assert_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """Assert ``response`` is the error envelope with ``status`` (and ``code``); return it."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    data = body(response)
    assert set(data) == {"error"}, data
    error = data["error"]
    assert set(error) == ENVELOPE_KEYS, error
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["operation"], str)
    assert isinstance(error["details"], dict)
    assert isinstance(error["retryable"], bool)
    if code is not None:
        assert error["code"] == code, error
    return error


def snapshot(tenant: Any) -> list[dict[str, Any]]:
    """Every row of ``tenant``'s memories and hierarchy, read straight from the database
    (no service code involved), as comparable JSON."""
    with tenant_scope(tenant.ctx), connection.cursor() as cursor:
        rows: list[dict[str, Any]] = []
        for table in ("memories_memory", "tenants_organization", "tenants_team",
                      "tenants_project"):
            cursor.execute(
                f"SELECT row_to_json(t)::text FROM {table} t ORDER BY id"
            )
            rows.extend({"table": table, **json.loads(r[0])} for r in cursor.fetchall())
        return rows


def memory_row(tenant: Any, memory_id: Any) -> dict[str, Any] | None:
    """One memory row as JSON (every column, the embedding included), or ``None``."""
    with tenant_scope(tenant.ctx), connection.cursor() as cursor:
        cursor.execute(
            "SELECT row_to_json(t)::text FROM memories_memory t WHERE id = %s", [str(memory_id)]
        )
        row = cursor.fetchone()
        return json.loads(row[0]) if row else None


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    """Poll ``predicate`` every 0.2 s until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def new_key(tenant: Any, **options: Any) -> tuple[str, Any]:
    """A new API key of ``tenant`` (``api_key_create`` options: roles, rate_limit, ...):
    ``(its prefix, a DRF client that sends it)``."""
    from rest_framework.test import APIClient

    from tenants import services as tenant_services

    options.setdefault("name", "k")
    with tenant_scope(tenant.ctx):
        key, raw = tenant_services.api_key_create(tenant.ctx, **options)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return key.prefix, client
