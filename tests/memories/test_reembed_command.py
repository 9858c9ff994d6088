"""``manage.py reembed``: after a model change, every memory with another model's vector is
queued for ``memories.memory_reembed`` through the job outbox, tenant by tenant."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from jobs.models import QueuedJob
from memories.embedding.embedders import get_embedder
from memories.models import Memory
from memories.services.reembed import memories_reembed
from tenants.context import tenant_scope

pytestmark = pytest.mark.django_db


def _with_old_vectors(tenant, *texts: str) -> list[str]:
    ids = [str(tenant.add(text).pk) for text in texts]
    with tenant_scope(tenant.ctx):
        Memory.objects.filter(pk__in=ids).update(embedding_model="old-model")
    return ids


def test_it_queues_one_job_per_batch_of_a_tenants_stale_memories(tenant_a, tenant_b) -> None:
    tenant_a.add("User drinks green tea")  # already the current model's vector
    stale = _with_old_vectors(tenant_a, "User lives in Lisbon", "User has a cat",
                              "User runs on Sundays")
    _with_old_vectors(tenant_b, "Globex ships on Fridays")
    out = StringIO()
    call_command("reembed", tenant=tenant_a.tenant.slug, batch_size=2, stdout=out)
    assert "queued 3 memories in 2 jobs" in out.getvalue()
    with tenant_scope(tenant_a.ctx):
        # (storing the memories queued their graph extraction too)
        jobs = list(QueuedJob.objects.filter(task="memories.memory_reembed")
                    .order_by("created_at", "id"))
    assert len(jobs) == 2
    assert sorted(i for job in jobs for i in job.args[1]) == sorted(stale)
    assert {job.args[0] for job in jobs} == {str(tenant_a.tenant.id)}
    with tenant_scope(tenant_b.ctx):
        assert not QueuedJob.objects.filter(task="memories.memory_reembed").exists()

    with tenant_scope(tenant_a.ctx):
        for job in jobs:
            memories_reembed(tenant_a.ctx, memory_ids=job.args[1])
        models = set(Memory.objects.values_list("embedding_model", flat=True))
    assert models == {get_embedder().model_name}


def test_without_a_tenant_it_queues_every_active_tenant(tenant_a, tenant_b) -> None:
    _with_old_vectors(tenant_a, "User lives in Lisbon")
    _with_old_vectors(tenant_b, "Globex ships on Fridays", "Globex uses MySQL")
    out = StringIO()
    call_command("reembed", stdout=out, stderr=StringIO())
    assert "queued 3 memories in 2 jobs" in out.getvalue()


def test_it_refuses_a_bad_batch_size_or_an_unknown_tenant(tenant_a) -> None:
    with pytest.raises(CommandError, match="batch-size"):
        call_command("reembed", batch_size=0)
    with pytest.raises(CommandError, match="No tenant"):
        call_command("reembed", tenant="no-such-tenant")
