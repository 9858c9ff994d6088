"""Reads about the vector backends: health and capabilities of the configured one."""

from __future__ import annotations

from typing import Any

from vectors.base import Healthy
from vectors.guard import GuardedBackend
from vectors.registry import backend as configured_backend
from vectors.runner import call


def backend_status(backend: GuardedBackend | None = None,
                   tenant_id: str | None = None) -> dict[str, Any]:
    """``{"backend", "status", "latencyMs", "details"?, "capabilities", "circuit"}`` of the
    configured backend (or ``backend``): a health check (seed 001 "Backend Health Checks";
    an unhealthy one counts ``vector_backend_health_check_failed_total``), its capabilities
    and its breaker's state."""
    backend = backend or configured_backend()
    health = call(backend.health_check, tenant_id)
    caps = call(backend.inner.capabilities)
    status: dict[str, Any] = {
        "backend": backend.name, "status": health.status,
        "latencyMs": round(health.latency_ms, 2), "circuit": backend.breaker.current_state,
        "capabilities": {
            "maxVectorDimensions": caps.max_vector_dimensions,
            "supportsMetadataFilter": caps.supports_metadata_filter,
            "supportsHybridSearch": caps.supports_hybrid_search,
            "supportsBatchUpsert": caps.supports_batch_upsert,
            "distanceMetrics": [m.value for m in caps.distance_metrics]}}
    if not isinstance(health, Healthy):
        status["details"] = health.details
        status["errorCode"] = health.error_code
    return status
