"""Per-API-key rate limits counted atomically in Redis: 429 RATE_LIMITED with Retry-After,
per-key limits, exact counting under concurrency, and fail-open when Redis is down; plus
the request size caps (body, limit, query length)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
import redis

from tenants import ratelimit
from tenants import services as tenant_services
from tenants.context import TenantContext, tenant_scope
from tests.conftest import TenantFixture
from tests.helpers import assert_error, new_key

pytestmark = pytest.mark.django_db

M = "/api/v1/memories"


def key_with_limit(tenant: TenantFixture, limit: int | None) -> Any:
    return new_key(tenant, name="limited", rate_limit=limit)[1]


def list_user(client: Any) -> Any:
    return client.get(M, {"layer": "user", "userId": "u1"})


def test_a_key_over_its_limit_gets_429_with_retry_after(tenant_a: TenantFixture,
                                                        settings: Any) -> None:
    settings.RATE_LIMIT_WINDOW_SECONDS = 60
    client = key_with_limit(tenant_a, 3)
    assert [list_user(client).status_code for _ in range(3)] == [200, 200, 200]
    response = list_user(client)
    error = assert_error(response, 429, "RATE_LIMITED")
    assert error["retryable"] is True
    assert 1 <= int(response["Retry-After"]) <= 60
    # Other keys, of this tenant too, have their own budget.
    assert list_user(tenant_a.client).status_code == 200


def test_the_default_limit_comes_from_settings(tenant_a: TenantFixture, settings: Any) -> None:
    settings.RATE_LIMIT_REQUESTS = 2
    client = key_with_limit(tenant_a, None)
    assert [list_user(client).status_code for _ in range(3)] == [200, 200, 429]
    own = key_with_limit(tenant_a, 5)  # a key's own limit wins over the default
    assert [list_user(own).status_code for _ in range(3)] == [200, 200, 200]


def test_zero_disables_the_default_limit(tenant_a: TenantFixture, settings: Any) -> None:
    settings.RATE_LIMIT_REQUESTS = 0
    client = key_with_limit(tenant_a, None)
    assert {list_user(client).status_code for _ in range(5)} == {200}


def test_counting_is_exact_under_concurrency(settings: Any) -> None:
    settings.RATE_LIMIT_WINDOW_SECONDS = 60
    ctx = TenantContext(tenant_id=uuid.uuid4(), tenant_slug="t", principal="api_key:x",
                        api_key_id=uuid.uuid4(), rate_limit=20)
    allowed: list[bool] = []
    lock = threading.Lock()

    def hit() -> None:
        for _ in range(5):
            result = ratelimit.rate_limit_hit(ctx) is None
            with lock:
                allowed.append(result)

    threads = [threading.Thread(target=hit) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(allowed) == 50
    assert allowed.count(True) == 20


def test_the_window_expires_in_redis(settings: Any) -> None:
    settings.RATE_LIMIT_WINDOW_SECONDS = 60
    ctx = TenantContext(tenant_id=uuid.uuid4(), tenant_slug="t", principal="api_key:x",
                        api_key_id=uuid.uuid4(), rate_limit=1)
    assert ratelimit.rate_limit_hit(ctx) is None
    wait = ratelimit.rate_limit_hit(ctx)
    assert wait is not None and 1 <= wait <= 60
    client = redis.Redis.from_url(settings.REDIS_URL)
    keys = client.keys(f"ratelimit:key:{ctx.api_key_id}:*")
    assert len(keys) == 1
    assert 0 < client.ttl(keys[0]) <= 120  # it is the previous window for another minute


def test_redis_down_fails_open_and_flags_the_response(tenant_a: TenantFixture,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: Any) -> Any:
        raise redis.ConnectionError("Connection refused")

    monkeypatch.setattr(ratelimit, "_script", refused)
    client = key_with_limit(tenant_a, 1)
    for _ in range(3):
        response = list_user(client)
        assert response.status_code == 200
        assert "rate_limit" in response["X-Memory-Degraded"].split(",")


def test_unauthenticated_requests_are_not_counted(anon: Any) -> None:
    assert_error(anon.get(M, {"layer": "user", "userId": "u1"}), 401)


def test_a_restricted_creator_cannot_raise_the_limit(tenant_a: TenantFixture) -> None:
    from memory_project.errors import Unauthorized

    limited = TenantContext(tenant_id=tenant_a.tenant.id, tenant_slug=tenant_a.tenant.slug,
                            principal="api_key:x", rate_limit=10)
    with tenant_scope(limited):
        with pytest.raises(Unauthorized):
            tenant_services.api_key_create(limited, rate_limit=11)
        key, _ = tenant_services.api_key_create(limited)
    assert key.rate_limit == 10


@pytest.mark.parametrize(("path", "payload"), [
    (f"{M}/search", {"query": "q", "limit": 101}),
    (f"{M}/search", {"query": "q", "limit": 0}),
    (f"{M}/search", {"query": "x" * 2001}),
    (f"{M}/recall", {"topic": "q", "limit": 1000}),
    (f"{M}/recall", {"topic": "x" * 2001}),
])
def test_limit_and_query_length_are_capped(tenant_a: TenantFixture, path: str,
                                           payload: dict[str, Any]) -> None:
    response = tenant_a.client.post(path, {"identifiers": {"userId": "u1"}, **payload},
                                    format="json")
    assert response.status_code == 400, response.content
    assert_error(response, 400)


def test_list_limit_and_body_size_are_capped(tenant_a: TenantFixture, settings: Any) -> None:
    assert_error(tenant_a.client.get(M, {"layer": "user", "userId": "u1", "limit": 101}), 400)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = tenant_a.client.post(M, {"content": "x" * 2000, "layer": "user",
                                        "identifiers": {"userId": "u1"}}, format="json")
    assert_error(response, 413, "PAYLOAD_TOO_LARGE")


# --- sliding window, per tenant, invalid keys (security review, finding 10) ----------------

def test_a_burst_across_the_window_edge_gets_no_more_than_the_limit(
        settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.RATE_LIMIT_WINDOW_SECONDS = 60
    ctx = TenantContext(tenant_id=uuid.uuid4(), tenant_slug="t", principal="api_key:x",
                        api_key_id=uuid.uuid4(), rate_limit=10)
    now = [6000.0 * 60 + 59.0]  # one second before a window ends
    monkeypatch.setattr(ratelimit.time, "time", lambda: now[0])
    allowed = sum(ratelimit.rate_limit_hit(ctx) is None for _ in range(10))
    now[0] += 2.0  # one second into the next window
    allowed += sum(ratelimit.rate_limit_hit(ctx) is None for _ in range(10))
    assert allowed <= 11  # a fixed window let all 20 through


def test_a_tenant_limit_covers_all_its_keys(tenant_a: TenantFixture, settings: Any) -> None:
    settings.RATE_LIMIT_TENANT_REQUESTS = 4
    clients = [key_with_limit(tenant_a, 100) for _ in range(2)]
    statuses = [list_user(clients[i % 2]).status_code for i in range(6)]
    assert statuses[:4] == [200] * 4
    assert statuses[4:] == [429, 429]


def test_guessing_keys_is_throttled_per_address(anon: Any, settings: Any) -> None:
    settings.RATE_LIMIT_INVALID_KEY_REQUESTS = 3
    guesses = [anon.get(M, {"layer": "user", "userId": "u1"},
                        HTTP_AUTHORIZATION=f"Bearer msk_guess{i:040d}") for i in range(5)]
    assert [r.status_code for r in guesses] == [401, 401, 401, 429, 429]
    assert int(guesses[-1]["Retry-After"]) >= 1
