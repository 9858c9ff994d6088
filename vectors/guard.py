"""Operations around every backend call: circuit breaker, metrics, spans, error mapping.

:class:`GuardedBackend` wraps any :class:`VectorBackend` and is what the registry hands out.
Each operation:

1. goes through the backend's circuit breaker ``vector:<name>`` (seed 001 "Backend Circuit
   Breaker": opens after 5 failures in 60 s, half-opens after 30 s for one trial call;
   settings ``CIRCUIT_BREAKER_*``); while open it fails with ``BACKEND_CIRCUIT_OPEN``
   without calling the backend. Rate-limit answers do not count as failures.
2. records ``vector_backend_operation_duration_ms`` and ``vector_backend_operation_total``,
   and on failure ``vector_backend_errors_total`` with the error's code (``vectors.metrics``).
3. runs in an OpenTelemetry span ``vector.<operation>`` with the backend's name, the error's
   code and message as span attributes.

An exception an adapter did not map to a service error counts as ``BACKEND_UNAVAILABLE``
and is re-raised as :class:`BackendUnavailable`.

``health_check`` bypasses the breaker (it is how one learns the backend is back), never
raises, and counts ``vector_backend_health_check_failed_total`` when unhealthy.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from memory_project.breaker import CircuitBreaker, CircuitOpenError, whole_seconds
from memory_project.errors import MemoryServiceError
from memory_project.resilience import breaker
from memory_project.tracing import tracer
from vectors import metrics
from vectors.base import (
    Capabilities,
    HealthStatus,
    SearchHit,
    SearchQuery,
    Unhealthy,
    VectorBackend,
    VectorRecord,
    check_filter,
)
from vectors.errors import BackendCircuitOpen, BackendUnavailable

logger = logging.getLogger(__name__)
T = TypeVar("T")


def breaker_name(backend: str) -> str:
    """The breaker of vector backend ``backend`` (``memory_project.resilience``)."""
    return f"vector:{backend}"


class GuardedBackend(VectorBackend):
    """``inner`` behind a breaker, with metrics, spans and errors in the service's codes."""

    def __init__(self, inner: VectorBackend) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]
        self.runs_in_caller_thread = inner.runs_in_caller_thread  # type: ignore[misc]
        self._capabilities: Capabilities | None = None

    @property
    def breaker(self) -> CircuitBreaker:
        """This backend's process-wide circuit breaker."""
        return breaker(breaker_name(self.name))

    async def health_check(self, tenant_id: str | None = None) -> HealthStatus:
        """The inner backend's health; an exception becomes ``Unhealthy`` (never raises)."""
        start = time.perf_counter()
        with tracer.start_as_current_span("vector.health_check") as span:
            span.set_attribute("vector.backend", self.name)
            try:
                status = await self.inner.health_check(tenant_id)
            except Exception as exc:  # an adapter that raised instead of answering
                status = Unhealthy(details=f"{type(exc).__name__}: {exc}"[:500],
                                   latency_ms=(time.perf_counter() - start) * 1000)
            span.set_attribute("vector.health", status.status)
        if isinstance(status, Unhealthy):
            metrics.HEALTH_CHECK_FAILED.labels(self.name).inc()
            logger.warning("vector backend %s unhealthy: %s", self.name, status.details)
        return status

    async def capabilities(self) -> Capabilities:
        """The inner backend's capabilities (asked once, then remembered)."""
        if self._capabilities is None:
            self._capabilities = await self._run("capabilities", self.inner.capabilities)
        return self._capabilities

    async def upsert(self, tenant_id: str, records: Sequence[VectorRecord]) -> int:
        """See :meth:`VectorBackend.upsert`; records' metadata keys are checked first.

        Raises:
            InvalidInput: a metadata key that is not an identifier, or a non-scalar value.
            BackendCircuitOpen, BackendUnavailable, BackendRequestFailed, RateLimited.
        """
        if not records:
            return 0
        for record in records:
            check_filter(record.metadata)
        return await self._run("upsert", self.inner.upsert, tenant_id, records)

    async def search(self, tenant_id: str, query: SearchQuery) -> list[SearchHit]:
        """See :meth:`VectorBackend.search`.

        Raises:
            InvalidInput: an invalid filter.
            BackendCircuitOpen, BackendUnavailable, BackendRequestFailed, RateLimited.
        """
        check_filter(query.filter)
        return await self._run("search", self.inner.search, tenant_id, query)

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> int:
        """See :meth:`VectorBackend.delete`."""
        if not ids:
            return 0
        return await self._run("delete", self.inner.delete, tenant_id, ids)

    async def get(self, tenant_id: str, ids: Sequence[str]) -> list[VectorRecord]:
        """See :meth:`VectorBackend.get`."""
        if not ids:
            return []
        return await self._run("get", self.inner.get, tenant_id, ids)

    async def scan(self, tenant_id: str, *, cursor: str | None = None, limit: int = 500
                   ) -> tuple[list[str], str | None]:
        """See :meth:`VectorBackend.scan`."""
        return await self._run("scan", self.inner.scan, tenant_id, cursor=cursor, limit=limit)

    async def close(self) -> None:
        """Close the inner backend."""
        await self.inner.close()

    async def _run(self, operation: str, func: Callable[..., Awaitable[T]], *args: Any,
                   **kwargs: Any) -> T:
        start = time.perf_counter()
        status = "ok"
        with tracer.start_as_current_span(f"vector.{operation}") as span:
            span.set_attribute("vector.backend", self.name)
            try:
                return await self.breaker.acall(self._bounded, operation, func, *args, **kwargs)
            except CircuitOpenError as exc:
                status = "error"
                error: MemoryServiceError = BackendCircuitOpen(
                    f"The {self.name} vector backend is failing; its circuit is open.",
                    operation=f"vector.{operation}",
                    details={"backend": self.name, "retryAfter": whole_seconds(exc.retry_after)})
                self._record_error(span, error)
                raise error from None
            except MemoryServiceError as exc:
                status = "error"
                self._record_error(span, exc)
                raise
            except Exception as exc:
                status = "error"
                error = BackendUnavailable(
                    f"The {self.name} vector backend failed: {type(exc).__name__}.",
                    operation=f"vector.{operation}",
                    details={"backend": self.name, "error": str(exc)[:300]})
                self._record_error(span, error)
                raise error from exc
            finally:
                elapsed_ms = (time.perf_counter() - start) * 1000
                metrics.OPERATION_DURATION.labels(self.name, operation).observe(elapsed_ms)
                metrics.OPERATIONS.labels(self.name, operation, status).inc()

    async def _bounded(self, operation: str, func: Callable[..., Awaitable[T]], *args: Any,
                       **kwargs: Any) -> T:
        """``func`` within the backend's ``operation_timeout`` (a breaker failure if not)."""
        deadline = self.inner.operation_timeout
        if deadline is None:
            return await func(*args, **kwargs)
        try:
            return await asyncio.wait_for(func(*args, **kwargs), timeout=deadline)
        except TimeoutError:
            raise BackendUnavailable(
                f"The {self.name} vector backend did not answer within {deadline:g} s.",
                operation=f"vector.{operation}",
                details={"backend": self.name, "timeoutSeconds": deadline}) from None

    def _record_error(self, span: Any, error: MemoryServiceError) -> None:
        metrics.ERRORS.labels(self.name, error.code).inc()
        span.set_attribute("error.code", error.code)
        span.set_attribute("error.message", error.message[:300])
        if error.details:
            span.set_attribute("error.details", str(error.details)[:500])
