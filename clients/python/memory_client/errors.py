"""The service's one error envelope, ``{"error": {"code", "message", "operation", "details",
"retryable"}}``, raised as typed exceptions."""

from __future__ import annotations

from typing import Any


class MemoryServiceError(Exception):
    """An error answer of the service (or no answer at all: :class:`ServiceUnreachable`).

    Attributes:
        status: the HTTP status (0 when no answer came).
        code: the envelope's code, e.g. ``MEMORY_NOT_FOUND``.
        details: the envelope's details (e.g. ``max_length`` of ``CONTENT_TOO_LONG``).
        retryable: whether the same call may succeed later.
        retry_after: the server's ``Retry-After`` in seconds, when it sent one.
    """

    retry_after: float | None = None

    def __init__(self, message: str, *, status: int = 0, code: str = "",
                 operation: str = "", details: dict[str, Any] | None = None,
                 retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.operation = operation
        self.details = details or {}
        self.retryable = retryable

    def __str__(self) -> str:
        return f"{self.code or self.status}: {self.message}"


class InvalidRequest(MemoryServiceError):
    """400, 413 and 422 but policy violations: the request itself is wrong."""


class Unauthorized(MemoryServiceError):
    """401 or 403: a missing, wrong or insufficient API key."""


class NotFound(MemoryServiceError):
    """404: the object does not exist (or belongs to another tenant: the same answer)."""


class Conflict(MemoryServiceError):
    """409 or 412: a concurrent change (``VERSION_CONFLICT``)."""


class PolicyViolation(MemoryServiceError):
    """422 ``POLICY_VIOLATION``: a governance policy refused the content."""


class RateLimited(MemoryServiceError):
    """429 after the retries ran out; ``retry_after`` is the server's ``Retry-After``."""


class ServiceUnavailable(MemoryServiceError):
    """5xx after the retries ran out."""


class ServiceUnreachable(MemoryServiceError):
    """No answer: connection refused, DNS failure or timeout."""


_BY_STATUS: dict[int, type[MemoryServiceError]] = {
    400: InvalidRequest, 401: Unauthorized, 403: Unauthorized, 404: NotFound, 409: Conflict,
    412: Conflict, 413: InvalidRequest, 422: InvalidRequest, 429: RateLimited,
}


def retry_after_seconds(headers: Any) -> float | None:
    """``Retry-After`` in seconds (its delta-seconds form), or ``None``."""
    raw = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


def error_from_response(status: int, payload: Any, headers: Any = None) -> MemoryServiceError:
    """The typed exception for an error answer (the envelope, or any other body)."""
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        error = {"message": f"HTTP {status}", "retryable": status in (429, 502, 503, 504)}
    code = str(error.get("code") or "")
    cls = PolicyViolation if code == "POLICY_VIOLATION" else _BY_STATUS.get(
        status, ServiceUnavailable if status >= 500 else MemoryServiceError)
    exc = cls(str(error.get("message") or f"HTTP {status}"), status=status, code=code,
              operation=str(error.get("operation") or ""),
              details=error.get("details") if isinstance(error.get("details"), dict) else {},
              retryable=bool(error.get("retryable")))
    exc.retry_after = retry_after_seconds(headers)
    return exc
