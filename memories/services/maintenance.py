"""Periodic lifecycle jobs of one tenant (seed 001 "Memory Lifecycle": decay, consolidation,
soft-delete cleanup; "Memory-R1 Pruning").

Each job takes the tenant's :class:`TenantContext`, runs inside :func:`tenant_scope` (entered
here as well, so a direct call is as safe as one from ``memories.tasks``), is one transaction,
is idempotent (a second run right after the first changes nothing), writes a history row per
memory it changes and one audit entry per run that changed something, and returns a dict of
counts. Settings: ``tenant.settings["lifecycle"]``, see :mod:`memories.services.lifecycle_config`.
"""

from __future__ import annotations

import json
import math
import uuid
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F, FloatField, Q
from django.db.models.expressions import ExpressionWrapper, RawSQL
from django.utils import timezone

from memories.embedding.embedders import content_hash, embed_texts
from memories.models import HistoryAction, Memory, State
from memories.services.deletion import memories_erase
from memories.services.history import history_record, history_row
from memories.services.lifecycle_config import deleted_retention_days, lifecycle_section
from memories.services.memory import MAX_METADATA_BYTES
from memories.signals import memories_stored, memories_withdrawn
from tenants.audit import audit_record
from tenants.context import TenantContext

#: At most this many ids are listed in one audit entry (the count is always complete).
AUDIT_MAX_IDS = 100
#: Float slack when comparing a mean reward with the pruning threshold (−0.9 / 3 ≠ −0.3).
REWARD_EPSILON = 1e-9


def _audit(ctx: TenantContext, action: str, ids: list[Any], **details: Any) -> None:
    if ids:
        audit_record(ctx, action=action, target_type="memory", details={
            "count": len(ids), "ids": [str(i) for i in ids[:AUDIT_MAX_IDS]], **details})


# --- decay (seed 001 DecayConfig) -------------------------------------------------------------

# (1 − rate) ^ days as exp(ln(1 − rate) × days), the exponent clamped at −700: PostgreSQL
# raises on underflow instead of returning 0 (a rate near 1 over years would fail the job).
_RELEVANCE_SQL = (
    "COALESCE(base_importance, importance) * exp(GREATEST(-700.0, %s::float8 * GREATEST(0.0,"
    " extract(epoch FROM (%s::timestamptz - COALESCE(restored_at, created_at)))::float8"
    " / 86400.0)))"
)


def decay_run(ctx: TenantContext) -> dict[str, int]:
    """Archive active memories whose relevance has decayed below ``archiveThreshold``.

    Seed 001 "Memory Decay": ``relevance(t) = initial × (1 − ratePerDay) ^ days`` where
    ``initial`` is the memory's base importance (the importance its writer gave) and ``days``
    counts from creation, or from the last restore (a restored memory starts afresh).
    Layers in ``exemptLayers`` never decay. Defaults: enabled, ratePerDay 0.01,
    archiveThreshold 0.1, exemptLayers ["company"]. A memory whose base importance is already
    below the threshold is archived by the next run. Nothing is ever deleted; archived
    memories leave search, recall and list and come back with ``POST .../restore``.

    Returns:
        ``{"archived": n}``.
    """
    cfg = lifecycle_section(ctx, "decay")
    if not cfg["enabled"]:
        return {"archived": 0}
    with transaction.atomic():
        now = timezone.now()
        rate = float(cfg["ratePerDay"])
        log_keep = math.log1p(-rate) if rate < 1 else -1e6  # ln(1 − rate); rate 1: all gone
        relevance = RawSQL(_RELEVANCE_SQL, [log_keep, now],
                           output_field=FloatField())
        decayed = list(
            Memory.objects.select_for_update(of=("self",))
            .filter(state=State.ACTIVE).exclude(layer__in=cfg["exemptLayers"])
            .annotate(relevance=relevance)
            .filter(relevance__lt=float(cfg["archiveThreshold"]))
            .order_by("pk").only("pk", "state")
        )
        ids = [m.pk for m in decayed]
        if ids:
            Memory.objects.filter(pk__in=ids).update(
                state=State.ARCHIVED, version=F("version") + 1, updated_at=now)
            memories_withdrawn.send(sender=Memory, tenant_id=ctx.tenant_id, memory_ids=ids)
            history_record(
                history_row(ctx, m.pk, HistoryAction.ARCHIVE, details={
                    "reason": "decay", "relevance": round(m.relevance, 6)})
                for m in decayed
            )
            _audit(ctx, "memories_archived", ids, reason="decay",
                   threshold=cfg["archiveThreshold"], ratePerDay=cfg["ratePerDay"])
    return {"archived": len(ids)}


# --- purge (seed 001 "Soft delete with deferred cleanup") ------------------------------------

def purge_deleted(ctx: TenantContext) -> dict[str, int]:
    """Erase soft-deleted memories whose ``deleted_at`` is older than the tenant's retention
    (``lifecycle.deletedRetentionDays``, default 30): the rows go and their history content
    is blanked (:func:`memories.services.deletion.memories_erase`, reason ``"purge"``).

    Returns:
        ``{"purged": n}``.
    """
    with transaction.atomic():
        cutoff = timezone.now() - timedelta(days=deleted_retention_days(ctx))
        ids = list(Memory.objects.filter(state=State.DELETED, deleted_at__lt=cutoff)
                   .order_by("pk").values_list("pk", flat=True))
        purged = memories_erase(ctx, memory_ids=ids, reason="purge") if ids else 0
        _audit(ctx, "memories_purged", ids, retentionDays=deleted_retention_days(ctx))
    return {"purged": purged}


# --- consolidation (seed 001 ConsolidationConfig) ---------------------------------------------

_SAME_SCOPE = " AND ".join(
    f"a.{column} IS NOT DISTINCT FROM b.{column}" for column in (
        "agent_id", "user_id", "session_id", "project_id", "team_id", "org_id", "company_id",
        "kind", "scope")
)
_PAIRS_SQL = f"""
SELECT a.id, b.id, 1.0 - (a.embedding <=> b.embedding) AS similarity
FROM memories_memory a
JOIN memories_memory b
  ON b.tenant_id = a.tenant_id AND b.layer = a.layer AND a.id < b.id AND {_SAME_SCOPE}
WHERE a.tenant_id = %s AND a.layer = ANY(%s)
  AND a.state = 'active' AND b.state = 'active'
  AND a.pruned_at IS NULL AND b.pruned_at IS NULL
  AND a.restored_at IS NULL AND b.restored_at IS NULL
  AND (a.embedding <=> b.embedding) <= %s
ORDER BY similarity DESC, a.id, b.id
"""


def consolidation_pairs(ctx: TenantContext, *, layers: list[str], threshold: float
                        ) -> list[tuple[uuid.UUID, uuid.UUID, float]]:
    """Pairs of active, unpruned, never-restored memories of the same layer scope (layer, all
    seven identifiers, kind and topical scope equal) whose cosine similarity (pgvector
    ``<=>``, computed in PostgreSQL) is ≥ ``threshold``; most similar first.

    The comparison is exact (every pair within a scope): O(n²) distances per scope, done in
    the database; the job is periodic and its trigger is the tenant's memory count.
    """
    with connection.cursor() as cursor:
        cursor.execute(_PAIRS_SQL, [str(ctx.tenant_id), layers, 1.0 - threshold])
        return [(a, b, float(s)) for a, b, s in cursor.fetchall()]


def _union_tags(first: Any, second: Any) -> list[str] | None:
    if not isinstance(first, list) and not isinstance(second, list):
        return None
    tags: list[str] = []
    for tag in [*(first if isinstance(first, list) else []),
                *(second if isinstance(second, list) else [])]:
        if tag not in tags:
            tags.append(tag)
    return tags


def _provenance(memory: Memory) -> dict[str, Any]:
    return {"id": str(memory.pk), "content": memory.content,
            "createdAt": memory.created_at.isoformat()}


def merged_metadata(survivor: Memory, other: Memory) -> dict[str, Any]:
    """The survivor's metadata after absorbing ``other``: both merged (the survivor wins a
    conflict), ``tags`` the union, ``mergedFrom`` the earlier provenance of both plus one
    entry (id, content, createdAt) for each of the two. When that would pass the metadata
    size limit the entries keep their ids only (the contents stay in the history)."""
    metadata = {**(other.metadata or {}), **(survivor.metadata or {})}
    metadata.pop("mergedInto", None)
    tags = _union_tags((survivor.metadata or {}).get("tags"), (other.metadata or {}).get("tags"))
    if tags is not None:
        metadata["tags"] = tags
    entries: list[Any] = []
    for source in (survivor, other):
        prior = (source.metadata or {}).get("mergedFrom")
        entries.extend(prior if isinstance(prior, list) else [])
    for source in (survivor, other):
        entry = _provenance(source)
        if not any(isinstance(e, dict) and e.get("id") == entry["id"]
                   and e.get("content") == entry["content"] for e in entries):
            entries.append(entry)
    metadata["mergedFrom"] = entries
    if len(json.dumps(metadata).encode()) > MAX_METADATA_BYTES:
        metadata["mergedFrom"] = [{k: v for k, v in e.items() if k != "content"}
                                  if isinstance(e, dict) else e for e in entries]
    return metadata


def _merge(ctx: TenantContext, first: uuid.UUID, second: uuid.UUID, similarity: float) -> bool:
    pair = list(Memory.objects.select_for_update().filter(pk__in=[first, second],
                                                          state=State.ACTIVE).order_by("pk"))
    if len(pair) != 2:
        return False
    survivor, other = sorted(pair, key=lambda m: (m.created_at, str(m.pk)))
    old_content, old_metadata = survivor.content, survivor.metadata
    other_metadata = other.metadata
    content = other.content if len(other.content) > len(survivor.content) else survivor.content
    survivor.metadata = merged_metadata(survivor, other)
    if content != survivor.content:
        survivor.content = content
        survivor.content_hash = content_hash(content)
        (survivor.embedding, _), = embed_texts(ctx.tenant_id, [content])
    survivor.context = survivor.context or other.context
    survivor.importance = max(survivor.importance, other.importance)
    survivor.base_importance = max(
        survivor.importance if survivor.base_importance is None else survivor.base_importance,
        other.importance if other.base_importance is None else other.base_importance)
    survivor.confidence = max(survivor.confidence, other.confidence)
    survivor.access_count += other.access_count
    survivor.reference_count += other.reference_count
    for name in ("last_accessed_at", "last_referenced_at", "last_confirmed_at"):
        values = [v for v in (getattr(survivor, name), getattr(other, name)) if v is not None]
        setattr(survivor, name, max(values) if values else None)
    survivor.sensitive = survivor.sensitive or other.sensitive
    survivor.private = survivor.private or other.private
    survivor.version = F("version") + 1
    survivor.save()
    other.metadata = {**(other.metadata or {}), "mergedInto": str(survivor.pk)}
    other.state = State.ARCHIVED
    other.version = F("version") + 1
    other.save(update_fields=["metadata", "state", "version", "updated_at"])
    memories_withdrawn.send(sender=Memory, tenant_id=ctx.tenant_id, memory_ids=[other.pk])
    changed = content != old_content
    if changed:
        memories_stored.send(sender=Memory, tenant_id=ctx.tenant_id, memory_ids=[survivor.pk])
    history_record([
        history_row(ctx, survivor.pk, HistoryAction.MERGE,
                    old_content=old_content if changed else None,
                    new_content=content if changed else None,
                    old_metadata=old_metadata, new_metadata=survivor.metadata,
                    details={"role": "survivor", "mergedWith": str(other.pk),
                             "similarity": round(similarity, 6)}),
        history_row(ctx, other.pk, HistoryAction.MERGE, old_metadata=other_metadata,
                    new_metadata=other.metadata,
                    details={"role": "merged", "mergedInto": str(survivor.pk),
                             "similarity": round(similarity, 6)}),
    ])
    return True


def consolidate(ctx: TenantContext) -> dict[str, int]:
    """Merge near-duplicate memories (seed 001 "Memory Consolidation").

    Runs only when enabled and the tenant has more than ``maxMemoriesBeforeTrigger``
    (default 1000) active memories in ``targetLayers`` (default user, project). Within each
    layer scope, every pair with cosine similarity ≥ ``similarityThreshold`` (default 0.92)
    is merged: the older memory survives with the longer content of the two (re-embedded
    when it changed), both metadata merged (tags united, ``mergedFrom`` lists both ids and
    contents), the larger importance and confidence, the summed access and reference counts;
    the other is archived with ``metadata.mergedInto``. Both get a ``merge`` history row.

    A memory takes part in at most one merge per run (its vector may have changed), so
    chains converge over runs; a memory restored by a person is never merged again
    automatically.

    Returns:
        ``{"merged": n, "candidates": active memories in the target layers, "triggered": 0|1}``.
    """
    cfg = lifecycle_section(ctx, "consolidation")
    if not cfg["enabled"] or not cfg["targetLayers"]:
        return {"merged": 0, "candidates": 0, "triggered": 0}
    with transaction.atomic():
        layers = list(cfg["targetLayers"])
        count = Memory.objects.filter(state=State.ACTIVE, pruned_at__isnull=True,
                                      layer__in=layers).count()
        if count <= cfg["maxMemoriesBeforeTrigger"]:
            return {"merged": 0, "candidates": count, "triggered": 0}
        touched: set[uuid.UUID] = set()
        merged: list[list[str]] = []
        for first, second, similarity in consolidation_pairs(
                ctx, layers=layers, threshold=float(cfg["similarityThreshold"])):
            if first in touched or second in touched:
                continue
            touched.update((first, second))
            if _merge(ctx, first, second, similarity):
                merged.append([str(first), str(second)])
        if merged:
            audit_record(ctx, action="memories_consolidated", target_type="memory", details={
                "count": len(merged), "pairs": merged[:AUDIT_MAX_IDS],
                "similarityThreshold": cfg["similarityThreshold"]})
    return {"merged": len(merged), "candidates": count, "triggered": 1}


# --- pruning (seed 001 "Memory-R1 Pruning") ---------------------------------------------------

def prune_by_feedback(ctx: TenantContext) -> dict[str, int]:
    """Prune active memories that keep failing to help (seed 001 "Memory-R1 Pruning").

    A memory with at least ``minFeedback`` (default 3) feedback rewards since its creation or
    last restore, whose mean reward is ≤ ``threshold`` (default −0.3), gets ``pruned_at``:
    it leaves search, recall and list (``memories.retrieval.partition.layer_queryset``) but stays
    readable by id, keeps its feedback, and ``POST .../restore`` brings it back with a fresh
    reward record. Each gets a ``prune`` history row; the run is audited.

    Returns:
        ``{"pruned": n}``.
    """
    cfg = lifecycle_section(ctx, "pruning")
    if not cfg["enabled"]:
        return {"pruned": 0}
    with transaction.atomic():
        now = timezone.now()
        mean = ExpressionWrapper(F("reward_sum") / F("feedback_count"), output_field=FloatField())
        doomed = list(
            Memory.objects.select_for_update()
            .filter(Q(state=State.ACTIVE), pruned_at__isnull=True,
                    feedback_count__gte=max(1, int(cfg["minFeedback"])))
            .annotate(mean_reward=mean)
            .filter(mean_reward__lte=float(cfg["threshold"]) + REWARD_EPSILON)
            .order_by("pk").only("pk", "feedback_count", "reward_sum")
        )
        ids = [m.pk for m in doomed]
        if ids:
            Memory.objects.filter(pk__in=ids).update(
                pruned_at=now, version=F("version") + 1, updated_at=now)
            memories_withdrawn.send(sender=Memory, tenant_id=ctx.tenant_id, memory_ids=ids)
            history_record(
                history_row(ctx, m.pk, HistoryAction.PRUNE, details={
                    "feedbackCount": m.feedback_count, "meanReward": round(m.mean_reward, 6)})
                for m in doomed
            )
            _audit(ctx, "memories_pruned", ids, minFeedback=cfg["minFeedback"],
                   threshold=cfg["threshold"])
    return {"pruned": len(ids)}
