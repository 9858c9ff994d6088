"""Writes of seed 003's agent memories: add, delete, delete all, post-run extraction.

Every write goes through the memory services (``memories.services``), so an agent memory gets
the same validation, governance policies, history and tenant isolation as any other memory.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from pgvector.django import CosineDistance

from agents.records import metadata_for, validate_agent_name, validate_source
from agents.selectors import agent_identifiers, agent_memories_queryset
from jobs.services import job_enqueue
from llm.purposes.learnings import extract_learnings
from memories.embedding.embedders import embed_texts
from memories.models import Memory
from memories.restrictions import check_layer
from memories.retrieval.partition import resolve_identifiers
from memories.services.deletion import memory_bulk_delete
from memories.services.memory import MemoryInput, memory_add
from memory_project.errors import InvalidInput, MemoryServiceError
from memory_project.validation import unstorable_text
from tenants.audit import audit_cross_tenant_probe, parse_uuid
from tenants.context import TenantContext
from tenants.layers import Layer, LayerIdentifiers

logger = logging.getLogger(__name__)

#: Characters of transcript one extraction request may carry (about 50k tokens); the
#: ``memory-agent`` command sends the end of a longer one.
MAX_TRANSCRIPT_CHARS = 200_000
#: A learning this similar (cosine) to a memory the agent+project holds is already known.
KNOWN_SIMILARITY = 0.9
EXTRACT_TASK = "agents.extract_learnings"


def agent_memory_add(ctx: TenantContext, *, agent_name: Any, project_id: Any, content: Any,
                     source: Any = "manual", user_id: Any = None) -> Memory:
    """Store one memory of ``agent_name`` in ``project_id`` (seed 003 "Create memory": the
    API's are ``source: "manual"``).

    Raises:
        InvalidInput, MissingIdentifier, Unauthorized: as
            :func:`agents.selectors.agent_identifiers`, or an unknown ``source``.
        ContentTooLong, PolicyViolation, EmbeddingFailed: as ``memory_add``.
    """
    identifiers = agent_identifiers(ctx, agent_name=agent_name, project_id=project_id,
                                    user_id=user_id)
    item = MemoryInput(content=content, layer=Layer.AGENT.value, identifiers=identifiers,
                       metadata=metadata_for(validate_source(source)))
    return memory_add(ctx, item=item).memory


@transaction.atomic
def agent_memory_delete(ctx: TenantContext, *, agent_name: Any, memory_id: Any) -> None:
    """Delete one memory of ``agent_name`` (seed 003 "Delete memory"; soft, as every delete of
    the service: restorable until the tenant's retention purges it). Idempotent: a missing
    id, a memory of another agent or layer and another tenant's id change nothing (the
    latter is audited as a probe).

    Raises:
        InvalidInput: a malformed agent name.
        Unauthorized: the caller's key may not use the agent layer.
    """
    check_layer(ctx, Layer.AGENT)
    agent = LayerIdentifiers(agentId=validate_agent_name(agent_name))
    identifiers = resolve_identifiers(ctx, agent)
    pk = parse_uuid(memory_id)
    if pk is None:
        return
    owned = Memory.objects.filter(pk=pk, layer=Layer.AGENT.value,
                                  agent_id=identifiers.agentId).values_list("pk", flat=True)
    if not owned:
        audit_cross_tenant_probe(ctx, model=Memory, object_id=pk)
        return
    memory_bulk_delete(ctx, memory_ids=list(owned))


@transaction.atomic
def agent_memories_clear(ctx: TenantContext, *, agent_name: Any, project_id: Any,
                         user_id: Any = None) -> int:
    """Delete every memory of ``agent_name`` in ``project_id`` (seed 003 "Delete all memories
    for agent+project"), not only the 50 a read returns. Returns how many were deleted.

    Raises:
        As :func:`agents.selectors.agent_identifiers`.
    """
    identifiers = agent_identifiers(ctx, agent_name=agent_name, project_id=project_id,
                                    user_id=user_id)
    ids = list(agent_memories_queryset(identifiers).values_list("pk", flat=True))
    return int(memory_bulk_delete(ctx, memory_ids=ids)["deleted"]) if ids else 0


def validate_transcript(transcript: Any) -> str:
    """``transcript`` when it is text an extraction can read.

    Raises:
        InvalidInput: not a string, blank, over :data:`MAX_TRANSCRIPT_CHARS` characters, or
            holding NUL or unpaired surrogate characters (binary data).
    """
    if not isinstance(transcript, str) or not transcript.strip():
        raise InvalidInput("transcript must be a non-empty string.")
    if len(transcript) > MAX_TRANSCRIPT_CHARS:
        raise InvalidInput(
            f"transcript is {len(transcript)} characters; at most {MAX_TRANSCRIPT_CHARS}. "
            "Send its end: it holds the run's outcome.",
            details={"max_length": MAX_TRANSCRIPT_CHARS})
    if unstorable_text(transcript):
        raise InvalidInput("transcript must be text (it holds NUL or unpaired surrogate "
                           "characters).")
    return transcript


def agent_extraction_enqueue(ctx: TenantContext, *, agent_name: Any, project_id: Any,
                             transcript: Any, user_id: Any = None) -> str:
    """Queue the post-run extraction of ``transcript`` for ``agent_name`` in ``project_id``
    (seed 003 "Memory extraction after agent run"); a Celery worker runs
    :func:`agent_learnings_store`. Returns the job id.

    Raises:
        InvalidInput, MissingIdentifier, Unauthorized: bad identifiers or transcript.
    """
    identifiers = agent_identifiers(ctx, agent_name=agent_name, project_id=project_id,
                                    user_id=user_id)
    text = validate_transcript(transcript)
    job = job_enqueue(ctx, task=EXTRACT_TASK, args=[str(ctx.tenant_id)], kwargs={
        "identifiers": identifiers.as_dict(), "transcript": text})
    return str(job.pk)


@dataclass(frozen=True)
class ExtractionOutcome:
    """What one post-run extraction did: memories stored, learnings already known, learnings
    a policy refused, and whether the offline fallback found them."""

    stored: list[Memory]
    known: int
    refused: int
    fallback: bool


def _known(identifiers: LayerIdentifiers, vector: Any) -> bool:
    """Whether a memory of the agent+project is this close (the same text embeds the same,
    so it is always known)."""
    nearest = (agent_memories_queryset(identifiers)
               .annotate(distance=CosineDistance("embedding", vector))
               .order_by("distance").values_list("distance", flat=True).first())
    return nearest is not None and 1.0 - float(nearest) >= KNOWN_SIMILARITY


def agent_learnings_store(ctx: TenantContext, *, identifiers: dict[str, str],
                          transcript: str) -> ExtractionOutcome:
    """Extract the learnings of an agent run (``llm.purposes.learnings``) and store each new
    one as an agent memory with ``source: "extraction"``. A learning the agent+project
    already holds (same text, or cosine similarity ≥ :data:`KNOWN_SIMILARITY`) is skipped;
    one a policy refuses is logged and skipped. Never raises for one learning's failure.
    """
    scope = LayerIdentifiers.from_mapping(identifiers)
    extraction = extract_learnings(ctx, transcript=transcript)
    texts = [item.text for item in extraction.value]
    vectors = embed_texts(ctx.tenant_id, texts) if texts else []
    stored: list[Memory] = []
    known = refused = 0
    for text, (vector, _) in zip(texts, vectors, strict=True):
        if _known(scope, vector):
            known += 1
            continue
        item = MemoryInput(content=text, layer=Layer.AGENT.value, identifiers=scope,
                           metadata=metadata_for("extraction"))
        try:
            stored.append(memory_add(ctx, item=item).memory)
        except MemoryServiceError as err:
            refused += 1
            logger.warning("agent learning not stored (%s): %s", err.code, err)
    return ExtractionOutcome(stored=stored, known=known, refused=refused,
                             fallback=extraction.fallback)
