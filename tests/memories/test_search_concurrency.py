"""Concurrent search (``memories.retrieval.concurrency``): the per-layer queries of a search run on
pool threads, each with its own connection and transaction, and answer exactly what the
same search answers in one transaction, for the caller's tenant only."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from memories.models import Memory
from memories.retrieval import concurrency, search
from memory_project.after_response import drain
from tenants.context import tenant_scope
from tests.helpers import body
from tests.retrieval_helpers import recall, searched

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "owner"])

AGENT = {"agentId": "a1", "userId": "u1"}
SESSION = {"userId": "u1", "sessionId": "s1"}
FACTS = {
    "agent": ["The agent answers in French", "The agent summarises meetings every Friday"],
    "user": ["User experiences nausea after dairy", "User prefers dark mode in every editor"],
    "session": ["In this session the user asked about lactose-free cheese",
                "The user is planning a trip to Lisbon"],
}
IDENTIFIERS = {"agent": AGENT, "user": {"userId": "u1"}, "session": SESSION}


@pytest.fixture
def threads(settings: Any, owner_flushes: None) -> Iterator[list[str]]:
    """Concurrency on; yields the names of the threads that ran keyword lists."""
    settings.MEMORY_SEARCH_THREADS = 4
    names: list[str] = []
    keyword = search._keyword

    def recording(*args: Any, **kwargs: Any) -> Any:
        names.append(threading.current_thread().name)
        return keyword(*args, **kwargs)

    search._keyword = recording  # type: ignore[assignment]
    try:
        yield names
    finally:
        search._keyword = keyword  # type: ignore[assignment]
        concurrency.shutdown()


def _fill(tenant: Any, prefix: str = "") -> None:
    for layer, texts in FACTS.items():
        for text in texts:
            tenant.add(prefix + text, layer=layer, identifiers=IDENTIFIERS[layer])


def _ranked(data: dict[str, Any]) -> list[tuple[str, str, float]]:
    return [(r["memory"]["id"], r["layer"], round(r["score"], 9)) for r in data["results"]]


def test_a_concurrent_search_answers_what_a_sequential_one_does(tenant_a, threads, settings
                                                                ) -> None:
    _fill(tenant_a)
    payload = {"identifiers": {**AGENT, "sessionId": "s1"}, "threshold": 0.0}
    for mode in ("hybrid", "semantic", "keyword"):
        settings.MEMORY_SEARCH_THREADS = 4
        together = searched(tenant_a, "dairy makes me feel sick", mode=mode, **payload)
        settings.MEMORY_SEARCH_THREADS = 0
        alone = searched(tenant_a, "dairy makes me feel sick", mode=mode, **payload)
        assert _ranked(together) == _ranked(alone), mode
        assert together["searchedLayers"][:3] == ["agent", "user", "session"]
        assert together["results"], mode
    assert any(name.startswith("search") for name in threads), threads


def test_concurrent_recall_answers_what_sequential_recall_does(tenant_a, threads, settings
                                                               ) -> None:
    _fill(tenant_a)
    payload = {"identifiers": {**AGENT, "sessionId": "s1"}}
    together = body(recall(tenant_a, "cheese and lactose", **payload))
    settings.MEMORY_SEARCH_THREADS = 0
    alone = body(recall(tenant_a, "cheese and lactose", **payload))
    assert [r["memory"]["id"] for r in together["results"]] == [
        r["memory"]["id"] for r in alone["results"]]
    assert together["results"]
    assert any(name.startswith("search") for name in threads), threads


def test_pool_threads_search_only_the_callers_tenant(tenant_a, tenant_b, threads) -> None:
    _fill(tenant_a, "Acme: ")
    _fill(tenant_b, "Globex: ")
    payload = {"identifiers": {**AGENT, "sessionId": "s1"}, "threshold": 0.0, "limit": 50}
    for tenant, own in ((tenant_a, "Acme: "), (tenant_b, "Globex: ")):
        for _ in range(3):  # pool threads serve both tenants in turn
            data = searched(tenant, "dairy trip editor French", **payload)
            contents = [r["memory"]["content"] for r in data["results"]]
            assert len(contents) == 6
            assert all(text.startswith(own) for text in contents), contents
    assert any(name.startswith("search") for name in threads), threads


def test_references_are_counted_on_the_background_thread(tenant_a, threads, settings) -> None:
    settings.AFTER_RESPONSE_IN_BACKGROUND = True
    _fill(tenant_a)
    data = searched(tenant_a, "dairy makes me feel sick", threshold=0.0, limit=2,
                    identifiers={**AGENT, "sessionId": "s1"})
    drain()
    returned = {r["memory"]["id"] for r in data["results"]}
    assert returned
    with tenant_scope(tenant_a.ctx):
        counts = dict(Memory.objects.values_list("id", "reference_count"))
    assert {str(pk) for pk, count in counts.items() if count == 1} == returned
    assert {count for pk, count in counts.items() if str(pk) not in returned} == {0}
