"""The memory endpoints of seed 001 over REST: add, get, update, delete, bulk, layers,
and the org → team → project hierarchy. List and filters are in test_memories_list.py."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.conf import settings

from tenants.layers import REQUIRED, Layer
from tests.contract import TenantApiContract
from tests.helpers import assert_error, body, memory_row, snapshot

pytestmark = pytest.mark.django_db

URL = "/api/v1/memories"

FULL_IDENTIFIERS = {
    "agentId": "a1", "userId": "u1", "sessionId": "s1", "projectId": "p1",
    "teamId": "t1", "orgId": "o1",
}


def add(tenant: Any, content: str, layer: str = "user", **extra: Any) -> Any:
    payload = {"content": content, "layer": layer,
               "identifiers": extra.pop("identifiers", {"userId": "u1"}), **extra}
    return tenant.client.post(URL, payload, format="json")


def added(tenant: Any, content: str, layer: str = "user", **extra: Any) -> dict[str, Any]:
    response = add(tenant, content, layer, **extra)
    assert response.status_code == 201, response.content
    return body(response)


def get(tenant: Any, memory_id: str, **params: str) -> Any:
    return tenant.client.get(f"{URL}/{memory_id}", params)


def patch(tenant: Any, memory_id: str, data: Any, **headers: str) -> Any:
    return tenant.client.patch(f"{URL}/{memory_id}", data, format="json", headers=headers)


# --- add and get ------------------------------------------------------------------------

def test_it_adds_a_memory_and_returns_it_with_embedding_generated(tenant_a) -> None:
    data = added(tenant_a, "User prefers dark mode", metadata={"tags": ["ui"]})
    assert set(data) == {"memory", "embeddingGenerated"}
    assert data["embeddingGenerated"] is True
    memory = data["memory"]
    uuid.UUID(memory["id"])
    assert memory["content"] == "User prefers dark mode"
    assert memory["layer"] == "user"
    assert memory["identifiers"] == {"userId": "u1", "companyId": tenant_a.tenant.slug}
    assert memory["metadata"] == {"tags": ["ui"]}
    assert memory["version"] == 1
    assert memory["createdAt"] and memory["updatedAt"]
    assert "embedding" not in memory
    row = memory_row(tenant_a, memory["id"])
    assert row is not None and row["content"] == "User prefers dark mode"


def test_it_reuses_the_embedding_when_the_same_content_is_added_again(tenant_a) -> None:
    first = added(tenant_a, "The deploy runs on Fridays")
    second = added(tenant_a, "The deploy runs on Fridays")
    assert (first["embeddingGenerated"], second["embeddingGenerated"]) == (True, False)
    assert first["memory"]["id"] != second["memory"]["id"]
    vectors = [body(get(tenant_a, d["memory"]["id"], includeEmbedding="true"))["memory"]
               ["embedding"] for d in (first, second)]
    assert len(vectors[0]) == 384 and vectors[0] == vectors[1]


def test_it_gets_a_memory_with_an_etag(tenant_a) -> None:
    memory = added(tenant_a, "Standup is at 9:30")["memory"]
    response = get(tenant_a, memory["id"])
    assert response.status_code == 200
    assert response["ETag"] == '"1"'
    got = body(response)["memory"]
    assert got["id"] == memory["id"] and got["content"] == "Standup is at 9:30"
    assert got["referenceCount"] == 1


def test_it_answers_404_for_a_missing_or_malformed_id(tenant_a) -> None:
    for memory_id in (str(uuid.uuid4()), "not-a-uuid", "1"):
        error = assert_error(get(tenant_a, memory_id), 404, "MEMORY_NOT_FOUND")
        assert error["retryable"] is False


# --- update -----------------------------------------------------------------------------

def test_it_re_embeds_when_the_content_changes(tenant_a) -> None:
    memory = added(tenant_a, "User drinks coffee")["memory"]
    before = body(get(tenant_a, memory["id"], includeEmbedding="true"))["memory"]
    response = tenant_a.client.patch(f"{URL}/{memory['id']}?includeEmbedding=true",
                                     {"content": "User switched to green tea"}, format="json")
    assert response.status_code == 200, response.content
    data = body(response)
    assert data["embeddingRegenerated"] is True
    after = data["memory"]
    assert after["content"] == "User switched to green tea"
    assert after["embedding"] != before["embedding"] and len(after["embedding"]) == 384
    assert after["contentHash"] != before["contentHash"]
    assert after["version"] == 2 and response["ETag"] == '"2"'
    assert after["updatedAt"] > before["updatedAt"]
    stored = body(get(tenant_a, memory["id"], includeEmbedding="true"))["memory"]
    # float32 read back through pgvector's text form: equal to float32 precision
    assert stored["embedding"] == pytest.approx(after["embedding"], abs=1e-6)
    assert stored["embedding"] != pytest.approx(before["embedding"], abs=1e-3)


def test_it_merges_metadata_without_re_embedding(tenant_a) -> None:
    memory = added(tenant_a, "Prefers pytest", metadata={"tags": ["py"], "team": "core",
                                                          "nested": {"a": 1}})["memory"]
    before = memory_row(tenant_a, memory["id"])
    response = patch(tenant_a, memory["id"], {"metadata": {"team": "infra", "nested": {"b": 2},
                                                           "new": True}})
    assert response.status_code == 200, response.content
    data = body(response)
    assert data["embeddingRegenerated"] is False
    # shallow: top-level keys merge, nested objects are replaced
    assert data["memory"]["metadata"] == {"tags": ["py"], "team": "infra", "nested": {"b": 2},
                                          "new": True}
    assert data["memory"]["version"] == 2
    assert data["memory"]["updatedAt"] > memory["updatedAt"]
    after = memory_row(tenant_a, memory["id"])
    assert after["embedding"] == before["embedding"]
    assert after["content_hash"] == before["content_hash"]


def test_it_removes_a_metadata_key_patched_to_null(tenant_a) -> None:
    memory = added(tenant_a, "Uses vim", metadata={"editor": "vim", "keep": 1})["memory"]
    response = patch(tenant_a, memory["id"], {"metadata": {"editor": None}})
    assert body(response)["memory"]["metadata"] == {"keep": 1}
    assert memory_row(tenant_a, memory["id"])["metadata"] == {"keep": 1}


def test_it_updates_scoring_fields(tenant_a) -> None:
    memory = added(tenant_a, "Important fact")["memory"]
    data = body(patch(tenant_a, memory["id"], {"importance": 0.9, "decayRate": 0.1}))
    assert (data["memory"]["importance"], data["memory"]["decayRate"]) == (0.9, 0.1)


@pytest.mark.parametrize("how", ["body", "if-match", "weak-if-match"])
def test_it_refuses_a_stale_version(tenant_a, how: str) -> None:
    memory = added(tenant_a, "Version one")["memory"]
    assert patch(tenant_a, memory["id"], {"metadata": {"x": 1}}).status_code == 200
    before = memory_row(tenant_a, memory["id"])
    update = {"content": "Overwritten by a stale client"}
    if how == "body":
        response = patch(tenant_a, memory["id"], {**update, "version": 1})
    else:
        tag = '"1"' if how == "if-match" else 'W/"1"'
        response = patch(tenant_a, memory["id"], update, **{"If-Match": tag})
    error = assert_error(response, 409, "VERSION_CONFLICT")
    assert error["details"] == {"expected": 1, "current": 2}
    assert memory_row(tenant_a, memory["id"]) == before


def test_it_accepts_the_current_version(tenant_a) -> None:
    memory = added(tenant_a, "Version one")["memory"]
    etag = get(tenant_a, memory["id"])["ETag"]
    response = patch(tenant_a, memory["id"], {"metadata": {"x": 1}}, **{"If-Match": etag})
    assert response.status_code == 200 and response["ETag"] == '"2"'
    response = patch(tenant_a, memory["id"], {"metadata": {"x": 2}, "version": 2})
    assert body(response)["memory"]["version"] == 3


def test_it_answers_memory_not_found_when_updating_a_missing_id(tenant_a) -> None:
    for memory_id in (str(uuid.uuid4()), "garbage"):
        assert_error(patch(tenant_a, memory_id, {"content": "x"}), 404, "MEMORY_NOT_FOUND")


def test_it_changes_nothing_when_an_update_is_invalid(tenant_a) -> None:
    memory = added(tenant_a, "Stays as is", metadata={"k": "v"})["memory"]
    before = memory_row(tenant_a, memory["id"])
    too_long = "x" * (settings.MEMORY_MAX_CONTENT_LENGTH + 1)
    assert_error(patch(tenant_a, memory["id"], {"content": too_long}), 400, "CONTENT_TOO_LONG")
    assert_error(patch(tenant_a, memory["id"], {}), 400, "INVALID_INPUT")
    assert_error(patch(tenant_a, memory["id"], {"metadata": {"tags": "nope"}}), 400,
                 "INVALID_INPUT")
    assert memory_row(tenant_a, memory["id"]) == before


# --- delete -----------------------------------------------------------------------------

def test_it_deletes_idempotently(tenant_a) -> None:
    memory = added(tenant_a, "Short-lived")["memory"]
    keep = added(tenant_a, "Long-lived")["memory"]
    for memory_id in (memory["id"], memory["id"], str(uuid.uuid4()), "not-a-uuid"):
        response = tenant_a.client.delete(f"{URL}/{memory_id}")
        assert response.status_code == 200
        assert body(response) == {"success": True}
    row = memory_row(tenant_a, memory["id"])  # soft delete: kept, hidden, restorable
    assert (row["state"], row["deleted_at"] is not None) == ("deleted", True)
    assert_error(get(tenant_a, memory["id"]), 404, "MEMORY_NOT_FOUND")
    assert memory_row(tenant_a, keep["id"])["state"] == "active"


# --- bulk -------------------------------------------------------------------------------

def test_it_bulk_adds_in_one_request(tenant_a) -> None:
    items = [{"content": f"Bulk fact {i}", "layer": "user", "identifiers": {"userId": "u1"}}
             for i in range(3)]
    items.append({"content": "Bulk fact 0", "layer": "project",
                  "identifiers": {"projectId": "p9"}})
    response = tenant_a.client.post(f"{URL}/bulk", {"memories": items}, format="json")
    assert response.status_code == 201, response.content
    results = body(response)["results"]
    assert [r["memory"]["content"] for r in results] == [i["content"] for i in items]
    # the repeated text is embedded once
    assert [r["embeddingGenerated"] for r in results] == [True, True, True, False]
    assert results[3]["memory"]["identifiers"]["projectId"] == "p9"
    assert len(snapshot(tenant_a)) == 4


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ({"content": "x", "layer": "galaxy", "identifiers": {}}, "INVALID_LAYER"),
        ({"content": "x", "layer": "session", "identifiers": {"userId": "u1"}},
         "MISSING_IDENTIFIER"),
        ({"content": "x" * (settings.MEMORY_MAX_CONTENT_LENGTH + 1), "layer": "user",
          "identifiers": {"userId": "u1"}}, "CONTENT_TOO_LONG"),
        ({"content": "x", "layer": "user", "identifiers": {"userId": "u1"},
          "metadata": {"source": {"type": "carrier-pigeon"}}}, "INVALID_INPUT"),
    ],
)
def test_it_fails_the_whole_batch_on_one_invalid_item(tenant_a, bad, code) -> None:
    tenant_a.add("Already here")
    before = snapshot(tenant_a)
    good = {"content": "Good item", "layer": "user", "identifiers": {"userId": "u1"}}
    response = tenant_a.client.post(f"{URL}/bulk", {"memories": [good, good, bad, good]},
                                    format="json")
    error = assert_error(response, 400, code)
    assert error["details"]["index"] == 2
    assert error["operation"] == "memory.bulk_add"
    assert snapshot(tenant_a) == before


def test_it_names_the_index_of_an_item_with_wrong_types(tenant_a) -> None:
    good = {"content": "Good item", "layer": "user", "identifiers": {"userId": "u1"}}
    response = tenant_a.client.post(f"{URL}/bulk", {"memories": [good, {"content": 5}]},
                                    format="json")
    assert assert_error(response, 400, "INVALID_INPUT")["details"].get("index") == 1


def test_it_limits_bulk_size_and_refuses_an_empty_batch(tenant_a, settings) -> None:
    settings.MEMORY_MAX_BULK_ITEMS = 2
    item = {"content": "x", "layer": "user", "identifiers": {"userId": "u1"}}
    assert_error(tenant_a.client.post(f"{URL}/bulk", {"memories": [item] * 3}, format="json"),
                 400, "INVALID_INPUT")
    assert_error(tenant_a.client.post(f"{URL}/bulk", {"memories": []}, format="json"),
                 400, "INVALID_INPUT")
    assert snapshot(tenant_a) == []


def test_it_bulk_deletes_and_reports_malformed_ids(tenant_a) -> None:
    ids = [tenant_a.add(f"Doomed {i}").pk for i in range(3)]
    keep = tenant_a.add("Survivor")
    payload = {"ids": [str(ids[0]), str(ids[1]), str(uuid.uuid4()), "junk", str(ids[0])]}
    response = tenant_a.client.post(f"{URL}/bulk-delete", payload, format="json")
    assert response.status_code == 200
    assert body(response) == {"deleted": 2, "failed": ["junk"]}
    assert [memory_row(tenant_a, i)["state"] for i in ids] == ["deleted", "deleted", "active"]
    assert memory_row(tenant_a, keep.pk) is not None
    assert_error(tenant_a.client.post(f"{URL}/bulk-delete", {"ids": []}, format="json"),
                 400, "INVALID_INPUT")


# --- layers (seed 001, "Layer Requirements Matrix") ---------------------------------------

def test_it_uses_the_layer_matrix_of_seed_001() -> None:
    assert {layer.value: list(names) for layer, names in REQUIRED.items()} == {
        "agent": ["agentId", "userId"], "user": ["userId"], "session": ["userId", "sessionId"],
        "project": ["projectId"], "team": ["teamId"], "org": ["orgId"],
        "company": ["companyId"],
    }


@pytest.mark.parametrize("layer", [x.value for x in Layer])
def test_it_adds_and_lists_every_layer_with_its_identifiers(tenant_a, layer: str) -> None:
    required = REQUIRED[Layer(layer)]
    identifiers = {k: FULL_IDENTIFIERS[k] for k in required if k != "companyId"}
    memory = added(tenant_a, f"A {layer} memory", layer, identifiers=identifiers)["memory"]
    expected = {**identifiers, "companyId": tenant_a.tenant.slug}
    assert memory["layer"] == layer and memory["identifiers"] == expected
    response = tenant_a.client.get(URL, {"layer": layer, **identifiers})
    assert response.status_code == 200, response.content
    assert [m["id"] for m in body(response)["memories"]] == [memory["id"]]


@pytest.mark.parametrize("layer", [x.value for x in Layer if x is not Layer.COMPANY])
def test_it_requires_each_identifier_of_a_layer(tenant_a, layer: str) -> None:
    required = REQUIRED[Layer(layer)]
    for missing in required:
        identifiers = {k: FULL_IDENTIFIERS[k] for k in required if k != missing}
        for response in (add(tenant_a, "x", layer, identifiers=identifiers),
                         tenant_a.client.get(URL, {"layer": layer, **identifiers})):
            error = assert_error(response, 400, "MISSING_IDENTIFIER")
            assert error["details"]["required"] == list(required)
            assert missing in error["details"]["missing"]
            assert missing in error["message"]
            assert error["retryable"] is False
    assert snapshot(tenant_a) == []


def test_it_fills_company_id_with_the_tenant_and_refuses_another(tenant_a, tenant_b) -> None:
    memory = added(tenant_a, "Company standard", "company", identifiers={})["memory"]
    assert memory["identifiers"] == {"companyId": tenant_a.tenant.slug}
    same = added(tenant_a, "Company standard 2", "company",
                 identifiers={"companyId": tenant_a.tenant.slug})["memory"]
    assert same["identifiers"] == {"companyId": tenant_a.tenant.slug}
    response = add(tenant_a, "Sneaky", "company",
                   identifiers={"companyId": tenant_b.tenant.slug})
    assert_error(response, 400, "INVALID_INPUT")
    assert len(snapshot(tenant_a)) == 2 and snapshot(tenant_b) == []


@pytest.mark.parametrize("layer", ["galaxy", "", "USER", "users", None, 7])
def test_it_answers_invalid_layer_not_retryable(tenant_a, layer) -> None:
    response = add(tenant_a, "x", layer)
    if isinstance(layer, str) and layer:
        error = assert_error(response, 400, "INVALID_LAYER")
        assert error["retryable"] is False
        assert error["details"]["allowed"] == [x.value for x in Layer]
    else:
        assert_error(response, 400)
    if isinstance(layer, str) and layer:
        listed = tenant_a.client.get(URL, {"layer": layer, "userId": "u1"})
        assert assert_error(listed, 400, "INVALID_LAYER")["retryable"] is False


def test_it_answers_content_too_long_with_the_limit(tenant_a) -> None:
    limit = settings.MEMORY_MAX_CONTENT_LENGTH
    error = assert_error(add(tenant_a, "y" * (limit + 1)), 400, "CONTENT_TOO_LONG")
    assert error["details"]["max_length"] == limit
    assert error["retryable"] is False
    assert snapshot(tenant_a) == []
    assert added(tenant_a, "y" * limit)["memory"]["content"] == "y" * limit


# --- hierarchy ----------------------------------------------------------------------------

def make_hierarchy(tenant: Any) -> None:
    for url, data in (("/api/v1/orgs", {"orgId": "o1", "name": "Engineering"}),
                      ("/api/v1/teams", {"teamId": "t1", "orgId": "o1"}),
                      ("/api/v1/projects", {"projectId": "p1", "teamId": "t1"})):
        response = tenant.client.post(url, data, format="json")
        assert response.status_code == 201, response.content


def test_it_registers_the_hierarchy(tenant_a) -> None:
    make_hierarchy(tenant_a)
    projects = body(tenant_a.client.get("/api/v1/projects"))
    assert [(p["projectId"], p["teamId"], p["orgId"]) for p in projects] == [("p1", "t1", "o1")]
    assert [t["orgId"] for t in body(tenant_a.client.get("/api/v1/teams"))] == ["o1"]
    assert body(tenant_a.client.get("/api/v1/orgs/o1"))["name"] == "Engineering"
    response = tenant_a.client.post("/api/v1/orgs", {"orgId": "o1"}, format="json")
    assert_error(response, 409, "ALREADY_EXISTS")
    response = tenant_a.client.post("/api/v1/teams", {"teamId": "t2", "orgId": "nope"},
                                    format="json")
    assert_error(response, 400, "INVALID_INPUT")


def test_it_resolves_team_and_org_from_a_registered_project(tenant_a) -> None:
    make_hierarchy(tenant_a)
    team = added(tenant_a, "Team uses trunk-based development", "team",
                 identifiers={"projectId": "p1"})["memory"]
    assert team["identifiers"] == {"projectId": "p1", "teamId": "t1", "orgId": "o1",
                                   "companyId": tenant_a.tenant.slug}
    org = added(tenant_a, "Org requires SSO", "org", identifiers={"orgId": "o1"})["memory"]
    via_team = added(tenant_a, "Org runs quarterly reviews", "org",
                     identifiers={"teamId": "t1"})["memory"]
    assert via_team["identifiers"]["orgId"] == "o1"
    listed = body(tenant_a.client.get(URL, {"layer": "org", "projectId": "p1"}))
    assert {m["id"] for m in listed["memories"]} == {org["id"], via_team["id"]}
    assert listed["totalCount"] == 2
    listed = body(tenant_a.client.get(URL, {"layer": "team", "projectId": "p1"}))
    assert [m["id"] for m in listed["memories"]] == [team["id"]]


def test_it_needs_a_registered_project_to_reach_the_team_layer(tenant_a) -> None:
    response = add(tenant_a, "x", "team", identifiers={"projectId": "unregistered"})
    assert assert_error(response, 400, "MISSING_IDENTIFIER")["details"]["required"] == ["teamId"]


class TestMemoryApiContract(TenantApiContract):
    """The tenant API contract (``tests.contract``) for this module's endpoints."""

    operations = (
        'memory.add', 'memory.bulk_add', 'memory.get', 'memory.batch_get', 'memory.update',
        'memory.delete',
        'memory.delete_hard', 'memory.bulk_delete', 'memory.bulk_delete_hard',
        'memory.list', 'memory.restore', 'memory.history', 'memory.erase',
        'memory.export', 'capabilities.get',
    )
