"""``taskId`` (seed 004 ``TaskID``, the ``task_id`` column): accepted on add and bulk add,
returned with the memory, an exact filter of list, search and recall; not a layer identifier;
bad values answer 400 ``INVALID_INPUT``; another tenant's tasks stay invisible."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection, transaction

from memories.models import Memory
from tenants.context import tenant_scope
from tests.helpers import assert_error, body, memory_row, snapshot
from tests.retrieval_helpers import ids, recalled, search, searched

pytestmark = pytest.mark.django_db

M = "/api/v1/memories"
USER = {"userId": "u1"}


def added(tenant: Any, content: str, layer: str = "user", **extra: Any) -> dict[str, Any]:
    payload = {"content": content, "layer": layer,
               "identifiers": extra.pop("identifiers", USER), **extra}
    response = tenant.client.post(M, payload, format="json")
    assert response.status_code == 201, response.content
    return body(response)["memory"]


def listed(tenant: Any, **params: Any) -> dict[str, Any]:
    response = tenant.client.get(M, {"layer": "user", **USER, **params})
    assert response.status_code == 200, response.content
    return body(response)


def raw_post(tenant: Any, url: str, payload: str) -> Any:
    return tenant.client.generic("POST", url, payload, content_type="application/json")


# --- write and read -----------------------------------------------------------------------

def test_a_memory_keeps_its_task_and_returns_it(tenant_a) -> None:
    memory = added(tenant_a, "Compile the quarterly report", taskId="task-7")
    assert memory["taskId"] == "task-7"
    assert memory_row(tenant_a, memory["id"])["task_id"] == "task-7"
    got = body(tenant_a.client.get(f"{M}/{memory['id']}"))["memory"]
    assert got["taskId"] == "task-7"
    assert "taskId" not in got["identifiers"]  # not a layer identifier


@pytest.mark.parametrize("payload", [{}, {"taskId": None}])
def test_a_memory_without_a_task_has_a_null_task_id(tenant_a, payload) -> None:
    memory = added(tenant_a, "No task named", **payload)
    assert memory["taskId"] is None and memory_row(tenant_a, memory["id"])["task_id"] is None


def test_bulk_add_takes_a_task_per_memory(tenant_a) -> None:
    response = tenant_a.client.post(f"{M}/bulk", {"memories": [
        {"content": "Step one of the migration", "layer": "user", "identifiers": USER,
         "taskId": "migrate"},
        {"content": "Unrelated note", "layer": "user", "identifiers": USER},
    ]}, format="json")
    assert response.status_code == 201, response.content
    assert [r["memory"]["taskId"] for r in body(response)["results"]] == ["migrate", None]


def test_the_task_does_not_change_the_layer_or_its_required_identifiers(tenant_a) -> None:
    memory = added(tenant_a, "Session scratch for the task", "session",
                   identifiers={"userId": "u1", "sessionId": "s1"}, taskId="task-7")
    assert (memory["layer"], memory["taskId"]) == ("session", "task-7")
    assert memory["identifiers"] == {"userId": "u1", "sessionId": "s1", "companyId":
                                     tenant_a.tenant.slug}
    response = tenant_a.client.post(M, {"content": "x", "layer": "session", "identifiers": USER,
                                        "taskId": "task-7"}, format="json")
    assert_error(response, 400, "MISSING_IDENTIFIER")


def test_the_export_carries_the_task(tenant_a) -> None:
    added(tenant_a, "Exported with its task", taskId="task-7")
    response = tenant_a.client.get("/api/v1/export")
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert [line["taskId"] for line in lines] == ["task-7"]


# --- filters ------------------------------------------------------------------------------

def three_tasks(tenant: Any) -> dict[str, str]:
    return {
        "t1": added(tenant, "Draft the launch email", taskId="T1")["id"],
        "t1b": added(tenant, "Review the launch email", taskId="T1")["id"],
        "t2": added(tenant, "Draft the launch checklist", taskId="T2")["id"],
        "none": added(tenant, "Draft the launch budget")["id"],
    }


def test_list_filters_by_task_exactly(tenant_a) -> None:
    memories = three_tasks(tenant_a)
    data = listed(tenant_a, taskId="T1")
    assert [m["id"] for m in data["memories"]] == [memories["t1b"], memories["t1"]]
    assert data["totalCount"] == 2
    assert [m["id"] for m in listed(tenant_a, taskId="T2")["memories"]] == [memories["t2"]]
    assert listed(tenant_a, taskId="t1")["memories"] == []  # exact, case included
    assert listed(tenant_a)["totalCount"] == 4


def test_the_task_filter_combines_with_the_metadata_filters(tenant_a) -> None:
    tagged = added(tenant_a, "Tagged and tasked", taskId="T1", metadata={"tags": ["x"]})
    added(tenant_a, "Tagged only", metadata={"tags": ["x"]})
    added(tenant_a, "Tasked only", taskId="T1")
    assert [m["id"] for m in listed(tenant_a, taskId="T1", tags="x")["memories"]] == [
        tagged["id"]]


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_search_and_recall_filter_by_task(tenant_a, mode) -> None:
    memories = three_tasks(tenant_a)
    found = ids(searched(tenant_a, "draft the launch", mode=mode, threshold=0,
                         filter={"taskId": "T1"})["results"])
    assert found and set(found) <= {memories["t1"], memories["t1b"]}
    everything = ids(searched(tenant_a, "draft the launch", mode=mode, threshold=0)["results"])
    assert memories["t2"] in everything
    again = ids(recalled(tenant_a, "draft the launch", min_confidence=0,
                         filter={"taskId": "T2"}))
    assert again == [memories["t2"]]


def test_another_tenant_cannot_reach_a_task_through_the_filter(tenant_a, tenant_b) -> None:
    three_tasks(tenant_a)
    assert listed(tenant_b, taskId="T1") == {"memories": [], "nextCursor": None,
                                             "totalCount": 0}
    assert searched(tenant_b, "draft the launch", threshold=0,
                    filter={"taskId": "T1"})["results"] == []
    mine = added(tenant_b, "Globex has its own T1", taskId="T1")
    assert [m["id"] for m in listed(tenant_b, taskId="T1")["memories"]] == [mine["id"]]
    assert mine["id"] not in [m["id"] for m in listed(tenant_a, taskId="T1")["memories"]]


# --- bad values ---------------------------------------------------------------------------

BAD_TASK_IDS = ['""', '"   "', '"\\t\\n"', '"' + "x" * 256 + '"', "5", "true", "[]", '{"a": 1}',
                '"a\\u0000b"', '"\\ud800"']


@pytest.mark.parametrize("raw", BAD_TASK_IDS)
def test_a_bad_task_id_is_refused_on_add_and_nothing_is_stored(tenant_a, raw) -> None:
    payload = ('{"content": "x", "layer": "user", "identifiers": {"userId": "u1"}, '
               f'"taskId": {raw}}}')
    assert_error(raw_post(tenant_a, M, payload), 400, "INVALID_INPUT")
    bulk = f'{{"memories": [{payload}]}}'
    assert_error(raw_post(tenant_a, f"{M}/bulk", bulk), 400, "INVALID_INPUT")
    assert snapshot(tenant_a) == []


@pytest.mark.parametrize("raw", BAD_TASK_IDS)
def test_a_bad_task_filter_is_refused_by_search_and_recall(tenant_a, raw) -> None:
    for url, text in ((f"{M}/search", "query"), (f"{M}/recall", "topic")):
        payload = (f'{{"{text}": "launch", "identifiers": {{"userId": "u1"}}, '
                   f'"filter": {{"taskId": {raw}}}}}')
        assert_error(raw_post(tenant_a, url, payload), 400, "INVALID_INPUT")


@pytest.mark.parametrize("query", ["taskId=", "taskId=%20", "taskId=a%00b",
                                   "taskId=" + "x" * 256, "taskId=T1&taskId=T2"])
def test_a_bad_task_filter_is_refused_by_list(tenant_a, query) -> None:
    added(tenant_a, "Stays listed", taskId="T1")
    assert_error(tenant_a.client.get(f"{M}?layer=user&userId=u1&{query}"), 400,
                 "INVALID_INPUT")


def test_a_long_but_valid_task_id_round_trips(tenant_a) -> None:
    task = "ü" * 255
    memory = added(tenant_a, "At the limit", taskId=task)
    assert memory["taskId"] == task
    assert [m["id"] for m in listed(tenant_a, taskId=task)["memories"]] == [memory["id"]]
    assert search(tenant_a, "limit", filter={"taskId": task}).status_code == 200


# --- the index ----------------------------------------------------------------------------

def test_a_tasks_memories_can_be_read_from_mem_task_idx(tenant_a) -> None:
    """The partial index serves "one task's memories in id order" (sequential scans
    discouraged, as in ``test_search_plans``: a handful of rows would otherwise be read whole)."""
    three_tasks(tenant_a)
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        sql, params = (Memory.objects.filter(task_id="T1").order_by("id").values("id")
                       .query.sql_with_params())
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + sql, params)
            shown = "\n".join(row[0] for row in cursor.fetchall())
    assert "mem_task_idx" in shown, shown
