"""Conversation ingestion (``POST /api/v1/conversations``): facts extracted and stored, known
ones skipped, contradictions superseding the stored fact (kept in history, shown with
``includeSuperseded``), and bad input refused before anything is queued."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agents.reconcile import Action, Stored, claims, decide
from agents.tasks import ingest_conversation
from jobs.models import QueuedJob
from memories.models import Memory, State
from tenants.context import tenant_scope
from tests.contract import TenantApiContract
from tests.helpers import assert_error, body

pytestmark = pytest.mark.django_db
URL = "/api/v1/conversations"
MARIA = {"userId": "maria"}


class TestConversationContract(TenantApiContract):
    operations = ("conversation.ingest",)


def ingest(tenant: Any, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """POST the conversation, then run the queued job as a worker would; its counts."""
    response = tenant.client.post(URL, {"messages": messages, "identifiers": MARIA, **extra},
                                  format="json")
    assert response.status_code == 202, response.content
    assert body(response)["messages"] == len(messages)
    with tenant_scope(tenant.ctx):
        job = QueuedJob.objects.get(pk=body(response)["jobId"])
        job.delete()
    return dict(ingest_conversation(*job.args, **job.kwargs))


def active(tenant: Any) -> list[str]:
    with tenant_scope(tenant.ctx):
        return sorted(Memory.objects.filter(user_id="maria", state=State.ACTIVE)
                      .values_list("content", flat=True))


def test_it_stores_the_facts_of_a_conversation_with_their_date(tenant_a: Any) -> None:
    counts = ingest(tenant_a, [
        {"role": "user", "name": "Maria", "content": "Hi!", "id": "m1"},
        {"role": "assistant", "content": "Hello, how can I help you today with your plans?"},
        {"role": "user", "name": "Maria", "id": "m3", "createdAt": "2023-05-08T10:00:00Z",
         "content": "I adopted a grey cat named Pixel yesterday."},
    ])
    assert counts == {"added": 1, "superseded": 0, "known": 0, "refused": 0, "fallback": True}
    with tenant_scope(tenant_a.ctx):
        [memory] = Memory.objects.filter(user_id="maria")
    assert memory.content == "Maria: I adopted a grey cat named Pixel yesterday."
    assert memory.metadata["sourceMessages"] == ["m3"]
    assert memory.metadata["occurredOn"] == "2023-05-07"
    assert memory.occurred_at == datetime(2023, 5, 7, tzinfo=UTC)  # what "yesterday" meant
    assert memory.metadata["source"] == {"type": "conversation"}


def test_a_fact_without_a_date_occurred_when_its_message_was_written(tenant_a: Any) -> None:
    ingest(tenant_a, [
        {"role": "user", "name": "Maria", "createdAt": "2023-05-08T10:00:00",
         "content": "I adopted a grey cat named Pixel."},
        {"role": "user", "name": "Maria", "content": "I play the cello in an orchestra."},
    ])
    with tenant_scope(tenant_a.ctx):
        times = {m.content: m.occurred_at for m in Memory.objects.filter(user_id="maria")}
    assert times == {"Maria: I adopted a grey cat named Pixel.": datetime(2023, 5, 8, 10,
                                                                          tzinfo=UTC),
                     "Maria: I play the cello in an orchestra.": None}


def test_a_contradiction_supersedes_the_stored_fact(tenant_a: Any) -> None:
    ingest(tenant_a, [{"role": "user", "name": "Maria", "content": "I live in Paris with my cat."}])
    counts = ingest(tenant_a, [{"role": "user", "name": "Maria",
                                "content": "I moved to Berlin last month for a new job."}])
    assert counts["added"] == 1 and counts["superseded"] == 1
    assert active(tenant_a) == ["Maria: I moved to Berlin last month for a new job."]
    with tenant_scope(tenant_a.ctx):
        old = Memory.objects.get(content__contains="Paris")
        new = Memory.objects.get(content__contains="Berlin")
    assert old.state == State.ARCHIVED and old.metadata["supersededBy"] == str(new.pk)
    assert new.metadata["supersedes"] == str(old.pk)
    history = body(tenant_a.client.get(f"/api/v1/memories/{old.pk}/history"))["history"]
    assert history[-1]["action"] == "archive"
    assert history[-1]["details"] == {"reason": "superseded", "supersededBy": str(new.pk)}

    search = {"query": "Where does Maria live?", "identifiers": MARIA, "threshold": 0}
    plain = body(tenant_a.client.post("/api/v1/memories/search", search, format="json"))
    assert [r["memory"]["id"] for r in plain["results"]] == [str(new.pk)]
    assert "superseded" not in plain["results"][0]
    chained = body(tenant_a.client.post("/api/v1/memories/search",
                                        {**search, "includeSuperseded": True}, format="json"))
    assert [m["id"] for m in chained["results"][0]["superseded"]] == [str(old.pk)]


def test_known_facts_are_not_stored_twice(tenant_a: Any) -> None:
    first = [{"role": "user", "name": "Maria", "content": "I work at Acme Robotics in Porto."}]
    assert ingest(tenant_a, first)["added"] == 1
    assert ingest(tenant_a, first) == {"added": 0, "superseded": 0, "known": 1, "refused": 0,
                                       "fallback": True}
    again = [{"role": "user", "name": "Maria", "content": "I still work at Acme Robotics."}]
    assert ingest(tenant_a, again)["known"] == 1
    assert len(active(tenant_a)) == 1


def test_what_the_assistant_says_is_context_not_memory(tenant_a: Any) -> None:
    counts = ingest(tenant_a, [
        {"role": "system", "content": "You are a helpful travel assistant for the user."},
        {"role": "assistant", "content": "Lisbon has wonderful tiled buildings and trams."}])
    assert counts["added"] == 0 and active(tenant_a) == []


@pytest.mark.parametrize(("messages", "index"), [
    ("not a list", None), ([], None), ([{"role": "user", "content": "x"}] * 501, None),
    ([{"role": "robot", "content": "I live in Paris"}], 0),
    ([{"role": "user", "content": "fine"}, {"role": "user", "content": "   "}], 1),
    ([{"role": "user", "content": "x" * 4001}], 0),
    ([{"role": "user", "content": "nul\x00"}], 0),
    ([{"role": "user", "content": "ok", "createdAt": "yesterday"}], 0),
    ([{"role": "user", "content": "ok", "mood": "happy"}], 0),
    (["just text"], 0),
])
def test_bad_messages_are_refused_and_nothing_is_queued(tenant_a: Any, messages: Any,
                                                        index: int | None) -> None:
    error = assert_error(tenant_a.client.post(URL, {"messages": messages, "identifiers": MARIA},
                                              format="json"), 400, "INVALID_INPUT")
    if index is not None:
        assert error["details"]["index"] == index
    with tenant_scope(tenant_a.ctx):
        assert not QueuedJob.objects.exists()


def test_the_layer_needs_its_identifiers(tenant_a: Any) -> None:
    messages = [{"role": "user", "content": "I live in Paris"}]
    assert_error(tenant_a.client.post(URL, {"messages": messages}, format="json"), 400,
                 "MISSING_IDENTIFIER")
    assert_error(tenant_a.client.post(URL, {"messages": messages, "layer": "galaxy",
                                            "identifiers": MARIA}, format="json"), 400,
                 "INVALID_LAYER")


def test_claims_read_subject_attribute_and_value() -> None:
    assert [(c.subject, c.attribute, c.value) for c in claims(
        "Ana: I moved to Rio de Janeiro last week.")] == [("ana", "residence", "rio de janeiro")]
    assert [(c.attribute, c.value) for c in claims("Jon works as a nurse at St Mary.")] == [
        ("employer", "st mary"), ("occupation", "nurse")]
    assert claims("Maria: I went to the Louvre yesterday.") == []
    paris = Stored("1", "Maria: I live in Paris.", 0.4)
    assert decide("Maria: I live in Lyon now.", [paris]) == (Action.UPDATE, paris)
    assert decide("Jon: I live in Lyon.", [paris]) == (Action.ADD, None)
    assert decide("Maria: I live in Paris.", [paris]) == (Action.NONE, paris)
