"""The graph side of memory writes: cascading deletion (hard, batch, soft then purge,
restore), referential integrity of edges, the integrity scan, atomic multi-table writes and
the single writer's queue (seed 001 "Cascading Graph Deletion", "Application-Level Referential
Integrity", "Multi-Table Transaction Atomicity", "Write Coordination")."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from graph import maintenance, ops, selectors, services, store, writer
from graph.tenant_sql import tenant_execute
from memories.services.deletion import memory_delete, memory_restore
from memory_project.errors import MemoryServiceError
from tenants.context import tenant_scope
from tenants.models import AuditEntry
from tests.graph.graph_helpers import graph_env, remember

pytestmark = pytest.mark.django_db
__all__ = ["graph_env"]


def _counts(tenant: Any) -> dict[str, int]:
    with tenant_scope(tenant.ctx):
        return maintenance.counts(tenant.ctx)


def _apply(tenant: Any, op: str, ids: list[Any]) -> dict[str, Any]:
    with tenant_scope(tenant.ctx):
        return services.graph_apply(tenant.ctx, op=op, payload={"ids": [str(i) for i in ids]})


def test_it_removes_a_hard_deleted_memorys_nodes_edges_and_unshared_entities(
        tenant_a: Any, graph_env: Any) -> None:
    kept, gone = remember(tenant_a, "Maria works at Google.",
                          "Maria visited Lisbon with Pedro.")
    _apply(tenant_a, "delete_memories", [gone.pk])
    with tenant_scope(tenant_a.ctx):
        assert selectors.entities_by_name(tenant_a.ctx, ["maria"])  # still mentioned by `kept`
        assert not selectors.entities_by_name(tenant_a.ctx, ["lisbon", "pedro"])
        assert {n.label for n in selectors.memory_entities(tenant_a.ctx, memory_id=kept.pk)
                } >= {"Maria", "Google"}
    assert _counts(tenant_a)["memory_nodes"] == 1


def test_it_deletes_a_batch_in_one_transaction(tenant_a: Any, graph_env: Any) -> None:
    memories = remember(tenant_a, "Ana met Rui in Porto.", "Rui works at Siemens.",
                        "Ana moved to Berlin.")
    before = _counts(tenant_a)
    with pytest.raises(MemoryServiceError):  # one malformed id: nothing is deleted
        _apply(tenant_a, "delete_memories", [memories[0].pk, "not-a-uuid"])
    assert _counts(tenant_a) == before
    _apply(tenant_a, "delete_memories", [m.pk for m in memories])
    assert _counts(tenant_a) == {"memory_nodes": 0, "entities": 0, "memory_edges": 0,
                                 "entity_edges": 0}


def test_it_marks_soft_deleted_data_restores_it_and_purges_it_after_retention(
        tenant_a: Any, graph_env: Any) -> None:
    memory, = remember(tenant_a, "Jon opened a dance studio in Madrid.")
    _apply(tenant_a, "soft_delete_memories", [memory.pk])
    with tenant_scope(tenant_a.ctx):
        assert not selectors.entities_by_name(tenant_a.ctx, ["madrid"])  # hidden
    assert _counts(tenant_a)["memory_nodes"] == 1  # kept, marked
    _apply(tenant_a, "restore_memories", [memory.pk])
    with tenant_scope(tenant_a.ctx):
        assert selectors.entities_by_name(tenant_a.ctx, ["madrid"])
    _apply(tenant_a, "soft_delete_memories", [memory.pk])
    with tenant_scope(tenant_a.ctx):
        services.graph_purge_deleted(tenant_a.ctx)  # retention not over: kept
    assert _counts(tenant_a)["memory_nodes"] == 1
    with tenant_scope(tenant_a.ctx):
        later = (timezone.now() + timedelta(days=1)).isoformat()
        writer.graph_write(tenant_a.ctx.tenant_id, "purge_deleted", {"before": later})
    assert _counts(tenant_a)["memory_nodes"] == 0 and _counts(tenant_a)["entities"] == 0


def test_memory_deletes_and_restores_queue_the_graph_change(tenant_a: Any, graph_env: Any,
                                                           django_capture_on_commit_callbacks: Any
                                                           ) -> None:
    from jobs.models import QueuedJob

    memory, = remember(tenant_a, "Maria works at Google.")
    with tenant_scope(tenant_a.ctx):
        memory_delete(tenant_a.ctx, memory_id=memory.pk)
        memory_restore(tenant_a.ctx, memory_id=memory.pk)
        memory_delete(tenant_a.ctx, memory_id=memory.pk, hard=True)
        jobs = list(QueuedJob.objects.filter(task=services.APPLY_TASK).order_by("created_at"))
    assert [job.args[1] for job in jobs] == ["soft_delete_memories", "restore_memories",
                                             "delete_memories"]


def test_an_edge_needs_both_ends_and_names_the_missing_one(tenant_a: Any,
                                                           graph_env: Any) -> None:
    memory, = remember(tenant_a, "Maria works at Google.")
    tenant = str(tenant_a.ctx.tenant_id)
    with tenant_scope(tenant_a.ctx), store.writer_connection() as conn:
        google = ops.entity_id(tenant, "google")
        with pytest.raises(ops.EdgeEndMissing) as missing_target:
            ops.entity_edge_add(conn, tenant, source=google, target=uuid.uuid4(),
                                relation="WORKS_ON", memory_id=memory.pk)
        with pytest.raises(ops.EdgeEndMissing) as missing_source:
            ops.memory_edge_add(conn, tenant, source=uuid.uuid4(), target=google,
                                target_kind=ops.ENTITY, relation=ops.MENTIONS)
    assert missing_target.value.details["missing"] == "target"
    assert missing_source.value.details["missing"] == "source"


def test_a_failing_operation_rolls_back_every_table(tenant_a: Any, graph_env: Any) -> None:
    remember(tenant_a, "Maria works at Google.")
    before = _counts(tenant_a)
    bad = {"memory": {"id": str(uuid.uuid4()), "layer": "user", "contentHash": "x",
                      "createdAt": timezone.now().isoformat()},
           "entities": [{"canonical": "lisbon", "name": "Lisbon", "type": "PLACE"}],
           "relations": [], "fallback": True}
    with pytest.raises(MemoryServiceError):  # the second item breaks: a malformed id
        writer.graph_write(tenant_a.ctx.tenant_id, "upsert_memories",
                           {"items": [bad, {**bad, "memory": {**bad["memory"], "id": "x"}}]})
    assert _counts(tenant_a) == before


def test_the_integrity_scan_audits_and_repairs_orphans(tenant_a: Any, graph_env: Any) -> None:
    memory, = remember(tenant_a, "Maria works at Google.")
    from memories.models import Memory  # erase the memory behind the graph's back

    with tenant_scope(tenant_a.ctx):
        Memory.objects.filter(pk=memory.pk).delete()
        found = services.graph_integrity_scan(tenant_a.ctx, repair=True)
        assert found["nodesWithoutMemory"] == 1 and found["repaired"]
        assert AuditEntry.objects.filter(action="graph_integrity_violations").exists()
        again = services.graph_integrity_scan(tenant_a.ctx)
    assert not any(v for k, v in again.items() if k != "repaired")
    assert _counts(tenant_a)["entities"] == 0


def test_concurrent_writers_are_serialized_and_each_is_answered(tenant_a: Any,
                                                                graph_env: Any) -> None:
    memories = remember(tenant_a, "Maria works at Google.")
    tenant = tenant_a.ctx.tenant_id
    errors: list[Exception] = []

    def soft_and_back() -> None:
        try:
            writer.graph_write(tenant, "soft_delete_memories", {"ids": [str(memories[0].pk)]})
            writer.graph_write(tenant, "restore_memories", {"ids": [str(memories[0].pk)]})
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=soft_and_back) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with tenant_scope(tenant_a.ctx):
        assert selectors.entities_by_name(tenant_a.ctx, ["google"])


def test_a_write_times_out_when_the_writer_lock_is_held(tenant_a: Any, graph_env: Any) -> None:
    with writer.writer_lock() as held:
        assert held
        with pytest.raises(writer.GraphWriteTimeout):
            writer.graph_write(tenant_a.ctx.tenant_id, "purge_deleted",
                               {"before": timezone.now().isoformat()}, timeout=0.3)
    assert writer.redis_client().llen(writer.key("queue")) == 0  # withdrawn


def test_a_failed_publication_keeps_the_commit_and_the_checkpoint_publishes_it(
        tenant_a: Any, graph_env: Any, settings: Any) -> None:
    from graph.objects import reset_object_store

    remember(tenant_a, "Maria works at Google.")
    with tenant_scope(tenant_a.ctx):  # this process has loaded the published graph
        assert selectors.entities_by_name(tenant_a.ctx, ["maria"])
    settings.OBJECT_STORE_DIR = "/dev/null/objects"  # unwritable
    reset_object_store()
    memory = tenant_a.add("Pedro lives in Lisbon.")
    with tenant_scope(tenant_a.ctx):
        done = services.graph_extract(tenant_a.ctx, memory_ids=[memory.pk])
        assert done["memories"] == 1
        # Committed but not published: readers keep serving the previous snapshot.
        assert not selectors.entities_by_name(tenant_a.ctx, ["lisbon"])
        assert selectors.entities_by_name(tenant_a.ctx, ["maria"])
    settings.OBJECT_STORE_DIR = graph_env.GRAPH_DIR.parent / "objects"
    reset_object_store()
    assert maintenance.graph_checkpoint() == {"tenants": 1, "failed": 0}
    with tenant_scope(tenant_a.ctx):
        assert selectors.entities_by_name(tenant_a.ctx, ["lisbon"])


def test_the_writer_file_holds_rows_of_several_tenants_apart(tenant_a: Any, tenant_b: Any,
                                                             graph_env: Any) -> None:
    remember(tenant_a, "Maria works at Google.")
    remember(tenant_b, "Maria works at Globex.")
    with store.writer_connection() as conn:
        rows = tenant_execute(conn, "SELECT DISTINCT tenant_id FROM entities WHERE tenant_id = "
                              "$tenant_id", {"tenant_id": tenant_b.ctx.tenant_id})
    assert [str(r[0]) for r in rows] == [str(tenant_b.ctx.tenant_id)]


def test_a_write_that_waited_too_long_is_logged_and_counted(
        tenant_a: Any, graph_env: Any, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(writer, "CONTENTION_SECONDS", 0.0)
    before = writer.CONTENDED._value.get()
    writer.graph_write(tenant_a.ctx.tenant_id, "purge_deleted",
                       {"before": timezone.now().isoformat()})
    assert writer.CONTENDED._value.get() == before + 1
    assert "graph write contention" in caplog.text
