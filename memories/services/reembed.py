"""Re-embedding: give memories whose vector came from another model the current model's.

Needed after switching the embedding model or provider (``EMBEDDING_PROVIDER``): vectors
of two models cannot be compared, so every memory must be re-embedded once. The Celery task
``memories.memory_reembed`` runs :func:`memories_reembed` in batches.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F

from jobs.services import job_enqueue
from memories.embedding.embedders import embed_texts, get_embedder
from memories.models import Memory
from memories.tiers.l3 import l3_queue
from tenants.context import TenantContext


def memories_reembed(ctx: TenantContext, *, memory_ids: list[Any]) -> dict[str, int]:
    """Re-embed those of ``memory_ids`` whose ``embedding_model`` is not the current one.

    Idempotent and safe to run twice at once: each memory is locked (``SELECT ... FOR
    UPDATE``) and skipped when it already has the current model's vector, so a retried or
    redelivered batch changes nothing twice (``version`` moves by exactly one per memory).
    The task runs a batch in one transaction (its ``tenant_scope``): a batch interrupted
    half-way leaves all its memories as they were and is redone whole when delivered again.

    Returns:
        ``{"reembedded": n, "skipped": m}``.

    Raises:
        EmbeddingFailed, ProviderError, BackendCircuitOpen: the embedder failed (the memory
            is left as it was).
    """
    model = get_embedder().model_name
    done: list[Any] = []
    for pk in memory_ids:
        with transaction.atomic():
            memory = (Memory.objects.select_for_update().filter(pk=pk)
                      .exclude(embedding_model=model).only("id", "content").first())
            if memory is None:
                continue
            (vector, _), = embed_texts(ctx.tenant_id, [memory.content])
            Memory.objects.filter(pk=pk).update(embedding=vector, embedding_model=model,
                                                version=F("version") + 1)
            done.append(pk)
    l3_queue(ctx, done)
    return {"reembedded": len(done), "skipped": len(memory_ids) - len(done)}


def reembed_enqueue(ctx: TenantContext, *, batch_size: int = 100) -> tuple[int, int]:
    """Queue ``memories.memory_reembed`` jobs for every memory of ``ctx``'s tenant whose
    vector is not the current model's, ``batch_size`` memories per job, through the job
    outbox (``jobs.services.job_enqueue``: kept in PostgreSQL until the broker takes them).
    Running it again while jobs are pending queues those memories again; the task skips
    what is already done.

    Returns:
        ``(memories, jobs)`` queued.

    Raises:
        ValueError: ``batch_size`` < 1.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    model = get_embedder().model_name
    ids = [str(pk) for pk in Memory.objects.exclude(embedding_model=model)
           .order_by("pk").values_list("pk", flat=True)]
    batches = [ids[i:i + batch_size] for i in range(0, len(ids), batch_size)]
    for batch in batches:
        job_enqueue(ctx, task="memories.memory_reembed", args=[str(ctx.tenant_id), batch])
    return len(ids), len(batches)
