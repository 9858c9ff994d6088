"""The one language-model client: chat completions with structured output over the
OpenAI-compatible HTTP API (the ``openai`` package), for every purpose of the service.

One call = :func:`chat_json`: a JSON-schema ``response_format`` (which OpenAI, vLLM, Ollama,
LM Studio and llama.cpp's server honour), the purpose's timeout, at most
``LLM_MAX_CONCURRENCY`` calls at once per process, the ``llm`` circuit breaker (seed 001
MR-H2: open when 5 % of the calls of the last 5 minutes failed, at least 20 calls), and the
provider retry policy (``memory_project.retries``: 429 honours ``Retry-After``, 5xx and
connection errors back off). The client follows no redirect and accepts at most
``LLM_MAX_RESPONSE_CHARS`` of an answer.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx2
import openai
from django.conf import settings
from openai import OpenAI

from llm import config
from memory_project.errors import MemoryServiceError, ProviderError
from memory_project.resilience import call_guarded
from memory_project.retries import call_with_retries, raise_provider_error

logger = logging.getLogger(__name__)
BACKEND = "llm"


class ModelRefused(MemoryServiceError):
    """The model declined to answer (a refusal or a content filter); not retried."""

    code = "PROVIDER_ERROR"
    status = 502


@dataclass(frozen=True)
class Reply:
    """What the model wrote, and what it cost."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float


_clients: dict[tuple[str, float], OpenAI] = {}
_clients_lock = threading.Lock()
_slots: threading.BoundedSemaphore | None = None
_slots_lock = threading.Lock()


def _client(timeout: float) -> OpenAI:
    key = (config.base_url(), timeout)
    with _clients_lock:
        if key not in _clients:
            _clients[key] = OpenAI(
                base_url=key[0], api_key=settings.LLM_API_KEY or "not-needed", max_retries=0,
                timeout=timeout,
                http_client=httpx2.Client(follow_redirects=False, timeout=timeout))
        return _clients[key]


def _concurrency() -> threading.BoundedSemaphore:
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(max(1, settings.LLM_MAX_CONCURRENCY))
        return _slots


def reset() -> None:
    """Forget clients and the concurrency limit (settings changed; tests)."""
    global _slots
    with _clients_lock:
        _clients.clear()
    with _slots_lock:
        _slots = None


def _call_once(model: str, messages: list[dict[str, str]], schema: dict[str, Any],
               max_tokens: int, timeout: float) -> Reply:
    started = time.perf_counter()
    try:
        # The messages and response_format are the plain dicts the client's TypedDicts
        # describe; its overloads cannot see that through ``list[dict[str, str]]``.
        answer = _client(timeout).chat.completions.create(  # type: ignore[call-overload]
            model=model, messages=messages, max_tokens=max_tokens, temperature=0,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "output", "schema": schema,
                                             "strict": True}})
    except (openai.OpenAIError, ValueError) as exc:  # ValueError: a body that is not JSON
        raise_provider_error(exc, backend=BACKEND, label="language model",
                             unreadable="The language model's answer could not be read.")
    choice = answer.choices[0] if answer.choices else None
    message = choice.message if choice else None
    if choice is None or message is None:
        raise ProviderError("The language model answered no choice.", retryable=False,
                            details={"backend": BACKEND})
    if getattr(message, "refusal", None) or choice.finish_reason == "content_filter":
        raise ModelRefused("The language model declined to answer.",
                           details={"backend": BACKEND})
    text = message.content or ""
    if len(text) > settings.LLM_MAX_RESPONSE_CHARS:
        raise ProviderError("The language model's answer is too long.", retryable=False,
                            details={"backend": BACKEND,
                                     "maxChars": settings.LLM_MAX_RESPONSE_CHARS})
    usage = answer.usage
    return Reply(text=text, model=answer.model or model,
                 prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                 completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                 latency_ms=(time.perf_counter() - started) * 1000)


def chat_json(model: str, messages: list[dict[str, str]], *, schema: dict[str, Any],
              max_tokens: int, timeout: float, operation: str) -> Reply:
    """One structured-output chat call, bounded as the module docstring says.

    Returns:
        The reply's raw text (JSON as the model wrote it; the caller validates it).

    Raises:
        BackendCircuitOpen: the ``llm`` circuit is open (503, retryable).
        RateLimited: the provider kept answering 429, or asked for too long a wait.
        ProviderError: the provider failed after the retries, refused the call, or
            answered something unreadable or too long.
        ModelRefused: the model declined.
        WorkBudgetExceeded-like ProviderError: no concurrency slot within the timeout.
    """
    slots = _concurrency()
    if not slots.acquire(timeout=timeout):
        raise ProviderError("The language model is busy; try later.", operation=operation,
                            retryable=True, details={"backend": BACKEND, "retryAfter": 5})
    try:
        return call_guarded(BACKEND, call_with_retries,
                            lambda: _call_once(model, messages, schema, max_tokens, timeout),
                            operation=operation, backend=BACKEND,
                            attempts=settings.LLM_RETRY_ATTEMPTS)
    finally:
        slots.release()


def parse_json(text: str) -> Any:
    """The JSON value of a reply (tolerating a Markdown code fence around it).

    Raises:
        ValueError: not JSON.
    """
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`")
        stripped = stripped.removeprefix("json").strip()
    return json.loads(stripped)


def ping(timeout: float = 2.0) -> float:
    """Milliseconds the server takes to list its models (readiness).

    Raises:
        Exception: whatever the client raises when the server does not answer.
    """
    started = time.perf_counter()
    _client(timeout).models.list()
    return (time.perf_counter() - started) * 1000
