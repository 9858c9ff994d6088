"""Whatever a client sends as a policy or as settings, the answer is 2xx or a 4xx envelope,
never a 500, and the tenant keeps working afterwards (security review, finding 6)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from tests.helpers import assert_error

P = "/api/v1/policies"
M = "/api/v1/memories"

#: Text a database cannot store (NUL, lone surrogates), very long text, and ordinary text.
hostile_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["a\x00b", "\ud800", "x\udfff", "\x00", "ok"]),
    st.integers(min_value=150, max_value=3000).map(lambda n: "n" * n),
)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, -1, 1e-9, 1e308, 2147483647, 2147483648, 10**15, 0.5]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, hostile_text)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(hostile_text, inner, max_size=4)),
    max_leaves=8)

POLICY_FIELDS = ["name", "description", "enabled", "denied_terms", "denied_patterns",
                 "pii_handling", "max_content_length", "writable_layers", "required_metadata",
                 "api_key_prefixes"]
SETTINGS_PATHS = {
    "search": ["defaultThreshold"],
    "recall": ["scoreWeights", "recencyHalfLifeDays"],
    "lifecycle": ["deletedRetentionDays", "importance", "decay", "consolidation", "pruning",
                  "sessionCleanup", "promotionTargetLayer"],
}
LIFECYCLE_KEYS = {
    "importance": ["frequencyWeight", "recencyWeight", "baseWeight", "halfLifeDays",
                   "saturation"],
    "decay": ["enabled", "ratePerDay", "archiveThreshold", "exemptLayers"],
    "sessionCleanup": ["autoDelete", "retentionPeriod", "promoteImportant",
                       "promotionThreshold"],
}


def _sent(client: Any, method: str, url: str, payload: Any) -> Any:
    return getattr(client, method)(url, json.dumps(payload), content_type="application/json")


def _still_works(tenant: Any, memory_id: str) -> None:
    assert tenant.client.get(f"{M}/{memory_id}").status_code == 200
    assert tenant.client.patch(f"{M}/{memory_id}", {"metadata": {"n": 1}},
                               format="json").status_code == 200
    assert tenant.client.post(f"{M}/search", {"query": "tea", "identifiers": {"userId": "u1"}},
                              format="json").status_code == 200


@pytest.fixture
def memory_id(tenant_a: Any, settings: Any) -> str:
    settings.RATE_LIMIT_REQUESTS = 0  # hundreds of calls with one key
    return str(tenant_a.add("Alice likes tea.").pk)


@examples(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(field=st.sampled_from(POLICY_FIELDS), value=values, name=hostile_text)
def test_any_policy_is_stored_or_refused_with_an_envelope(tenant_a: Any, memory_id: str,
                                                          field: str, value: Any,
                                                          name: str) -> None:
    payload = {"name": name or "p", field: value}
    response = _sent(tenant_a.client, "post", P, payload)
    assert response.status_code in (201, 400), response.content[:300]
    if response.status_code == 400:
        assert_error(response, 400)
    else:
        policy = json.loads(response.content)
        update = _sent(tenant_a.client, "patch", f"{P}/{policy['id']}", {field: value})
        assert update.status_code in (200, 400), update.content[:300]
        tenant_a.client.delete(f"{P}/{policy['id']}")
    _still_works(tenant_a, memory_id)


@st.composite
def settings_patches(draw: Any) -> dict[str, Any]:
    section = draw(st.sampled_from(sorted(SETTINGS_PATHS)))
    key = draw(st.sampled_from(SETTINGS_PATHS[section]))
    if key in LIFECYCLE_KEYS:
        value: Any = {draw(st.sampled_from(LIFECYCLE_KEYS[key])): draw(values)}
    elif key == "scoreWeights":
        value = {draw(hostile_text): draw(values)}
    else:
        value = draw(values)
    return {section: {key: value}}


@examples(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(patch=settings_patches())
def test_any_settings_patch_is_stored_or_refused_with_an_envelope(tenant_a: Any, memory_id: str,
                                                                  patch: dict[str, Any]) -> None:
    response = _sent(tenant_a.client, "patch", "/api/v1/settings", patch)
    assert response.status_code in (200, 400), response.content[:300]
    if response.status_code == 400:
        assert_error(response, 400)
    _still_works(tenant_a, memory_id)
    assert tenant_a.client.get("/api/v1/settings").status_code == 200


@pytest.mark.parametrize("url", ["/api/v1/audit", "/api/v1/reviews"])
@pytest.mark.parametrize("cursor", [
    "cD1ub3QtYS1kYXRl",                      # p=not-a-date
    "cD0yMDI2LTEzLTQwVDAwOjAwOjAwWg",        # p=2026-13-40T00:00:00Z
    "bz0xJnI9MSZwPXg",                       # o=1&r=1&p=x
])
def test_a_crafted_cursor_is_refused(tenant_a: Any, url: str, cursor: str) -> None:
    assert_error(tenant_a.client.get(f"{url}?cursor={cursor}"), 404, "NOT_FOUND")


@pytest.mark.parametrize("url", ["/api/v1/audit", "/api/v1/reviews"])
def test_a_cursor_that_decodes_to_nothing_is_the_first_page(tenant_a: Any, url: str) -> None:
    assert tenant_a.client.get(f"{url}?cursor={'A' * 500}").status_code == 200


def test_a_tiny_saturation_or_half_life_keeps_the_tenant_working(tenant_a: Any,
                                                                  memory_id: str) -> None:
    for lifecycle in ({"importance": {"saturation": 1e-9}},
                      {"importance": {"halfLifeDays": 1e-9}},
                      {"decay": {"ratePerDay": 1}}):
        response = tenant_a.client.patch("/api/v1/settings", {"lifecycle": lifecycle},
                                         format="json")
        assert response.status_code in (200, 400)
        _still_works(tenant_a, memory_id)
