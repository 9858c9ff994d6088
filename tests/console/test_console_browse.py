"""The memory browser of the console's explorer page: filters (and the names other pages link
with), chips, pages, bad input, bulk archive / delete / restore, export as CSV and JSON Lines,
and who may do what (admin only; another tenant's slug is a 404)."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client

from console.browse import BrowseFilters, export_rows
from memories.models import Memory, State
from memories.services.deletion import memory_archive, memory_delete
from tenants.context import tenant_scope
from tenants.models import AuditEntry
from tests.console_helpers import MISSING, audit_actions, console_user

pytestmark = pytest.mark.django_db


def url(tenant: Any, path: str = "memories/") -> str:
    return f"/console/t/{tenant.tenant.slug}/{path}"


def text(response: Any) -> str:
    return response.content.decode()


def listed(response: Any) -> list[str]:
    """The contents of the memories on the browser's page, in order."""
    return [m.content for m in response.context["page"].object_list]


def states(tenant: Any) -> dict[str, str]:
    with tenant_scope(tenant.ctx):
        return dict(Memory.objects.values_list("content", "state"))


def dated(tenant: Any, memory: Memory, day: str) -> None:
    """Pretend ``memory`` was created at noon UTC on ``day`` (YYYY-MM-DD)."""
    when = datetime.fromisoformat(f"{day}T12:00:00+00:00")
    with tenant_scope(tenant.ctx):
        Memory.objects.filter(pk=memory.pk).update(created_at=when)


@pytest.fixture
def seeded(tenant_a: Any) -> dict[str, Memory]:
    """Five memories of tenant A in several layers, kinds, states, tags and days."""
    made = {
        "tea": tenant_a.add("Alice drinks Green Tea", metadata={"tags": ["drinks", "food"]}),
        "agent": tenant_a.add("The agent answers in French", layer="agent",
                              identifiers={"agentId": "bot1", "userId": "u1"}),
        "rule": tenant_a.add("Never share the office code", layer="company", kind="rule",
                             identifiers={"companyId": "acme"}),
        "old": tenant_a.add("Bob moved to Lyon", identifiers={"userId": "u2"},
                            kind="episode", metadata={"tags": ["moves"]}),
        "gone": tenant_a.add("A deleted thought"),
    }
    with tenant_scope(tenant_a.ctx):
        memory_archive(tenant_a.ctx, memory_id=made["old"].pk)
        memory_delete(tenant_a.ctx, memory_id=made["gone"].pk)
    for name, day in (("tea", "2024-05-03"), ("agent", "2024-05-02"), ("rule", "2024-05-01"),
                      ("old", "2024-04-01"), ("gone", "2024-05-03")):
        dated(tenant_a, made[name], day)
    return made


def test_it_lists_every_state_newest_first_and_links_each_row_to_its_edit_form(
        seeded: dict[str, Memory], tenant_a: Any, tenant_b: Any, admin: Client) -> None:
    tenant_b.add("Globex only: never shown to Acme")
    response = admin.get(url(tenant_a))
    assert response.status_code == 200
    assert listed(response) == ["A deleted thought", "Bob moved to Lyon",
                                "Never share the office code", "The agent answers in French",
                                "Alice drinks Green Tea"]
    body = text(response)
    assert 'id="recent-memories"' in body and 'id="browse-form"' in body
    assert re.search(r'id="browse-count">\s*5 memories', body)
    for memory in seeded.values():
        assert f'href="/console/t/{tenant_a.tenant.slug}/memories/{memory.pk}/#edit-form"' in body
    assert "Globex" not in body
    assert 'id="search-form"' in body and 'id="search-errors"' not in body
    assert 'data-confirm="' in body and 'id="bulk-form"' in body
    for marker in ('class="bulk-archive"', 'bulk-delete', 'class="bulk-restore"',
                   'id="export-jsonl"', 'id="export-csv"', 'id="browse-pager"',
                   'id="select-page"', "100,000 at most"):
        assert marker in body, marker


@pytest.mark.parametrize(("params", "expected"), [
    ({"layer": "agent"}, ["agent"]),
    ({"layer": "company"}, ["rule"]),
    ({"kind": "fact"}, ["gone", "agent", "tea"]),
    ({"kind": "rule"}, ["rule"]),
    ({"state": "archived"}, ["old"]),
    ({"state": "deleted"}, ["gone"]),
    ({"state": "active"}, ["rule", "agent", "tea"]),
    ({"tag": "drinks"}, ["tea"]),
    ({"tag": "drink"}, []),
    ({"contains": "green tea"}, ["tea"]),
    ({"contains": "%"}, []),
    ({"created_after": "2024-05-02"}, ["gone", "agent", "tea"]),
    ({"created_before": "2024-05-01"}, ["old", "rule"]),
    ({"created_after": "2024-05-02", "created_before": "2024-05-02"}, ["agent"]),
    ({"created_before": "9999-12-31"}, ["gone", "old", "rule", "agent", "tea"]),
    ({"f_userId": "u2"}, ["old"]),
    ({"f_agentId": "bot1"}, ["agent"]),
    ({"f_companyId": "acme", "kind": "episode"}, ["old"]),
    ({"f_companyId": "initech"}, []),
    ({"layer": "user", "state": "active"}, ["tea"]),
    ({"query": ""}, ["gone", "old", "rule", "agent", "tea"]),  # the search's, not a filter
])
def test_each_filter_narrows_the_list(seeded: dict[str, Memory], tenant_a: Any, admin: Client,
                                      params: dict[str, str], expected: list[str]) -> None:
    response = admin.get(url(tenant_a), params)
    assert response.status_code == 200
    assert listed(response) == [seeded[name].content for name in expected]
    assert response.context["page"].paginator.count == len(expected)
    assert 'id="browse-errors"' not in text(response)


def test_the_chips_name_each_filter_and_remove_only_it(seeded: dict[str, Memory],
                                                       tenant_a: Any, admin: Client) -> None:
    base = url(tenant_a)
    response = admin.get(base, {"layer": "user", "kind": "fact", "f_userId": "u1"})
    chips = re.findall(r'<li class="chip filter-chip"[^>]*>(.*?) <a href="([^"]*)"',
                       text(response))
    assert [label for label, _ in chips] == ["layer: user", "kind: fact", "userId: u1"]
    removes = {label: href.replace("&amp;", "&") for label, href in chips}
    assert removes["layer: user"] == f"{base}?kind=fact&f_userId=u1"
    assert removes["userId: u1"] == f"{base}?layer=user&kind=fact"
    assert f'href="{base}" id="clear-filters">clear all' in text(response)
    assert listed(admin.get(removes["layer: user"])) == [
        "A deleted thought", "The agent answers in French", "Alice drinks Green Tea"]
    assert 'class="chip filter-chip"' not in text(admin.get(base))
    assert re.search(r'id="browse-count">\s*1 memory matches these filters',
                     text(admin.get(base, {"layer": "agent"})))


def test_it_pages_fifty_newest_first_keeping_the_filters(tenant_a: Any, admin: Client) -> None:
    for i in range(53):
        tenant_a.add(f"Numbered note {i:02d}")
    tenant_a.add("A company note", layer="company", identifiers={"companyId": "acme"})
    base = url(tenant_a)
    first = admin.get(base, {"layer": "user"})
    assert len(listed(first)) == 50 and listed(first)[0] == "Numbered note 52"
    body = text(first)
    assert "page 1 of 2" in body
    assert f'href="{base}?layer=user&amp;page=2" rel="next"' in body
    second = admin.get(base, {"layer": "user", "page": "2"})
    assert listed(second) == ["Numbered note 02", "Numbered note 01", "Numbered note 00"]
    assert f'href="{base}?layer=user&amp;page=1" rel="prev"' in text(second)
    assert "page 2 of 2" in text(second)
    for bad, number in (("abc", 1), ("99", 2), ("-1", 2), ("0", 2), ("9" * 5000, 1), ("", 1)):
        response = admin.get(base, {"layer": "user", "page": bad})
        assert response.status_code == 200, bad
        assert response.context["page"].number == number, bad


@pytest.mark.parametrize(("params", "said"), [
    ({"layer": "planet"}, "Layer: Select a valid choice"),
    ({"kind": "dream"}, "Kind: Select a valid choice"),
    ({"state": "gone"}, "State: Select a valid choice"),
    ({"created_after": "2024-13-01"}, "Created from: Enter a valid date"),
    ({"created_before": "05/01/2024"}, "Created until: Enter a valid date"),
    ({"created_after": "2024-05-02", "created_before": "2024-05-01"},
     "Created from must not be after Created until."),
    ({"contains": "x" * 201}, "Content contains: Ensure this value has at most 200"),
    ({"contains": "tea\x00"}, "Content contains: Null characters are not allowed"),
    ({"f_userId": "u" * 256}, "userId: Ensure this value has at most 255"),
])
def test_bad_filters_show_an_error_and_list_nothing(seeded: dict[str, Memory], tenant_a: Any,
                                                    admin: Client, params: dict[str, str],
                                                    said: str) -> None:
    response = admin.get(url(tenant_a), params)
    assert response.status_code == 200
    body = text(response)
    errors = re.search(r'id="browse-errors"[^>]*>(.*?)</p>', body, re.S)
    assert errors is not None
    assert said in " ".join(errors.group(1).split())
    assert "Nothing is listed until the filters are fixed." in errors.group(1)
    assert listed(response) == []
    assert "Fix the filters above to list memories." in body
    assert 'id="bulk-form"' not in body and 'id="export-csv"' not in body


def test_the_empty_states_tell_no_match_from_no_memories(tenant_a: Any, admin: Client) -> None:
    body = text(admin.get(url(tenant_a)))
    assert "No memories yet" in body and "manage.py import_locomo" in body
    tenant_a.add("Alice drinks tea")
    body = text(admin.get(url(tenant_a), {"layer": "org"}))
    assert "No memories match these filters." in body and "No memories yet" not in body


def test_the_search_still_runs_beside_the_browser(seeded: dict[str, Memory], tenant_a: Any,
                                                  admin: Client) -> None:
    response = admin.get(url(tenant_a), {"query": "green tea", "mode": "keyword",
                                         "userId": "u1", "layer": "agent"})
    assert response.status_code == 200
    assert [r["memory"].content for r in response.context["results"]] == [
        "Alice drinks Green Tea"]
    assert listed(response) == ["The agent answers in French"]
    assert 'id="search-results"' in text(response)


def bulk(admin: Client, tenant: Any, action: str, ids: list[Any], *, follow: bool = False,
         **extra: Any) -> Any:
    """POST a bulk ``action`` on ``ids`` (plus form fields ``extra``) as ``admin``."""
    return admin.post(url(tenant, "memories/bulk/"), {
        "action": action, "ids": [str(x) for x in ids], **extra}, follow=follow)


def test_bulk_archive_delete_and_restore_change_the_states_and_are_audited(
        seeded: dict[str, Memory], tenant_a: Any, admin: Client) -> None:
    tea, agent, old = seeded["tea"].pk, seeded["agent"].pk, seeded["old"].pk
    response = bulk(admin, tenant_a, "archive", [tea, agent, old],
                    return_query="layer=user&state=&page=2&query=x&as=csv")
    assert response.status_code == 302
    assert response["Location"] == url(tenant_a) + "?layer=user&page=2"
    shown = text(admin.get(response["Location"]))
    assert "Archived 2 memories (1 unchanged)." in shown
    assert states(tenant_a)["Alice drinks Green Tea"] == State.ARCHIVED
    assert states(tenant_a)["The agent answers in French"] == State.ARCHIVED

    response = bulk(admin, tenant_a, "delete", [tea, seeded["gone"].pk], follow=True)
    assert "Deleted 1 memory (1 unchanged)." in text(response)
    assert states(tenant_a)["Alice drinks Green Tea"] == State.DELETED

    response = bulk(admin, tenant_a, "restore", [tea, agent, old, seeded["rule"].pk],
                    follow=True)
    assert "Restored 3 memories (1 unchanged)." in text(response)
    assert set(states(tenant_a).values()) == {State.ACTIVE, State.DELETED}
    assert states(tenant_a)["A deleted thought"] == State.DELETED
    mine = [a for a, actor in audit_actions(tenant_a) if actor == "user:alice"]
    assert mine == ["memory_archived"] * 2 + ["memory_deleted"] + ["memory_restored"] * 3


def test_bulk_counts_other_tenants_unknown_and_malformed_ids_as_not_found(
        seeded: dict[str, Memory], tenant_a: Any, tenant_b: Any, admin: Client) -> None:
    foreign = tenant_b.add("Globex keeps its books in euros")
    response = bulk(admin, tenant_a, "archive",
                    [seeded["tea"].pk, foreign.pk, MISSING, "not-a-uuid"], follow=True)
    assert "Archived 1 memory (3 not found)." in text(response)
    assert states(tenant_b) == {"Globex keeps its books in euros": State.ACTIVE}
    for action in ("delete", "restore"):
        response = bulk(admin, tenant_a, action, [foreign.pk], follow=True)
        assert "(1 not found)." in text(response), action
    with tenant_scope(tenant_b.ctx):
        row = Memory.objects.get(pk=foreign.pk)
        assert (row.state, row.version) == (State.ACTIVE, 1)
        assert not AuditEntry.objects.filter(actor="user:alice").exists()


def test_select_all_on_this_page_acts_on_the_page_shown(seeded: dict[str, Memory],
                                                       tenant_a: Any, admin: Client) -> None:
    page = admin.get(url(tenant_a), {"state": "active"})
    page_ids = page.context["page_ids"]
    assert len(page_ids) == 3
    response = bulk(admin, tenant_a, "archive", [], page_ids=page_ids, select_page="1",
                    follow=True)
    assert "Archived 3 memories." in text(response)
    unchecked = bulk(admin, tenant_a, "restore", [], page_ids=page_ids, follow=True)
    assert "Check at least one memory first." in text(unchecked)
    assert set(states(tenant_a).values()) == {State.ARCHIVED, State.DELETED}


def test_bulk_refuses_more_than_500_ids_and_unknown_actions(seeded: dict[str, Memory],
                                                            tenant_a: Any,
                                                            admin: Client) -> None:
    ids = [seeded["tea"].pk] + [f"01a1fb8f-0000-7000-8000-{i:012d}" for i in range(500)]
    response = bulk(admin, tenant_a, "archive", ids, follow=True)
    assert "At most 500 memories at a time (501 given)." in text(response)
    response = bulk(admin, tenant_a, "erase", [seeded["tea"].pk], follow=True)
    assert "Unknown bulk action" in text(response)
    assert states(tenant_a)["Alice drinks Green Tea"] == State.ACTIVE
    assert admin.get(url(tenant_a, "memories/bulk/")).status_code == 405


def export(admin: Client, tenant: Any, **params: str) -> tuple[Any, str]:
    response: Any = admin.get(url(tenant, "memories/export/"), params)
    assert response.status_code == 200, response
    assert response.streaming
    return response, b"".join(response.streaming_content).decode()


def test_the_csv_export_holds_the_filtered_memories(seeded: dict[str, Memory], tenant_a: Any,
                                                    tenant_b: Any, admin: Client) -> None:
    tenant_b.add("Globex only")
    tenant_a.add("=cmd|' /C calc'!A0 formula")
    response, body = export(admin, tenant_a, **{"as": "csv", "layer": "user"})
    assert response["Content-Type"].startswith("text/csv")
    today = datetime.now(UTC).date().isoformat()
    assert response["Content-Disposition"] == (
        f'attachment; filename="memories-{tenant_a.tenant.slug}-{today}.csv"')
    rows = list(csv.DictReader(io.StringIO(body)))
    assert list(rows[0]) == ["id", "created_at", "updated_at", "occurred_at", "layer",
                             "identifiers", "kind", "state", "tags", "importance",
                             "confidence", "content", "metadata"]
    assert [r["content"] for r in rows] == ["'=cmd|' /C calc'!A0 formula", "A deleted thought",
                                            "Bob moved to Lyon", "Alice drinks Green Tea"]
    tea = rows[-1]
    assert tea["id"] == str(seeded["tea"].pk)
    assert tea["created_at"] == "2024-05-03T12:00:00+00:00"
    assert tea["occurred_at"] == ""
    assert json.loads(tea["tags"]) == ["drinks", "food"]
    assert json.loads(tea["identifiers"]) == {"userId": "u1",
                                              "companyId": tenant_a.tenant.slug}
    assert (tea["layer"], tea["kind"], tea["state"]) == ("user", "fact", "active")
    assert "embedding" not in body and "Globex" not in body
    with tenant_scope(tenant_a.ctx):
        entry = AuditEntry.objects.get(action="memories_exported")
    assert entry.actor == "user:alice"
    assert entry.details == {"format": "csv", "filters": {"layer": "user"}, "rows": 4}


def test_the_json_lines_export_holds_every_field_but_embeddings(
        seeded: dict[str, Memory], tenant_a: Any, admin: Client) -> None:
    response, body = export(admin, tenant_a, **{"as": "jsonl", "state": "archived"})
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert response["Content-Disposition"].endswith('.jsonl"')
    lines = [json.loads(line) for line in body.splitlines()]
    assert len(lines) == 1
    row = lines[0]
    assert list(row) == ["id", "created_at", "updated_at", "occurred_at", "layer",
                         "identifiers", "kind", "state", "tags", "importance", "confidence",
                         "content", "metadata"]
    assert row["occurred_at"] is None  # the writer gave none
    assert row["content"] == "Bob moved to Lyon" and row["state"] == "archived"
    assert row["identifiers"] == {"userId": "u2", "companyId": tenant_a.tenant.slug}
    assert row["tags"] == ["moves"]
    assert row["metadata"] == {"tags": ["moves"]} and row["kind"] == "episode"
    assert datetime.fromisoformat(row["updated_at"]).tzinfo is not None
    _, everything = export(admin, tenant_a, **{"as": "jsonl"})
    assert len(everything.splitlines()) == 5


def test_the_export_reads_newest_first_in_chunks_up_to_its_limit(
        seeded: dict[str, Memory], tenant_a: Any) -> None:
    rows = list(export_rows(tenant_a.ctx, BrowseFilters(), limit=4, chunk_size=3))
    assert [r["content"] for r in rows] == ["A deleted thought", "Bob moved to Lyon",
                                            "Never share the office code",
                                            "The agent answers in French"]
    rows = list(export_rows(tenant_a.ctx, BrowseFilters(state="active"), chunk_size=1))
    assert len(rows) == 3


def test_an_export_with_bad_filters_or_format_goes_back_to_the_browser(
        seeded: dict[str, Memory], tenant_a: Any, admin: Client) -> None:
    response = admin.get(url(tenant_a, "memories/export/"), {"as": "csv", "layer": "planet"})
    assert response.status_code == 302
    assert response["Location"] == url(tenant_a) + "?layer=planet"
    assert "Select a valid choice" in text(admin.get(response["Location"]))
    response = admin.get(url(tenant_a, "memories/export/"), {"as": "xlsx"}, follow=True)
    assert "Export as jsonl or csv." in text(response)
    with tenant_scope(tenant_a.ctx):
        assert not AuditEntry.objects.filter(action="memories_exported").exists()


def test_a_reviewer_gets_the_consoles_403_page(seeded: dict[str, Memory],
                                               tenant_a: Any) -> None:
    client = Client()
    client.force_login(console_user(tenant_a, "rita", "reviewer"))
    responses = [client.get(url(tenant_a)),
                 client.get(url(tenant_a, "memories/export/"), {"as": "csv"}),
                 bulk(client, tenant_a, "delete", [seeded["tea"].pk])]
    for response in responses:
        assert response.status_code == 403
        assert "console/forbidden.html" in [t.name for t in response.templates]
        assert 'id="forbidden"' in text(response)
    assert states(tenant_a)["Alice drinks Green Tea"] == State.ACTIVE


def test_another_tenants_slug_is_the_consoles_404_page(tenant_a: Any, tenant_b: Any,
                                                       admin: Client) -> None:
    foreign = tenant_b.add("Globex keeps its books in euros")
    responses = [admin.get(url(tenant_b)),
                 admin.get(url(tenant_b, "memories/export/"), {"as": "jsonl"}),
                 bulk(admin, tenant_b, "delete", [foreign.pk])]
    for response in responses:
        assert response.status_code == 404
        assert "console/not_found.html" in [t.name for t in response.templates]
        assert "Globex keeps" not in text(response)
    assert states(tenant_b) == {"Globex keeps its books in euros": State.ACTIVE}


def test_signed_out_visitors_are_sent_to_the_login_page(tenant_a: Any) -> None:
    client = Client()
    for response in (client.get(url(tenant_a)),
                     client.get(url(tenant_a, "memories/export/"), {"as": "csv"}),
                     client.post(url(tenant_a, "memories/bulk/"), {"action": "delete"})):
        assert response.status_code == 302
        assert response["Location"].startswith("/console/login/")

