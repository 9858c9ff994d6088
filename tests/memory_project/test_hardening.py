"""Smaller findings of the security review (10 and 11): what logs keep, ids that URLs can
address, bounded settings, and gunicorn's own errors in the envelope."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest
from django.db import connections
from django.test import RequestFactory

from memory_project.observability import RequestIdFilter
from tests.helpers import assert_error, body


def test_logs_keep_no_query_string() -> None:
    request = RequestFactory().get("/api/v1/memories", {"userId": "alice-secret-id"})
    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1,
                               "Bad Request: %s", (request.path,), None)
    record.request = request
    RequestIdFilter().filter(record)
    assert "alice-secret-id" not in str(record.request) + record.getMessage()
    assert str(record.request) == "GET /api/v1/memories"


def test_the_access_log_format_leaves_out_the_query_string() -> None:
    from memory_project.management.commands.run_stack import Command

    args = Command()._gunicorn("127.0.0.1", 8000)
    log_format = args[args.index("--access-logformat") + 1]
    assert "%(U)s" in log_format and "%(r)s" not in log_format and "%(q)s" not in log_format


@pytest.mark.parametrize("plural,field", [("orgs", "orgId")])
def test_an_id_its_url_cannot_address_is_refused(tenant_a: Any, plural: str, field: str) -> None:
    for bad in ("a/b", "/", "  "):
        assert_error(tenant_a.client.post(f"/api/v1/{plural}", {field: bad}, format="json"),
                     400)
    assert tenant_a.client.post(f"/api/v1/{plural}", {field: "a.b-c"},
                                format="json").status_code == 201
    assert tenant_a.client.get(f"/api/v1/{plural}/a.b-c").status_code == 200


def test_thousands_of_weight_scopes_are_refused(tenant_a: Any) -> None:
    weights = {"relevance": 0.4, "importance": 0.3, "recency": 0.2, "confidence": 0.1}
    many = {f"scope-{i}": weights for i in range(2000)}
    response = tenant_a.client.patch("/api/v1/settings",
                                     {"recall": {"scoreWeights": many}}, format="json")
    assert_error(response, 400, "INVALID_INPUT")
    stored = body(tenant_a.client.get("/api/v1/settings"))
    assert len((stored.get("recall") or {}).get("scoreWeights") or {}) <= 100


def _raw(port: int, request: bytes) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), payload


@pytest.mark.slow
@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_gunicorn_answers_its_own_errors_in_the_envelope(owner_flushes: None) -> None:
    import json

    from bench.http import Server

    db = connections["default"].settings_dict
    url = f"postgres://{db['USER']}@{db['HOST'].replace('/', '%2F')}/{db['NAME']}"
    with Server(url, threads=1, extra_args=(
            "--config", "python:memory_project.gunicorn_conf")) as server:
        long_line = b"GET /api/v1/memories?x=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        status, payload = _raw(server.port, long_line)
        assert status == 414
        assert json.loads(payload)["error"]["code"] == "URI_TOO_LONG"
        big_header = (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 +
                      b"\r\n\r\n")
        status, payload = _raw(server.port, big_header)
        assert status == 431
        assert json.loads(payload)["error"]["code"] == "HEADERS_TOO_LARGE"


def test_the_stacks_children_get_every_database_role(settings: Any) -> None:
    from memory_project.management.commands.run_stack import child_environment

    settings.DATABASE_PLATFORM_URL = "postgresql://platform@127.0.0.1:5432/memory"
    env = child_environment()
    assert env["DATABASE_PLATFORM_URL"] == settings.DATABASE_PLATFORM_URL
    assert env["DATABASE_URL"] == settings.DATABASE_URL
    assert env["DATABASE_OWNER_URL"] == settings.DATABASE_OWNER_URL
