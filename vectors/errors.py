"""Errors of the vector backends, in the service's one error envelope.

- ``INVALID_BACKEND_CONFIG`` (seed 001 "Invalid backend configuration"): an unknown backend
  or missing settings; raised at start-up, ``details`` list the supported backends.
- ``BACKEND_CIRCUIT_OPEN`` (``memory_project.errors.BackendCircuitOpen``): the backend's
  breaker is open.
- ``BACKEND_UNAVAILABLE``: the backend could not be reached (connection, timeout, 5xx).
- ``PROVIDER_ERROR`` (:class:`BackendRequestFailed`): the backend answered with an error
  that retrying will not fix (bad request, missing index, authentication).
- ``RATE_LIMITED``: the backend asked us to slow down and retries ran out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from memory_project.errors import (
    BackendCircuitOpen,
    BackendUnavailable,
    MemoryServiceError,
    ProviderError,
    RateLimited,
)

__all__ = [
    "BackendCircuitOpen",
    "BackendRequestFailed",
    "BackendUnavailable",
    "InvalidBackendConfig",
    "RateLimited",
]


class InvalidBackendConfig(MemoryServiceError):
    """``INVALID_BACKEND_CONFIG`` (HTTP 500, not retryable): the vector backend configuration
    names an unsupported backend or lacks a required setting.

    ``details``: ``backend`` (the name asked for), ``supportedBackends`` (every name), and
    ``missing`` / ``invalid`` (setting names) when those are the cause.
    """

    code = "INVALID_BACKEND_CONFIG"
    status = 500
    default_message = "The vector backend configuration is invalid."

    def __init__(self, message: str, *, backend: str, supported: Sequence[str],
                 **details: Any) -> None:
        super().__init__(
            f"{message} Supported backends: {', '.join(supported)}.",
            details={"backend": backend, "supportedBackends": list(supported), **details},
        )

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class BackendRequestFailed(ProviderError):
    """``PROVIDER_ERROR`` (HTTP 502): the backend refused the request (bad request, missing
    index, authentication); retrying the same request will not help."""

    status = 502
    retryable = False
    default_message = "The vector backend refused the request."


#: ``(exception, details) -> error``: a backend's reading of its client's exception (``None``:
#: not the backend's, let it through). ``details`` carry ``backend`` and ``error``.
Translation = Callable[[Exception, dict[str, Any]], MemoryServiceError | None]


class translated_errors:  # noqa: N801 (used as a context manager)
    """``async with translated_errors(name, translate):`` (or ``with``, for client calls made
    in a worker thread) raises, for an exception of the block, the service error
    ``translate`` reads it as (chained to it); other exceptions pass unchanged."""

    def __init__(self, backend: str, translate: Translation) -> None:
        self.backend = backend
        self.translate = translate

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        if exc is None or not isinstance(exc, Exception):
            return False
        error = self.translate(exc, {"backend": self.backend, "error": str(exc)[:300]})
        if error is None:
            return False
        raise error from exc

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        return self.__exit__(kind, exc, tb)
