"""``/metrics``: who may read it, and the memory service's own metrics (seed 001 "Memory
Observability", dots as underscores)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from memories.tasks import tenant_job
from memories.telemetry import storage_size_refresh
from memory_project import metrics
from memory_project.schedule import BEAT_SCHEDULE
from tenants.context import tenant_scope
from tests.helpers import assert_error

pytestmark = pytest.mark.django_db

M = "/api/v1/memories"


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def scrape(client: Any, **extra: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.content.decode())
            for s in family.samples}


def test_it_serves_metrics_to_loopback_by_default(client) -> None:
    samples = scrape(client)
    assert any(name == "memory_storage_size" for name, _ in samples)
    assert any(name.startswith("django_http_requests") for name, _ in samples)


def test_it_refuses_addresses_outside_the_allowed_networks(client, settings) -> None:
    settings.METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert_error(client.get("/metrics"), 403, "UNAUTHORIZED")
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200


def test_it_accepts_the_metrics_token_from_anywhere(client, settings) -> None:
    settings.METRICS_ALLOWED_NETWORKS = []
    settings.METRICS_TOKEN = "s3cret-token"
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 200
    assert_error(client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong"), 403)
    assert_error(client.get("/metrics"), 403)


def test_it_refuses_a_token_when_none_is_configured(client, settings) -> None:
    settings.METRICS_ALLOWED_NETWORKS = []
    settings.METRICS_TOKEN = ""
    assert_error(client.get("/metrics", HTTP_AUTHORIZATION="Bearer "), 403)


def test_it_counts_operations_and_their_latency(tenant_a) -> None:
    before = value("memory_operations_total", operation="memory.add")
    latency_before = value("memory_operations_latency_seconds_count", operation="memory.add")
    response = tenant_a.client.post(M, {"content": "metrics note", "layer": "user",
                                        "identifiers": {"userId": "u1"}}, format="json")
    assert response.status_code == 201
    assert value("memory_operations_total", operation="memory.add") == before + 1
    assert value("memory_operations_latency_seconds_count",
                 operation="memory.add") == latency_before + 1
    assert value("memory_operations_latency_seconds_sum", operation="memory.add") > 0


def test_it_counts_errors_by_code(tenant_a) -> None:
    before = value("memory_operations_errors_total", code="MEMORY_NOT_FOUND")
    invalid = value("memory_operations_errors_total", code="INVALID_LAYER")
    assert tenant_a.client.get(f"{M}/01a1fb00-0000-7000-8000-00000000abcd").status_code == 404
    tenant_a.client.post(M, {"content": "x", "layer": "galaxy", "identifiers": {}},
                         format="json")
    assert value("memory_operations_errors_total", code="MEMORY_NOT_FOUND") == before + 1
    assert value("memory_operations_errors_total", code="INVALID_LAYER") == invalid + 1


def test_it_observes_search_results_per_searched_layer(tenant_a) -> None:
    tenant_a.add("the deploy runs on Fridays", identifiers={"userId": "u1"})
    user_count = value("memory_search_results_count", layer="user")
    user_sum = value("memory_search_results_sum", layer="user")
    company_count = value("memory_search_results_count", layer="company")
    response = tenant_a.client.post(f"{M}/search", {
        "query": "deploy Fridays", "identifiers": {"userId": "u1"}, "threshold": 0,
        "layers": ["user", "company"]}, format="json")
    assert response.status_code == 200
    assert value("memory_search_results_count", layer="user") == user_count + 1
    assert value("memory_search_results_sum", layer="user") == user_sum + 1
    assert value("memory_search_results_count", layer="company") == company_count + 1


def test_it_counts_embedding_cache_hits_and_misses(tenant_a) -> None:
    search = {"query": "a query never asked before 7f3a", "identifiers": {"userId": "u1"}}
    misses = value("memory_embedding_cache_total", level="redis", result="miss")
    tenant_a.client.post(f"{M}/search", search, format="json")
    assert value("memory_embedding_cache_total", level="redis", result="miss") >= misses + 1
    hits = value("memory_embedding_cache_total", level="local", result="hit")
    tenant_a.client.post(f"{M}/search", search, format="json")
    assert value("memory_embedding_cache_total", level="local", result="hit") == hits + 1


def test_it_reports_storage_size_from_the_refresh_job(tenant_a, tenant_b, client) -> None:
    tenant_a.add("one", identifiers={"userId": "u1"})
    tenant_a.add("two", identifiers={"userId": "u2"})
    tenant_b.add("three", "company", identifiers={})
    deleted = tenant_b.add("four", identifiers={"userId": "u1"})
    assert tenant_b.client.delete(f"{M}/{deleted.pk}").status_code == 200
    with tenant_scope(tenant_a.ctx):
        assert storage_size_refresh(tenant_a.ctx) == {"user": 2}
    assert tenant_job("storage_size", str(tenant_b.tenant.pk)) == {"company": 1}  # the job
    assert BEAT_SCHEDULE["storage size metrics"]["job"] == "storage_size"
    samples = scrape(client)
    assert samples[("memory_storage_size", (("layer", "user"),))] == 2
    assert samples[("memory_storage_size", (("layer", "company"),))] == 1
    assert samples[("memory_storage_size", (("layer", "agent"),))] == 0


def test_it_exports_every_family_the_readme_lists(client) -> None:
    text = client.get("/metrics").content.decode()
    for family in ("memory_operations_total", "memory_operations_latency_seconds",
                   "memory_operations_errors_total", "memory_search_results",
                   "memory_storage_size", "memory_embedding_cache_total",
                   "memory_promotion_blocks_total", "memory_policy_violations_total"):
        assert f"# TYPE {family} " in text, family


CHILD = """
from prometheus_client import Counter
Counter("memory_operations_total", "x", ["operation"]).labels(operation="memory.add").inc({n})
"""


def test_it_sums_every_worker_process_in_multiprocess_mode(tmp_path, monkeypatch) -> None:
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for n in (2, 3):
        subprocess.run([sys.executable, "-c", CHILD.format(n=n)], env=env, check=True,
                       timeout=60)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    scraped = metrics.registry()
    assert scraped.get_sample_value("memory_operations_total",
                                    {"operation": "memory.add"}) == 5
