"""One "case" per backend for the shared trait suite: the backend, two tenants, and how to
seed and remove records (pgvector's records are memories, the others' are vectors).

Real: pgvector (the test database) and Qdrant (embedded local mode, in memory). Fixtures:
every other backend, against its emulator (``tests/vectors/emulators``) on a local port.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vectors.base import VectorRecord
from vectors.config import load_config
from vectors.guard import GuardedBackend
from vectors.registry import build
from vectors.runner import call

DIMENSIONS = 384


def run(coroutine_function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run an async backend call from a test as the service does (``vectors.runner``):
    pgvector in the test's thread (its database connection and tenant scope), the others
    on the backends' event loop."""
    return call(coroutine_function, *args, **kwargs)


def unit_vector(seed: str) -> tuple[float, ...]:
    """A deterministic random unit vector of :data:`DIMENSIONS` for ``seed``."""
    rng = np.random.default_rng(int(hashlib.sha256(seed.encode()).hexdigest()[:12], 16))
    vector = rng.normal(size=DIMENSIONS)
    return tuple(float(x) for x in vector / np.linalg.norm(vector))


def near(vector: Sequence[float], seed: str, noise: float) -> tuple[float, ...]:
    """``vector`` moved by ``noise`` towards a random direction, normalised."""
    moved = np.asarray(vector) + noise * np.asarray(unit_vector(seed))
    return tuple(float(x) for x in moved / np.linalg.norm(moved))


def records(count: int, prefix: str, **metadata: Any) -> list[VectorRecord]:
    """``count`` records with UUID ids; metadata ``kind`` alternates fact/episode/rule,
    ``rank`` is the index, plus ``metadata``."""
    kinds = ("fact", "episode", "rule")
    return [VectorRecord(id=str(uuid.uuid5(uuid.NAMESPACE_OID, f"{prefix}-{i}")),
                         vector=unit_vector(f"{prefix}-{i}"),
                         metadata={"kind": kinds[i % 3], "rank": i, **metadata},
                         text=f"note {i} about {'cats' if i % 2 else 'dogs'} {prefix}")
            for i in range(count)]


@dataclass
class Case:
    """A backend under test and what the suite needs around it."""

    name: str
    backend: GuardedBackend
    tenants: tuple[str, str]
    server: Any = None
    scopes: dict[str, Any] = field(default_factory=dict)
    seeder: Callable[[str, list[VectorRecord]], None] | None = None
    remover: Callable[[str, list[str]], None] | None = None

    @contextlib.contextmanager
    def scope(self, tenant: str) -> Iterator[None]:
        """The tenant scope the backend's calls need (pgvector only)."""
        maker = self.scopes.get(tenant)
        with maker() if maker else contextlib.nullcontext():
            yield

    def store(self, tenant: str, items: list[VectorRecord]) -> None:
        """Seed ``items`` (pgvector: their memories) and upsert them."""
        with self.scope(tenant):
            if self.seeder:
                self.seeder(tenant, items)
            assert run(self.backend.upsert, tenant, items) == len(items)

    def remove(self, tenant: str, ids: list[str]) -> None:
        """Delete ``ids`` the way the backend's records go (pgvector: delete the memory)."""
        with self.scope(tenant):
            if self.remover:
                self.remover(tenant, ids)
            else:
                run(self.backend.delete, tenant, ids)


def emulated(name: str, server: Any, environ: dict[str, str]) -> Case:
    """A case for a backend served by an emulator."""
    config = load_config({"VECTOR_BACKEND": name, **environ})
    return Case(name=name, backend=build(config), server=server,
                tenants=(str(uuid.uuid4()), str(uuid.uuid4())))
