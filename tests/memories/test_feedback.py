"""Feedback rewards (``POST /api/v1/memories/feedback``) and Memory-R1 pruning
(``memories.services.maintenance.prune_by_feedback``): all-or-nothing recording, no leak of which id
was foreign, pruned memories out of search/recall/list, restore un-prunes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memories.models import Memory, MemoryFeedback, MemoryHistory
from memories.services import maintenance
from tenants import services as tenant_services
from tenants.context import tenant_scope
from tenants.models import AuditEntry
from tests.contract import TenantApiContract
from tests.helpers import assert_error, body, memory_row
from tests.retrieval_helpers import ids, recalled, reload, searched

pytestmark = pytest.mark.django_db

M = "/api/v1/memories"
FEEDBACK = f"{M}/feedback"
MISSING_ID = "01a1fb00-0000-7000-8000-00000000abcd"


def feedback(tenant: Any, memory_ids: list[Any], reward: Any, **extra: Any) -> Any:
    payload = {"memoryIds": [str(i) for i in memory_ids], "reward": reward, **extra}
    return tenant.client.post(FEEDBACK, payload, format="json")


def stored_feedback(tenant: Any) -> list[tuple[str, float, str]]:
    with tenant_scope(tenant.ctx):
        return [(str(f.memory_id), f.reward, f.query)
                for f in MemoryFeedback.objects.order_by("created_at")]


def prune(tenant: Any) -> dict[str, int]:
    with tenant_scope(tenant.ctx):
        return maintenance.prune_by_feedback(tenant.ctx)


def rate(tenant: Any, memory: Memory, rewards: list[float]) -> None:
    for reward in rewards:
        assert feedback(tenant, [memory.pk], reward).status_code == 200


# --- feedback ----------------------------------------------------------------------------------

def test_it_records_one_reward_per_memory_and_a_running_mean(tenant_a) -> None:
    a, b = tenant_a.add("Helpful memory"), tenant_a.add("Another memory")
    response = feedback(tenant_a, [a.pk, b.pk, a.pk], 0.5, query="what helps?")
    assert response.status_code == 200, response.content
    assert body(response) == {"recorded": 2, "memories": [
        {"id": str(a.pk), "feedbackCount": 1, "meanReward": 0.5},
        {"id": str(b.pk), "feedbackCount": 1, "meanReward": 0.5}]}
    assert body(feedback(tenant_a, [a.pk], -1))["memories"][0] == {
        "id": str(a.pk), "feedbackCount": 2, "meanReward": -0.25}
    assert stored_feedback(tenant_a) == [(str(a.pk), 0.5, "what helps?"),
                                         (str(b.pk), 0.5, "what helps?"),
                                         (str(a.pk), -1.0, "")]
    got = body(tenant_a.client.get(f"{M}/{a.pk}"))["memory"]
    assert (got["feedbackCount"], got["meanReward"]) == (2, -0.25)


def test_it_takes_feedback_for_archived_but_not_for_deleted_memories(tenant_a) -> None:
    archived, deleted = tenant_a.add("Archived"), tenant_a.add("Deleted")
    with tenant_scope(tenant_a.ctx):
        Memory.objects.filter(pk=archived.pk).update(state="archived")
    tenant_a.client.delete(f"{M}/{deleted.pk}")
    assert feedback(tenant_a, [archived.pk], 1).status_code == 200
    assert_error(feedback(tenant_a, [deleted.pk], 1), 404, "MEMORY_NOT_FOUND")


def test_a_foreign_id_fails_the_whole_request_like_a_missing_one(tenant_a, tenant_b) -> None:
    mine = tenant_a.add("Acme memory")
    theirs = tenant_b.add("Globex memory")
    missing = feedback(tenant_a, [mine.pk, MISSING_ID], -1)
    foreign = feedback(tenant_a, [mine.pk, theirs.pk], -1)
    for response in (missing, foreign):
        assert_error(response, 404, "MEMORY_NOT_FOUND")
    assert missing.content == foreign.content  # same bytes: nothing says which id
    assert str(theirs.pk).encode() not in foreign.content
    assert stored_feedback(tenant_a) == [] and stored_feedback(tenant_b) == []
    assert reload(tenant_a, mine).feedback_count == 0
    assert reload(tenant_b, theirs).feedback_count == 0
    with tenant_scope(tenant_a.ctx):  # the security log has it (test_platform_role.py)
        assert not AuditEntry.objects.filter(target_id=str(theirs.pk)).exists()


@pytest.mark.parametrize(
    "payload",
    [
        {"memoryIds": ["{id}"], "reward": 5},
        {"memoryIds": ["{id}"], "reward": -1.01},
        {"memoryIds": ["{id}"], "reward": "0.5"},
        {"memoryIds": ["{id}"], "reward": True},
        {"memoryIds": ["{id}"], "reward": None},
        {"memoryIds": ["{id}"]},
        {"memoryIds": ["{id}", "not-a-uuid"], "reward": 1},
        {"memoryIds": ["{id}", 5], "reward": 1},
        {"memoryIds": [], "reward": 1},
        {"memoryIds": "{id}", "reward": 1},
        {"memoryIds": ["{id}"] * 101, "reward": 1},
        {"reward": 1},
        {"memoryIds": ["{id}"], "reward": 1, "query": 5},
        {"memoryIds": ["{id}"], "reward": 1, "query": "a\u0000b"},
        {"memoryIds": ["{id}"], "reward": 1, "query": "q" * 2001},
    ],
)
def test_it_refuses_bad_feedback_and_records_nothing(tenant_a, payload) -> None:
    memory = tenant_a.add("Target")
    raw = json.dumps(payload).replace("{id}", str(memory.pk))
    response = tenant_a.client.post(FEEDBACK, raw, content_type="application/json")
    assert_error(response, 400, "INVALID_INPUT")
    assert stored_feedback(tenant_a) == []
    assert reload(tenant_a, memory).feedback_count == 0


@pytest.mark.parametrize("raw", ['{"memoryIds": ["%s"], "reward": NaN}',
                                 '{"memoryIds": ["%s"], "reward": Infinity}',
                                 '{"memoryIds": ["%s"], "reward": 1e999}', "[1]", "nope"])
def test_it_refuses_non_finite_rewards_and_malformed_bodies(tenant_a, raw: str) -> None:
    memory = tenant_a.add("Target")
    text = raw % memory.pk if "%s" in raw else raw
    assert_error(tenant_a.client.post(FEEDBACK, text, content_type="application/json"), 400)
    assert stored_feedback(tenant_a) == []


# --- pruning (seed 001 "Memory-R1 Pruning") ----------------------------------------------------

def test_it_prunes_consistently_unhelpful_memories_out_of_retrieval(tenant_a) -> None:
    useless = tenant_a.add("Kettle descaling tip that never helps")
    unsure = tenant_a.add("Kettle descaling tip rated twice")
    mixed = tenant_a.add("Kettle descaling tip with mixed ratings")
    rate(tenant_a, useless, [-1, -0.5, -0.2])      # mean −0.57
    rate(tenant_a, unsure, [-1, -1])               # too few
    rate(tenant_a, mixed, [-1, 0.5, 0.2])          # mean −0.1
    assert prune(tenant_a) == {"pruned": 1}

    row = memory_row(tenant_a, useless.pk)
    assert row["pruned_at"] is not None and row["state"] == "active"
    assert memory_row(tenant_a, unsure.pk)["pruned_at"] is None
    assert memory_row(tenant_a, mixed.pk)["pruned_at"] is None
    found = ids(searched(tenant_a, "kettle descaling tip", threshold=0)["results"])
    assert str(useless.pk) not in found and str(unsure.pk) in found
    assert str(useless.pk) not in ids(recalled(tenant_a, "kettle descaling tip",
                                               min_confidence=0))
    listed = body(tenant_a.client.get(M, {"layer": "user", "userId": "u1"}))
    assert str(useless.pk) not in [m["id"] for m in listed["memories"]]
    assert listed["totalCount"] == 2
    got = body(tenant_a.client.get(f"{M}/{useless.pk}"))["memory"]  # still readable by id
    assert got["prunedAt"] is not None
    with tenant_scope(tenant_a.ctx):
        (entry,) = MemoryHistory.objects.filter(memory_id=useless.pk, action="prune")
        assert entry.details["feedbackCount"] == 3
        (audit,) = AuditEntry.objects.filter(action="memories_pruned")
        assert audit.details["ids"] == [str(useless.pk)]
    assert prune(tenant_a) == {"pruned": 0}   # idempotent


def test_restore_unprunes_and_starts_a_fresh_reward_record(tenant_a) -> None:
    memory = tenant_a.add("Pruned then restored")
    rate(tenant_a, memory, [-1, -1, -1])
    assert prune(tenant_a) == {"pruned": 1}
    data = body(tenant_a.client.post(f"{M}/{memory.pk}/restore"))
    assert data["restored"] is True
    assert (data["memory"]["prunedAt"], data["memory"]["feedbackCount"],
            data["memory"]["meanReward"]) == (None, 0, None)
    assert prune(tenant_a) == {"pruned": 0}
    assert str(memory.pk) in ids(searched(tenant_a, "Pruned then restored",
                                          threshold=0)["results"])
    assert len(stored_feedback(tenant_a)) == 3   # the rewards themselves are kept


def test_pruning_follows_the_tenants_settings_and_stays_in_the_tenant(tenant_a,
                                                                      tenant_b) -> None:
    mine = tenant_a.add("Rated once, badly")
    theirs = tenant_b.add("Globex, rated badly")
    rate(tenant_a, mine, [-0.1])
    rate(tenant_b, theirs, [-1, -1, -1])
    assert prune(tenant_a) == {"pruned": 0}
    with tenant_scope(tenant_a.ctx):
        tenant_services.tenant_settings_update(tenant_a.ctx, patch={"lifecycle": {
            "pruning": {"minFeedback": 1, "threshold": 0}}})
    assert prune(tenant_a) == {"pruned": 1}
    assert memory_row(tenant_b, theirs.pk)["pruned_at"] is None
    assert prune(tenant_b) == {"pruned": 1}


def test_hard_delete_removes_the_feedback_of_an_erased_memory(tenant_a) -> None:
    memory = tenant_a.add("Rated and erased")
    rate(tenant_a, memory, [1])
    assert feedback(tenant_a, [memory.pk], 1, query="private question").status_code == 200
    tenant_a.client.delete(f"{M}/{memory.pk}?hard=true")
    assert stored_feedback(tenant_a) == []


class TestFeedbackApiContract(TenantApiContract):
    """The tenant API contract (``tests.contract``) for this module's endpoints."""

    operations = ('memory.feedback',)
