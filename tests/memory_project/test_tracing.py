"""OpenTelemetry spans of the memory operations, read with the in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler, SamplingResult

from memory_project import tracing

pytestmark = pytest.mark.django_db

M = "/api/v1/memories"
_EXPORTER = InMemorySpanExporter()


class _Switch(Sampler):
    """Records only while a test of this module runs; the other tests stay untraced."""

    on = False

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        return (ALWAYS_ON if self.on else ALWAYS_OFF).should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return "tests.memory_project.test_tracing switch"


_SWITCH = _Switch()


@pytest.fixture()
def spans() -> Iterator[InMemorySpanExporter]:
    """The finished spans of this test (the provider is installed once per process)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider(sampler=_SWITCH)
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    _SWITCH.on = True
    yield _EXPORTER
    _SWITCH.on = False
    _EXPORTER.clear()


def one(finished: Any, name: str) -> ReadableSpan:
    matching = [s for s in finished if s.name == name]
    assert len(matching) == 1, [s.name for s in finished]
    return matching[0]


def children(finished: Any, parent: ReadableSpan) -> list[ReadableSpan]:
    """Every span below ``parent``, at any depth."""
    ids = {parent.context.span_id}
    found: list[ReadableSpan] = []
    for s in sorted(finished, key=lambda s: s.start_time or 0):
        if s.parent is not None and s.parent.span_id in ids:
            ids.add(s.context.span_id)
            found.append(s)
    return found


def test_it_traces_a_search_with_its_database_and_embedding_steps(tenant_a, spans) -> None:
    tenant_a.add("the deploy runs on Fridays", identifiers={"userId": "u1"})
    spans.clear()
    response = tenant_a.client.post(f"{M}/search", {
        "query": "deploy on Fridays", "identifiers": {"userId": "u1"}, "threshold": 0},
        format="json", HTTP_X_REQUEST_ID="trace-me-1")
    assert response.status_code == 200
    finished = spans.get_finished_spans()
    operation = one(finished, "memory.search")
    assert operation.kind == trace.SpanKind.SERVER
    attributes = dict(operation.attributes or {})
    assert attributes["memory.operation"] == "memory.search"
    assert attributes["memory.tenant"] == tenant_a.tenant.slug
    assert attributes["memory.tenant_id"] == str(tenant_a.tenant.pk)
    assert attributes["memory.layer_count"] == len(response.json()["searchedLayers"]) == 2
    assert attributes["memory.result_count"] == len(response.json()["results"]) == 1
    assert attributes["memory.request_id"] == "trace-me-1"
    assert attributes["http.response.status_code"] == 200
    below = children(finished, operation)
    queries = [s for s in below if s.name == "db.query"]
    assert queries and all(s.attributes["db.system.name"] == "postgresql" for s in queries)
    assert any(s.attributes["db.operation.name"] == "SELECT" for s in queries)
    assert all("Fridays" not in s.attributes["db.query.text"] for s in queries)  # no params
    embed = [s for s in below if s.name == "memory.embed"]
    assert len(embed) == 1 and embed[0].attributes["memory.embed.kind"] == "query"


def test_it_traces_an_add_with_the_embedding_it_generated(tenant_a, spans) -> None:
    response = tenant_a.client.post(M, {"content": "a brand new fact 91c2", "layer": "user",
                                        "identifiers": {"userId": "u1"}}, format="json")
    assert response.status_code == 201
    finished = spans.get_finished_spans()
    operation = one(finished, "memory.add")
    assert operation.attributes["memory.result_count"] == 1
    assert operation.attributes["memory.layer_count"] == 1
    embed = one(finished, "memory.embed")
    assert embed.parent is not None and embed.context.trace_id == operation.context.trace_id
    assert embed.attributes["memory.embed.generated"] == 1
    assert any(s.attributes.get("db.operation.name") == "INSERT"
               for s in children(finished, operation))


def test_it_traces_a_list_and_marks_errors_by_status(tenant_a, spans) -> None:
    tenant_a.add("listed", identifiers={"userId": "u1"})
    spans.clear()
    tenant_a.client.get(M, {"layer": "user", "userId": "u1"})
    listed = one(spans.get_finished_spans(), "memory.list")
    assert listed.attributes["memory.result_count"] == 1
    spans.clear()
    missing = tenant_a.client.get(f"{M}/01a1fb00-0000-7000-8000-00000000abcd")
    assert missing.status_code == 404
    got = one(spans.get_finished_spans(), "memory.get")
    assert got.attributes["http.response.status_code"] == 404


def test_it_names_non_api_requests_by_method(client, spans) -> None:
    client.get("/health")
    assert one(spans.get_finished_spans(), "HTTP GET").attributes["url.path"] == "/health"


def test_it_stays_off_unless_an_exporter_is_named(monkeypatch) -> None:
    installed: list[Any] = []
    monkeypatch.setattr(trace, "set_tracer_provider", installed.append)
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    assert tracing.configure() == []
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert tracing.configure() == []
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert tracing.configure() == []
    assert installed == []


def test_it_installs_the_named_exporter(monkeypatch) -> None:
    installed: list[Any] = []
    monkeypatch.setattr(trace, "set_tracer_provider", installed.append)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "memsvc-test")
    assert tracing.configure() == ["console"]
    (provider,) = installed
    assert provider.resource.attributes["service.name"] == "memsvc-test"
    provider.shutdown()


def test_it_refuses_an_unknown_exporter(monkeypatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
    with pytest.raises(ValueError, match="carrier-pigeon"):
        tracing.configure()
