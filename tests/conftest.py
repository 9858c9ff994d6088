"""Shared fixtures: the test database (created and migrated by the owner role), two tenants
with API keys, and helpers to act as either tenant."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connections
from rest_framework.test import APIClient

from memories.models import Memory
from memories.services.memory import MemoryInput, memory_add
from memories.tiers.l1 import l1_reset
from memory_project import embedded
from memory_project.paths import VAR_DIR
from tenants import services as tenant_services
from tenants.context import TenantContext, tenant_scope
from tenants.layers import LayerIdentifiers
from tenants.models import Tenant

# pytest-xdist already runs a test process per core: embedding calls in tests, and in the
# servers tests start (they inherit this), run one batch at a time, so that one process's
# bulk embedding does not take the other's core during its timings.
os.environ.setdefault("EMBEDDING_PARALLEL_BATCHES", "1")


@pytest.fixture(scope="session")
def django_db_setup(django_test_environment: Any, django_db_blocker: Any,
                    django_db_modify_db_settings: Any) -> Iterator[None]:
    """Create the test database as the owner role, migrate it as the owner role, and point
    the app role (``default``) and the platform role (``platform``) at it: tests then run as
    the roles the service runs as. pytest-django's suffixes apply (``TOX_PARALLEL_ENV=x``
    gives runs side by side a test database each)."""
    with django_db_blocker.unblock():
        owner, default = connections["owner"], connections["default"]
        old_name = owner.settings_dict["NAME"]
        owner.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        for alias in ("default", "platform"):
            connections[alias].close()
            connections[alias].creation.set_as_test_mirror(owner.settings_dict)
    yield
    l1_reset()  # its listener's connection would keep the test database open
    with django_db_blocker.unblock():
        connections["platform"].close()
        default.close()
        owner.close()
        _end_leftover_sessions(str(owner.settings_dict["NAME"]))
        owner.creation.destroy_test_db(old_name, verbosity=0)


def _end_leftover_sessions(database: str) -> None:
    """Sessions still attached to the test database once every connection of this thread is
    closed (one some other thread of the run kept) would make dropping it fail ("being
    accessed by other users"), one run in a few: they are reported as a warning and ended
    first. Only on the embedded server, whose superuser may end them."""
    if not settings.EMBEDDED_DATABASE:
        return
    url = embedded.superuser_url(VAR_DIR / "pg")
    with psycopg.connect(url, autocommit=True) as conn:
        left = conn.execute(
            "SELECT pid, usename, application_name, state, left(query, 120) "
            "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [database]).fetchall()
        if left:
            warnings.warn(f"sessions left on {database} at the end of the run: {left}",
                          stacklevel=1)
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = %s AND pid <> pg_backend_pid()", [database])


class TenantFixture:
    """A tenant, its context, a raw API key and an authenticated API client."""

    def __init__(self, tenant: Tenant, raw_key: str) -> None:
        self.tenant = tenant
        self.ctx: TenantContext = tenant_services.system_context(tenant, "test")
        self.key = raw_key
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")

    def add(self, content: str, layer: str = "user", **kwargs: Any) -> Memory:
        """Add a memory through the service layer as this tenant."""
        identifiers = kwargs.pop("identifiers", {"userId": "u1"})
        with tenant_scope(self.ctx):
            return memory_add(
                self.ctx,
                item=MemoryInput(
                    content=content,
                    layer=layer,
                    identifiers=LayerIdentifiers.from_mapping(identifiers),
                    **kwargs,
                ),
            ).memory


def make_tenant(name: str) -> TenantFixture:
    """Create a tenant with one API key."""
    tenant = tenant_services.tenant_create(name=name)
    ctx = tenant_services.system_context(tenant)
    with tenant_scope(ctx):
        _, raw_key = tenant_services.api_key_create(ctx, name="test")
    return TenantFixture(tenant, raw_key)


@pytest.fixture
def tenant_a(db: Any) -> TenantFixture:
    return make_tenant("Acme")


@pytest.fixture
def tenant_b(db: Any) -> TenantFixture:
    return make_tenant("Globex")


@pytest.fixture(scope="module")
def owner_flushes() -> Iterator[None]:
    """For transactional tests (``django_db(transaction=True, databases=["default",
    "owner"])``): pytest-django empties the database after each with ``flush``, which the
    app role may not run (no TRUNCATE); this declares ``default`` a mirror of ``owner`` so
    the owner role, which owns the tables, flushes."""
    test_settings = connections["default"].settings_dict["TEST"]
    previous_mirror = test_settings.get("MIRROR")
    test_settings["MIRROR"] = "owner"
    yield
    test_settings["MIRROR"] = previous_mirror


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give each schemathesis case (``test_api_fuzz.py``: one per API operation) a node id of
    its own. Schemathesis names the item after its operation (``…[POST /api/v1/memories]``),
    but pytest 9 builds a test's id from its ``originalname``, which schemathesis sets to the
    function's name: every case had one id, and pytest-xdist, which schedules by id, ran one
    case of the 60. The id is built as pytest builds any node's (private API, so a collection
    that still holds one id twice stops the run rather than skip cases in silence)."""
    from schemathesis.pytest.plugin import SchemathesisFunction

    cases = [item for item in items if isinstance(item, SchemathesisFunction)]
    for item in cases:
        if item.parent is not None:
            item._id = item.parent.id.child(item.name)  # type: ignore[attr-defined]
    if len({item.nodeid for item in cases}) != len(cases):
        raise pytest.UsageError("schemathesis cases share a node id: pytest-xdist would skip some")


@pytest.fixture(autouse=True)
def _search_in_one_transaction(settings: Any) -> None:
    """Concurrent search jobs run on their own connections, which cannot see a test's
    uncommitted rows: tests search in the test's transaction unless they turn it on
    (``tests/memories/test_search_concurrency.py``, with committed data). Likewise, work deferred
    until after a response runs in the request's thread, so tests see it at once. Embedding
    runs one batch at a time (``EMBEDDING_PARALLEL_BATCHES``, at the top of this module), and
    nothing analyzes the memory table unless the test asks (``MEMORY_STATISTICS_MIN_ROWS``)."""
    settings.MEMORY_SEARCH_THREADS = 0
    settings.AFTER_RESPONSE_IN_BACKGROUND = False
    settings.EMBEDDING_PARALLEL_BATCHES = 1
    # The memory table is analyzed again (by the owner role, on another connection) only
    # where a test asks for it: tests/memories/test_planner_statistics.py.
    settings.MEMORY_STATISTICS_MIN_ROWS = 10**9


@pytest.fixture(autouse=True)
def _embedder(request: pytest.FixtureRequest) -> Iterator[None]:
    """The deterministic hashing embedder (``tests/fake_embedder.py``) unless the test is
    marked ``real_embedder`` (it measures what the bundled MiniLM model understands)."""
    if request.node.get_closest_marker("real_embedder"):
        yield
        return
    from memories.embedding import embedders
    from tests.fake_embedder import HashingEmbedder

    previous = embedders.set_embedder(HashingEmbedder())
    try:
        yield
    finally:
        embedders.set_embedder(previous)


@pytest.fixture(autouse=True)
def _language_model_offline(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test reaches a language model unless it starts one and points the settings at it
    (``tests/llm/``): every purpose answers with its offline fallback, and each test
    starts with empty LLM clients, caches and readiness report. (A test that imports
    ``memory_project.wsgi`` marks this process a web worker; the tests are not one.)"""
    from llm import cache, client, health

    monkeypatch.delenv("MEMORY_WEB_PROCESS", raising=False)
    settings.LLM_OFFLINE = True
    client.reset()
    cache.clear_local()
    health.reset()
    yield
    client.reset()
    cache.clear_local()
    health.reset()


@pytest.fixture(autouse=True)
def _fresh_breakers() -> Iterator[None]:
    """Circuit breakers and the rate limiter's client are per process: start each test
    with closed circuits, so one test's failures cannot open another's."""
    from memory_project import resilience
    from tenants import ratelimit

    resilience.reset_breakers()
    ratelimit.reset_client()
    _forget_invalid_key_counts()
    yield
    resilience.reset_breakers()


def _forget_invalid_key_counts() -> None:
    """Every test client sends from 127.0.0.1: one test's invalid keys must not throttle the
    next test's (the counters are per address, in Redis)."""
    import redis
    from django.conf import settings

    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1)
        doomed = list(client.scan_iter(match="ratelimit:badkey:*", count=1000))
        if doomed:
            client.delete(*doomed)
        client.close()
    except redis.RedisError:
        pass  # a test that stopped Redis on purpose


@pytest.fixture
def own_redis() -> Iterator[Any]:
    """A Redis server of the test's own (``tests.fault_helpers.RedisServer``), which it may
    stop and start; this process's cache, rate limiter and breakers use it meanwhile."""
    from tests.fault_helpers import redis_for_this_process

    with redis_for_this_process() as server:
        yield server


@pytest.fixture
def anon() -> APIClient:
    return APIClient()
