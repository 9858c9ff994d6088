"""``/health`` (the process is alive) and ``/ready`` (database, Redis and model are ready)."""

from __future__ import annotations

import time
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET


@require_GET
def health(request: HttpRequest) -> JsonResponse:
    """Liveness: answers 200 as long as the process serves requests; touches nothing."""
    return JsonResponse({"status": "ok"})


def _check(fn: Any) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        fn()
    except Exception as exc:
        return {"status": "unhealthy", "message": f"{type(exc).__name__}: {exc}"[:300]}
    return {"status": "healthy", "latencyMs": round((time.perf_counter() - start) * 1000, 2)}


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _redis() -> None:
    cache.set("ready-probe", "1", timeout=5)
    if cache.get("ready-probe") != "1":
        raise RuntimeError("Redis did not return the probe value")


def _embedding_model() -> None:
    from memories.embeddings import get_embedder

    vector = get_embedder().encode(["ready"])
    if vector.shape[0] != 1:
        raise RuntimeError("embedding model returned no vector")


@require_GET
def ready(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 when the database, Redis and the embedding model all work, else 503.

    The first call loads the model (a few seconds); later calls take milliseconds.
    """
    components = {
        "database": _check(_database),
        "redis": _check(_redis),
        "embeddingModel": _check(_embedding_model),
    }
    healthy = all(c["status"] == "healthy" for c in components.values())
    return JsonResponse(
        {"status": "ready" if healthy else "not_ready", "components": components},
        status=200 if healthy else 503,
    )
