"""``tenants.config_cache``: settings, policies in force and the project hierarchy are read
once per configuration version, and any change, by service or by plain SQL, is seen by the
next read; a change rolled back never is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from governance.services import policies_in_force, policy_create
from memories.retrieval.search import default_threshold
from tenants import config_cache
from tenants.context import tenant_scope
from tenants.selectors import project_ancestry, team_ancestry, tenant_settings_of
from tenants.services import org_create, project_create, team_create, tenant_settings_update

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def empty_cache() -> None:
    config_cache.clear()


def data_queries(read: Callable[[], Any]) -> tuple[Any, list[str]]:
    """``read()`` and the queries it ran other than the version lookup."""
    with CaptureQueriesContext(connection) as captured:
        value = read()
    return value, [q["sql"] for q in captured.captured_queries
                   if "config_version" not in q["sql"]]


def names(ctx: Any) -> list[str]:
    return [p.name for p in policies_in_force(ctx)]


def test_a_second_read_runs_only_the_version_lookup(tenant_a) -> None:
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        policy_create(tenant_a.ctx, data={"name": "no-secrets", "denied_terms": ["secret"]})
        first, queries = data_queries(lambda: names(tenant_a.ctx))
        assert first == ["no-secrets"] and queries
        for read in (lambda: names(tenant_a.ctx), lambda: tenant_settings_of(tenant_a.ctx),
                     lambda: project_ancestry("p1")):
            read()
        again, queries = data_queries(lambda: names(tenant_a.ctx))
        assert again == ["no-secrets"] and queries == []
        _, queries = data_queries(lambda: (tenant_settings_of(tenant_a.ctx),
                                           project_ancestry("p1")))
        assert queries == []


def test_services_changes_are_seen_by_the_next_read(tenant_a) -> None:
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        assert names(tenant_a.ctx) == [] and project_ancestry("p1") == (None, None)
        assert default_threshold(tenant_a.ctx) == 0.7 and team_ancestry("t1") is None
        policy_create(tenant_a.ctx, data={"name": "no-secrets", "denied_terms": ["secret"]})
        org_create(tenant_a.ctx, external_id="o1")
        team_create(tenant_a.ctx, external_id="t1", org_id="o1")
        project_create(tenant_a.ctx, external_id="p1", team_id="t1")
        tenant_settings_update(tenant_a.ctx, patch={"search": {"defaultThreshold": 0.4}})
        assert names(tenant_a.ctx) == ["no-secrets"]
        assert project_ancestry("p1") == ("t1", "o1") and team_ancestry("t1") == "o1"
        assert default_threshold(tenant_a.ctx) == 0.4


@pytest.mark.parametrize("change", [
    "UPDATE governance_policy SET enabled = false",
    "DELETE FROM tenants_project",
    "UPDATE tenants_team SET external_id = 't9'",
    "UPDATE tenants_tenant SET settings = '{\"search\": {\"defaultThreshold\": 0.2}}' "
    "WHERE id = %(tenant)s",
])
def test_a_change_in_plain_sql_is_seen_too(tenant_a, change: str) -> None:
    """What another process (the console, the admin, an operator's SQL) writes reaches this
    process's cache through the triggers alone."""
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        policy_create(tenant_a.ctx, data={"name": "no-secrets", "denied_terms": ["secret"]})
        org_create(tenant_a.ctx, external_id="o1")
        team_create(tenant_a.ctx, external_id="t1", org_id="o1")
        project_create(tenant_a.ctx, external_id="p1", team_id="t1")
        before = (names(tenant_a.ctx), project_ancestry("p1"), team_ancestry("t1"),
                  default_threshold(tenant_a.ctx))
        with connection.cursor() as cursor:
            cursor.execute(change, {"tenant": tenant_a.ctx.tenant_id})
        after = (names(tenant_a.ctx), project_ancestry("p1"), team_ancestry("t1"),
                 default_threshold(tenant_a.ctx))
    assert before == (["no-secrets"], ("t1", "o1"), "o1", 0.7)
    assert after != before


def test_a_rolled_back_change_is_never_served(tenant_a) -> None:
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        assert names(tenant_a.ctx) == []
    with pytest.raises(RuntimeError), transaction.atomic(), tenant_scope(tenant_a.ctx):
        policy_create(tenant_a.ctx, data={"name": "doomed", "denied_terms": ["x"]})
        assert names(tenant_a.ctx) == ["doomed"]  # cached under the uncommitted version
        raise RuntimeError("roll back")
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        assert names(tenant_a.ctx) == []


def test_tenants_never_share_entries(tenant_a, tenant_b) -> None:
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        policy_create(tenant_a.ctx, data={"name": "a-only", "denied_terms": ["x"]})
        project_create(tenant_a.ctx, external_id="p1")
        tenant_settings_update(tenant_a.ctx, patch={"search": {"defaultThreshold": 0.3}})
        assert names(tenant_a.ctx) == ["a-only"]
        assert default_threshold(tenant_a.ctx) == 0.3
    with transaction.atomic(), tenant_scope(tenant_b.ctx):
        assert names(tenant_b.ctx) == [] and default_threshold(tenant_b.ctx) == 0.7


def test_callers_get_copies(tenant_a) -> None:
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        tenant_settings_update(tenant_a.ctx, patch={"search": {"defaultThreshold": 0.3}})
        tenant_settings_of(tenant_a.ctx)["search"]["defaultThreshold"] = 0.9
        assert default_threshold(tenant_a.ctx) == 0.3


def test_entries_belong_to_the_tenant_in_scope(tenant_a, tenant_b) -> None:
    """A caller passing another tenant's context reads the tenant in scope, and leaves
    nothing in the cache under the other tenant's name."""
    with transaction.atomic(), tenant_scope(tenant_b.ctx):
        policy_create(tenant_b.ctx, data={"name": "b-only", "denied_terms": ["x"]})
        assert names(tenant_a.ctx) == ["b-only"]
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        assert names(tenant_a.ctx) == []


def version_lookups(read: Callable[[], Any]) -> int:
    with CaptureQueriesContext(connection) as captured:
        read()
    return sum("config_version" in q["sql"] for q in captured.captured_queries)


def test_a_pinned_block_reads_the_version_once(tenant_a) -> None:
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        reads = lambda: (names(tenant_a.ctx), tenant_settings_of(tenant_a.ctx),  # noqa: E731
                         project_ancestry("p1"), default_threshold(tenant_a.ctx))
        reads()
        assert version_lookups(reads) == 4

        def pinned_reads() -> None:
            with config_cache.pinned():
                reads()
                with config_cache.pinned():  # nested: the outer block's version
                    reads()

        assert version_lookups(pinned_reads) == 1


def test_a_pinned_block_keeps_its_configuration_and_the_next_one_sees_changes(tenant_a) -> None:
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        with config_cache.pinned():
            assert default_threshold(tenant_a.ctx) == 0.7
            tenant_settings_update(tenant_a.ctx, patch={"search": {"defaultThreshold": 0.4}})
            assert default_threshold(tenant_a.ctx) == 0.7  # the block's snapshot
        assert default_threshold(tenant_a.ctx) == 0.4
        with config_cache.pinned():
            assert default_threshold(tenant_a.ctx) == 0.4


def test_a_search_reads_the_configuration_version_once(tenant_a) -> None:
    from memories.retrieval.search import SearchRequest, memory_search
    from tenants.layers import LayerIdentifiers

    tenant_a.add("User likes green tea")
    request = SearchRequest(query="green tea", identifiers=LayerIdentifiers.from_mapping(
        {"userId": "u1"}))
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        memory_search(tenant_a.ctx, request)
        assert version_lookups(lambda: memory_search(tenant_a.ctx, request)) == 1


def rest_search(tenant: Any) -> tuple[Any, int]:
    """A semantic REST search for "green tea"; the response and the ``config_version`` reads
    of its transaction (up to where the request leaves its tenant: in a test's transaction,
    ``deactivate`` empties the setting; the bookkeeping after the response is not counted)."""
    with CaptureQueriesContext(connection) as captured:
        response = tenant.client.post("/api/v1/memories/search", {
            "query": "green tea", "identifiers": {"userId": "u1"}, "mode": "semantic"},
            content_type="application/json")
    assert response.status_code == 200, response.content
    statements = [q["sql"] for q in captured.captured_queries]
    left = next(i for i, sql in enumerate(statements) if "'app.tenant_id', ''" in sql)
    return response, sum("config_version" in sql for sql in statements[:left])


def set_threshold(tenant: Any, value: float) -> None:
    with transaction.atomic(), tenant_scope(tenant.ctx):
        tenant_settings_update(tenant.ctx, patch={"search": {"defaultThreshold": value}})


def test_a_rest_search_reads_the_version_only_to_authenticate(tenant_a) -> None:
    tenant_a.add("User likes green tea")
    rest_search(tenant_a)
    _, lookups = rest_search(tenant_a)
    assert lookups == 1  # the cached key's check, which the search's pinned block reuses


def test_a_rest_search_sees_a_change_made_between_requests(tenant_a) -> None:
    tenant_a.add("User likes green tea")
    set_threshold(tenant_a, 1.0)
    assert rest_search(tenant_a)[0].json()["results"] == []
    assert rest_search(tenant_a)[0].json()["results"] == []  # the key cached: the same
    set_threshold(tenant_a, 0.0)
    assert len(rest_search(tenant_a)[0].json()["results"]) == 1
    assert len(rest_search(tenant_a)[0].json()["results"]) == 1


def test_the_version_a_request_read_ends_with_it(tenant_a) -> None:
    tenant_a.add("User likes green tea")
    rest_search(tenant_a)
    rest_search(tenant_a)
    set_threshold(tenant_a, 0.25)
    with transaction.atomic(), tenant_scope(tenant_a.ctx), config_cache.pinned():
        assert default_threshold(tenant_a.ctx) == 0.25  # not the last request's version
