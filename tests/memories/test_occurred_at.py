"""``occurredAt``: a memory's time on its source's clock, beside ``createdAt``, through the
API (``Memory.occurred_at``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memories.models import Memory
from tenants.context import tenant_scope

URL = "/api/v1/memories"


@pytest.mark.django_db
def test_occurred_at_is_written_read_patched_and_cleared(tenant_a) -> None:
    created = tenant_a.client.post(URL, {
        "content": "We camped by the lake.", "layer": "user",
        "identifiers": {"userId": "u1"}, "occurredAt": "2023-06-20"}, format="json")
    assert created.status_code == 201, created.content
    memory = created.json()["memory"]
    assert memory["occurredAt"] == "2023-06-20T00:00:00Z"
    patched = tenant_a.client.patch(f"{URL}/{memory['id']}",
                                    {"occurredAt": "2023-06-21T09:30:00+02:00"}, format="json")
    assert patched.status_code == 200, patched.content
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.get(pk=memory["id"]).occurred_at == datetime(
            2023, 6, 21, 7, 30, tzinfo=UTC)
    cleared = tenant_a.client.patch(f"{URL}/{memory['id']}", {"occurredAt": None},
                                    format="json")
    assert cleared.status_code == 200
    assert tenant_a.client.get(f"{URL}/{memory['id']}").json()["memory"]["occurredAt"] is None


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["yesterday", "2023-13-01", 20230620, ["2023-06-20"],
                                   "0001-01-01T00:00:00+05:00", "2023-06-20T10:00:00+25:00"])
def test_a_bad_occurred_at_is_refused_and_nothing_is_stored(tenant_a, value) -> None:
    response = tenant_a.client.post(URL, {
        "content": "We camped by the lake.", "layer": "user",
        "identifiers": {"userId": "u1"}, "occurredAt": value}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_INPUT"
    assert "occurredAt" in str(response.json()["error"]["details"])
    with tenant_scope(tenant_a.ctx):
        assert not Memory.objects.exists()


# --- the occurredAt range filter -----------------------------------------------------------


def _three_times(tenant_a) -> dict[str, str]:
    """Two memories dated June and July 2023 by ``occurredAt``, one dated only by its
    ``createdAt`` (now)."""
    made = {}
    for name, when in (("june", "2023-06-20T10:00:00Z"), ("july", "2023-07-02"), ("now", None)):
        response = tenant_a.client.post(URL, {
            "content": f"We went camping by the lake ({name})", "layer": "user",
            "identifiers": {"userId": "u1"}, "occurredAt": when}, format="json")
        assert response.status_code == 201, response.content
        made[name] = response.json()["memory"]["id"]
    return made


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_search_and_recall_keep_to_the_time_range(tenant_a, mode) -> None:
    made = _three_times(tenant_a)

    def found(window: dict[str, str], url: str = "/api/v1/memories/search") -> set[str]:
        response = tenant_a.client.post(url, {
            ("topic" if url.endswith("recall") else "query"): "camping by the lake",
            "identifiers": {"userId": "u1"}, "mode": mode, "threshold": 0,
            "filter": {"occurredAt": window}}, format="json")
        assert response.status_code == 200, response.content
        return {r["memory"]["id"] for r in response.json()["results"]}

    assert found({"gte": "2023-06-01", "lt": "2023-07-01"}) == {made["june"]}
    assert found({"gte": "2023-06-01", "lte": "2023-07-02"}) == {made["june"], made["july"]}
    assert found({"gt": "2024-01-01"}) == {made["now"]}  # createdAt when none was given
    assert found({"lte": "2023-06-20T12:00:00+02:00"}) == {made["june"]}  # 10:00 UTC
    assert found({"lt": "2023-06-20T12:00:00+02:00"}) == set()
    if mode == "hybrid":
        assert found({"lt": "2023-07-01"}, "/api/v1/memories/recall") == {made["june"]}


@pytest.mark.django_db
def test_the_list_keeps_to_the_time_range(tenant_a) -> None:
    made = _three_times(tenant_a)

    def listed(**bounds: str) -> list[str]:
        response = tenant_a.client.get(URL, {"layer": "user", "userId": "u1", **bounds})
        assert response.status_code == 200, response.content
        assert response.json()["totalCount"] == len(response.json()["memories"])
        return [m["id"] for m in response.json()["memories"]]

    assert listed(occurredAt__gte="2023-07-01") == [made["now"], made["july"]]
    assert listed(occurredAt__lt="2023-07-01", occurredAt__gte="2023-01-01") == [made["june"]]


@pytest.mark.django_db
@pytest.mark.parametrize("window", ["2023-06", {}, {"after": "2023-06-01"},
                                    {"gte": "yesterday"}, {"gte": 2023}, {"lt": "2023-13-01"},
                                    {"gte": "0001-01-01T00:00:00+05:00"}])
def test_a_bad_time_range_is_refused(tenant_a, window) -> None:
    response = tenant_a.client.post("/api/v1/memories/search", {
        "query": "camping", "identifiers": {"userId": "u1"},
        "filter": {"occurredAt": window}}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "INVALID_INPUT"


@pytest.mark.django_db
@pytest.mark.parametrize("params", [{"occurredAt": "2023-06-01"},
                                    {"occurredAt__since": "2023-06-01"},
                                    {"occurredAt__gte": "June"}])
def test_a_bad_time_range_in_the_query_string_is_refused(tenant_a, params) -> None:
    response = tenant_a.client.get(URL, {"layer": "user", "userId": "u1", **params})
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "INVALID_INPUT"
