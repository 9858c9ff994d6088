"""OpenTelemetry tracing: configured from the standard ``OTEL_*`` variables, off by default.

``OTEL_TRACES_EXPORTER`` names the exporters (comma-separated) among those installed under
the ``opentelemetry_traces_exporter`` entry points: ``console`` ships with the SDK;
``otlp`` needs the ``opentelemetry-exporter-otlp`` package. Unset or ``none`` (the default
here, unlike the SDK's own ``otlp`` default) leaves tracing off: the API's no-op tracer
costs next to nothing. ``OTEL_SDK_DISABLED=true`` also turns it off. The service name
comes from ``OTEL_SERVICE_NAME`` (default ``memory-service``); the batch processor reads
``OTEL_BSP_*``.

Spans (see ``memory_project.observability``): one per API operation
(``memory.add``, ``memory.search``, ...), with children for every SQL statement
(``db.query``) and every embedding step (``memory.embed``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import Any

from opentelemetry import trace

logger = logging.getLogger(__name__)

tracer = trace.get_tracer("memory_service")


def configure() -> list[str]:
    """Install a tracer provider with the exporters ``OTEL_TRACES_EXPORTER`` names.

    Returns:
        The exporter names installed (empty when tracing stays off).

    Raises:
        ValueError: an exporter name that no installed package provides.
    """
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "none").split(",")
             if n.strip() and n.strip() != "none"]
    if not names or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return []
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME")
                                or "memory-service"})
    provider = TracerProvider(resource=resource)
    for name in names:
        found = entry_points(group="opentelemetry_traces_exporter", name=name)
        if not found:
            raise ValueError(f"OTEL_TRACES_EXPORTER: no installed exporter named {name!r}")
        exporter_class = next(iter(found)).load()
        provider.add_span_processor(BatchSpanProcessor(exporter_class()))
    trace.set_tracer_provider(provider)
    logger.info("tracing on, exporters: %s", ", ".join(names))
    return names


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[trace.Span]:
    """A child span of the current one; ``None`` attribute values are left out."""
    with tracer.start_as_current_span(
            name, attributes={k: v for k, v in attributes.items() if v is not None}) as current:
        yield current


def annotate(**attributes: Any) -> None:
    """Set attributes on the current span (the operation's, in a request); no-op when
    tracing is off. Names are prefixed ``memory.``: ``annotate(result_count=3)`` sets
    ``memory.result_count``."""
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes({f"memory.{k}": v for k, v in attributes.items()
                                if v is not None})


def db_span(execute: Callable[..., Any], sql: str, params: Any, many: bool,
            context: dict[str, Any]) -> Any:
    """A Django ``execute_wrapper``: one ``db.query`` span per SQL statement (its text,
    never its parameters)."""
    if not trace.get_current_span().is_recording():
        return execute(sql, params, many, context)
    operation = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    with tracer.start_as_current_span("db.query", kind=trace.SpanKind.CLIENT, attributes={
            "db.system.name": "postgresql", "db.operation.name": operation,
            "db.query.text": sql[:2000]}):
        return execute(sql, params, many, context)
