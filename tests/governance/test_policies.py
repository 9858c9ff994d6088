"""Tenant policies (seed 001 "Governance Validation") through the API: CRUD with validation at
save, enforcement on add and update (422 POLICY_VIOLATION, audit entry, review item), PII
handling, the other rules, search filtering, the "try it" endpoint and the admin role."""

from __future__ import annotations

from typing import Any

import pytest
import regex

from governance.models import Policy, ReviewItem
from memories.models import Memory
from tenants.context import tenant_scope
from tenants.models import AuditEntry
from tests.contract import TenantApiContract
from tests.helpers import assert_error, body, new_key, snapshot
from tests.retrieval_helpers import searched

pytestmark = pytest.mark.django_db

P = "/api/v1/policies"
M = "/api/v1/memories"


def create(tenant: Any, **fields: Any) -> Any:
    return tenant.client.post(P, {"name": "house rules", **fields}, format="json")


def created(tenant: Any, **fields: Any) -> dict[str, Any]:
    response = create(tenant, **fields)
    assert response.status_code == 201, response.content
    return body(response)


def add(client: Any, content: str, layer: str = "user", **extra: Any) -> Any:
    payload = {"content": content, "layer": layer,
               "identifiers": extra.pop("identifiers", {"userId": "u1"}), **extra}
    return client.post(M, payload, format="json")


def audit(tenant: Any, action: str) -> list[dict[str, Any]]:
    response = tenant.client.get("/api/v1/audit", {"action": action})
    assert response.status_code == 200, response.content
    return body(response)["results"]


def policy_names(tenant: Any) -> list[str]:
    return [p["name"] for p in body(tenant.client.get(P))["policies"]]


def key_client(tenant: Any, roles: list[str]) -> tuple[str, Any]:
    """A new key of ``tenant`` with ``roles``: its prefix and a client using it."""
    return new_key(tenant, name="extra", roles=roles)


def memory_count(tenant: Any) -> int:
    with tenant_scope(tenant.ctx):
        return Memory.objects.count()


# --- CRUD and validation at save --------------------------------------------------------

def test_it_creates_lists_updates_and_deletes_a_policy(tenant_a) -> None:
    policy = created(tenant_a, denied_terms=["falcon"], pii_handling="redact")
    assert policy["name"] == "house rules"
    assert policy["denied_terms"] == ["falcon"]
    assert policy["pii_handling"] == "redact"
    assert policy["enabled"] is True
    assert policy["updated_by"].startswith("api_key:")
    assert body(tenant_a.client.get(f"{P}/{policy['id']}"))["id"] == policy["id"]
    response = tenant_a.client.patch(f"{P}/{policy['id']}", {"enabled": False}, format="json")
    assert response.status_code == 200, response.content
    assert body(response)["enabled"] is False
    assert body(response)["denied_terms"] == ["falcon"]
    assert policy_names(tenant_a) == ["house rules"]
    assert tenant_a.client.delete(f"{P}/{policy['id']}").status_code == 204
    assert policy_names(tenant_a) == []
    assert_error(tenant_a.client.get(f"{P}/{policy['id']}"), 404, "NOT_FOUND")
    actions = [e["action"] for e in body(tenant_a.client.get("/api/v1/audit"))["results"]]
    assert actions[:3] == ["policy_deleted", "policy_updated", "policy_created"]


@pytest.mark.parametrize("pattern", ["(", "[a-", "a{2,1}", "(?<=a+)b)"])
def test_it_refuses_an_invalid_regex_with_the_compiler_message(tenant_a, pattern) -> None:
    try:
        regex.compile(pattern, regex.IGNORECASE)
    except regex.error as err:
        message = str(err)
    else:  # pragma: no cover - the case itself would be wrong
        pytest.fail(f"{pattern!r} compiles")
    error = assert_error(create(tenant_a, denied_patterns=["ok", pattern]), 400,
                         "INVALID_INPUT")
    assert error["details"]["error"] == message
    assert error["details"]["pattern"] == pattern
    assert policy_names(tenant_a) == []


@pytest.mark.parametrize("pattern", ["(a+)+$", "(x+x+)+y", "([a-z]+)*$", r"(\w+\s?)*$"])
def test_it_refuses_a_catastrophic_pattern(tenant_a, pattern) -> None:
    error = assert_error(create(tenant_a, denied_patterns=[pattern]), 400, "INVALID_INPUT")
    assert error["details"] == {"pattern": pattern, "error": "timeout"}
    assert policy_names(tenant_a) == []


def test_it_refuses_a_catastrophic_pattern_on_update_and_keeps_the_old_one(tenant_a) -> None:
    policy = created(tenant_a, denied_patterns=[r"secret\d+"])
    response = tenant_a.client.patch(f"{P}/{policy['id']}", {"denied_patterns": ["(a+)+$"]},
                                     format="json")
    assert_error(response, 400, "INVALID_INPUT")
    assert body(tenant_a.client.get(f"{P}/{policy['id']}"))["denied_patterns"] == [r"secret\d+"]


@pytest.mark.parametrize("fields", [
    {"name": ""}, {"name": "   "}, {"bogus": 1}, {"pii_handling": "shred"},
    {"writable_layers": ["attic"]}, {"max_content_length": 0}, {"denied_terms": "falcon"},
    {"enabled": "yes"},
])
def test_it_refuses_an_invalid_definition(tenant_a, fields) -> None:
    assert_error(create(tenant_a, **fields), 400, "INVALID_INPUT")
    assert policy_names(tenant_a) == []


@pytest.mark.parametrize("name", ["", "   "])
def test_it_refuses_renaming_a_policy_to_a_blank_name(tenant_a, name) -> None:
    policy = created(tenant_a)
    response = tenant_a.client.patch(f"{P}/{policy['id']}", {"name": name}, format="json")
    assert_error(response, 400, "INVALID_INPUT")
    assert policy_names(tenant_a) == ["house rules"]


def test_it_refuses_a_duplicate_name(tenant_a) -> None:
    created(tenant_a)
    assert_error(create(tenant_a), 400, "INVALID_INPUT")
    assert policy_names(tenant_a) == ["house rules"]


def test_a_reader_key_cannot_write_policies(tenant_a) -> None:
    policy = created(tenant_a, denied_terms=["falcon"])
    _, reader = key_client(tenant_a, ["reader"])
    assert_error(reader.post(P, {"name": "mine"}, format="json"), 403, "UNAUTHORIZED")
    assert_error(reader.patch(f"{P}/{policy['id']}", {"enabled": False}, format="json"),
                 403, "UNAUTHORIZED")
    assert_error(reader.delete(f"{P}/{policy['id']}"), 403, "UNAUTHORIZED")
    assert policy_names(tenant_a) == ["house rules"]
    assert body(tenant_a.client.get(f"{P}/{policy['id']}"))["enabled"] is True


# --- enforcement on writes --------------------------------------------------------------

def test_a_denied_term_refuses_the_write_with_audit_and_review(tenant_a) -> None:
    policy = created(tenant_a, denied_terms=["project falcon"])
    before = snapshot(tenant_a)
    error = assert_error(add(tenant_a.client, "We discussed PROJECT FALCON, mail a@example.com"),
                         422, "POLICY_VIOLATION")
    assert error["details"]["policy"] == "house rules"
    assert error["details"]["policyId"] == policy["id"]
    assert error["details"]["violations"][0]["rule"] == "denied_term"
    assert error["operation"] == "memory.add"
    assert snapshot(tenant_a) == before
    [entry] = audit(tenant_a, "policy_violation")
    assert entry["details"]["operation"] == "memory.add"
    assert entry["details"]["violations"][0]["policy"] == "house rules"
    items = body(tenant_a.client.get("/api/v1/reviews", {"kind": "policy_hit"}))["results"]
    assert len(items) == 1
    assert items[0]["status"] == "pending"
    assert "house rules" in items[0]["reason"]
    assert items[0]["preview"] == "We discussed [DENIED], mail [REDACTED_EMAIL]"


def test_a_denied_term_matches_whole_words_only(tenant_a) -> None:
    created(tenant_a, denied_terms=["cat"])
    assert add(tenant_a.client, "The category is concatenated").status_code == 201
    assert_error(add(tenant_a.client, "The Cat sat"), 422, "POLICY_VIOLATION")


def test_a_denied_pattern_refuses_the_write(tenant_a) -> None:
    created(tenant_a, denied_patterns=[r"secret-\d{3}"])
    assert add(tenant_a.client, "code secret-12").status_code == 201
    error = assert_error(add(tenant_a.client, "code SECRET-123"), 422, "POLICY_VIOLATION")
    assert error["details"]["violations"][0]["rule"] == "denied_pattern"


def test_an_update_to_denied_content_is_refused_and_changes_nothing(tenant_a) -> None:
    memory = tenant_a.add("Launch planning notes")
    created(tenant_a, denied_terms=["falcon"])
    response = tenant_a.client.patch(f"{M}/{memory.pk}", {"content": "Launch of Falcon"},
                                     format="json")
    error = assert_error(response, 422, "POLICY_VIOLATION")
    assert error["details"]["policy"] == "house rules"
    assert error["operation"] == "memory.update"
    stored = body(tenant_a.client.get(f"{M}/{memory.pk}"))["memory"]
    assert stored["content"] == "Launch planning notes"
    assert stored["version"] == 1
    assert [e["details"]["operation"] for e in audit(tenant_a, "policy_violation")] == [
        "memory.update"]


def test_redact_stores_the_content_with_pii_replaced(tenant_a) -> None:
    created(tenant_a, pii_handling="redact")
    response = add(tenant_a.client, "Reach me at user@example.com or 123-456-7890 today")
    assert response.status_code == 201, response.content
    content = "Reach me at [REDACTED_EMAIL] or [REDACTED_PHONE] today"
    assert body(response)["memory"]["content"] == content
    memory_id = body(response)["memory"]["id"]
    assert body(tenant_a.client.get(f"{M}/{memory_id}"))["memory"]["content"] == content


def test_deny_refuses_content_with_pii(tenant_a) -> None:
    created(tenant_a, pii_handling="deny")
    assert add(tenant_a.client, "Meeting on 2023-05-08 at 10:30").status_code == 201
    error = assert_error(add(tenant_a.client, "Call 123-456-7890"), 422, "POLICY_VIOLATION")
    assert error["details"]["violations"][0]["rule"] == "pii"
    assert "PHONE" in error["details"]["violations"][0]["detail"]
    assert memory_count(tenant_a) == 1


def test_allow_keeps_pii(tenant_a) -> None:
    created(tenant_a, pii_handling="allow", denied_terms=["falcon"])
    response = add(tenant_a.client, "Mail user@example.com")
    assert body(response)["memory"]["content"] == "Mail user@example.com"


def test_max_content_length(tenant_a) -> None:
    created(tenant_a, max_content_length=10)
    assert add(tenant_a.client, "x" * 10).status_code == 201
    error = assert_error(add(tenant_a.client, "x" * 11), 422, "POLICY_VIOLATION")
    assert error["details"]["violations"][0]["rule"] == "max_content_length"


def test_writable_layers(tenant_a) -> None:
    created(tenant_a, writable_layers=["company"])
    error = assert_error(add(tenant_a.client, "A user fact"), 422, "POLICY_VIOLATION")
    assert error["details"]["violations"][0]["rule"] == "writable_layers"
    assert add(tenant_a.client, "A company fact", "company", identifiers={}).status_code == 201
    assert memory_count(tenant_a) == 1


def test_required_metadata(tenant_a) -> None:
    created(tenant_a, required_metadata=["ticket"])
    error = assert_error(add(tenant_a.client, "No ticket", metadata={"other": 1}), 422,
                         "POLICY_VIOLATION")
    assert error["details"]["violations"][0]["detail"] == "missing ticket"
    response = add(tenant_a.client, "With ticket", metadata={"ticket": "T-1"})
    assert response.status_code == 201, response.content


def test_api_key_prefixes_scope_a_policy_to_the_listed_keys(tenant_a) -> None:
    prefix, other = key_client(tenant_a, ["admin"])
    created(tenant_a, denied_terms=["falcon"], api_key_prefixes=[prefix])
    assert add(tenant_a.client, "Falcon via the first key").status_code == 201
    assert_error(add(other, "Falcon via the listed key"), 422, "POLICY_VIOLATION")
    assert add(other, "Harmless via the listed key").status_code == 201


def test_a_disabled_policy_is_ignored(tenant_a) -> None:
    policy = created(tenant_a, denied_terms=["falcon"], enabled=False)
    assert add(tenant_a.client, "Falcon one").status_code == 201
    tenant_a.client.patch(f"{P}/{policy['id']}", {"enabled": True}, format="json")
    assert_error(add(tenant_a.client, "Falcon two"), 422, "POLICY_VIOLATION")


def test_policies_are_per_tenant(tenant_a, tenant_b) -> None:
    created(tenant_a, denied_terms=["falcon"])
    assert_error(add(tenant_a.client, "Falcon"), 422, "POLICY_VIOLATION")
    assert add(tenant_b.client, "Falcon").status_code == 201
    assert policy_names(tenant_b) == []
    assert audit(tenant_b, "policy_violation") == []


# --- search filtering -------------------------------------------------------------------

def test_search_filters_out_memories_that_violate_a_later_policy(tenant_a) -> None:
    old = tenant_a.add("The quokka project Falcon starts in May")
    kept = tenant_a.add("The quokka garden opens in June")
    found = searched(tenant_a, "quokka", mode="keyword")["results"]
    assert {r["memory"]["id"] for r in found} == {str(old.pk), str(kept.pk)}
    assert audit(tenant_a, "search_filtered") == []
    created(tenant_a, denied_terms=["falcon"])
    found = searched(tenant_a, "quokka", mode="keyword")["results"]
    assert [r["memory"]["id"] for r in found] == [str(kept.pk)]
    [entry] = audit(tenant_a, "search_filtered")
    assert entry["details"]["memoryIds"] == [str(old.pk)]
    assert "Falcon" not in str(entry)


# --- try it -----------------------------------------------------------------------------

def test_try_shows_what_would_be_denied_without_saving(tenant_a) -> None:
    before = snapshot(tenant_a)
    response = tenant_a.client.post(f"{P}/try", {
        "policy": {"denied_terms": ["falcon"], "pii_handling": "redact"},
        "text": "Falcon: mail user@example.com"}, format="json")
    assert response.status_code == 200, response.content
    data = body(response)
    assert data["allowed"] is False
    assert [v["rule"] for v in data["violations"]] == ["denied_term"]
    assert data["content"] == "Falcon: mail [REDACTED_EMAIL]"
    assert [r["type"] for r in data["redactions"]] == ["EMAIL"]
    assert snapshot(tenant_a) == before
    assert policy_names(tenant_a) == []
    with tenant_scope(tenant_a.ctx):
        assert not Policy.objects.exists()
        assert not ReviewItem.objects.exists()
        assert not AuditEntry.objects.exclude(action="api_key_created").exists()


def test_try_shows_what_would_be_redacted(tenant_a) -> None:
    response = tenant_a.client.post(f"{P}/try", {
        "policy": {"pii_handling": "redact"}, "text": "Call 123-456-7890 at 10:30"},
        format="json")
    data = body(response)
    assert data == {"allowed": True, "content": "Call [REDACTED_PHONE] at 10:30",
                    "violations": [],
                    "redactions": [{"type": "PHONE", "start": 5, "end": 17}]}


def test_try_validates_the_policy(tenant_a) -> None:
    response = tenant_a.client.post(f"{P}/try", {
        "policy": {"denied_patterns": ["(x+x+)+y"]}, "text": "xxxx"}, format="json")
    assert_error(response, 400, "INVALID_INPUT")


@pytest.mark.parametrize("payload", [
    {"policy": ["denied_terms"], "text": "hi"},
    {"policy": "falcon", "text": "hi"},
    {"policy": 5, "text": "hi"},
    {"policy": {}, "text": "hi", "layer": "attic"},
])
def test_try_refuses_a_malformed_request_with_400(tenant_a, payload) -> None:
    assert_error(tenant_a.client.post(f"{P}/try", payload, format="json"), 400,
                 "INVALID_INPUT")


def test_approving_a_policy_hit_stores_the_write_redacted(tenant_a) -> None:
    created(tenant_a, denied_terms=["falcon"])
    assert_error(add(tenant_a.client, "Falcon contact user@example.com", metadata={"k": 1}),
                 422, "POLICY_VIOLATION")
    [item] = body(tenant_a.client.get("/api/v1/reviews", {"kind": "policy_hit"}))["results"]
    response = tenant_a.client.post(f"/api/v1/reviews/{item['id']}/approve", {}, format="json")
    assert response.status_code == 200, response.content
    stored = body(tenant_a.client.get(f"{M}/{body(response)['result_memory_id']}"))["memory"]
    assert stored["content"] == "[DENIED] contact [REDACTED_EMAIL]" == item["preview"]
    assert (stored["layer"], stored["metadata"]) == ("user", {"k": 1})
    assert stored["identifiers"]["userId"] == "u1"


class TestGovernanceApiContract(TenantApiContract):
    """The tenant API contract (``tests.contract``) for this module's endpoints."""

    operations = (
        'policy.list', 'policy.get', 'policy.create', 'policy.update', 'policy.delete',
        'policy.try', 'review.list', 'review.get', 'review.approve', 'review.reject',
    )
