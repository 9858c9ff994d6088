"""The graph's REST API (``/api/v1/graph/``) on memories extracted for real: entities, the
memories that mention them, neighbourhoods, explained paths, point-in-time restore; bad
input, another tenant's ids, roles; and ``/health/graph`` and ``/ready/graph``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from uuid6 import uuid7

from graph import maintenance
from graph.objects import reset_object_store
from graph.writer import writer_lock
from tenants.context import tenant_scope
from tests.contract import TenantApiContract
from tests.graph.graph_helpers import graph_env, remember
from tests.helpers import assert_error, body, new_key

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("graph_env")]
__all__ = ["graph_env"]

G = "/api/v1/graph"
WORKS = "Maria works at Google in Lisbon."
TEAM = "Maria's team at Google fixed the memory leak in Project Atlas."
INJECTION = "Robert'); DROP TABLE entities;--"


class TestGraphContract(TenantApiContract):
    operations = ("graph.entity_search", "graph.entity_get", "graph.entity_memories",
                  "graph.memory_entities", "graph.neighbours", "graph.path", "graph.restore")


@pytest.fixture
def maria(tenant_a: Any) -> list[Any]:
    """Tenant A's two memories about Maria, extracted."""
    return remember(tenant_a, WORKS, TEAM)


def get(tenant: Any, url: str, **params: Any) -> Any:
    return tenant.client.get(url, params)


def ok(response: Any) -> Any:
    assert response.status_code == 200, response.content[:500]
    return body(response)


def entity(tenant: Any, name: str) -> dict[str, Any]:
    """The entity ``name`` as the search answers it."""
    found = [e for e in ok(get(tenant, f"{G}/entities", q=name))["results"]
             if e["name"] == name]
    assert found, name
    return dict(found[0])


# --- reads ----------------------------------------------------------------------------------

def test_it_finds_entities_by_part_of_a_name(tenant_a: Any, maria: Any) -> None:
    results = ok(get(tenant_a, f"{G}/entities", q="maria"))["results"]
    assert results[0]["name"] == "Maria" and results[0]["type"].lower() == "person"
    assert set(results[0]) == {"id", "name", "type", "aliases"}
    assert "Google" in {e["name"] for e in ok(get(tenant_a, f"{G}/entities", q="goo"))[
        "results"]}
    assert len(ok(get(tenant_a, f"{G}/entities", q="o", limit=1))["results"]) == 1
    assert ok(get(tenant_a, f"{G}/entities", q="Tokyo")) == {"results": []}


def test_it_gets_an_entity_by_id(tenant_a: Any, maria: Any) -> None:
    google = entity(tenant_a, "Google")
    assert ok(get(tenant_a, f"{G}/entities/{google['id']}")) == google


def test_it_lists_the_memories_that_mention_an_entity_newest_first(tenant_a: Any,
                                                                  maria: Any) -> None:
    google = entity(tenant_a, "Google")
    data = ok(get(tenant_a, f"{G}/entities/{google['id']}/memories"))
    assert data["entity"] == google
    assert [m["id"] for m in data["results"]] == [str(maria[1].pk), str(maria[0].pk)]
    assert set(data["results"][0]) == {"id", "content", "layer", "createdAt"}
    assert data["results"][0]["content"] == TEAM and data["results"][0]["layer"] == "user"
    one = ok(get(tenant_a, f"{G}/entities/{google['id']}/memories", limit=1))["results"]
    assert [m["id"] for m in one] == [str(maria[1].pk)]


def test_it_lists_the_entities_a_memory_mentions(tenant_a: Any, maria: Any) -> None:
    results = ok(get(tenant_a, f"{G}/memories/{maria[0].pk}/entities"))["results"]
    assert [e["name"] for e in results] == ["Google", "Lisbon", "Maria"]
    assert all(isinstance(e["type"], str) and e["type"] for e in results)
    assert results == [entity(tenant_a, n) for n in ("Google", "Lisbon", "Maria")]


def test_it_walks_the_neighbourhood_of_an_entity_nearest_first(tenant_a: Any,
                                                              maria: Any) -> None:
    lisbon = entity(tenant_a, "Lisbon")
    data = ok(get(tenant_a, f"{G}/nodes/{lisbon['id']}/neighbours", depth=1))
    assert data["node"] == {"id": lisbon["id"], "kind": "entity", "label": "Lisbon",
                            "type": lisbon["type"], "aliases": ["Lisbon"], "depth": 0}
    near = {(n["kind"], n["label"]) for n in data["results"]}
    assert ("memory", WORKS) in near and ("memory", TEAM) not in near
    assert all(n["depth"] == 1 for n in data["results"])
    memory = next(n for n in data["results"] if n["kind"] == "memory")
    assert set(memory) == {"id", "kind", "label", "type", "depth", "via", "relation"}
    assert memory["relation"] == "MENTIONS" and memory["via"] == lisbon["id"]
    assert memory["type"] == "user"

    wide = ok(get(tenant_a, f"{G}/nodes/{lisbon['id']}/neighbours", depth=3))["results"]
    depths = [n["depth"] for n in wide]
    assert depths == sorted(depths) and max(depths) <= 3
    assert ("memory", TEAM) in {(n["kind"], n["label"]) for n in wide}
    only = ok(get(tenant_a, f"{G}/nodes/{lisbon['id']}/neighbours", kind="memory",
                  depth=3))["results"]
    assert only and {n["kind"] for n in only} == {"memory"}
    assert len(ok(get(tenant_a, f"{G}/nodes/{lisbon['id']}/neighbours", depth=3,
                      limit=2))["results"]) == 2


def test_it_walks_the_neighbourhood_of_a_memory(tenant_a: Any, maria: Any) -> None:
    data = ok(get(tenant_a, f"{G}/nodes/{maria[0].pk}/neighbours", depth=2))
    assert data["node"]["kind"] == "memory" and data["node"]["label"] == WORKS
    assert {"Maria", "Google", "Lisbon"} <= {n["label"] for n in data["results"]
                                             if n["depth"] == 1}
    assert str(maria[1].pk) in {n["id"] for n in data["results"] if n["depth"] == 2}


def test_it_explains_the_path_between_two_memories(tenant_a: Any, maria: Any) -> None:
    data = ok(get(tenant_a, f"{G}/path", **{"from": maria[0].pk, "to": maria[1].pk}))
    assert data["found"] is True and data["hops"] == 2
    assert [n["id"] for n in data["nodes"]][::2] == [str(maria[0].pk), str(maria[1].pk)]
    assert data["nodes"][1]["kind"] == "entity"
    assert data["nodes"][1]["label"] in {"Maria", "Google"}
    for step, left, right in zip(data["steps"], data["nodes"], data["nodes"][1:],
                                 strict=False):
        assert (step["source"], step["target"]) in {(left["id"], right["id"]),
                                                    (right["id"], left["id"])}
        assert step["relation"] == "MENTIONS"
    assert data["nodes"][1]["label"] in data["explanation"]
    assert "mentions" in data["explanation"]


def test_it_explains_the_path_between_two_names(tenant_a: Any, maria: Any) -> None:
    data = ok(get(tenant_a, f"{G}/path", fromName="lisbon", toName="Project Atlas"))
    assert data["found"] is True and data["hops"] >= 1
    assert (data["nodes"][0]["label"], data["nodes"][-1]["label"]) == ("Lisbon",
                                                                      "Project Atlas")
    assert len(data["steps"]) == data["hops"] == len(data["nodes"]) - 1
    assert data["explanation"].startswith("Lisbon")


def test_it_answers_found_false_when_nothing_connects_them(tenant_a: Any,
                                                           maria: Any) -> None:
    [tokyo] = remember(tenant_a, "Tokyo hosted the Olympics.")
    far = ok(get(tenant_a, f"{G}/path", **{"from": maria[0].pk, "to": tokyo.pk}))
    assert far == {"found": False, "hops": 0, "nodes": [], "steps": [],
                   "explanation": "No path of at most 6 hops connects them."}
    short = ok(get(tenant_a, f"{G}/path", maxDepth=1,
                   **{"from": maria[0].pk, "to": maria[1].pk}))
    assert short["found"] is False and short["nodes"] == []
    same = ok(get(tenant_a, f"{G}/path", **{"from": maria[0].pk, "to": maria[0].pk}))
    assert (same["found"], same["hops"], len(same["nodes"])) == (True, 0, 1)


# --- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", ["0", "100", "abc", "", "1.5", "-1", "4"])
def test_it_refuses_a_depth_outside_1_to_3(tenant_a: Any, maria: Any, depth: str) -> None:
    error = assert_error(get(tenant_a, f"{G}/nodes/{maria[0].pk}/neighbours", depth=depth),
                         400, "INVALID_INPUT")
    assert error["details"] == {"field": "depth", "min": 1, "max": 3}
    assert error["operation"] == "graph.neighbours"


@pytest.mark.parametrize("limit", ["0", "1000", "101", "x", ""])
def test_it_refuses_a_limit_outside_1_to_100(tenant_a: Any, maria: Any, limit: str) -> None:
    google = entity(tenant_a, "Google")
    for url, params in ((f"{G}/entities", {"q": "Maria"}),
                        (f"{G}/entities/{google['id']}/memories", {}),
                        (f"{G}/nodes/{google['id']}/neighbours", {})):
        error = assert_error(get(tenant_a, url, limit=limit, **params), 400, "INVALID_INPUT")
        assert error["details"] == {"field": "limit", "min": 1, "max": 100}


@pytest.mark.parametrize(("params", "code"), [
    ({}, "INVALID_INPUT"), ({"q": ""}, "INVALID_INPUT"), ({"q": "   "}, "INVALID_INPUT"),
    ({"q": "a\x00b"}, "INVALID_INPUT"), ({"q": "x" * 201}, "QUERY_TOO_LONG"),
    ({"q": "Maria", "layer": "user"}, "INVALID_INPUT"),
])
def test_it_refuses_a_bad_search(tenant_a: Any, params: dict[str, str], code: str) -> None:
    assert_error(get(tenant_a, f"{G}/entities", **params), 400, code)


def test_it_refuses_an_unknown_kind(tenant_a: Any, maria: Any) -> None:
    assert_error(get(tenant_a, f"{G}/nodes/{maria[0].pk}/neighbours", kind="person"), 400,
                 "INVALID_INPUT")


@pytest.mark.parametrize("bad", ["not-a-uuid", "123", "%27%3B%20DROP%20TABLE%20entities",
                                 "00000000-0000-0000-0000-000000000000", "new"])
def test_unknown_and_malformed_ids_answer_404_in_the_envelope(tenant_a: Any, maria: Any,
                                                              bad: str) -> None:
    for url, code in ((f"{G}/entities/{bad}", "NOT_FOUND"),
                      (f"{G}/entities/{bad}/memories", "NOT_FOUND"),
                      (f"{G}/memories/{bad}/entities", "MEMORY_NOT_FOUND"),
                      (f"{G}/nodes/{bad}/neighbours", "NOT_FOUND")):
        assert_error(tenant_a.client.get(url), 404, code)
    assert_error(get(tenant_a, f"{G}/path", **{"from": bad, "to": maria[0].pk}), 404,
                 "NOT_FOUND")
    entity_id = entity(tenant_a, "Maria")["id"]
    assert_error(tenant_a.client.get(f"{G}/memories/{entity_id}/entities"), 404,
                 "MEMORY_NOT_FOUND")  # an entity's id names no memory


@pytest.mark.parametrize("params", [
    {}, {"from": "A"}, {"to": "A"}, {"fromName": "Maria"}, {"from": "A", "toName": "Google"},
    {"from": "A", "to": "B", "fromName": "Maria", "toName": "Google"},
    {"fromName": "Maria", "toName": "Google", "to": "B"}, {"fromName": " ", "toName": "Google"},
    {"fromName": "Maria", "toName": "Google", "maxDepth": "0"},
    {"fromName": "Maria", "toName": "Google", "maxDepth": "7"},
    {"fromName": "Maria", "toName": "Google", "maxDepth": "abc"},
    {"fromName": "Maria", "toName": "x" * 201},
])
def test_it_wants_exactly_one_pair_of_ends(tenant_a: Any, maria: Any,
                                           params: dict[str, str]) -> None:
    replaced = {k: str(maria[0].pk) if v == "A" else str(maria[1].pk) if v == "B" else v
                for k, v in params.items()}
    error = assert_error(get(tenant_a, f"{G}/path", **replaced), 400)
    assert error["code"] in ("INVALID_INPUT", "QUERY_TOO_LONG")
    assert error["operation"] == "graph.path"


@pytest.mark.parametrize("name", [INJECTION, "O'Brien", 'say "hi"', "a; DELETE FROM x",
                                  "50%_off*", "x\\' OR 1=1", "Maria' OR '1'='1", "$needle"])
def test_names_with_quotes_and_sql_are_only_names(tenant_a: Any, maria: Any,
                                                  name: str) -> None:
    with tenant_scope(tenant_a.ctx):
        before = maintenance.counts(tenant_a.ctx)
    error = assert_error(get(tenant_a, f"{G}/path", fromName=name, toName="Maria"), 404,
                         "NOT_FOUND")
    assert error["details"] == {"field": "fromName"}
    assert ok(get(tenant_a, f"{G}/entities", q=name)) == {"results": []}
    with tenant_scope(tenant_a.ctx):
        assert maintenance.counts(tenant_a.ctx) == before
    assert entity(tenant_a, "Maria")["type"].lower() == "person"
    path = ok(get(tenant_a, f"{G}/path", fromName="Maria", toName="Google"))
    assert path["found"] is True


# --- tenants and roles ----------------------------------------------------------------------

def _same(foreign: Any, missing: Any, replace: dict[str, str]) -> None:
    text = foreign.content.decode()
    for old, new in replace.items():
        text = text.replace(old, new)
    assert foreign.status_code == missing.status_code == 404, foreign.content
    assert json.loads(text) == body(missing)


def test_another_tenants_ids_answer_exactly_like_missing_ones(tenant_a: Any, tenant_b: Any,
                                                              maria: Any) -> None:
    theirs = remember(tenant_b, "Ana works at Globex in Porto.")
    b_entity = entity(tenant_b, "Ana")["id"]
    b_memory = str(theirs[0].pk)
    missing = str(uuid7())
    mine = str(maria[0].pk)
    for template in (f"{G}/entities/{{}}", f"{G}/entities/{{}}/memories",
                     f"{G}/memories/{{}}/entities", f"{G}/nodes/{{}}/neighbours",
                     f"{G}/path?from={{}}&to={mine}", f"{G}/path?from={mine}&to={{}}"):
        for foreign in (b_entity, b_memory):
            _same(tenant_a.client.get(template.format(foreign)),
                  tenant_a.client.get(template.format(missing)), {foreign: missing})
    _same(get(tenant_a, f"{G}/path", fromName="Ana", toName="Maria"),
          get(tenant_a, f"{G}/path", fromName="Zed", toName="Maria"), {"Ana": "Zed"})
    assert ok(get(tenant_a, f"{G}/entities", q="Globex")) == {"results": []}
    # B reaches its own
    assert ok(get(tenant_b, f"{G}/entities/{b_entity}"))["name"] == "Ana"
    assert ok(get(tenant_b, f"{G}/memories/{b_memory}/entities"))["results"]


def test_a_reader_reads_the_graph_but_may_not_restore_it(tenant_a: Any, maria: Any) -> None:
    _, reader = new_key(tenant_a, roles=["reader"])
    _, writer = new_key(tenant_a, roles=["writer"])
    assert reader.get(f"{G}/entities", {"q": "Maria"}).status_code == 200
    for client in (reader, writer):
        error = assert_error(client.post(f"{G}/restore", {"at": "2100-01-01T00:00:00Z"},
                                         format="json"), 403, "UNAUTHORIZED")
        assert error["details"]["operation"] == "graph.restore"
        assert error["details"]["requiredRoles"] == ["admin"]


def test_a_restricted_key_may_not_read_the_graph(tenant_a: Any, maria: Any) -> None:
    """Entities come from every memory of the tenant, also those outside the key's reach."""
    _, restricted = new_key(tenant_a, roles=["reader"], pinned_identifiers={"userId": "u1"})
    for url in (f"{G}/entities?q=Maria", f"{G}/memories/{maria[0].pk}/entities"):
        assert_error(restricted.get(url), 403, "UNAUTHORIZED")


# --- restore --------------------------------------------------------------------------------

def test_an_admin_restores_the_graph_as_it_was(tenant_a: Any) -> None:
    [works] = remember(tenant_a, WORKS)
    with tenant_scope(tenant_a.ctx):
        maintenance.graph_backup(tenant_a.ctx)
    [team] = remember(tenant_a, TEAM)
    assert entity(tenant_a, "Project Atlas")
    at = datetime.now(UTC).isoformat()
    data = ok(tenant_a.client.post(f"{G}/restore", {"at": at}, format="json"))
    assert set(data) == {"backup", "takenAt", "before", "after", "erasedSince", "version"}
    assert data["before"]["memory_nodes"] == 2 and data["after"]["memory_nodes"] == 1
    assert data["erasedSince"] == 0
    assert ok(get(tenant_a, f"{G}/memories/{team.pk}/entities")) == {"results": []}
    assert ok(get(tenant_a, f"{G}/entities", q="Atlas")) == {"results": []}
    assert len(ok(get(tenant_a, f"{G}/memories/{works.pk}/entities"))["results"]) == 3


@pytest.mark.parametrize(("payload", "status", "code"), [
    ({}, 400, "INVALID_INPUT"), ({"at": "yesterday"}, 400, "INVALID_INPUT"),
    ({"at": "2025-01-01T00:00:00"}, 400, "INVALID_INPUT"),
    ({"at": "2000-01-01T00:00:00Z"}, 404, "NOT_FOUND"),
    # before year 1 in UTC: the earliest moment there is, not "out of range"
    ({"at": "0001-01-01T00:00:00+01:01"}, 404, "NOT_FOUND"),
])
def test_it_refuses_a_restore_it_cannot_do(tenant_a: Any, payload: dict[str, str],
                                          status: int, code: str) -> None:
    error = assert_error(tenant_a.client.post(f"{G}/restore", payload, format="json"),
                         status, code)
    assert error["operation"] == "graph.restore"


# --- health and readiness -------------------------------------------------------------------

def _components(response: Any, status: int, names: set[str]) -> dict[str, Any]:
    assert response.status_code == status, response.content
    data = body(response)
    assert set(data["components"]) == names
    for component in data["components"].values():
        assert component["latencyMs"] >= 0
    return dict(data)


def test_graph_health_and_readiness_answer_without_a_key(client: Any, tenant_a: Any,
                                                         django_assert_num_queries: Any
                                                         ) -> None:
    with django_assert_num_queries(0):
        fresh = _components(client.get("/health/graph"), 200,
                            {"duckdb", "objectStore", "schema"})
    assert fresh["status"] == "healthy"
    assert fresh["components"]["schema"]["state"] == "absent"
    remember(tenant_a, WORKS)
    health = _components(client.get("/health/graph"), 200, {"duckdb", "objectStore", "schema"})
    assert {c["status"] for c in health["components"].values()} == {"healthy"}
    assert health["components"]["schema"]["state"] == "current"
    assert health["components"]["schema"]["version"] == 2
    with writer_lock(block=False) as held:
        assert held
        busy = _components(client.get("/health/graph"), 200,
                           {"duckdb", "objectStore", "schema"})
    assert busy["components"]["schema"]["state"] == "busy"
    ready = _components(client.get("/ready/graph"), 200, {"query", "objectStore"})
    assert ready["status"] == "ready"
    assert client.post("/health/graph").status_code == 405


def test_graph_health_is_503_when_the_object_store_is_unreachable(client: Any,
                                                                  settings: Any) -> None:
    settings.S3_ENDPOINT_URL = "http://127.0.0.1:9"
    reset_object_store()
    health = _components(client.get("/health/graph"), 503, {"duckdb", "objectStore", "schema"})
    assert health["status"] == "unhealthy"
    assert health["components"]["objectStore"] == {
        "status": "unhealthy", "error": "ObjectStoreUnavailable",
        "latencyMs": health["components"]["objectStore"]["latencyMs"]}
    assert health["components"]["duckdb"]["status"] == "healthy"
    assert "127.0.0.1:9" not in json.dumps(health)  # the error's text goes to the log
    ready = _components(client.get("/ready/graph"), 503, {"query", "objectStore"})
    assert ready["status"] == "not_ready"
    assert ready["components"]["query"]["status"] == "healthy"

