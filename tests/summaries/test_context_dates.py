"""Dates in an assembled context: a memory written with ``occurredAt`` carries that day in
the Markdown (``- [13 Oct 2023] …``) and the JSON (``occurredAt``), priced within the budget;
a memory without one has no date."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from memories.models import Memory
from summaries.markdown import bullet, day
from summaries.tokens import count_tokens
from tests.conftest import TenantFixture
from tests.helpers import body

pytestmark = pytest.mark.django_db

C = "/api/v1/context"
IDS = {"projectId": "p1"}
SAID = datetime(2023, 10, 13, 10, 31, tzinfo=UTC)


@pytest.fixture
def memories(tenant_a: TenantFixture) -> tuple[Memory, Memory]:
    """One memory that says when it happened, one that does not."""
    dated = tenant_a.add("Melanie showed the sunset painting she did last week.",
                         layer="project", identifiers=IDS, occurred_at=SAID)
    undated = tenant_a.add("Melanie keeps her paints in the garage.", layer="project",
                           identifiers=IDS)
    return dated, undated


def context(tenant_a: TenantFixture, budget: int = 400, **extra: Any) -> Any:
    response = tenant_a.client.post(C, {"identifiers": IDS, "query": "Melanie painting",
                                        "budget": budget, **extra}, format="json")
    assert response.status_code == 200, response.content[:500]
    return response


def test_the_json_form_gives_each_memory_its_occurred_at(
        tenant_a: TenantFixture, memories: tuple[Memory, Memory]) -> None:
    dated, undated = memories
    by_id = {m["id"]: m for m in body(context(tenant_a))["memories"]}
    assert by_id[str(dated.pk)]["occurredAt"] == "2023-10-13T10:31:00Z"
    assert by_id[str(undated.pk)]["occurredAt"] is None
    assert by_id[str(undated.pk)]["createdAt"].startswith(str(datetime.now(UTC).year))


def test_the_markdown_puts_the_day_in_front_of_a_dated_memory(
        tenant_a: TenantFixture, memories: tuple[Memory, Memory]) -> None:
    text = context(tenant_a, format="markdown").content.decode()
    lines = text.splitlines()
    assert "- [13 Oct 2023] Melanie showed the sunset painting she did last week." in lines
    assert "- Melanie keeps her paints in the garage." in lines


def test_dated_lines_are_priced_within_the_budget(
        tenant_a: TenantFixture, memories: tuple[Memory, Memory]) -> None:
    for n in range(12):
        tenant_a.add(f"Melanie painted picture number {n} at the lake.", layer="project",
                     identifiers=IDS, occurred_at=SAID + timedelta(days=n))
    for budget in (50, 60, 80, 120, 400):
        data = body(context(tenant_a, budget=budget))
        markdown = context(tenant_a, budget=budget, format="markdown").content.decode()
        assert data["tokenCount"] == count_tokens(markdown) <= budget
        for memory in data["memories"]:
            line = bullet(memory["content"], memory["occurredAt"] and datetime.fromisoformat(
                memory["occurredAt"]))
            assert memory["tokenCount"] == count_tokens(memory["content"])
            assert line in markdown.splitlines()


def test_the_day_is_the_utc_calendar_date() -> None:
    late = datetime(2023, 10, 13, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert day(late) == "14 Oct 2023"
    assert day(datetime(2024, 2, 9, 0, 0)) == "9 Feb 2024"  # naive: already UTC
    assert bullet("a\n  b", SAID) == "- [13 Oct 2023] a b"
    assert bullet("a\n  b") == "- a b"
