"""The ``case`` fixture: every backend, one after another, for the shared trait suite."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np
import pytest
from django.utils import timezone

from memory_project.resilience import reset_breakers
from tests.vectors.cases import Case, emulated, unit_vector
from tests.vectors.emulators.databricks import DatabricksEmulator
from tests.vectors.emulators.mongodb import MongoEmulator
from tests.vectors.emulators.pinecone import PineconeEmulator
from tests.vectors.emulators.vertex_ai import VertexAiEmulator
from tests.vectors.emulators.weaviate import WeaviateEmulator
from vectors.base import VectorRecord
from vectors.config import load_config
from vectors.registry import build

BACKENDS = ["pgvector", "qdrant", "weaviate", "pinecone", "mongodb", "vertex_ai", "databricks"]


@pytest.fixture(autouse=True)
def _fresh_breakers() -> Iterator[None]:
    reset_breakers()
    yield
    reset_breakers()


def _pgvector_case(tenant_a: Any, tenant_b: Any) -> Case:
    from memories.models import Memory
    from tenants.context import tenant_scope

    fixtures = {str(tenant_a.tenant.id): tenant_a, str(tenant_b.tenant.id): tenant_b}

    def seed(tenant: str, items: list[VectorRecord]) -> None:
        for item in items:
            meta = dict(item.metadata)
            Memory.objects.update_or_create(id=item.id, defaults=dict(
                tenant_id=tenant, content=item.text, layer="user", user_id="u1",
                content_hash=hashlib.sha256(item.text.encode()).hexdigest(),
                kind=meta.pop("kind", "fact"), metadata=meta,
                embedding=np.asarray(unit_vector("placeholder"))))

    def remove(tenant: str, ids: list[str]) -> None:
        Memory.objects.filter(pk__in=ids).update(state="deleted", deleted_at=timezone.now())

    config = load_config({"VECTOR_BACKEND": "pgvector"})
    return Case(name="pgvector", backend=build(config), tenants=tuple(fixtures),  # type: ignore[arg-type]
                scopes={t: partial(tenant_scope, f.ctx) for t, f in fixtures.items()},
                seeder=seed, remover=remove)


@pytest.fixture(params=BACKENDS)
def case(request: pytest.FixtureRequest) -> Iterator[Case]:
    """One backend with two tenants (see ``tests/vectors/cases.py``)."""
    name = request.param
    if name == "pgvector":
        tenant_a, tenant_b = request.getfixturevalue("tenant_a"), request.getfixturevalue(
            "tenant_b")
        yield _pgvector_case(tenant_a, tenant_b)
        return
    if name == "qdrant":
        yield emulated("qdrant", None, {"QDRANT_PATH": ":memory:"})
        return
    server = _servers[name]().start()
    try:
        yield emulated(name, server, _environ(name, server))
    finally:
        server.stop()


_servers: dict[str, Any] = {
    "weaviate": WeaviateEmulator,
    "pinecone": PineconeEmulator,
    "mongodb": MongoEmulator,
    "vertex_ai": VertexAiEmulator,
    "databricks": DatabricksEmulator,
}


def _environ(name: str, server: Any) -> dict[str, str]:
    if name == "pinecone":
        return {"PINECONE_API_KEY": "test-key", "PINECONE_INDEX": "memories",
                "PINECONE_CONTROL_PLANE_HOST": server.url, "PINECONE_BACKOFF_SECONDS": "0.01",
                "PINECONE_BACKOFF_MAX_SECONDS": "0.05"}
    if name == "weaviate":
        return {"WEAVIATE_URL": server.url, "WEAVIATE_GRPC_PORT": str(server.grpc_port),
                "WEAVIATE_TIMEOUT_SECONDS": "4", "WEAVIATE_OPERATION_TIMEOUT_SECONDS": "5"}
    if name == "mongodb":
        return {"MONGODB_URI": server.uri, "MONGODB_TIMEOUT_SECONDS": "3"}
    if name == "vertex_ai":
        return {"VERTEX_AI_PROJECT": "memory-test", "VERTEX_AI_LOCATION": "us-central1",
                "VERTEX_AI_INDEX": "memories", "VERTEX_AI_INDEX_ENDPOINT": "memories-endpoint",
                "VERTEX_AI_DEPLOYED_INDEX_ID": "memories_deployed",
                "VERTEX_AI_API_ENDPOINT": server.url, "VERTEX_AI_CREDENTIALS_FILE": "anonymous"}
    if name == "databricks":
        return {"DATABRICKS_HOST": server.url, "DATABRICKS_TOKEN": "dapi-test",
                "DATABRICKS_ENDPOINT": "memory-endpoint", "DATABRICKS_CATALOG": "main",
                "DATABRICKS_WAREHOUSE_ID": "wh-1", "DATABRICKS_GRANT_PRINCIPAL": "memory-readers"}
    raise KeyError(name)
