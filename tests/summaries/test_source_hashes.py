"""The scopes' current source hashes between changes (``summaries.source_hashes``): computed
once and kept, never served after a change of the sources (added, archived, superseded,
changed by hand within the TTL), kept apart per tenant, and computed directly when the
cache is down."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.models import Memory
from memories.services.deletion import memory_archive
from memories.services.supersede import memory_supersede
from summaries import source_hashes
from summaries.scopes import scope_for, source_hash
from summaries.selectors import summary_get
from tenants.context import tenant_scope
from tenants.layers import Layer
from tests.summaries.test_summaries_services import P1, TEXTS, add_project, generate

pytestmark = pytest.mark.django_db
SCOPE = scope_for(Layer.PROJECT, P1)


def aggregates(queries: CaptureQueriesContext) -> int:
    """How many of the captured statements computed a source hash."""
    return sum("string_agg" in q["sql"] for q in queries.captured_queries)


def read(tenant: Any) -> Any:
    with tenant_scope(tenant.ctx), CaptureQueriesContext(connection) as queries:
        served = summary_get(tenant.ctx, layer="project", identifiers=P1, depth="detailed")
    assert served is not None
    return served, aggregates(queries)


def test_the_hash_is_computed_once_until_the_sources_change(tenant_a: Any) -> None:
    add_project(tenant_a, *TEXTS)
    generate(tenant_a)
    first, computed = read(tenant_a)
    assert not first.freshness.stale and computed == 1
    again, computed = read(tenant_a)
    assert not again.freshness.stale and computed == 0
    add_project(tenant_a, "Ana: I am starting a pottery class.")
    changed, computed = read(tenant_a)
    assert changed.freshness.reasons == ("sources_changed",) and computed == 1
    assert read(tenant_a)[1] == 0


@pytest.mark.parametrize("withdraw", ["archive", "supersede"])
def test_archived_and_superseded_sources_are_seen_at_once(tenant_a: Any, withdraw: str) -> None:
    memories = add_project(tenant_a, *TEXTS)
    generate(tenant_a)
    assert not read(tenant_a)[0].freshness.stale
    with tenant_scope(tenant_a.ctx):
        if withdraw == "archive":
            memory_archive(tenant_a.ctx, memory_id=memories[0].pk)
        else:
            newer = add_project(tenant_a, "Maria: I moved to Porto.")[0]
            generate(tenant_a)
            assert not read(tenant_a)[0].freshness.stale
            assert memory_supersede(tenant_a.ctx, old=memories[0], new=newer)
    assert read(tenant_a)[0].freshness.reasons == ("sources_changed",)


def test_a_change_without_a_signal_is_seen_once_the_ttl_passes(tenant_a: Any,
                                                              settings: Any) -> None:
    settings.SUMMARY_SOURCE_HASH_TTL = 1
    memories = add_project(tenant_a, *TEXTS)
    generate(tenant_a)
    assert not read(tenant_a)[0].freshness.stale
    with tenant_scope(tenant_a.ctx):
        Memory.objects.filter(pk=memories[0].pk).update(content_hash="0" * 64)  # by hand
    assert not read(tenant_a)[0].freshness.stale  # the cached hash, within the TTL
    time.sleep(1.2)
    assert read(tenant_a)[0].freshness.reasons == ("sources_changed",)


def test_a_hash_cached_under_an_older_version_is_not_served(tenant_a: Any) -> None:
    add_project(tenant_a, *TEXTS)
    with tenant_scope(tenant_a.ctx):
        real = source_hash(SCOPE)
        version_key, hash_key = source_hashes._keys(tenant_a.ctx.tenant_id, SCOPE)
        cache.set_many({version_key: "new", hash_key: ("old", "f" * 64)}, 60)
        assert source_hashes.current_source_hash(tenant_a.ctx.tenant_id, SCOPE) == real
        assert cache.get(hash_key) == ("new", real)


def test_tenants_never_share_a_cached_hash(tenant_a: Any, tenant_b: Any) -> None:
    add_project(tenant_a, *TEXTS)
    add_project(tenant_b, "Globex: the launch is in June.")
    with tenant_scope(tenant_a.ctx):
        ours = source_hashes.current_source_hash(tenant_a.ctx.tenant_id, SCOPE)
    with tenant_scope(tenant_b.ctx):
        theirs = source_hashes.current_source_hash(tenant_b.ctx.tenant_id, SCOPE)
        assert theirs == source_hash(SCOPE) != ours


def test_without_the_cache_the_hash_is_computed(tenant_a: Any, monkeypatch: Any) -> None:
    add_project(tenant_a, *TEXTS)

    def down(*_: Any, **__: Any) -> None:
        raise ConnectionError("cache down")

    monkeypatch.setattr(cache, "get_many", down)
    monkeypatch.setattr(cache, "set_many", down)
    monkeypatch.setattr(cache, "set", down)
    with tenant_scope(tenant_a.ctx):
        assert source_hashes.current_source_hash(tenant_a.ctx.tenant_id, SCOPE) == \
            source_hash(SCOPE)
        source_hashes.sources_changed(tenant_a.ctx.tenant_id, [SCOPE])  # logged, not raised
