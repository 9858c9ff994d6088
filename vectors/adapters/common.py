"""What the vendor adapters share: settings and health probing (:class:`VendorBackend`),
the registry's factory (:func:`factory`), the capabilities every adapter has, filtering
after a search (:class:`PostFilter`) and reading an exception's causes (:func:`causes`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from vectors.base import (
    Capabilities,
    DistanceMetric,
    Filter,
    HealthStatus,
    SearchHit,
    VectorBackend,
    VectorRecord,
    matches,
    probe_health,
)
from vectors.config import BackendSettings
from vectors.errors import BackendRequestFailed

SettingsT = TypeVar("SettingsT", bound=BackendSettings)
BackendT = TypeVar("BackendT", bound=VectorBackend)

#: Candidates per result when part of a filter is applied after the search.
POST_FILTER_FACTOR = 4


class VendorBackend(VectorBackend, Generic[SettingsT]):
    """A vendor adapter configured by ``settings``: each operation is bounded by
    ``settings.operation_timeout_seconds`` and the health check times :meth:`_probe`."""

    def __init__(self, settings: SettingsT) -> None:
        self.settings = settings
        self.operation_timeout = settings.operation_timeout_seconds

    async def health_check(self, tenant_id: str | None = None) -> HealthStatus:
        """``Healthy`` with the latency of :meth:`_probe`, else ``Unhealthy`` naming what it
        raised; never raises."""
        return await probe_health(self._probe)

    @abstractmethod
    async def _probe(self) -> None:
        """Return when the backend answers a request, else raise."""

    def dense(self, record: VectorRecord) -> list[float]:
        """``record``'s vector as a list of floats.

        Raises:
            BackendRequestFailed: it has not ``settings.dimensions`` dimensions.
        """
        if len(record.vector) != self.settings.dimensions:
            raise BackendRequestFailed(
                f"Vectors have {self.settings.dimensions} dimensions here.",
                details={"backend": self.name, "got": len(record.vector)})
        return [float(x) for x in record.vector]


def factory(backend: Callable[[SettingsT], BackendT], settings_class: type[SettingsT]
            ) -> Callable[[BackendSettings], BackendT]:
    """The registry's factory of an adapter (a module's ``build(settings)``): ``backend``
    built from settings that must be ``settings_class``'s (asserted)."""

    def build(settings: BackendSettings) -> BackendT:
        """The registry's factory: the adapter configured by ``settings``."""
        assert isinstance(settings, settings_class)
        return backend(settings)

    return build


def adapter_capabilities(max_vector_dimensions: int, max_batch_size: int, *, hybrid: bool,
                         metrics: tuple[DistanceMetric, ...] = tuple(DistanceMetric),
                         scan: bool = True) -> Capabilities:
    """The :class:`Capabilities` of a vendor adapter: every one has the backend apply
    metadata filters and upserts in batches of ``max_batch_size``; ``hybrid``: the backend
    fuses keyword and vector ranking; ``metrics``: the distance metrics it can be
    configured with (all by default); ``scan``: it lists a tenant's ids."""
    return Capabilities(
        max_vector_dimensions=max_vector_dimensions, supports_metadata_filter=True,
        supports_hybrid_search=hybrid, supports_batch_upsert=True, distance_metrics=metrics,
        max_batch_size=max_batch_size, supports_scan=scan)


@dataclass(frozen=True)
class PostFilter:
    """Filter terms a backend cannot apply (``rest``), applied after the search to a wider
    candidate list; ``limit`` and ``min_score`` are the query's."""

    rest: Filter | None
    limit: int
    min_score: float | None = None

    @property
    def candidates(self) -> int:
        """How many neighbours to ask the backend for: ``limit``, times
        :data:`POST_FILTER_FACTOR` when there are ``rest`` terms."""
        return self.limit * (POST_FILTER_FACTOR if self.rest else 1)

    def apply(self, hits: Iterable[SearchHit]) -> list[SearchHit]:
        """The first ``limit`` of ``hits`` (best first) whose metadata satisfy ``rest`` and,
        when ``min_score`` is set, that score at least that."""
        kept = [hit for hit in hits if matches(hit.metadata, self.rest)
                and (self.min_score is None or hit.score >= self.min_score)]
        return kept[:self.limit]


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then the exception it was raised from or while handling, and so on (each
    once, should the chain loop)."""
    visited: set[int] = set()
    seen: BaseException | None = exc
    while seen is not None and id(seen) not in visited:
        visited.add(id(seen))
        yield seen
        seen = seen.__cause__ or seen.__context__
