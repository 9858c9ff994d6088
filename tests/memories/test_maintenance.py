"""Importance on access, effective confidence in the API, and the lifecycle jobs of
``memories.services.maintenance``: decay, purge of soft-deleted memories, consolidation."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.utils import timezone

from memories.embedding.embedders import get_embedder
from memories.models import Memory, MemoryHistory
from memories.retrieval.confidence import confidence_state, effective_confidence
from memories.services import maintenance
from tenants import services as tenant_services
from tenants.context import tenant_scope
from tenants.models import AuditEntry
from tests.helpers import body, memory_row
from tests.retrieval_helpers import (
    MemoryUpdates,
    cosine,
    days_ago,
    ids,
    reload,
    searched,
    set_fields,
)

# What the bundled MiniLM model understands is part of what these tests check.
pytestmark = [pytest.mark.django_db, pytest.mark.real_embedder]

M = "/api/v1/memories"


def lifecycle(tenant: Any, **sections: Any) -> None:
    with tenant_scope(tenant.ctx):
        tenant_services.tenant_settings_update(tenant.ctx, patch={"lifecycle": sections})


def run(job: Any, tenant: Any) -> dict[str, int]:
    with tenant_scope(tenant.ctx):
        return job(tenant.ctx)


def actions(tenant: Any, memory: Memory) -> list[str]:
    with tenant_scope(tenant.ctx):
        return list(MemoryHistory.objects.filter(memory_id=memory.pk)
                    .order_by("created_at").values_list("action", flat=True))


def get(tenant: Any, memory: Memory) -> dict[str, Any]:
    response = tenant.client.get(f"{M}/{memory.pk}")
    assert response.status_code == 200, response.content
    return body(response)["memory"]


def expected_importance(base: float, count: int, gap_days: float, *, fw: float = 0.5,
                        rw: float = 0.3, bw: float = 0.2, half_life: float = 7,
                        saturation: float = 10) -> float:
    value = (bw * base + fw * (1 - math.exp(-count / saturation))
             + rw * 0.5 ** (gap_days / half_life))
    return min(1.0, max(0.0, value))


# --- importance (seed 001 "Importance Scoring") ------------------------------------------------

def test_it_recomputes_importance_on_access_and_keeps_the_base(tenant_a) -> None:
    memory = tenant_a.add("Standup is at nine", importance=0.9)
    set_fields(tenant_a, memory, access_count=4, last_accessed_at=days_ago(7))
    with MemoryUpdates() as updates:
        data = get(tenant_a, memory)
    assert updates.count == 1
    assert data["accessCount"] == 5 and data["lastAccessedAt"] is not None
    assert data["baseImportance"] == 0.9
    assert data["importance"] == pytest.approx(expected_importance(0.9, 5, 7), rel=1e-4)
    # next access right away: the gap is ~0, one more access
    data = get(tenant_a, memory)
    assert data["importance"] == pytest.approx(expected_importance(0.9, 6, 0), rel=1e-4)
    assert data["baseImportance"] == 0.9


def test_it_recomputes_importance_of_search_results_in_one_update(tenant_a) -> None:
    hits = [tenant_a.add(f"Kettle descaling tip {i}", importance=0.2) for i in range(3)]
    miss = tenant_a.add("Quarterly tax filing", importance=0.2)
    with MemoryUpdates() as updates:
        results = searched(tenant_a, "kettle descaling", mode="keyword")["results"]
    assert updates.count == 1
    assert set(ids(results)) == {str(m.pk) for m in hits}
    for memory in hits:
        fresh = reload(tenant_a, memory)
        assert fresh.access_count == 1 and fresh.base_importance == 0.2
        assert fresh.importance == pytest.approx(expected_importance(0.2, 1, 0), rel=1e-3)
    assert reload(tenant_a, miss).importance == 0.2


def test_it_uses_the_tenants_importance_weights(tenant_a) -> None:
    lifecycle(tenant_a, importance={"frequencyWeight": 0, "recencyWeight": 0, "baseWeight": 1,
                                    "halfLifeDays": 7, "saturation": 10})
    memory = tenant_a.add("Weighted by base only", importance=0.4)
    assert get(tenant_a, memory)["importance"] == pytest.approx(0.4)
    lifecycle(tenant_a, importance={"frequencyWeight": 1, "recencyWeight": 0, "baseWeight": 0,
                                    "saturation": 1, "halfLifeDays": "bad"})  # bad key ignored
    assert get(tenant_a, memory)["importance"] == pytest.approx(1 - math.exp(-2), rel=1e-4)


def test_an_update_counts_as_an_access_unless_it_sets_importance(tenant_a) -> None:
    memory = tenant_a.add("Editable", importance=0.6)
    response = tenant_a.client.patch(f"{M}/{memory.pk}", {"metadata": {"x": 1}}, format="json")
    data = body(response)["memory"]
    assert data["accessCount"] == 1
    assert data["importance"] == pytest.approx(expected_importance(0.6, 1, 0), rel=1e-3)
    response = tenant_a.client.patch(f"{M}/{memory.pk}", {"importance": 0.95}, format="json")
    data = body(response)["memory"]
    assert (data["importance"], data["baseImportance"], data["accessCount"]) == (0.95, 0.95, 2)


# --- effective confidence (seed 002) -----------------------------------------------------------

def test_confidence_state_boundaries() -> None:
    assert [confidence_state(v) for v in (1.0, 0.5, 0.4999, 0.2, 0.1999, 0.0)] == [
        "active", "active", "fading", "fading", "expired", "expired"]
    assert effective_confidence(0.9, 0.1, 10) == pytest.approx(0.9 * math.exp(-1))
    assert effective_confidence(0.9, 0.1, -5) == 0.9


@pytest.mark.parametrize(("days", "state"), [(0, "active"), (10, "fading"), (30, "expired")])
def test_it_shows_effective_confidence_on_every_memory(tenant_a, days, state) -> None:
    memory = tenant_a.add("Confidence decays", confidence=0.9, decay_rate=0.1)
    set_fields(tenant_a, memory, last_confirmed_at=days_ago(days))
    data = get(tenant_a, memory)
    assert data["effectiveConfidence"] == pytest.approx(0.9 * math.exp(-0.1 * days), rel=1e-4)
    assert data["confidenceState"] == state
    listed = body(tenant_a.client.get(M, {"layer": "user", "userId": "u1"}))["memories"]
    assert listed[0]["confidenceState"] == state


# --- decay (seed 001 DecayConfig) --------------------------------------------------------------

def test_decay_archives_below_threshold_skips_exempt_layers_and_never_deletes(tenant_a) -> None:
    old = tenant_a.add("Two hundred days old")           # 0.5 × 0.99^200 ≈ 0.067
    young = tenant_a.add("One hundred days old")         # 0.5 × 0.99^100 ≈ 0.183
    company = tenant_a.add("Company fact, old", "company", identifiers={})
    trivial = tenant_a.add("Unimportant from the start", importance=0.05)
    for memory, days in ((old, 200), (young, 100), (company, 400)):
        set_fields(tenant_a, memory, created_at=days_ago(days))
    assert run(maintenance.decay_run, tenant_a) == {"archived": 2}
    states = {m.content: memory_row(tenant_a, m.pk)["state"]
              for m in (old, young, company, trivial)}
    assert states == {"Two hundred days old": "archived", "One hundred days old": "active",
                      "Company fact, old": "active", "Unimportant from the start": "archived"}
    assert actions(tenant_a, old) == ["add", "archive"]
    assert str(old.pk) not in ids(searched(tenant_a, "Two hundred days old",
                                           threshold=0)["results"])
    assert get(tenant_a, old)["state"] == "archived"  # readable by id, not deleted
    assert run(maintenance.decay_run, tenant_a) == {"archived": 0}  # idempotent
    with tenant_scope(tenant_a.ctx):
        assert AuditEntry.objects.filter(action="memories_archived").count() == 1


def test_decay_follows_the_tenants_settings_and_restarts_after_restore(tenant_a) -> None:
    memory = tenant_a.add("Ten days old")
    set_fields(tenant_a, memory, created_at=days_ago(10))
    lifecycle(tenant_a, decay={"enabled": False, "ratePerDay": 0.5})
    assert run(maintenance.decay_run, tenant_a) == {"archived": 0}
    lifecycle(tenant_a, decay={"enabled": True, "ratePerDay": 0.5, "exemptLayers": []})
    assert run(maintenance.decay_run, tenant_a) == {"archived": 1}   # 0.5 × 0.5^10
    assert tenant_a.client.post(f"{M}/{memory.pk}/restore").status_code == 200
    assert run(maintenance.decay_run, tenant_a) == {"archived": 0}   # counts from the restore
    assert memory_row(tenant_a, memory.pk)["state"] == "active"


# --- purge of soft-deleted memories ------------------------------------------------------------

def test_purge_erases_deleted_memories_past_retention_only(tenant_a, tenant_b) -> None:
    expired = tenant_a.add("Deleted long ago")
    recent = tenant_a.add("Deleted yesterday")
    active = tenant_a.add("Never deleted")
    theirs = tenant_b.add("Globex, deleted long ago")
    for tenant, memory in ((tenant_a, expired), (tenant_a, recent), (tenant_b, theirs)):
        tenant.client.delete(f"{M}/{memory.pk}")
    set_fields(tenant_a, expired, deleted_at=days_ago(31))
    set_fields(tenant_a, recent, deleted_at=days_ago(1))
    set_fields(tenant_b, theirs, deleted_at=days_ago(31))
    assert run(maintenance.purge_deleted, tenant_a) == {"purged": 1}
    assert memory_row(tenant_a, expired.pk) is None
    assert memory_row(tenant_a, recent.pk)["state"] == "deleted"
    assert memory_row(tenant_a, active.pk)["state"] == "active"
    assert memory_row(tenant_b, theirs.pk)["state"] == "deleted"
    assert actions(tenant_a, expired) == ["add", "delete", "erase"]
    with tenant_scope(tenant_a.ctx):
        assert not MemoryHistory.objects.filter(memory_id=expired.pk,
                                                old_content__isnull=False).exists()
    assert run(maintenance.purge_deleted, tenant_a) == {"purged": 0}
    lifecycle(tenant_a, deletedRetentionDays=0.5)
    assert run(maintenance.purge_deleted, tenant_a) == {"purged": 1}
    assert memory_row(tenant_a, recent.pk) is None


# --- consolidation (seed 001 ConsolidationConfig) ----------------------------------------------

SHORT = "The user prefers dark mode in every editor"
LONG = "The user prefers dark mode in every editor, including the terminal"


def test_consolidation_merges_near_duplicates_within_one_scope(tenant_a) -> None:
    assert cosine(SHORT, LONG) >= 0.92
    older = tenant_a.add(SHORT, metadata={"tags": ["ui"], "source": {"type": "conversation"}})
    newer = tenant_a.add(LONG, metadata={"tags": ["ui", "terminal"], "extra": 1})
    set_fields(tenant_a, older, created_at=timezone.now() - timedelta(hours=2),
               access_count=2)
    set_fields(tenant_a, newer, access_count=3)
    other_user = tenant_a.add(LONG, identifiers={"userId": "u2"})
    unrelated = tenant_a.add("Quarterly taxes are due in April")
    lifecycle(tenant_a, consolidation={"maxMemoriesBeforeTrigger": 3})

    result = run(maintenance.consolidate, tenant_a)
    assert result == {"merged": 1, "candidates": 4, "triggered": 1}
    survivor, merged = reload(tenant_a, older), reload(tenant_a, newer)
    assert (survivor.state, survivor.content) == ("active", LONG)
    assert survivor.metadata["tags"] == ["ui", "terminal"]
    assert survivor.metadata["extra"] == 1 and survivor.metadata["source"]["type"] == \
        "conversation"
    assert [(e["id"], e["content"]) for e in survivor.metadata["mergedFrom"]] == [
        (str(older.pk), SHORT), (str(newer.pk), LONG)]
    assert survivor.access_count == 5 and survivor.version == 2
    expected = get_embedder().encode([LONG])[0]
    assert np.allclose(np.array(survivor.embedding), expected, atol=1e-5)
    assert (merged.state, merged.metadata["mergedInto"]) == ("archived", str(older.pk))
    assert actions(tenant_a, older) == ["add", "merge"]
    assert actions(tenant_a, newer) == ["add", "merge"]
    assert reload(tenant_a, other_user).state == "active"
    assert reload(tenant_a, unrelated).state == "active"
    assert run(maintenance.consolidate, tenant_a)["merged"] == 0   # idempotent
    found = ids(searched(tenant_a, LONG, threshold=0)["results"])
    assert str(older.pk) in found and str(newer.pk) not in found


def test_consolidation_waits_for_the_trigger_and_respects_its_settings(tenant_a) -> None:
    a = tenant_a.add(SHORT)
    b = tenant_a.add(SHORT + ".")
    assert run(maintenance.consolidate, tenant_a) == {"merged": 0, "candidates": 2,
                                                      "triggered": 0}   # default 1000
    lifecycle(tenant_a, consolidation={"maxMemoriesBeforeTrigger": 0, "targetLayers": ["team"]})
    assert run(maintenance.consolidate, tenant_a)["merged"] == 0       # user not targeted
    assert cosine(SHORT, SHORT + ".") < 0.9999
    on = {"maxMemoriesBeforeTrigger": 0, "targetLayers": ["user"], "enabled": True}
    lifecycle(tenant_a, consolidation={**on, "similarityThreshold": 0.9999})
    assert run(maintenance.consolidate, tenant_a)["merged"] == 0       # not similar enough
    lifecycle(tenant_a, consolidation={**on, "enabled": False})
    assert run(maintenance.consolidate, tenant_a)["merged"] == 0       # disabled
    lifecycle(tenant_a, consolidation=on)
    assert run(maintenance.consolidate, tenant_a)["merged"] == 1
    assert {reload(tenant_a, a).state, reload(tenant_a, b).state} == {"active", "archived"}


def test_a_restored_merged_memory_is_not_merged_again(tenant_a) -> None:
    older, newer = tenant_a.add(SHORT), tenant_a.add(LONG)
    lifecycle(tenant_a, consolidation={"maxMemoriesBeforeTrigger": 0})
    assert run(maintenance.consolidate, tenant_a)["merged"] == 1
    restored = body(tenant_a.client.post(f"{M}/{newer.pk}/restore"))["memory"]
    assert restored["state"] == "active" and "mergedInto" not in restored["metadata"]
    assert run(maintenance.consolidate, tenant_a)["merged"] == 0
    assert reload(tenant_a, older).state == "active"


def test_consolidation_never_crosses_tenants(tenant_a, tenant_b) -> None:
    mine = tenant_a.add(SHORT)
    tenant_b.add(LONG)
    lifecycle(tenant_a, consolidation={"maxMemoriesBeforeTrigger": 0})
    assert run(maintenance.consolidate, tenant_a)["merged"] == 0
    assert reload(tenant_a, mine).content == SHORT
