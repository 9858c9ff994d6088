"""Conversation ingestion: messages in, memories out (facts, preferences, events, with the
date they refer to, kept as ``metadata.occurredOn`` and as the memory's ``occurred_at``), each
decided against what is stored (``agents.reconcile``): added, superseding a fact it
contradicts, or nothing when it is known.

The API queues the work (``POST /api/v1/conversations`` answers 202 with the job id); a
Celery worker runs :func:`conversation_ingest`, which the LoCoMo benchmark also calls
directly. Extraction is ``llm.purposes.memories`` (the configured model, else its offline
fallback), 50 messages per call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from pgvector.django import CosineDistance

from agents.reconcile import Action, Stored, decide
from jobs.services import job_enqueue
from llm.purposes.memories import MAX_MESSAGE_CHARS, MAX_MESSAGES, Message, extract_memories
from memories.embedding.embedders import embed_texts
from memories.models import Memory
from memories.restrictions import check_layer
from memories.retrieval.partition import layer_queryset, resolve_identifiers
from memories.services.memory import MemoryInput, memory_add
from memories.services.supersede import memory_supersede
from memory_project.errors import InvalidInput, MemoryServiceError
from memory_project.validation import unstorable_text
from tenants.context import TenantContext
from tenants.layers import Layer, LayerIdentifiers, parse_layer, require_identifiers

logger = logging.getLogger(__name__)

INGEST_TASK = "agents.ingest_conversation"
MAX_REQUEST_MESSAGES = 500
ROLES = ("user", "assistant", "system", "tool")
#: Roles whose messages are read as context but never become memories themselves.
CONTEXT_ONLY_ROLES = ("assistant", "system", "tool")
#: Stored facts of the partition a new fact is compared with (the most similar ones).
CANDIDATES = 20


@dataclass(frozen=True)
class ConversationMessage:
    """One message: ``role`` (user, assistant, system, tool), ``content``, the speaker's
    ``name`` (optional), when it was said (optional) and the caller's id for it (optional,
    kept in the memories extracted from it as ``metadata.sourceMessages``)."""

    role: str
    content: str
    name: str = ""
    at: datetime | None = None
    id: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content, "name": self.name,
                "createdAt": self.at.isoformat() if self.at else None, "id": self.id}


def _text(value: Any, name: str, index: int, limit: int, *, required: bool) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()) or len(value) > limit \
            or unstorable_text(value):
        raise InvalidInput(
            f"messages[{index}].{name} must be {'a non-empty' if required else 'a'} string of "
            f"at most {limit} characters without NUL.", details={"index": index, "field": name})
    return value


def validate_messages(raw: Any) -> list[ConversationMessage]:
    """The messages of a request.

    Raises:
        InvalidInput: not a list of 1..500 objects; an unknown role; empty or over-long
            content (4,000 characters); a malformed ``createdAt``. ``details.index`` names
            the message.
    """
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_REQUEST_MESSAGES:
        raise InvalidInput(f"messages must be a list of 1 to {MAX_REQUEST_MESSAGES} messages.")
    parsed: list[ConversationMessage] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InvalidInput(f"messages[{index}] must be an object.", details={"index": index})
        unknown = sorted(set(item) - {"role", "content", "name", "createdAt", "id"})
        if unknown:
            raise InvalidInput(f"messages[{index}] has unknown fields: {', '.join(unknown)}.",
                               details={"index": index})
        if item.get("role") not in ROLES:
            raise InvalidInput(f"messages[{index}].role must be one of {', '.join(ROLES)}.",
                               details={"index": index, "allowed": list(ROLES)})
        at = None
        if item.get("createdAt") is not None:
            stamp = item["createdAt"]
            at = parse_datetime(stamp) if isinstance(stamp, str) else None
            if at is None:
                raise InvalidInput(f"messages[{index}].createdAt must be an ISO 8601 time.",
                                   details={"index": index})
        parsed.append(ConversationMessage(
            role=item["role"],
            content=_text(item.get("content"), "content", index, MAX_MESSAGE_CHARS,
                          required=True),
            name=_text(item.get("name"), "name", index, 100, required=False),
            at=at, id=_text(item.get("id"), "id", index, 200, required=False)))
    return parsed


def _scope(ctx: TenantContext, layer: Any, identifiers: LayerIdentifiers
           ) -> tuple[str, LayerIdentifiers]:
    parsed = parse_layer(layer)
    check_layer(ctx, parsed)
    resolved = resolve_identifiers(ctx, identifiers)
    require_identifiers(parsed, resolved)
    return parsed.value, resolved


def conversation_ingest_enqueue(ctx: TenantContext, *, messages: Any, layer: Any,
                                identifiers: LayerIdentifiers,
                                reference_time: datetime | None = None) -> str:
    """Validate a conversation and queue its ingestion; returns the job id.

    Raises:
        InvalidInput, InvalidLayer, MissingIdentifier, Unauthorized: bad input.
    """
    parsed = validate_messages(messages)
    layer_name, resolved = _scope(ctx, layer, identifiers)
    job = job_enqueue(ctx, task=INGEST_TASK, args=[str(ctx.tenant_id)], kwargs={
        "messages": [m.as_json() for m in parsed], "layer": layer_name,
        "identifiers": resolved.as_dict(),
        "reference_time": (reference_time or timezone.now()).isoformat()})
    return str(job.pk)


@dataclass
class IngestOutcome:
    """What one ingestion did: memories added, ``(old, new)`` supersessions, facts already
    known, facts a policy refused, and whether the offline fallback extracted them."""

    added: list[Memory] = field(default_factory=list)
    superseded: list[tuple[str, str]] = field(default_factory=list)
    known: int = 0
    refused: int = 0
    fallback: bool = False

    def counts(self) -> dict[str, Any]:
        return {"added": len(self.added), "superseded": len(self.superseded),
                "known": self.known, "refused": self.refused, "fallback": self.fallback}


def _nearest(layer: str, identifiers: LayerIdentifiers, vector: Any) -> list[Stored]:
    rows = (layer_queryset(Layer(layer), identifiers)
            .annotate(distance=CosineDistance("embedding", vector))
            .order_by("distance").values_list("pk", "content", "distance")[:CANDIDATES])
    return [Stored(str(pk), content, 1.0 - float(distance)) for pk, content, distance in rows]


def conversation_ingest(ctx: TenantContext, *, messages: list[ConversationMessage], layer: str,
                        identifiers: LayerIdentifiers, reference_time: datetime) -> IngestOutcome:
    """Extract memories from ``messages`` and store what is new (module docstring), in
    windows of 50 messages, oldest first, so a later message can supersede what an earlier
    one stated. Never raises for one fact's failure (a policy refusal is counted)."""
    layer_name, scope = _scope(ctx, layer, identifiers)
    outcome = IngestOutcome()
    for start in range(0, len(messages), MAX_MESSAGES):
        window = messages[start:start + MAX_MESSAGES]
        extraction = extract_memories(
            ctx, messages=[Message(m.name or m.role, m.content, m.at) for m in window],
            reference_time=reference_time, layer=layer_name)
        outcome.fallback = outcome.fallback or extraction.fallback
        facts = [f for f in extraction.value
                 if any(window[i].role not in CONTEXT_ONLY_ROLES for i in f.message_indexes)]
        vectors = embed_texts(ctx.tenant_id, [f.text for f in facts]) if facts else []
        for fact, (vector, _) in zip(facts, vectors, strict=True):
            action, other = decide(fact.text, _nearest(layer_name, scope, vector))
            if action is Action.NONE:
                outcome.known += 1
                continue
            cited = [window[i].id for i in fact.message_indexes if window[i].id]
            metadata: dict[str, Any] = {"source": {"type": "conversation"}}
            if cited:
                metadata["sourceMessages"] = cited
            if fact.occurred_on:
                metadata["occurredOn"] = fact.occurred_on
            try:
                memory = memory_add(ctx, item=MemoryInput(
                    content=fact.text, layer=layer_name, identifiers=scope, metadata=metadata,
                    occurred_at=occurred_at(fact.occurred_on,
                                            [window[i] for i in fact.message_indexes]))).memory
            except MemoryServiceError as err:
                outcome.refused += 1
                logger.warning("conversation fact not stored (%s): %s", err.code, err)
                continue
            outcome.added.append(memory)
            if action is Action.UPDATE and other is not None:
                old = Memory.objects.filter(pk=other.id).first()
                if old is not None and memory_supersede(ctx, old=old, new=memory):
                    outcome.superseded.append((other.id, str(memory.pk)))
    return outcome


def occurred_at(occurred_on: str, cited: list[ConversationMessage]) -> datetime | None:
    """A fact's time on the conversation's clock (``Memory.occurred_at``): the day it
    happened when the conversation says so (``occurred_on``, ISO date, read as midnight
    UTC), else when the latest message it comes from was written (a time without a zone
    read as UTC), else ``None``."""
    if occurred_on:
        try:
            return datetime.combine(date.fromisoformat(occurred_on), time(), tzinfo=UTC)
        except ValueError:
            pass
    stamps = [m.at if m.at.tzinfo else m.at.replace(tzinfo=UTC) for m in cited if m.at]
    return max(stamps) if stamps else None


def conversation_ingest_job(ctx: TenantContext, *, messages: list[dict[str, Any]], layer: str,
                            identifiers: dict[str, str], reference_time: str) -> dict[str, Any]:
    """The Celery job's body: :func:`conversation_ingest` on the queued JSON."""
    parsed = validate_messages(messages)
    when = parse_datetime(reference_time) or timezone.now()
    outcome = conversation_ingest(ctx, messages=parsed, layer=layer,
                                  identifiers=LayerIdentifiers.from_mapping(identifiers),
                                  reference_time=when)
    return outcome.counts()
