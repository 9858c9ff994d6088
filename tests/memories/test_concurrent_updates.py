"""Concurrent metadata updates without a version lose nothing (security review, finding 4):
each merges its patch into the row as locked, not into a copy read before the lock."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from memories.models import Memory
from tenants.context import tenant_scope

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "owner"])


def test_fifty_concurrent_metadata_patches_all_survive(owner_flushes: None, tenant_a: Any
                                                       ) -> None:
    memory = tenant_a.add("A memory many agents annotate at once.", metadata={"seed": 0})
    barrier = threading.Barrier(10)
    statuses: list[int] = []

    def patch(worker: int) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant_a.key}")
        barrier.wait()
        try:
            for i in range(5):
                key = f"k{worker * 5 + i}"
                response = client.patch(f"/api/v1/memories/{memory.pk}",
                                        {"metadata": {key: worker}}, format="json")
                statuses.append(response.status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=patch, args=(w,)) for w in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses.count(200) == 50, statuses
    with tenant_scope(tenant_a.ctx):
        stored = Memory.objects.get(pk=memory.pk)
    assert set(stored.metadata) == {"seed"} | {f"k{i}" for i in range(50)}
    assert stored.version == 51
