"""The sync and async clients: authentication, timeouts, retries, the error envelope.

A ``429`` or ``503`` answer, and a connection that could not be opened, are retried up to
``max_retries`` times, waiting what the server's ``Retry-After`` says (at most
``max_wait`` seconds) or else 0.5, 1, 2, … seconds; then the typed error is raised.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from memory_client.endpoints import Endpoints
from memory_client.errors import MemoryServiceError, ServiceUnreachable, error_from_response

DEFAULT_TIMEOUT = 10.0
DEFAULT_RETRIES = 3
_backoff = wait_exponential(multiplier=0.5, max=8)


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, ServiceUnreachable):
        return bool(exc.details.get("connect"))
    return isinstance(exc, MemoryServiceError) and exc.status in (429, 503)


class _Policy:
    def __init__(self, max_retries: int, max_wait: float) -> None:
        self.max_retries = max_retries
        self.max_wait = max_wait

    def wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, MemoryServiceError) and exc.retry_after is not None:
            return min(exc.retry_after, self.max_wait)
        return min(float(_backoff(state)), self.max_wait)

    def options(self) -> dict[str, Any]:
        return {"stop": stop_after_attempt(self.max_retries + 1), "wait": self.wait,
                "retry": retry_if_exception(_retryable), "reraise": True}


def _headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}", "Accept": "application/json",
            "User-Agent": "memory-service-client/0.1"}


def _decode(response: httpx.Response) -> Any:
    """The answer's JSON (``None`` when empty), or its text when the service answered text
    (a Markdown context); an error status raises the typed error."""
    if response.status_code < 400 and response.headers.get(
            "content-type", "").startswith("text/"):
        return response.text
    try:
        payload = response.json() if response.content else None
    except ValueError:
        payload = None
    if response.status_code >= 400:
        raise error_from_response(response.status_code, payload, response.headers)
    return payload


def _unreachable(err: httpx.TransportError, url: str) -> ServiceUnreachable:
    return ServiceUnreachable(f"The memory service at {url} did not answer: {err}",
                              details={"connect": isinstance(err, httpx.ConnectError)},
                              retryable=True)


class MemoryClient(Endpoints[Any]):
    """Blocking client. ``base_url`` is the service's root (e.g. ``http://127.0.0.1:8000``);
    ``timeout`` is seconds per request; every method returns the decoded JSON (``None`` for
    a 204; the text of a text answer) or raises a
    :class:`~memory_client.errors.MemoryServiceError` subclass. Use as a context manager, or
    call :meth:`close`."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = DEFAULT_TIMEOUT,
                 max_retries: int = DEFAULT_RETRIES, max_wait: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._policy = _Policy(max_retries, max_wait)
        self._http = httpx.Client(base_url=self.base_url, headers=_headers(api_key),
                                  timeout=timeout, transport=transport)

    def _send(self, method: str, path: str, *, params: dict[str, Any] | None = None,
              json: Any = None) -> Any:
        for attempt in Retrying(**self._policy.options()):
            with attempt:
                try:
                    response = self._http.request(method, path, params=params, json=json)
                except httpx.TransportError as err:
                    raise _unreachable(err, self.base_url) from err
                return _decode(response)
        return None  # not reached: Retrying re-raises the last error

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemoryClient(Endpoints[Awaitable[Any]]):
    """The same operations as :class:`MemoryClient`, awaitable (``httpx.AsyncClient``)."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = DEFAULT_TIMEOUT,
                 max_retries: int = DEFAULT_RETRIES, max_wait: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._policy = _Policy(max_retries, max_wait)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=_headers(api_key),
                                       timeout=timeout, transport=transport)

    async def _request(self, method: str, path: str, params: dict[str, Any] | None,
                       json: Any) -> Any:
        async for attempt in AsyncRetrying(**self._policy.options()):
            with attempt:
                try:
                    response = await self._http.request(method, path, params=params, json=json)
                except httpx.TransportError as err:
                    raise _unreachable(err, self.base_url) from err
                return _decode(response)
        return None  # not reached: AsyncRetrying re-raises the last error

    def _send(self, method: str, path: str, *, params: dict[str, Any] | None = None,
              json: Any = None) -> Awaitable[Any]:
        return self._request(method, path, params, json)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
