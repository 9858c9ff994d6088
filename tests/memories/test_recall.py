"""Recall (seed 002 ``memory_recall``): composite score, weights per scope (settings and
``import_recall_weights``), effective confidence, scope filtering, ties, limit, bumping."""

from __future__ import annotations

import io
import math
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from memories.retrieval.recall import DEFAULT_WEIGHTS
from tenants import services as tenant_services
from tenants.context import tenant_scope
from tests.contract import TenantApiContract
from tests.helpers import assert_error, body
from tests.retrieval_helpers import (
    SETTINGS_URL,
    contents,
    days_ago,
    ids,
    patch_settings,
    recalled,
    reload,
    set_fields,
)

pytestmark = pytest.mark.django_db

PEANUTS = "User is allergic to peanuts"


def composite(r: dict[str, Any], weights: dict[str, float]) -> float:
    return (weights["relevance"] * r["relevance"] + weights["importance"] * r["importance"]
            + weights["recency"] * r["recency"] + weights["confidence"] * r["effectiveConfidence"])


def test_it_returns_the_parts_and_the_default_weighted_score(tenant_a) -> None:
    assert DEFAULT_WEIGHTS == {"relevance": 0.4, "importance": 0.3, "recency": 0.2,
                               "confidence": 0.1}
    fact = tenant_a.add(PEANUTS, importance=0.8, confidence=0.9, decay_rate=0.05)
    other = tenant_a.add("User carries an epinephrine pen for peanut reactions",
                         importance=0.4)
    tenant_a.add("User prefers dark mode", importance=0.1)
    set_fields(tenant_a, fact, last_referenced_at=days_ago(10), last_confirmed_at=days_ago(5))
    results = recalled(tenant_a, "peanut allergy")
    assert len(results) == 3
    best_keyword = max(r["keywordScore"] or 0.0 for r in results)
    for r in results:
        assert r["score"] == pytest.approx(
            0.4 * r["relevance"] + 0.3 * r["importance"] + 0.2 * r["recency"]
            + 0.1 * r["effectiveConfidence"], abs=1e-9)
        assert 0.0 <= r["relevance"] <= 1.0
        assert r["relevance"] == pytest.approx(
            0.5 * r["similarity"] + 0.5 * (r["keywordScore"] or 0.0) / best_keyword)
    by_id = {r["memory"]["id"]: r for r in results}
    mine = by_id[str(fact.pk)]
    assert mine["importance"] == 0.8
    assert mine["recency"] == pytest.approx(0.5 ** (10 / 30), rel=1e-4)
    assert mine["effectiveConfidence"] == pytest.approx(0.9 * math.exp(-0.05 * 5), rel=1e-4)
    fresh = by_id[str(other.pk)]
    assert fresh["recency"] == pytest.approx(1.0, abs=1e-4)
    assert fresh["effectiveConfidence"] == pytest.approx(1.0, abs=1e-6)
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)


def test_high_importance_recent_fact_ranks_above_low_importance_old_fact(tenant_a) -> None:
    old = tenant_a.add(PEANUTS, importance=0.2)
    recent = tenant_a.add(PEANUTS, importance=0.9)
    set_fields(tenant_a, old, last_referenced_at=days_ago(30))
    set_fields(tenant_a, recent, last_referenced_at=days_ago(1))
    results = recalled(tenant_a, "peanut allergy")
    assert ids(results) == [str(recent.pk), str(old.pk)]
    first, second = results
    assert first["relevance"] == pytest.approx(second["relevance"], abs=1e-6)
    assert first["effectiveConfidence"] == second["effectiveConfidence"] == pytest.approx(1.0)
    assert first["recency"] == pytest.approx(0.5 ** (1 / 30), rel=1e-4)
    assert second["recency"] == pytest.approx(0.5, rel=1e-4)
    assert first["score"] - second["score"] == pytest.approx(0.3 * 0.7 + 0.2 * (
        0.5 ** (1 / 30) - 0.5), rel=1e-3)


# --- weights from butler.toml ---------------------------------------------------------

BUTLER_TOML = """
score_weights = { relevance = 0.6, importance = 0.1, recency = 0.2, confidence = 0.1 }

[scopes.health]
score_weights = { relevance = 0.1, importance = 0.7, recency = 0.1, confidence = 0.1 }
"""
CUSTOM = {"relevance": 0.6, "importance": 0.1, "recency": 0.2, "confidence": 0.1}
HEALTH = {"relevance": 0.1, "importance": 0.7, "recency": 0.1, "confidence": 0.1}


def import_weights(tenant: Any, path: Any, **options: Any) -> str:
    out = io.StringIO()
    call_command("import_recall_weights", str(path), tenant=tenant.tenant.slug, stdout=out,
                 stderr=io.StringIO(), **options)
    return out.getvalue()


def test_it_imports_butler_toml_weights_and_recall_uses_them(tenant_a, tmp_path) -> None:
    relevant = tenant_a.add(PEANUTS, importance=0.1, scope="health")
    important = tenant_a.add("User keeps an inhaler in the car", importance=1.0,
                             scope="health")
    path = tmp_path / "butler.toml"
    path.write_text(BUTLER_TOML)
    output = import_weights(tenant_a, path)
    assert "scope default: relevance=0.6, importance=0.1, recency=0.2, confidence=0.1" in output
    assert "scope health: relevance=0.1, importance=0.7" in output
    stored = body(tenant_a.client.get(SETTINGS_URL))
    assert stored["recall"]["scoreWeights"] == {"default": CUSTOM, "health": HEALTH}

    unscoped = recalled(tenant_a, "peanut allergy")
    assert ids(unscoped) == [str(relevant.pk), str(important.pk)]
    for r in unscoped:
        assert r["score"] == pytest.approx(composite(r, CUSTOM), abs=1e-9)
        assert r["score"] != pytest.approx(composite(r, DEFAULT_WEIGHTS), abs=1e-6)
    health = recalled(tenant_a, "peanut allergy", scope="health")
    assert ids(health) == [str(important.pk), str(relevant.pk)]
    for r in health:
        assert r["score"] == pytest.approx(composite(r, HEALTH), abs=1e-9)
    # a scope without weights of its own falls back to "default"
    for r in recalled(tenant_a, "peanut allergy", scope="work"):
        assert r["score"] == pytest.approx(composite(r, CUSTOM), abs=1e-9)


def test_a_top_level_table_can_be_imported_for_one_scope(tenant_a, tmp_path) -> None:
    path = tmp_path / "butler.toml"
    path.write_text("score_weights = { relevance = 0.6, importance = 0.1, recency = 0.2,"
                    " confidence = 0.1 }\n")
    import_weights(tenant_a, path, scope="work")
    assert body(tenant_a.client.get(SETTINGS_URL))["recall"]["scoreWeights"] == {
        "work": CUSTOM}


@pytest.mark.parametrize("text", [
    "score_weights = { relevance = 0.6, importance = ",  # not TOML
    "name = 'health butler'\n",  # no score_weights
    "score_weights = { relevance = 0.6, importance = 0.1, recency = 0.3 }\n",  # missing key
    "score_weights = { relevance = -0.6, importance = 0.1, recency = 0.2, confidence = 0.1 }",
    "score_weights = { relevance = 0, importance = 0, recency = 0, confidence = 0 }",
    "score_weights = { relevance = 'high', importance = 0.1, recency = 0.2, confidence = 0.1 }",
    "score_weights = { relevance = 0.6, importance = 0.1, recency = 0.2, confidence = 0.1,"
    " novelty = 0.1 }",
    "[scopes.health]\nscore_weights = { relevance = nan, importance = 0.1, recency = 0.2,"
    " confidence = 0.1 }",
    "scopes = 'health'\n",
    "scopes = [1, 2]\n",
    "score_weights = { relevance = 0.6, importance = 0.1, recency = 0.2, confidence = 0.1 }\n"
    "[scopes]\nhealth = 3\n",
])
def test_it_refuses_invalid_weight_files(tenant_a, tmp_path, text) -> None:
    path = tmp_path / "butler.toml"
    path.write_text(text)
    with pytest.raises(CommandError):
        import_weights(tenant_a, path)
    assert body(tenant_a.client.get(SETTINGS_URL)) == {}


def test_it_refuses_a_missing_file_and_an_unknown_tenant(tenant_a, tmp_path) -> None:
    with pytest.raises(CommandError, match="Cannot read"):
        import_weights(tenant_a, tmp_path / "absent.toml")
    path = tmp_path / "butler.toml"
    path.write_text(BUTLER_TOML)
    with pytest.raises(CommandError, match="No tenant"):
        call_command("import_recall_weights", str(path), tenant="no-such-tenant",
                     stdout=io.StringIO(), stderr=io.StringIO())


# --- effective confidence --------------------------------------------------------------

def test_a_fading_memory_is_left_out_unless_min_confidence_allows_it(tenant_a) -> None:
    steady = tenant_a.add("User is allergic to shellfish")
    fading = tenant_a.add(PEANUTS, confidence=0.3, decay_rate=math.log(2) / 10)
    set_fields(tenant_a, fading, last_confirmed_at=days_ago(10))
    assert ids(recalled(tenant_a, "food allergy")) == [str(steady.pk)]
    assert ids(recalled(tenant_a, "food allergy", minConfidence=0.16)) == [str(steady.pk)]
    results = recalled(tenant_a, "food allergy", minConfidence=0)
    assert set(ids(results)) == {str(steady.pk), str(fading.pk)}
    faded = next(r for r in results if r["memory"]["id"] == str(fading.pk))
    assert faded["effectiveConfidence"] == pytest.approx(0.15, rel=1e-3)
    assert str(fading.pk) in ids(recalled(tenant_a, "food allergy", minConfidence=0.14))


# --- scope ----------------------------------------------------------------------------

def test_recall_filters_by_scope_and_unscoped_returns_all(tenant_a, tenant_b) -> None:
    made = {
        "global": tenant_a.add("Fact: blood pressure is normal", scope="global"),
        "health": tenant_a.add("Fact: blood pressure medication daily", scope="health"),
        "general": tenant_a.add("Fact: blood pressure article bookmarked", scope="general"),
        "episode-health": tenant_a.add("Episode: measured blood pressure", kind="episode",
                                       scope="health"),
        "episode-global": tenant_a.add("Episode: talked about blood pressure",
                                       kind="episode", scope="global"),
    }
    tenant_b.add("Fact: blood pressure is high", scope="health")
    health = recalled(tenant_a, "blood pressure", scope="health")
    assert set(ids(health)) == {str(made[k].pk) for k in ("global", "health", "episode-health")}
    everything = recalled(tenant_a, "blood pressure")
    assert set(ids(everything)) == {str(m.pk) for m in made.values()}
    assert contents(recalled(tenant_b, "blood pressure")) == ["Fact: blood pressure is high"]


# --- ties, limit, bumping -------------------------------------------------------------

def test_equal_scores_order_by_created_at_desc_then_id_asc(tenant_a) -> None:
    weights = {"relevance": 0, "importance": 1, "recency": 0, "confidence": 0}
    response = patch_settings(tenant_a, {"recall": {"scoreWeights": {"default": weights}}})
    assert response.status_code == 200, response.content
    a = tenant_a.add("Garden fact alpha")
    b = tenant_a.add("Garden fact beta")
    c = tenant_a.add("Garden fact gamma")
    assert str(a.pk) < str(b.pk) < str(c.pk)
    base = timezone.now().replace(microsecond=0)
    set_fields(tenant_a, a, created_at=base)
    set_fields(tenant_a, b, created_at=base)
    set_fields(tenant_a, c, created_at=base + timedelta(hours=1))
    for _ in range(2):
        for memory in (a, b, c):  # each recall recomputes importance (seed 001): reset it
            set_fields(tenant_a, memory, importance=0.5)
        results = recalled(tenant_a, "garden")
        assert [r["score"] for r in results] == [0.5, 0.5, 0.5]
        assert ids(results) == [str(c.pk), str(a.pk), str(b.pk)]


@pytest.mark.parametrize("limit", [1, 5, 12])
def test_recall_returns_exactly_limit_results(tenant_a, limit) -> None:
    for i in range(12):
        tenant_a.add(f"Garden observation number {i}")
    assert len(recalled(tenant_a, "garden observation", limit=limit)) == limit


def test_recall_bumps_reference_count_from_3_to_4(tenant_a) -> None:
    fact = tenant_a.add(PEANUTS)
    set_fields(tenant_a, fact, reference_count=3, last_referenced_at=days_ago(5))
    before = timezone.now()
    assert ids(recalled(tenant_a, "peanut allergy")) == [str(fact.pk)]
    fresh = reload(tenant_a, fact)
    assert fresh.reference_count == 4
    assert before <= fresh.last_referenced_at <= timezone.now()


def test_the_recency_half_life_is_a_tenant_setting(tenant_a) -> None:
    fact = tenant_a.add(PEANUTS)
    set_fields(tenant_a, fact, last_referenced_at=days_ago(10))
    assert recalled(tenant_a, "peanuts")[0]["recency"] == pytest.approx(0.5 ** (1 / 3),
                                                                         rel=1e-4)
    assert patch_settings(tenant_a, {"recall": {"recencyHalfLifeDays": 10}}).status_code == 200
    set_fields(tenant_a, fact, last_referenced_at=days_ago(10))  # the recall bumped it
    assert recalled(tenant_a, "peanuts")[0]["recency"] == pytest.approx(0.5, rel=1e-4)


# --- settings validation --------------------------------------------------------------

GOOD = {"relevance": 0.4, "importance": 0.3, "recency": 0.2, "confidence": 0.1}


@pytest.mark.parametrize("patch", [
    {"recall": {"scoreWeights": {"default": {**GOOD, "relevance": -0.1}}}},
    {"recall": {"scoreWeights": {"default": {"relevance": 1}}}},
    {"recall": {"scoreWeights": {"default": {**GOOD, "novelty": 0.1}}}},
    {"recall": {"scoreWeights": {"default": {k: 0 for k in GOOD}}}},
    {"recall": {"scoreWeights": {"default": {**GOOD, "recency": "high"}}}},
    {"recall": {"scoreWeights": {"default": {**GOOD, "recency": True}}}},
    {"recall": {"scoreWeights": {}}},
    {"recall": {"scoreWeights": GOOD}},
    {"recall": {"weights": GOOD}},
    {"recall": {"recencyHalfLifeDays": 0}},
    {"search": {"defaultThreshold": 1.5}},
    {"search": {"threshold": 0.5}},
    {"ranking": {}},
    ["not", "an", "object"],
])
def test_it_refuses_bad_settings(tenant_a, patch) -> None:
    assert_error(patch_settings(tenant_a, patch), 400, "INVALID_INPUT")
    assert body(tenant_a.client.get(SETTINGS_URL)) == {}


def test_settings_merge_per_scope_and_need_the_admin_role(tenant_a) -> None:
    assert patch_settings(tenant_a, {"recall": {"scoreWeights": {"health": GOOD}}}
                          ).status_code == 200
    response = patch_settings(tenant_a, {"recall": {"scoreWeights": {"default": CUSTOM}},
                                         "search": {"defaultThreshold": 0.6}})
    assert body(response) == {"recall": {"scoreWeights": {"health": GOOD, "default": CUSTOM}},
                              "search": {"defaultThreshold": 0.6}}
    with tenant_scope(tenant_a.ctx):
        _, raw = tenant_services.api_key_create(tenant_a.ctx, name="r", roles=["reader"])
    tenant_a.client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert_error(patch_settings(tenant_a, {"search": {"defaultThreshold": 0.1}}), 403,
                 "UNAUTHORIZED")
    assert body(tenant_a.client.get(SETTINGS_URL))["search"] == {"defaultThreshold": 0.6}


@pytest.mark.parametrize(("change", "code"), [
    ({"limit": 0}, "INVALID_INPUT"), ({"limit": 101}, "INVALID_INPUT"),
    ({"minConfidence": 1.5}, "INVALID_INPUT"), ({"minConfidence": -0.1}, "INVALID_INPUT"),
    ({"topic": ""}, "INVALID_INPUT"), ({"topic": None, "query": None}, "INVALID_INPUT"),
    ({"layers": ["galaxy"]}, "INVALID_LAYER"), ({"layers": ["agent"]}, "MISSING_IDENTIFIER"),
])
def test_it_refuses_bad_recall_input(tenant_a, change, code) -> None:
    payload = {"topic": "peanuts", "identifiers": {"userId": "u1"}, **change}
    payload = {k: v for k, v in payload.items() if v is not None}
    response = tenant_a.client.post("/api/v1/memories/recall", payload, format="json")
    assert_error(response, 400, code)


class TestRecallApiContract(TenantApiContract):
    """The tenant API contract (``tests.contract``) for this module's endpoints."""

    operations = ('memory.recall',)
