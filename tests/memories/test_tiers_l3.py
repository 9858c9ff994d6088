"""L3 as a vector backend of its own (seed 004 "L3 vector database integration", "Vector
database unavailable", "L1 and L2 miss, L3 hit"), run for real against Qdrant's embedded
local mode: writes reach it through the job outbox, search ranks with it, an outage is
served by PostgreSQL and loses nothing, and an entry only L3 holds is promoted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from django.db import connections

from jobs.models import QueuedJob
from memories.embedding.embedders import embed_texts
from memories.models import Memory, MemoryHistory
from memories.tasks import l3_sync
from memories.tiers.l1 import CHANNEL, l1_cache, l1_reset
from memories.tiers.l3 import SYNC_TASK
from memory_project.resilience import reset_breakers
from tenants.context import tenant_scope
from tests.helpers import body
from vectors import registry
from vectors.base import VectorRecord
from vectors.config import QdrantSettings, VectorConfig
from vectors.guard import GuardedBackend
from vectors.runner import call

pytestmark = pytest.mark.django_db

FACTS = [
    "Maria drinks green tea every morning", "Maria drinks black coffee at work",
    "Tom drinks green tea late at night", "Maria lives in Lisbon near the river",
    "Tom lives in Berlin with two cats", "Maria takes the night train to Berlin",
    "Tom plays chess on Sundays", "Maria plays jazz piano", "Rain is expected in Lisbon",
    "Snow fell in Berlin this morning", "Tom rides his bike to work every day",
    "Maria reads crime novels on the train", "Apples and pears grow in the garden",
    "Tom watches old films with his cats", "Maria's cat sleeps on the piano",
    "The garden needs rain",
]
QUERIES = ("Maria drinks green tea in Berlin", "Tom and his cats in the morning")
SEARCH = "/api/v1/memories/search"
BATCH = "/api/v1/memories/batch-get"


class Qdrant:
    """The configured L3: Qdrant local mode in a directory, which a test can kill (close)
    and start again on the same data."""

    def __init__(self, path: Path) -> None:
        self.config = VectorConfig(backend="qdrant", settings=QdrantSettings(path=str(path)))
        self.backend: GuardedBackend = self.start()

    def start(self) -> GuardedBackend:
        reset_breakers()
        registry.reset(self.config)
        self.backend = registry.backend()
        return self.backend

    def kill(self) -> None:
        call(self.backend.close)

    def ids(self, tenant: Any) -> set[str]:
        found, cursor = [], None
        while True:
            page, cursor = call(self.backend.scan, str(tenant.tenant.id), cursor=cursor)
            found.extend(page)
            if cursor is None:
                return set(found)


@pytest.fixture
def qdrant(tmp_path: Path) -> Iterator[Qdrant]:
    l1_reset()
    store = Qdrant(tmp_path / "qdrant")
    yield store
    store.kill()
    registry.reset()
    reset_breakers()
    l1_reset()


def _queued(tenant: Any) -> list[QueuedJob]:
    with tenant_scope(tenant.ctx):
        return list(QueuedJob.objects.filter(task=SYNC_TASK).order_by("id"))


def run_l3_jobs(tenant: Any) -> dict[str, int]:
    """What the outbox drain and a worker do with ``tenant``'s queued L3 sync jobs: run each
    once and remove it from the outbox (a job that finds L3 down queues itself again)."""
    totals = {"upserted": 0, "deleted": 0, "deferred": 0}
    for job in _queued(tenant):
        with tenant_scope(tenant.ctx):
            job.delete()
        for key, value in l3_sync(*job.args).items():
            totals[key] += value
    return totals


def _add(tenant: Any, texts: list[str]) -> list[str]:
    return [str(tenant.add(text, identifiers={"userId": "u1"}).pk) for text in texts]


def _semantic(tenant: Any, query: str) -> Any:
    return tenant.client.post(SEARCH, {"query": query, "mode": "semantic", "threshold": 0.05,
                                       "limit": 20, "identifiers": {"userId": "u1"}},
                              format="json")


def _ranked(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [r["memory"]["id"] for r in body(response)["results"]]


def _scored(response: Any) -> list[tuple[float, set[str]]]:
    """The results best first as ``(cosine similarity, ids with it)``: the backends may order
    a tie differently."""
    assert response.status_code == 200, response.content
    groups: dict[float, set[str]] = {}
    for r in body(response)["results"]:
        groups.setdefault(round(r["similarity"], 5), set()).add(r["memory"]["id"])
    return sorted(groups.items(), reverse=True)


def test_search_through_qdrant_ranks_as_pgvector_does(tenant_a, qdrant) -> None:
    _add(tenant_a, FACTS)
    assert run_l3_jobs(tenant_a)["upserted"] == len(FACTS)
    through_qdrant = [_scored(_semantic(tenant_a, q)) for q in QUERIES]
    registry.reset()  # the default: pgvector
    through_pgvector = [_scored(_semantic(tenant_a, q)) for q in QUERIES]
    assert through_qdrant == through_pgvector
    assert all(sum(len(ids) for _, ids in ranked) >= 5 for ranked in through_qdrant)


def test_l3_follows_adds_deletes_restores_and_erasures(tenant_a, qdrant) -> None:
    ids = _add(tenant_a, FACTS[:4])
    run_l3_jobs(tenant_a)
    assert qdrant.ids(tenant_a) == set(ids)
    client = tenant_a.client
    assert client.delete(f"/api/v1/memories/{ids[0]}").status_code == 200
    run_l3_jobs(tenant_a)
    assert qdrant.ids(tenant_a) == set(ids[1:])
    assert client.post(f"/api/v1/memories/{ids[0]}/restore", {}, format="json"
                       ).status_code == 200
    run_l3_jobs(tenant_a)
    assert qdrant.ids(tenant_a) == set(ids)
    assert client.delete(f"/api/v1/memories/{ids[1]}?hard=true").status_code == 200
    run_l3_jobs(tenant_a)
    assert qdrant.ids(tenant_a) == set(ids) - {ids[1]}


def test_killing_l3_mid_run_loses_nothing(tenant_a, qdrant) -> None:
    before = _add(tenant_a, FACTS[:8])
    run_l3_jobs(tenant_a)
    qdrant.kill()
    during = _add(tenant_a, FACTS[8:])
    assert tenant_a.client.delete(f"/api/v1/memories/{before[0]}").status_code == 200
    assert run_l3_jobs(tenant_a)["deferred"] == len(during) + 1
    assert _queued(tenant_a)  # waiting in the outbox

    degraded = _semantic(tenant_a, FACTS[-1])
    assert "vector_backend" in degraded["X-Memory-Degraded"]
    assert _ranked(degraded)[0] == during[-1]  # written while L3 was down, found in L2

    qdrant.start()
    run_l3_jobs(tenant_a)
    assert _queued(tenant_a) == []
    assert qdrant.ids(tenant_a) == set(before[1:]) | set(during)
    healthy = _semantic(tenant_a, FACTS[-1])
    assert not healthy.has_header("X-Memory-Degraded")
    assert _ranked(healthy)[0] == during[-1]


def _l3_only(tenant: Any, qdrant: Qdrant, text: str, memory_id: str) -> None:
    (vector, _), = embed_texts(tenant.tenant.id, [text])
    call(qdrant.backend.upsert, str(tenant.tenant.id), [VectorRecord(
        id=memory_id, vector=tuple(float(x) for x in np.asarray(vector)), text=text,
        metadata={"layer": "user", "user_id": "u1", "kind": "fact", "scope": "global",
                  "company_id": tenant.tenant.slug, "task_id": "t-7", "source": "import"})])


def _l1_caught_up() -> None:
    """Wait until this process's L1 listener has applied every notification committed so far
    (earlier tests' writes): a sentinel sent now arrives after them. An invalidation arriving
    while a read is filling L1 makes the read leave L1 as it is, which is right, and would
    make the L1 hit asserted below depend on how far behind the listener is."""
    cache = l1_cache(wait_seconds=5)
    before = cache.generation()
    with psycopg.connect(**connections["default"].get_connection_params(),
                         autocommit=True) as conn:
        conn.execute("SELECT pg_notify(%s, 'sentinel:caught-up')", [CHANNEL])
    deadline = time.monotonic() + 10
    while cache.generation() == before:
        assert time.monotonic() < deadline, "the L1 listener did not receive the sentinel"
        time.sleep(0.01)


def test_an_entry_only_l3_holds_is_promoted_to_l2_and_l1(tenant_a, tenant_b, qdrant) -> None:
    memory_id = "01a20000-0000-7000-8000-0000000000aa"
    _l3_only(tenant_a, qdrant, "Maria's passport number ends in 42", memory_id)
    _l1_caught_up()
    assert body(tenant_b.client.post(BATCH, {"ids": [memory_id]}, format="json")
                )["missing"] == [memory_id]
    first = tenant_a.client.post(BATCH, {"ids": [memory_id]}, format="json")
    assert first["X-Memory-Tiers"] == "l1=0, l2=0, l3=1"
    entry = body(first)["entries"][0]
    assert entry["content"] == "Maria's passport number ends in 42"
    assert entry["layer"] == "user" and entry["identifiers"]["userId"] == "u1"
    assert entry["metadata"] == {"source": "import"} and entry["taskId"] == "t-7"
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.filter(pk=memory_id).exists()
        history = MemoryHistory.objects.get(memory_id=memory_id)
        assert history.details == {"recoveredFrom": "l3"}
    second = tenant_a.client.post(BATCH, {"ids": [memory_id]}, format="json")
    assert second["X-Memory-Tiers"].startswith("l1=1")


def test_an_erased_memory_is_not_brought_back_from_l3(tenant_a, qdrant) -> None:
    memory_id, = _add(tenant_a, ["Maria's passport number ends in 42"])
    run_l3_jobs(tenant_a)
    assert tenant_a.client.delete(f"/api/v1/memories/{memory_id}?hard=true"
                                  ).status_code == 200
    assert memory_id in qdrant.ids(tenant_a)  # its deletion from L3 is still queued
    response = tenant_a.client.post(BATCH, {"ids": [memory_id]}, format="json")
    assert body(response) == {"entries": [], "missing": [memory_id]}
    assert response["X-Memory-Tiers"] == "l1=0, l2=0, l3=0"
    run_l3_jobs(tenant_a)
    assert memory_id not in qdrant.ids(tenant_a)

