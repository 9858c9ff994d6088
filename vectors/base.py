"""The vector backend trait (seed 001 "Vector Backend Trait") and the values it exchanges.

Every backend implements six async operations, each bounded to one tenant:
``health_check``, ``capabilities``, ``upsert``, ``search``, ``delete``, ``get``; ``scan``
(list a tenant's ids page by page, for copying between backends) is optional and advertised
by ``Capabilities.supports_scan``.

Scores are "higher is better": cosine similarity for the cosine metric, the inner product
for inner product, minus the Euclidean distance for L2; a hybrid search returns the fused
score of the backend (reciprocal rank fusion or a weighted sum, see each adapter).

Metadata values are scalars (``str``, ``int``, ``float``, ``bool``) so that every backend
can store and filter them; a filter is a conjunction of ``key: value`` (equality) and
``key: [v1, v2]`` (any of) terms on metadata keys.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, TypeAlias

from memory_project.errors import InvalidInput
from vectors.errors import BackendRequestFailed

MetadataValue: TypeAlias = str | int | float | bool
#: ``{"layer": "user", "kind": ["fact", "rule"]}``: every term must hold; a list is "any of".
Filter: TypeAlias = Mapping[str, MetadataValue | Sequence[MetadataValue]]

#: Metadata keys: identifiers only (they become field paths, SQL and filter expressions).
METADATA_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class DistanceMetric(StrEnum):
    """How vectors are compared (seed 001 "pgvector distance metric")."""

    COSINE = "cosine"
    L2 = "l2"
    INNER_PRODUCT = "inner_product"


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; the memory system adapts to it (seed 001).

    Attributes:
        max_vector_dimensions: the longest vector the backend stores.
        supports_metadata_filter: filters are applied by the backend (else by the caller,
            after the search, on a wider candidate list).
        supports_hybrid_search: the backend fuses vector and keyword ranking itself (else
            the memory system fuses its own keyword list with the vector list).
        supports_batch_upsert: one call stores many records.
        distance_metrics: the metrics the backend can be configured with.
        max_batch_size: records per upsert request the adapter sends.
        supports_scan: ``scan`` lists a tenant's ids (needed to copy away from it).
        shares_system_of_record: the vectors are a column of the memories table itself
            (pgvector): ``upsert`` sets the vectors of existing memories, a memory's vector
            goes when the memory is deleted, and ``delete`` removes nothing.
    """

    max_vector_dimensions: int
    supports_metadata_filter: bool
    supports_hybrid_search: bool
    supports_batch_upsert: bool
    distance_metrics: tuple[DistanceMetric, ...]
    max_batch_size: int = 1000
    supports_scan: bool = True
    shares_system_of_record: bool = False


@dataclass(frozen=True)
class VectorRecord:
    """One stored vector: ``id`` (a memory id), the vector, scalar metadata and the text a
    hybrid search matches keywords against (may be empty)."""

    id: str
    vector: tuple[float, ...]
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict)
    text: str = ""


@dataclass(frozen=True)
class SearchQuery:
    """A nearest-neighbour query.

    Attributes:
        vector: the query vector (same dimensions as the stored ones).
        limit: neighbours to return, 1..1000.
        filter: metadata conjunction (see the module docstring), or ``None``.
        text: the keyword part of a hybrid search.
        hybrid: fuse vector and keyword ranking (only with ``text``; backends without
            ``supports_hybrid_search`` reject it).
        alpha: weight of the vector ranking in the fusion, in [0, 1] (1 = vector only);
            Weaviate's convention, applied as RRF weights where the backend fuses by rank;
            ``None``: the backend's configured default (0.5 unless set).
        min_score: drop hits scoring below this (vector-only searches); for cosine a
            similarity, for Vertex AI passed on as its distance threshold.
    """

    vector: tuple[float, ...]
    limit: int = 10
    filter: Filter | None = None
    text: str = ""
    hybrid: bool = False
    alpha: float | None = None
    min_score: float | None = None


@dataclass(frozen=True)
class SearchHit:
    """One neighbour: its id, its score (higher is better) and its metadata."""

    id: str
    score: float
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Healthy:
    """``HealthStatus::Healthy`` (seed 001): the backend answered a query in ``latency_ms``."""

    latency_ms: float
    status: ClassVar[str] = "healthy"


@dataclass(frozen=True)
class Unhealthy:
    """``HealthStatus::Unhealthy`` (seed 001): what failed, and after how long."""

    details: str
    latency_ms: float
    error_code: str = "BACKEND_UNAVAILABLE"
    status: ClassVar[str] = "unhealthy"


HealthStatus: TypeAlias = Healthy | Unhealthy


async def probe_health(probe: Callable[[], Awaitable[object]]) -> HealthStatus:
    """Run a backend's health ``probe`` and time it: ``Healthy`` with its latency when it
    returns, else :func:`unhealthy` naming what it raised (every adapter's ``health_check``)."""
    start = time.perf_counter()
    try:
        await probe()
    except Exception as exc:
        return unhealthy(exc, start)
    return Healthy(latency_ms=(time.perf_counter() - start) * 1000)


def unhealthy(exc: BaseException, started: float) -> Unhealthy:
    """``Unhealthy`` for a health probe that raised ``exc``; ``started`` is the probe's
    ``time.perf_counter()`` at its start. Details name the error and its cause."""
    details = f"{type(exc).__name__}: {exc}"
    cause = getattr(exc, "details", {}).get("error") or (exc.__cause__ and str(exc.__cause__))
    if cause:
        details = f"{details} ({cause})"
    return Unhealthy(details=details[:500], latency_ms=(time.perf_counter() - started) * 1000,
                     error_code=getattr(exc, "code", "BACKEND_UNAVAILABLE"))


class VectorBackend(ABC):
    """The trait every vector backend implements; all operations are async and take the
    tenant they are bounded to. Implementations raise the errors of ``vectors.errors``
    (``BackendUnavailable``, ``BackendRequestFailed``, ``RateLimited``)."""

    #: The backend's name in configuration (``VECTOR_BACKEND``), metrics and breakers.
    name: ClassVar[str] = ""
    #: Run in the calling thread (``vectors.runner``): the backend uses the caller's
    #: database connection and transaction (pgvector).
    runs_in_caller_thread: ClassVar[bool] = False
    #: Seconds one operation may take, client retries included (``None``: unbounded); the
    #: guard fails a slower one with ``BACKEND_UNAVAILABLE``.
    operation_timeout: float | None = None

    @abstractmethod
    async def health_check(self, tenant_id: str | None = None) -> HealthStatus:
        """Verify connectivity and that a query can run; never raises."""

    @abstractmethod
    async def capabilities(self) -> Capabilities:
        """What the backend supports (see :class:`Capabilities`)."""

    @abstractmethod
    async def upsert(self, tenant_id: str, records: Sequence[VectorRecord]) -> int:
        """Insert or replace ``records`` for ``tenant_id``; returns how many were stored."""

    @abstractmethod
    async def search(self, tenant_id: str, query: SearchQuery) -> list[SearchHit]:
        """``tenant_id``'s nearest neighbours of ``query.vector``, best first."""

    @abstractmethod
    async def delete(self, tenant_id: str, ids: Sequence[str]) -> int:
        """Delete ``ids`` of ``tenant_id`` (missing ids are ignored); returns how many
        deletions were requested (backends do not all say how many existed)."""

    @abstractmethod
    async def get(self, tenant_id: str, ids: Sequence[str]) -> list[VectorRecord]:
        """The records of ``tenant_id`` among ``ids`` (missing ones are left out)."""

    async def scan(self, tenant_id: str, *, cursor: str | None = None, limit: int = 500
                   ) -> tuple[list[str], str | None]:
        """A page of ``tenant_id``'s ids and the cursor of the next page (``None`` at the end).

        Raises:
            BackendRequestFailed: the backend cannot list its vectors (``supports_scan``).
        """
        raise BackendRequestFailed(f"The {self.name} backend cannot list its vectors.",
                                   details={"backend": self.name})

    async def close(self) -> None:  # noqa: B027 (most backends hold nothing to close)
        """Release connections; the backend is not used afterwards."""


def check_filter(filter_: Filter | None) -> Filter | None:
    """Validate a metadata filter: identifier keys, scalar values or non-empty lists of them.

    Raises:
        InvalidInput: a key is not an identifier, or a value is not a scalar or list.
    """
    if not filter_:
        return None
    for key, value in filter_.items():
        if not METADATA_KEY.match(key):
            raise InvalidInput("Metadata filter keys are identifiers.", details={"key": key})
        values = value if isinstance(value, list | tuple) else [value]
        if not values or not all(isinstance(v, str | int | float | bool) for v in values):
            raise InvalidInput("Metadata filter values are scalars or lists of scalars.",
                               details={"key": key})
    return filter_


def matches(metadata: Mapping[str, MetadataValue], filter_: Filter | None) -> bool:
    """Whether ``metadata`` satisfies ``filter_`` (for filtering after a search)."""
    if not filter_:
        return True
    for key, wanted in filter_.items():
        value = metadata.get(key)
        if isinstance(wanted, list | tuple):
            if value not in wanted:
                return False
        elif value != wanted:
            return False
    return True
