"""Request ids (``X-Request-ID``) and the structured JSON log lines that carry them."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from django.conf import settings

from memory_project.observability import RequestIdFilter

pytestmark = pytest.mark.django_db


@pytest.fixture()
def log_lines() -> Iterator[io.StringIO]:
    """What the configured console handler would print (JSON formatter, request-id filter)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    config = settings.LOGGING["formatters"]["json"]
    from pythonjsonlogger.json import JsonFormatter

    handler.setFormatter(JsonFormatter(config["fmt"], rename_fields=config["rename_fields"]))
    handler.addFilter(RequestIdFilter())
    logger = logging.getLogger("memory_project")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def records(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_it_generates_a_request_id_when_none_is_sent(client) -> None:
    first, second = client.get("/health"), client.get("/health")
    assert re.fullmatch(r"[0-9a-f]{32}", first["X-Request-ID"])
    assert first["X-Request-ID"] != second["X-Request-ID"]


def test_it_keeps_a_sane_incoming_request_id(client) -> None:
    response = client.get("/health", HTTP_X_REQUEST_ID="edge-42.a_b:c-d")
    assert response["X-Request-ID"] == "edge-42.a_b:c-d"


@pytest.mark.parametrize("bad", ["", "has space", "x" * 129, "new\\nline", "<script>", "é"])
def test_it_replaces_an_insane_request_id(client, bad) -> None:
    response = client.get("/health", HTTP_X_REQUEST_ID=bad)
    assert re.fullmatch(r"[0-9a-f]{32}", response["X-Request-ID"])


def test_it_returns_the_request_id_on_errors_too(tenant_a) -> None:
    response = tenant_a.client.get("/api/v1/memories/nope", HTTP_X_REQUEST_ID="err-1")
    assert response.status_code == 404
    assert response["X-Request-ID"] == "err-1"
    unauthenticated = tenant_a.client.__class__().get("/api/v1/memories?layer=company")
    assert unauthenticated.status_code == 401
    assert unauthenticated["X-Request-ID"]


def test_it_logs_one_json_access_line_per_request(tenant_a, log_lines) -> None:
    response = tenant_a.client.get("/api/v1/memories", {"layer": "company"},
                                   HTTP_X_REQUEST_ID="req-77")
    assert response.status_code == 200
    (line,) = [r for r in records(log_lines) if r["logger"] == "memory_project.access"]
    assert line["request_id"] == "req-77"
    assert line["level"] == "INFO" and line["time"]
    assert line["method"] == "GET" and line["path"] == "/api/v1/memories"
    assert line["status"] == 200 and line["duration_ms"] >= 0
    assert line["operation"] == "memory.list"
    assert line["tenant"] == tenant_a.tenant.slug
    assert line["error_code"] is None


def test_it_logs_the_error_code_of_a_failed_operation(tenant_a, log_lines) -> None:
    tenant_a.client.post("/api/v1/memories", {"content": "x", "layer": "galaxy"},
                         format="json")
    (line,) = [r for r in records(log_lines) if r["logger"] == "memory_project.access"]
    assert line["status"] == 400 and line["error_code"] == "INVALID_LAYER"
    assert line["operation"] == "memory.add"


def test_it_tags_application_logs_with_the_request_id(tenant_a, log_lines) -> None:
    logger = logging.getLogger("memory_project.test")
    from memory_project import observability

    token = observability.REQUEST_ID.set("inner-1")
    try:
        logger.warning("something happened", extra={"memory_id": "m1"})
    finally:
        observability.REQUEST_ID.reset(token)
    logger.warning("outside a request")
    inside, outside = records(log_lines)
    assert inside == {**inside, "message": "something happened", "request_id": "inner-1",
                      "memory_id": "m1", "level": "WARNING"}
    assert outside["request_id"] is None


def test_the_settings_choose_the_json_formatter_by_default() -> None:
    handler = settings.LOGGING["handlers"]["console"]
    assert handler["formatter"] == ("plain" if settings.LOG_FORMAT == "plain" else "json")
    assert "request_id" in handler["filters"]
