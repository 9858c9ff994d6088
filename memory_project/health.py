"""``/health`` (the process is alive) and ``/ready`` (database, Redis and the components the
apps register, such as the embedding model, are ready)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

logger = logging.getLogger(__name__)


@require_GET
def health(request: HttpRequest) -> JsonResponse:
    """Liveness: answers 200 as long as the process serves requests; touches nothing."""
    return JsonResponse({"status": "ok"})


def _check(fn: Any) -> dict[str, Any]:
    """Run one probe. A failure answers only the exception's type (its text, which may name
    hosts, paths or credentials, goes to the log)."""
    start = time.perf_counter()
    try:
        fn()
    except Exception as exc:
        logger.warning("readiness probe %s failed: %s", getattr(fn, "__name__", fn), exc)
        return {"status": "unhealthy", "error": type(exc).__name__}
    return {"status": "healthy", "latencyMs": round((time.perf_counter() - start) * 1000, 2)}


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _redis() -> None:
    cache.set("ready-probe", "1", timeout=5)
    if cache.get("ready-probe") != "1":
        raise RuntimeError("Redis did not return the probe value")


#: Components an app adds to the readiness decision (``register_required``), in order: the
#: memories app adds ``embeddingModel``.
_required: dict[str, Callable[[], None]] = {}


def register_required(name: str, probe: Callable[[], None]) -> None:
    """Make ``/ready`` depend on ``probe()`` under ``name`` (called from ``AppConfig.ready()``).

    ``probe`` raises when the component does not work; it must be cheap on repeat calls
    (cache its own success).
    """
    _required[name] = probe


#: Components an app reports itself (``register_component``): they appear in ``/ready`` but
#: do not decide it, because the service answers without them (e.g. the language model's
#: purposes fall back offline).
_reported: dict[str, Callable[[], dict[str, Any]]] = {}


def register_component(name: str, probe: Callable[[], dict[str, Any]]) -> None:
    """Report ``probe()`` under ``name`` in ``/ready`` (called from ``AppConfig.ready()``).

    ``probe`` returns ``{"status": "healthy" | "degraded" | "down", ...}``; it must be cheap
    (cache its own result) and never raise (an exception reports ``down`` with its type).
    """
    _reported[name] = probe


def _reported_component(probe: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return probe()
    except Exception as exc:
        logger.warning("readiness probe %s failed: %s", getattr(probe, "__name__", probe), exc)
        return {"status": "down", "error": type(exc).__name__}


@require_GET
def ready(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 when the database, Redis and every component registered with
    :func:`register_required` (the embedding model) work, else 503.

    The first call loads the model (a few seconds) and runs it once; a success stands for
    ``MODEL_PROBE_SECONDS`` (60 s), so later calls cost no model run. A failing component
    names only the type of its error. Components registered with
    :func:`register_component` (``llm``) are reported beside them without deciding the
    status.
    """
    components = {"database": _check(_database), "redis": _check(_redis)}
    for name, check in _required.items():
        components[name] = _check(check)
    healthy = all(c["status"] == "healthy" for c in components.values())
    for name, probe in _reported.items():
        components[name] = _reported_component(probe)
    return JsonResponse(
        {"status": "ready" if healthy else "not_ready", "components": components},
        status=200 if healthy else 503,
    )
