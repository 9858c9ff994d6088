"""Circuit breakers per backend (seed 001 "Backend Circuit Breaker"): the embedding
backend's circuit opens after 5 failures within the window and answers
BACKEND_CIRCUIT_OPEN with Retry-After, half-opens for one trial; a failing Redis cache
degrades requests (X-Memory-Degraded) instead of failing them."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from django.core.cache import cache

from memories.embedding import embedders as embeddings
from memories.embedding.embedders import clear_local_cache, set_embedder
from memory_project import resilience
from tenants import ratelimit
from tests.helpers import assert_error

pytestmark = pytest.mark.django_db

M = "/api/v1/memories"


class Flaky:
    """An embedder that fails while ``failing`` is set and counts the calls it gets."""

    model_name = "flaky"
    dimensions = 384

    def __init__(self) -> None:
        self.failing = True
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.failing:
            raise RuntimeError("model crashed")
        vectors = np.ones((len(texts), 384), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def flaky(settings: Any) -> Iterator[Flaky]:
    settings.CIRCUIT_BREAKER_RESET_SECONDS = 0.5
    resilience.reset_breakers()
    embedder = Flaky()
    previous = set_embedder(embedder)
    yield embedder
    set_embedder(previous)


def add(tenant: Any, content: str) -> Any:
    return tenant.client.post(M, {"content": content, "layer": "user",
                                  "identifiers": {"userId": "u1"}}, format="json")


def test_five_failures_open_the_circuit_and_later_calls_fail_fast(tenant_a: Any,
                                                                  flaky: Flaky) -> None:
    for i in range(5):
        assert_error(add(tenant_a, f"attempt {i}"), 503, "EMBEDDING_FAILED")
    assert flaky.calls == 5
    response = add(tenant_a, "attempt 6")
    error = assert_error(response, 503, "BACKEND_CIRCUIT_OPEN")
    assert error["retryable"] is True
    assert error["details"]["backend"] == "embedding"
    assert 1 <= int(response["Retry-After"]) <= 1  # reset timeout 0.5 s, rounded up
    assert flaky.calls == 5, "an open circuit must not call the backend"
    search = tenant_a.client.post(f"{M}/search", {"query": "anything", "mode": "semantic",
                                                  "identifiers": {"userId": "u1"}},
                                  format="json")
    assert_error(search, 503, "BACKEND_CIRCUIT_OPEN")


def test_the_default_reset_timeout_is_thirty_seconds(tenant_a: Any, settings: Any) -> None:
    assert settings.CIRCUIT_BREAKER_FAIL_MAX == 5
    assert settings.CIRCUIT_BREAKER_WINDOW_SECONDS == 60
    assert settings.CIRCUIT_BREAKER_RESET_SECONDS == 30
    embedder = Flaky()
    previous = set_embedder(embedder)
    try:
        for i in range(6):
            response = add(tenant_a, f"attempt {i}")
        assert_error(response, 503, "BACKEND_CIRCUIT_OPEN")
        assert 29 <= int(response["Retry-After"]) <= 30
    finally:
        set_embedder(previous)


def test_half_open_lets_one_trial_through_and_a_success_closes(tenant_a: Any,
                                                               flaky: Flaky) -> None:
    for i in range(6):
        add(tenant_a, f"attempt {i}")
    assert resilience.breaker("embedding").current_state == "open"
    time.sleep(0.6)
    flaky.failing = False
    assert add(tenant_a, "trial").status_code == 201
    assert resilience.breaker("embedding").current_state == "closed"
    assert add(tenant_a, "after").status_code == 201
    assert flaky.calls == 7


def test_a_failed_trial_opens_the_circuit_again(tenant_a: Any, flaky: Flaky) -> None:
    for i in range(6):
        add(tenant_a, f"attempt {i}")
    time.sleep(0.6)
    assert_error(add(tenant_a, "trial"), 503, "EMBEDDING_FAILED")
    assert flaky.calls == 6
    assert resilience.breaker("embedding").current_state == "open"
    assert_error(add(tenant_a, "still open"), 503, "BACKEND_CIRCUIT_OPEN")
    assert flaky.calls == 6


def test_failures_older_than_the_window_do_not_count(tenant_a: Any, flaky: Flaky,
                                                     settings: Any) -> None:
    # A window wide enough for five failing requests on a busy 2-core machine (0.3 s was not:
    # the fifth failure came after the first of the late ones had left the window).
    settings.CIRCUIT_BREAKER_WINDOW_SECONDS = 1.5
    resilience.reset_breakers()
    for i in range(4):
        assert_error(add(tenant_a, f"early {i}"), 503, "EMBEDDING_FAILED")
    time.sleep(1.6)
    for i in range(4):
        assert_error(add(tenant_a, f"late {i}"), 503, "EMBEDDING_FAILED")
    assert resilience.breaker("embedding").current_state == "closed"
    assert_error(add(tenant_a, "fifth in the window"), 503, "EMBEDDING_FAILED")
    assert_error(add(tenant_a, "now open"), 503, "BACKEND_CIRCUIT_OPEN")


class BrokenCache:
    """Stands in for Redis being down: every call raises like a refused connection."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        raise ConnectionError("Connection refused")


def test_a_redis_outage_degrades_requests_and_opens_the_redis_circuit(
        tenant_a: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = BrokenCache()
    monkeypatch.setattr(cache, "get_many", broken)
    monkeypatch.setattr(cache, "set_many", broken)
    monkeypatch.setattr(ratelimit, "_script", broken)  # the rate limiter's Redis too
    clear_local_cache()
    ids = []
    for i in range(4):
        response = add(tenant_a, f"written while the cache is down {i}")
        assert response.status_code == 201, response.content
        assert set(response["X-Memory-Degraded"].split(",")) == {"rate_limit", "cache"}
        ids.append(response.json()["memory"]["id"])
    assert broken.calls == 5  # limiter, get, set; limiter, get: the fifth failure opened it
    assert resilience.breaker("redis").current_state == "open"
    search = tenant_a.client.post(f"{M}/search", {"query": "written while the cache is down",
                                                  "identifiers": {"userId": "u1"}},
                                  format="json")
    assert search.status_code == 200
    assert set(search["X-Memory-Degraded"].split(",")) == {"rate_limit", "cache"}
    assert broken.calls == 5, "an open circuit must not call Redis"
    found = {r["memory"]["id"] for r in search.json()["results"]}
    assert set(ids) <= found, "every memory written while Redis was down is searchable"


def test_requests_without_an_outage_are_not_flagged(tenant_a: Any) -> None:
    response = add(tenant_a, "all is well")
    assert response.status_code == 201
    assert "X-Memory-Degraded" not in response


def test_the_embedding_cache_uses_redis_again_after_the_circuit_closes(
        tenant_a: Any, monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    settings.CIRCUIT_BREAKER_RESET_SECONDS = 0.3
    resilience.reset_breakers()
    embeddings.embed_texts(tenant_a.tenant.id, ["text 0"], kind="query")  # cached in Redis
    broken = BrokenCache()
    monkeypatch.setattr(cache, "get_many", broken)
    monkeypatch.setattr(cache, "set_many", broken)
    for i in range(1, 4):
        embeddings.embed_texts(tenant_a.tenant.id, [f"text {i}"], kind="query")
    assert resilience.breaker("redis").current_state == "open"
    monkeypatch.undo()  # Redis is back
    time.sleep(0.4)
    clear_local_cache()
    (_vector, generated), = embeddings.embed_texts(tenant_a.tenant.id, ["text 0"], kind="query")
    assert generated is False, "the vector cached before the outage came back from Redis"
    assert resilience.breaker("redis").current_state == "closed"
