"""Embeddings: the real MiniLM model, the per-tenant content cache, and model failures."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from memories.embedding import embedders as embeddings
from memories.embedding.embedders import clear_local_cache, embed_texts, get_embedder, set_embedder
from tests.helpers import assert_error, body, memory_row, snapshot
from tests.retrieval_helpers import CountingEmbedder

# What the bundled MiniLM model understands is part of what these tests check.
pytestmark = [pytest.mark.django_db, pytest.mark.real_embedder]

M = "/api/v1/memories"


def add(tenant: Any, content: str, **extra: Any) -> Any:
    return tenant.client.post(M, {"content": content, "layer": "user",
                                  "identifiers": {"userId": "u1"}, **extra}, format="json")


class Broken:
    """An embedder that fails the way a model or a remote provider can."""

    def __init__(self, inner: Any, result: Any) -> None:
        self.model_name = inner.model_name
        self.dimensions = inner.dimensions
        self.result = result

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result(len(texts))


@pytest.fixture
def counting() -> Iterator[CountingEmbedder]:
    real = get_embedder()
    wrapper = CountingEmbedder(real)
    set_embedder(wrapper)
    try:
        yield wrapper
    finally:
        set_embedder(real)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- the real model -------------------------------------------------------------------------

def test_it_gives_384_dimensional_unit_vectors() -> None:
    vectors = get_embedder().encode(["User prefers dark mode", "Deploys happen on Fridays", "x"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(vectors[0], vectors[1])
    assert get_embedder().model_name == "all-MiniLM-L6-v2"


def test_it_places_related_meanings_closer() -> None:
    query, nausea, tabs = get_embedder().encode(
        ["feeling unwell", "User experiences nausea after dairy", "The build uses tabs"]
    )
    assert cosine(query, nausea) > cosine(query, tabs) + 0.1
    assert np.dot(query, nausea) == pytest.approx(cosine(query, nausea), abs=1e-5)


def test_it_embeds_deterministically() -> None:
    first, second = (get_embedder().encode(["Same text twice"]) for _ in range(2))
    assert np.allclose(first, second, atol=1e-6)


def test_it_stores_the_model_vector_with_the_memory(tenant_a) -> None:
    content = "User experiences nausea after dairy"
    response = tenant_a.client.post(f"{M}?includeEmbedding=true", {
        "content": content, "layer": "user", "identifiers": {"userId": "u1"}}, format="json")
    stored = np.array(body(response)["memory"]["embedding"], dtype=np.float32)
    assert np.allclose(stored, get_embedder().encode([content])[0], atol=1e-5)
    row = memory_row(tenant_a, body(response)["memory"]["id"])
    assert row["embedding_model"] == "all-MiniLM-L6-v2"


# --- the cache ------------------------------------------------------------------------------

def test_it_never_calls_the_model_twice_for_the_same_content(tenant_a, counting) -> None:
    text = "The team standup is at 9:30"
    assert body(add(tenant_a, text))["embeddingGenerated"] is True
    assert counting.texts == [text]

    assert body(add(tenant_a, text))["embeddingGenerated"] is False
    clear_local_cache()  # the process cache is gone; Redis still has it
    assert body(add(tenant_a, text))["embeddingGenerated"] is False
    assert counting.texts == [text]

    other = tenant_a.add("Something else entirely")
    assert counting.texts == [text, "Something else entirely"]
    response = tenant_a.client.patch(f"{M}/{other.pk}", {"content": text}, format="json")
    assert body(response)["embeddingRegenerated"] is True  # the content changed...
    assert counting.texts == [text, "Something else entirely"]  # ...the model was not asked
    rows = [r for r in snapshot(tenant_a) if r.get("content") == text]
    assert len(rows) == 4 and len({r["embedding"] for r in rows}) == 1


def test_it_embeds_only_unseen_texts_of_a_batch_once(tenant_a, counting) -> None:
    tenant_a.add("seen before")
    counting.calls.clear()
    items = [{"content": c, "layer": "user", "identifiers": {"userId": "u1"}}
             for c in ("seen before", "new one", "new one", "new two")]
    response = tenant_a.client.post(f"{M}/bulk", {"memories": items}, format="json")
    assert [r["embeddingGenerated"] for r in body(response)["results"]] == [
        False, True, False, True]
    assert counting.calls == [["new one", "new two"]]


def test_it_keeps_each_tenants_cache_apart(tenant_a, tenant_b, counting) -> None:
    text = "Quarterly planning starts in March"
    assert body(add(tenant_a, text))["embeddingGenerated"] is True
    assert body(add(tenant_b, text))["embeddingGenerated"] is True
    assert counting.texts == [text, text]
    assert body(add(tenant_b, text))["embeddingGenerated"] is False
    assert len(counting.calls) == 2


def test_it_keys_the_cache_by_tenant_text_and_kind(tenant_a, tenant_b, counting) -> None:
    (vector, generated), = embed_texts(tenant_a.tenant.id, ["cache key probe"])
    assert generated is True
    assert embed_texts(tenant_a.tenant.id, ["cache key probe"])[0][1] is False
    assert embed_texts(tenant_a.tenant.id, ["cache key probe "])[0][1] is True  # exact text
    assert embed_texts(tenant_b.tenant.id, ["cache key probe"])[0][1] is True
    (query, generated), = embed_texts(tenant_a.tenant.id, ["cache key probe"], kind="query")
    assert generated is True and np.allclose(query, vector)
    assert len(counting.calls) == 4


# --- failures -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "result",
    [
        RuntimeError("CUDA out of memory"),
        TimeoutError("provider timed out"),
        lambda n: np.zeros((n, 3), dtype=np.float32),  # wrong dimensions
        lambda n: np.full((n, 384), np.nan, dtype=np.float32),  # not finite
        lambda n: np.zeros((n + 1, 384), dtype=np.float32),  # wrong count
    ],
    ids=["raises", "times-out", "wrong-dimensions", "nan", "wrong-count"],
)
def test_it_answers_embedding_failed_and_writes_nothing(tenant_a, result) -> None:
    memory = tenant_a.add("Stored before the model broke")
    before = snapshot(tenant_a)
    real = set_embedder(Broken(get_embedder(), result))
    try:
        error = assert_error(add(tenant_a, "A brand new text"), 503, "EMBEDDING_FAILED")
        assert error["retryable"] is True
        assert error["operation"] == "memory.add"
        items = [{"content": f"new {i}", "layer": "user", "identifiers": {"userId": "u1"}}
                 for i in range(3)]
        response = tenant_a.client.post(f"{M}/bulk", {"memories": items}, format="json")
        assert assert_error(response, 503, "EMBEDDING_FAILED")["retryable"] is True
        response = tenant_a.client.patch(f"{M}/{memory.pk}", {"content": "Changed text"},
                                         format="json")
        assert_error(response, 503, "EMBEDDING_FAILED")
        assert "CUDA" not in response.content.decode()  # no internals leak
    finally:
        set_embedder(real)
    assert snapshot(tenant_a) == before
    assert body(add(tenant_a, "A brand new text"))["embeddingGenerated"] is True


def test_it_still_serves_cached_content_while_the_model_is_down(tenant_a) -> None:
    tenant_a.add("Cached before the outage")
    real = set_embedder(Broken(get_embedder(), RuntimeError("down")))
    try:
        response = add(tenant_a, "Cached before the outage")
        assert response.status_code == 201
        assert body(response)["embeddingGenerated"] is False
    finally:
        set_embedder(real)


def test_it_keeps_working_when_redis_is_unreachable(tenant_a, monkeypatch) -> None:
    def down(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("redis is down")

    monkeypatch.setattr(embeddings.cache, "get_many", down)
    monkeypatch.setattr(embeddings.cache, "set_many", down)
    clear_local_cache()
    response = add(tenant_a, "Written while Redis is down")
    assert response.status_code == 201
    assert body(response)["embeddingGenerated"] is True
