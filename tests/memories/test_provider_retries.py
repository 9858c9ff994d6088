"""Transient provider errors: the OpenAI-compatible HTTP embedder against a scripted local
HTTP server: retries with exponential backoff and jitter, Retry-After on 429, bounded waits,
and the error envelope the API answers when retries run out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np
import pytest

from memories.embedding import http as embedding_http
from memories.embedding.embedders import set_embedder
from memories.embedding.http import OpenAICompatibleEmbedder
from memory_project import retries
from memory_project.errors import ProviderError, RateLimited
from memory_project.retries import call_with_retries
from tests.helpers import assert_error
from tests.http_server import serving

M = "/api/v1/memories"


class Script:
    """What the fake provider answers, one entry per request (the last one repeats)."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, dict[str, str]]] = [(200, {})]
        self.requests: list[dict[str, Any]] = []


class FakeProvider(BaseHTTPRequestHandler):
    script: Script

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.script.requests.append({"body": payload, "auth": self.headers.get("Authorization")})
        index = min(len(self.script.requests), len(self.script.answers)) - 1
        status, headers = self.script.answers[index]
        if status == 200:
            rng = np.random.default_rng(len(payload["input"]))
            data = [{"index": i, "embedding": rng.normal(size=384).tolist()}
                    for i in range(len(payload["input"]))]
            body = json.dumps({"data": data, "model": payload["model"]}).encode()
        else:
            body = json.dumps({"error": {"message": "scripted"}}).encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def provider() -> Iterator[tuple[Script, OpenAICompatibleEmbedder]]:
    script = Script()
    handler = type("Handler", (FakeProvider,), {"script": script})
    with serving(handler) as port:
        embedder = OpenAICompatibleEmbedder(f"http://127.0.0.1:{port}/v1",
                                            model="test-model", api_key="sk-test", timeout=5)
        yield script, embedder


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every wait the retry policy asks for, recorded instead of slept."""
    waited: list[float] = []
    monkeypatch.setattr(retries, "_sleep", waited.append)
    return waited


def test_a_transient_failure_is_retried_until_it_succeeds(provider: Any, sleeps: list[float]
                                                          ) -> None:
    script, embedder = provider
    script.answers = [(503, {}), (502, {}), (200, {})]
    vectors = embedder.encode(["a", "b"])
    assert vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert len(script.requests) == 3
    assert script.requests[0]["body"] == {"model": "test-model", "input": ["a", "b"],
                                          "encoding_format": "float"}
    assert script.requests[0]["auth"] == "Bearer sk-test"
    assert len(sleeps) == 2


def test_backoff_is_exponential_with_jitter_and_stops_after_three_attempts(
        provider: Any, sleeps: list[float]) -> None:
    script, embedder = provider
    script.answers = [(500, {})]
    with pytest.raises(ProviderError) as raised:
        embedder.encode(["a"])
    assert raised.value.retryable is True
    assert raised.value.details["attempts"] == 3
    assert len(script.requests) == 3
    # seed 001 "Retry Strategy": 1 s initial, doubling; jitter adds up to 1 s.
    assert len(sleeps) == 2
    assert 1.0 <= sleeps[0] <= 2.0
    assert 2.0 <= sleeps[1] <= 3.0


def test_jitter_varies_the_waits(provider: Any, sleeps: list[float]) -> None:
    script, embedder = provider
    script.answers = [(503, {})]
    for _ in range(5):
        with pytest.raises(ProviderError):
            embedder.encode(["a"])
    assert len(set(sleeps[0::2])) > 1


def test_429_waits_as_retry_after_says(provider: Any, sleeps: list[float]) -> None:
    script, embedder = provider
    script.answers = [(429, {"Retry-After": "7"}), (200, {})]
    assert embedder.encode(["a"]).shape == (1, 384)
    assert sleeps == [7.0]
    assert len(script.requests) == 2


def test_a_retry_after_beyond_the_bound_is_not_waited_for(provider: Any, sleeps: list[float],
                                                          settings: Any) -> None:
    settings.PROVIDER_MAX_RETRY_AFTER_SECONDS = 30
    script, embedder = provider
    script.answers = [(429, {"Retry-After": "120"})]
    with pytest.raises(RateLimited) as raised:
        embedder.encode(["a"])
    assert sleeps == []
    assert len(script.requests) == 1
    assert raised.value.details["retryAfter"] == 120.0
    assert raised.value.retryable is True


def test_persistent_rate_limiting_gives_up_after_the_attempts(provider: Any,
                                                              sleeps: list[float]) -> None:
    script, embedder = provider
    script.answers = [(429, {"Retry-After": "2"})]
    with pytest.raises(RateLimited):
        embedder.encode(["a"])
    assert len(script.requests) == 3
    assert sleeps == [2.0, 2.0]


def test_a_client_error_is_not_retried(provider: Any, sleeps: list[float]) -> None:
    script, embedder = provider
    script.answers = [(400, {})]
    with pytest.raises(ProviderError) as raised:
        embedder.encode(["a"])
    assert raised.value.retryable is False
    assert len(script.requests) == 1
    assert sleeps == []


def test_an_unreachable_provider_is_a_transient_error(sleeps: list[float]) -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = OpenAICompatibleEmbedder(f"http://127.0.0.1:{port}", model="m", timeout=1)
    with pytest.raises(ProviderError) as raised:
        embedder.encode(["a"])
    assert raised.value.retryable is True
    assert len(sleeps) == 2


def test_call_with_retries_passes_results_and_other_errors_through(sleeps: list[float]) -> None:
    assert call_with_retries(lambda: 42) == 42
    with pytest.raises(ZeroDivisionError):
        call_with_retries(lambda: 1 // 0)
    assert sleeps == []


@pytest.mark.django_db
def test_the_api_answers_provider_error_when_retries_run_out(
        provider: Any, tenant_a: Any, settings: Any) -> None:
    settings.PROVIDER_RETRY_INITIAL_SECONDS = 0.001  # real sleeps, tiny
    script, embedder = provider
    previous = set_embedder(embedder)
    try:
        script.answers = [(503, {})]
        response = tenant_a.client.post(M, {"content": "fails upstream", "layer": "user",
                                            "identifiers": {"userId": "u1"}}, format="json")
        error = assert_error(response, 503, "PROVIDER_ERROR")
        assert error["retryable"] is True
        assert len(script.requests) == 3

        script.answers = [(429, {"Retry-After": "3600"})]
        script.requests.clear()
        response = tenant_a.client.post(M, {"content": "rate limited upstream", "layer": "user",
                                            "identifiers": {"userId": "u1"}}, format="json")
        error = assert_error(response, 429, "RATE_LIMITED")
        assert response["Retry-After"] == "3600"

        script.answers = [(503, {}), (200, {})]
        script.requests.clear()
        response = tenant_a.client.post(M, {"content": "works on retry", "layer": "user",
                                            "identifiers": {"userId": "u1"}}, format="json")
        assert response.status_code == 201, response.content
        assert len(script.requests) == 2
    finally:
        set_embedder(previous)


# --- what the client will not do (security review, finding 10) -----------------------------

def test_a_redirect_is_not_followed_with_the_key(provider: Any, sleeps: list[float]) -> None:
    script, embedder = provider
    script.answers = [(307, {"Location": "http://127.0.0.1:9/steal"})]
    with pytest.raises(ProviderError) as raised:
        embedder.encode(["a"])
    assert raised.value.retryable is False
    assert len(script.requests) == 1 and sleeps == []


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://host/v1", "http://", "/v1"])
def test_only_http_urls_are_accepted(settings: Any, url: str) -> None:
    from django.core.exceptions import ImproperlyConfigured

    settings.EMBEDDING_PROVIDER, settings.EMBEDDING_API_URL = "openai", url
    with pytest.raises(ImproperlyConfigured):
        embedding_http.configured_embedder()


def test_a_connection_error_does_not_reach_the_client(sleeps: list[float]) -> None:
    embedder = OpenAICompatibleEmbedder("http://10.255.255.1:9/v1", model="m", timeout=0.2)
    with pytest.raises(ProviderError) as raised:
        embedder.encode(["a"])
    text = json.dumps(raised.value.envelope())
    assert "10.255.255.1" not in text and "Errno" not in text and "timed out" not in text
