"""Shared set-up of the graph tests: a graph of the test's own (writer file, object store
directory, Redis key prefix) and helpers that store memories and extract them at once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from graph import store
from graph.coordination import redis_client
from graph.objects import reset_object_store
from graph.services import graph_extract
from memories.models import Memory
from tenants.context import tenant_scope


@pytest.fixture
def graph_env(settings: Any, tmp_path: Any) -> Iterator[Any]:
    """The graph under ``tmp_path`` with Redis keys of its own; cleaned up after."""
    settings.GRAPH_DIR = tmp_path / "graph"
    settings.OBJECT_STORE_DIR = tmp_path / "objects"
    settings.S3_ENDPOINT_URL = ""
    settings.GRAPH_REDIS_PREFIX = f"test-graph-{uuid.uuid4().hex}:"
    reset_object_store()
    store.forget_readers()
    yield settings
    client = redis_client()
    for name in client.scan_iter(match=settings.GRAPH_REDIS_PREFIX + "*"):
        client.delete(name)
    store.forget_readers()
    reset_object_store()


def remember(tenant: Any, *texts: str, **kwargs: Any) -> list[Memory]:
    """Store memories as ``tenant`` and extract their graph at once (as the job would)."""
    memories = [tenant.add(text, **kwargs) for text in texts]
    with tenant_scope(tenant.ctx):
        graph_extract(tenant.ctx, memory_ids=[m.pk for m in memories])
    return memories
