"""Metrics of the vector backends (seed 001 "Backend Observability", "Backend Health
Checks", "Pinecone rate limit handling"); seed names with dots written as underscores:

- ``vector_backend_operation_duration_ms{backend,operation}``: histogram, milliseconds.
- ``vector_backend_operation_total{backend,operation,status}``: counter, ``status`` ``ok`` or
  ``error``.
- ``vector_backend_errors_total{backend,error_code}``: counter, failed operations by the
  error's code (``BACKEND_UNAVAILABLE``, ``BACKEND_CIRCUIT_OPEN``, ``RATE_LIMITED``, ...).
- ``vector_backend_health_check_failed_total{backend}``: counter, unhealthy health checks.
- ``vector_backend_rate_limit_total{backend}``: counter, rate-limit answers of the backend
  (each one, retried or not).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

OPERATION_DURATION = Histogram(
    "vector_backend_operation_duration_ms",
    "Vector backend operation duration in milliseconds, by backend and operation",
    ["backend", "operation"],
    buckets=(0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000),
)
OPERATIONS = Counter(
    "vector_backend_operation",
    "Vector backend operations, by backend, operation and status (ok/error)",
    ["backend", "operation", "status"],
)
ERRORS = Counter(
    "vector_backend_errors", "Failed vector backend operations, by backend and error code",
    ["backend", "error_code"],
)
HEALTH_CHECK_FAILED = Counter(
    "vector_backend_health_check_failed", "Vector backend health checks that failed",
    ["backend"],
)
RATE_LIMITS = Counter(
    "vector_backend_rate_limit", "Rate-limit answers from a vector backend", ["backend"],
)
