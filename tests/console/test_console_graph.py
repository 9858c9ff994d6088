"""The console's knowledge graph explorer: entity search, an entity's neighbourhood (the
drawing's JSON and the same nodes as a table), its memories, the path form, bad input shown on
the page, another tenant's entity answering like a missing one, and who may open it. The
browser test draws the neighbourhood in Chromium and clicks through to a neighbour."""

from __future__ import annotations

import html
import json
import re
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client
from django.utils.html import escape
from playwright.sync_api import Page, expect

from graph import selectors
from memories.models import Memory
from tenants.context import tenant_scope
from tests.console.browser_helpers import BROWSER_TEST, shot, sign_in
from tests.console_helpers import MISSING, console_user, platform_admin
from tests.graph.graph_helpers import graph_env, remember

pytestmark = pytest.mark.django_db
__all__ = ["graph_env"]

TEXTS = ("Maria works at Google in Lisbon.",
         "Maria's team at Google fixed the memory leak in Project Atlas.",
         "Tom lives in Paris.")


def entity(tenant: Any, name: str) -> Any:
    with tenant_scope(tenant.ctx):
        return selectors.entity_named(tenant.ctx, name, field="name")


def graph_url(tenant: Any, entity_id: Any = None) -> str:
    base = f"/console/t/{tenant.tenant.slug}/graph/"
    return base if entity_id is None else f"{base}entities/{quote(str(entity_id))}/"


def text(response: Any) -> str:
    """The page, without the logout form's CSRF token (new on every page)."""
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", response.content.decode())


def browser_test(test: Callable[..., None]) -> Callable[..., None]:
    """The browser tests' marks (:data:`BROWSER_TEST`) on one test of this module."""
    for mark in BROWSER_TEST:
        test = mark(test)
    return test


def rows(response: Any, table: str) -> list[list[str]]:
    """The cells (tags stripped) of each body row of the table ``#table``."""
    markup = text(response).split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    body = markup.split("<tbody>", 1)[1]
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
             for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


def drawing(response: Any) -> dict[str, Any]:
    found = re.search(r'<script id="graph-data" type="application/json">(.*?)</script>',
                      text(response), re.S)
    assert found, "no drawing data on the page"
    data: dict[str, Any] = json.loads(found.group(1))
    return data


@pytest.fixture
def stored(tenant_a: Any, graph_env: Any) -> list[Memory]:
    """Tenant A's three memories, their graph extracted."""
    return remember(tenant_a, *TEXTS)


def test_it_finds_entities_by_name_and_links_them(tenant_a: Any, tenant_b: Any,
                                                  stored: list[Memory], admin: Client) -> None:
    remember(tenant_b, "Maria moved to Berlin.")
    found = admin.get(graph_url(tenant_a), {"q": "mari"})
    assert found.status_code == 200
    assert [r[0] for r in rows(found, "entity-matches")] == ["Maria"]
    maria = entity(tenant_a, "Maria")
    assert f'href="{graph_url(tenant_a, maria.id)}"' in text(found)
    assert found.context["matches"][0].type.upper() == "PERSON"
    berlin = admin.get(graph_url(tenant_a), {"q": "Berlin"})
    assert berlin.status_code == 200 and "No entity matches" in text(berlin)
    nav = admin.get(graph_url(tenant_a))
    assert f'href="{graph_url(tenant_a)}">Knowledge graph</a>' in text(nav)


def test_the_neighbourhood_is_drawn_and_tabled_with_the_memories(
        tenant_a: Any, stored: list[Memory], admin: Client) -> None:
    maria = entity(tenant_a, "Maria")
    near = admin.get(graph_url(tenant_a, maria.id), {"depth": "1"})
    assert near.status_code == 200
    table = [[name, kind, kind_type.upper(), hops]
             for name, kind, kind_type, hops in rows(near, "neighbourhood")]
    assert table[0] == ["Maria", "entity", "PERSON", "0"]
    names = {r[0]: r[1:] for r in table[1:]}
    assert names["Google"][0::2] == ["entity", "1"]
    assert names["Google"][1].startswith("ORGANI")
    assert names[TEXTS[0]] == ["memory", "USER", "1"]
    assert TEXTS[2] not in names and "Tom" not in names
    data = drawing(near)
    assert data["centre"] == str(maria.id) and data["depth"] == 1
    assert len(data["nodes"]) == len(table)
    assert {n["label"] for n in data["nodes"]} == {r[0] for r in table}
    shown = {n["id"] for n in data["nodes"]}
    ends = {end for e in data["edges"] for end in (e["source"], e["target"])}
    assert ends <= shown and shown - {data["centre"]} <= ends
    by_kind = {n["kind"]: n for n in data["nodes"]}
    slug = tenant_a.tenant.slug
    assert by_kind["memory"]["href"].startswith(f"/console/t/{slug}/memories/")
    assert by_kind["memory"]["colour"] != next(
        n["colour"] for n in data["nodes"] if n["type"].upper() == "PERSON")
    google = next(n for n in data["nodes"] if n["label"] == "Google")
    assert google["href"] == graph_url(tenant_a, google["id"]) + "?depth=1"
    memories = text(near).split('id="entity-memories"', 1)[1].split("</ul>", 1)[0]
    for memory in stored[:2]:
        assert f"/console/t/{slug}/memories/{memory.pk}/" in memories
    assert str(stored[2].pk) not in memories
    deeper = admin.get(graph_url(tenant_a, maria.id), {"depth": "3"})
    assert deeper.status_code == 200
    assert len(rows(deeper, "neighbourhood")) >= len(table)


def test_the_path_form_shows_each_step_and_the_explanation(
        tenant_a: Any, stored: list[Memory], admin: Client) -> None:
    answer = admin.get(graph_url(tenant_a), {"from": "Lisbon", "to": "project atlas",
                                             "hops": "6"})
    assert answer.status_code == 200
    page = text(answer)
    steps = page.split('id="path-steps"', 1)[1].split("</ol>", 1)[0]
    path = answer.context["answer"].path
    assert path.hops >= 1
    labels = [n.label for n in path.nodes]
    assert labels[0] == "Lisbon" and labels[-1] == "Project Atlas"
    positions = [steps.index(label) for label in labels]
    assert positions == sorted(positions)
    for step in path.steps:
        assert step.relation in steps
    assert path.explanation and escape(path.explanation) in page
    lisbon, atlas = entity(tenant_a, "Lisbon"), entity(tenant_a, "Project Atlas")
    by_id = admin.get(graph_url(tenant_a), {"from": str(lisbon.id), "to": str(atlas.id)})
    assert by_id.status_code == 200 and by_id.context["answer"].path.hops == path.hops
    apart = admin.get(graph_url(tenant_a), {"from": "Maria", "to": "Paris", "hops": "6"})
    assert apart.status_code == 200
    assert "Maria and Paris are not connected within 6 hops." in text(apart)
    close = admin.get(graph_url(tenant_a), {"from": "Lisbon", "to": "Project Atlas",
                                            "hops": "1"})
    assert "not connected within 1 hop." in text(close)


@pytest.mark.parametrize(("params", "status", "said"), [
    ({"q": ""}, 400, "Name: type a name."),
    ({"q": "   "}, 400, "Name: type a name."),
    ({"q": "x" * 201}, 400, "at most 200 characters"),
    ({"q": "'; DROP TABLE entities; --"}, 200, "No entity matches"),
    ({"from": "", "to": "Maria"}, 400, "From: type a name."),
    ({"from": "Maria", "to": ""}, 400, "To: type a name."),
    ({"from": "Maria", "to": "Nobody Known"}, 404, "No entity named"),
    ({"from": "Robert'); DROP TABLE entities;--", "to": "Maria"}, 404, "No entity named"),
    ({"from": 'Maria" OR 1=1 --', "to": "Paris"}, 404, "No entity named"),
    ({"from": "Maria", "to": "Paris", "hops": "0"}, 400, "Hops must be an integer from 1 to 6"),
    ({"from": "Maria", "to": "Paris", "hops": "7"}, 400, "Hops must be an integer from 1 to 6"),
    ({"from": "Maria", "to": "Paris", "hops": "two"}, 400, "Hops must be an integer"),
    ({"from": str(MISSING), "to": "Maria"}, 404, "No such node in the graph."),
])
def test_bad_search_and_path_input_is_a_message_on_the_page(
        tenant_a: Any, stored: list[Memory], admin: Client, params: dict[str, str],
        status: int, said: str) -> None:
    response = admin.get(graph_url(tenant_a), params)
    assert response.status_code == status, text(response)[:500]
    body = text(response)
    assert escape(said) in body
    assert 'role="alert"' in body or "No entity matches" in body
    assert 'id="path-form"' in body


@pytest.mark.parametrize("depth", ["0", "4", "-1", "two", "1.5", "2 OR 1=1"])
def test_a_depth_out_of_range_is_a_message_on_the_page(
        tenant_a: Any, stored: list[Memory], admin: Client, depth: str) -> None:
    maria = entity(tenant_a, "Maria")
    response = admin.get(graph_url(tenant_a, maria.id), {"depth": depth})
    assert response.status_code == 400
    body = text(response)
    assert "Depth must be an integer from 1 to 3." in body
    assert 'id="graph-data"' not in body and 'id="entity-memories"' in body


def test_another_tenants_entity_answers_like_a_missing_one(
        tenant_a: Any, tenant_b: Any, stored: list[Memory], admin: Client) -> None:
    remember(tenant_b, "Maria works at Globex in Berlin.")
    theirs = entity(tenant_b, "Maria")
    assert theirs.id != entity(tenant_a, "Maria").id
    answers = [admin.get(graph_url(tenant_a, pk)) for pk in
               (theirs.id, MISSING, uuid.uuid4(), "not-an-id", "1' OR '1'='1")]
    assert {r.status_code for r in answers} == {404}
    assert len({text(r) for r in answers}) == 1
    assert "Globex" not in text(answers[0]) and "Berlin" not in text(answers[0])
    path = admin.get(graph_url(tenant_a), {"from": str(theirs.id), "to": "Maria"})
    assert path.status_code == 404 and "No such node in the graph." in text(path)
    assert "Globex" not in text(path)


def test_a_reviewer_is_refused_and_a_platform_admin_may_look(
        tenant_a: Any, stored: list[Memory]) -> None:
    maria = entity(tenant_a, "Maria")
    reviewer = Client()
    reviewer.force_login(console_user(tenant_a, "rita", "reviewer"))
    for url in (graph_url(tenant_a), graph_url(tenant_a, maria.id)):
        refused = reviewer.get(url, {"q": "Maria"})
        assert refused.status_code == 403
        assert "Maria" not in text(refused)
    queue = reviewer.get(f"/console/t/{tenant_a.tenant.slug}/reviews/")
    assert "Knowledge graph" not in text(queue)
    root = Client()
    root.force_login(platform_admin())
    assert root.get(graph_url(tenant_a, maria.id)).status_code == 200


@browser_test
@pytest.mark.usefixtures("graph_env")
def test_the_explorer_draws_the_neighbourhood_and_clicks_through(
        live_server: Any, page: Page, tenant_a: Any) -> None:
    """In Chromium: search, open Maria, the canvas holds as many nodes as the JSON and the
    table, a click on Google's node opens Google's neighbourhood; screenshots at desktop
    width and at 390 px."""
    base, slug = live_server.url, tenant_a.tenant.slug
    remember(tenant_a, *TEXTS)
    console_user(tenant_a, "alice", "admin")
    sign_in(page, base, "alice")
    page.goto(f"{base}/console/t/{slug}/")
    page.click("text=Knowledge graph")
    page.fill("#graph-q", "maria")
    page.click("#entity-search input[type=submit]")
    page.click("#entity-matches a:text('Maria')")
    page.select_option("#graph-depth", "2")
    page.click("#depth-form input[type=submit]")
    drawn = page.locator("#graph-drawing[data-drawn=true]")
    expect(drawn).to_have_count(1)
    expect(page.locator("#graph-drawing canvas")).to_have_count(1)
    data = json.loads(page.locator("#graph-data").text_content() or "{}")
    expect(page.locator("#neighbourhood tbody tr")).to_have_count(len(data["nodes"]))
    assert drawn.get_attribute("data-nodes") == str(len(data["nodes"]))
    page.wait_for_timeout(300)
    shot(page, "graph-explorer")
    google = next(n for n in data["nodes"] if n["label"] == "Google")
    spot = page.evaluate("""(id) => { const holder = document.getElementById('graph-drawing');
        const p = holder.network.canvasToDOM(holder.network.getPosition(id));
        const box = holder.getBoundingClientRect();
        return {x: box.left + p.x, y: box.top + p.y}; }""", google["id"])
    with page.expect_navigation():
        page.mouse.click(spot["x"], spot["y"])
    assert page.url.endswith(google["href"])
    expect(page.locator("#entity-heading")).to_contain_text("Google")
    expect(page.locator("#graph-drawing[data-drawn=true] canvas")).to_have_count(1)
    page.fill("#path-from", "Lisbon")
    page.fill("#path-to", "Project Atlas")
    page.click("#path-form input[type=submit]")
    expect(page.locator("#path-explanation")).not_to_be_empty()
    assert page.locator("#path-steps li").count() >= 2
    shot(page, "graph-path")
    page.go_back()
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(page.locator("#graph-drawing[data-drawn=true] canvas")).to_have_count(1)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, width
    shot(page, "graph-explorer-390")
