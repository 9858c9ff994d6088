"""Writes of the summaries app: change tracking, invalidation, scheduling and batches
(seed 001 "Summary Configuration", "Summary Staleness Validation", "LLM Summarization Cost
Control"). Generation itself is ``summaries.generation``.

- A stored, changed or restored memory adds one to its scope's change counter (and to the
  counters of the scope's personalized summaries), in the memory write's transaction.
- A deleted or replaced memory that a summary cites invalidates that summary at once and
  queues a high-priority regeneration; until it runs, the summary is served with a warning.
  An erased memory's sentences are also cut out of every summary at once, so no summary
  repeats erased content.
- Every minute (beat entry "summaries"), per tenant: scopes whose triggers fire are marked
  pending (:func:`summaries_mark_due`); pending scopes older than the batch window (5 minutes
  by default) or of high priority are regenerated, by priority, then layer precedence
  (agent, user, session, project, team, org, company: seed 001 calls company and org the
  low-priority layers), then age (:func:`summaries_run_batch`).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, F, IntegerField, Q, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone
from uuid6 import uuid7

from jobs.services import job_enqueue
from llm.budgets import BudgetExceeded
from memories.models import Memory, State
from summaries.config import summary_settings
from summaries.generation import OFFLINE_MODEL, check_budget, summary_generate
from summaries.metrics import BATCH_EFFICIENCY, BATCH_SIZE
from summaries.models import LayerSummary, Priority, SummaryScope
from summaries.scopes import (
    PERSONAL_IDENTIFIERS,
    ScopeRef,
    scope_of_memory,
    scope_of_row,
    scope_row,
    scopes_of_memories,
)
from summaries.source_hashes import sources_changed
from summaries.tokens import count_tokens
from tenants.audit import parse_uuid
from tenants.context import TenantContext
from tenants.layers import IDENTIFIER_FIELDS, PRECEDENCE

logger = logging.getLogger(__name__)

REGENERATE_TASK = "summaries.regenerate_scope"
_COLUMNS = ("layer", *IDENTIFIER_FIELDS.values())


def _upsert_scope(ctx: TenantContext, scope: ScopeRef, *, changes: int = 0,
                  pending_trigger: str = "") -> None:
    """Create ``scope``'s row or update it in one statement, safe against concurrent writers
    (``ON CONFLICT``): add ``changes`` to its counter (``first_change_at`` set when it was
    unset); with ``pending_trigger``, mark it pending at normal priority unless it already
    is."""
    now = timezone.now()
    pending = now if pending_trigger else None
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO summaries_summaryscope AS s (id, tenant_id, layer, scope_key, "
            "identifiers, personal_key, changes, first_change_at, pending_since, priority, "
            "trigger, last_error, created_at) "
            "VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, '', %s) "
            "ON CONFLICT (tenant_id, layer, scope_key, personal_key) DO UPDATE SET "
            "changes = s.changes + EXCLUDED.changes, "
            "first_change_at = COALESCE(s.first_change_at, EXCLUDED.first_change_at), "
            "pending_since = COALESCE(s.pending_since, EXCLUDED.pending_since), "
            "trigger = CASE WHEN s.pending_since IS NULL AND EXCLUDED.pending_since IS NOT NULL "
            "THEN EXCLUDED.trigger ELSE s.trigger END",
            [uuid7(), ctx.tenant_id, scope.layer.value, scope.key,
             json.dumps(dict(scope.identifiers), sort_keys=True), scope.personal_key, changes,
             now if changes else None, pending, Priority.NORMAL, pending_trigger, now])


def _count_changes(ctx: TenantContext, rows: list[dict[str, Any]]) -> None:
    """One change more in the scope of each memory row (``layer`` and identifier columns),
    and in its personalized summaries when its layer personalizes."""
    config = summary_settings(ctx)
    for scope, n in Counter(scope_of_memory(row["layer"], row) for row in rows).items():
        _upsert_scope(ctx, scope, changes=n)
        if config.for_layer(scope.layer).personalize:
            SummaryScope.objects.filter(layer=scope.layer.value, scope_key=scope.key).exclude(
                personal_key="").update(changes=F("changes") + n,
                                        first_change_at=Coalesce("first_change_at",
                                                                 timezone.now()))


def _scope_rows(memory_ids: list[Any]) -> list[dict[str, Any]]:
    """The ``layer`` and identifier columns of ``memory_ids`` (what their scopes are made of)."""
    return list(Memory.objects.filter(pk__in=memory_ids).values(*_COLUMNS))


def summaries_note_withdrawn(ctx: TenantContext, *, memory_ids: Iterable[Any]) -> None:
    """Memories were archived or pruned: their scopes' sources changed (the hash a summary
    is compared with, ``summaries.source_hashes``); nothing is counted or invalidated, as
    the summaries citing them still say what was true. In the caller's transaction."""
    ids = list(memory_ids)
    if ids:
        sources_changed(ctx.tenant_id, scopes_of_memories(_scope_rows(ids)))


def _invalidate(ctx: TenantContext, memory_ids: list[Any], now: datetime) -> list[uuid.UUID]:
    """Mark the summaries citing ``memory_ids`` invalid and their scopes pending at high
    priority; a regeneration job per scope is queued for after commit. Returns the scopes."""
    ids = [str(pk) for pk in memory_ids]
    scope_ids = list(LayerSummary.objects.filter(source_ids__overlap=ids)
                     .values_list("scope_id", flat=True).distinct())
    if not scope_ids:
        return []
    LayerSummary.objects.filter(scope_id__in=scope_ids, invalidated_at__isnull=True).update(
        invalidated_at=now)
    waiting = set(SummaryScope.objects.filter(pk__in=scope_ids, priority=Priority.HIGH,
                                              pending_since__isnull=False)
                  .values_list("pk", flat=True))  # a job is queued for these already
    SummaryScope.objects.filter(pk__in=scope_ids).exclude(pk__in=waiting).update(
        pending_since=now, priority=Priority.HIGH, trigger="invalidation")
    for scope_id in set(scope_ids) - waiting:
        job_enqueue(ctx, task=REGENERATE_TASK, args=[str(ctx.tenant_id), str(scope_id)])
    return scope_ids


def summary_scope_wanted(ctx: TenantContext, *, scope: ScopeRef, trigger: str) -> None:
    """Mark ``scope`` pending (normal priority) unless it already is: a summary was asked for
    that does not exist yet (a personalized one) or is stale."""
    _upsert_scope(ctx, scope, pending_trigger=trigger)


def summaries_note_stored(ctx: TenantContext, *, memory_ids: Iterable[Any]) -> None:
    """Memories were stored, changed, merged into or restored: count the change in their
    scopes; a changed memory that a summary cites invalidates that summary (seed 001
    "Immediate invalidation on significant change"). In the caller's transaction."""
    ids = list(memory_ids)
    if not ids:
        return
    rows = _scope_rows(ids)
    sources_changed(ctx.tenant_id, scopes_of_memories(rows))
    if settings.SUMMARIES:
        _count_changes(ctx, rows)
    _invalidate(ctx, ids, timezone.now())


def summaries_note_removed(ctx: TenantContext, *, memory_ids: Iterable[Any],
                           erased: bool, rows: list[dict[str, Any]] | None = None) -> None:
    """Memories were soft-deleted (``erased=False``) or erased: summaries that cite them are
    invalidated and regenerated at high priority; when erased, the sentences that cite them
    are also removed from those summaries now (and their context vectors cleared until the
    regeneration), so erased content is never served again. ``rows`` (erasure: the erased
    memories' layer and identifier columns) find the scopes and personalized summaries left
    without any memory, which are deleted (:func:`_forget_empty`)."""
    ids = [str(pk) for pk in memory_ids]
    if not ids:
        return
    scope_rows = (rows or []) if erased else _scope_rows(ids)
    sources_changed(ctx.tenant_id, scopes_of_memories(scope_rows))
    if not erased and settings.SUMMARIES:
        _count_changes(ctx, scope_rows)
    if erased:
        _cut_sentences(ids)
        _forget_empty(rows or [])
    _invalidate(ctx, ids, timezone.now())


def _forget_empty(rows: list[dict[str, Any]]) -> None:
    """Delete the scope rows (and their summaries) of the erased memories' scopes that hold
    no memory any more, in any state, and the personalized summaries of users and sessions
    that hold none: their keys and identifiers name an erased data subject."""
    for scope in scopes_of_memories(rows):
        if not Memory.objects.filter(layer=scope.layer.value, **{
                IDENTIFIER_FIELDS[name]: value for name, value in scope.identifiers}).exists():
            SummaryScope.objects.filter(layer=scope.layer.value, scope_key=scope.key).delete()
    for name in PERSONAL_IDENTIFIERS.values():
        column = IDENTIFIER_FIELDS[name]
        for value in {row[column] for row in rows if row.get(column)}:
            if not Memory.objects.filter(**{column: value}).exists():
                SummaryScope.objects.filter(personal_key=f"{name}={value}").delete()


def _cut_sentences(ids: list[str]) -> None:
    gone = set(ids)
    for summary in LayerSummary.objects.filter(source_ids__overlap=ids):
        kept = [s for s in summary.sentences if not gone & set(s["sourceIds"])]
        summary.sentences = kept
        summary.content = " ".join(s["text"] for s in kept)
        summary.source_ids = sorted({i for s in kept for i in s["sourceIds"]})
        summary.source_count = len(summary.source_ids)
        summary.token_count = count_tokens(summary.content)
        summary.context_vector = None
        summary.save(update_fields=["sentences", "content", "source_ids", "source_count",
                                    "token_count", "context_vector"])


def summary_request(ctx: TenantContext, *, scope: ScopeRef, priority: int = Priority.HIGH,
                    trigger: str = "manual") -> SummaryScope:
    """Ask for ``scope``'s regeneration: mark it pending and, at high priority, queue its job
    now (after commit). Checks the summarization budget first.

    Raises:
        BudgetExceeded: a model would be called and the budget is spent (nothing queued).
    """
    check_budget(ctx)
    row = scope_row(ctx, scope)
    queued = row.pending_since is not None and row.priority == Priority.HIGH
    if row.pending_since is None or priority < row.priority:
        SummaryScope.objects.filter(pk=row.pk).update(
            pending_since=row.pending_since or timezone.now(),
            priority=min(priority, row.priority), trigger=trigger)
        row.refresh_from_db()
    if priority == Priority.HIGH and not queued:  # one job per wait, however many asks
        job_enqueue(ctx, task=REGENERATE_TASK, args=[str(ctx.tenant_id), str(row.pk)])
    return row


def _due(row: SummaryScope, now: datetime, ctx: TenantContext) -> str | None:
    config = summary_settings(ctx).for_layer(row.layer)
    if not config.enabled:
        return None
    if row.last_generated_at is None:
        return "initial" if row.changes > 0 else None
    age = (now - row.last_generated_at).total_seconds()
    if config.update_on_changes and row.changes >= config.update_on_changes:
        return "changes"
    if age >= config.update_interval and (row.changes > 0 or not config.skip_if_unchanged):
        return "time"
    if age >= config.max_age:
        return "age"
    return None


def summaries_mark_due(ctx: TenantContext, *, now: datetime | None = None) -> int:
    """Mark the scopes whose triggers fire as pending (seed 001 "Configure time-based
    update", "Configure change-based update"); returns how many."""
    now = now or timezone.now()
    marked = 0
    for row in SummaryScope.objects.filter(pending_since__isnull=True).iterator():
        trigger = _due(row, now, ctx)
        if trigger:
            SummaryScope.objects.filter(pk=row.pk, pending_since__isnull=True).update(
                pending_since=now, trigger=trigger)
            marked += 1
    return marked


def _precedence_order() -> Case:
    return Case(*(When(layer=layer.value, then=Value(rank)) for layer, rank in PRECEDENCE.items()),
                default=Value(99), output_field=IntegerField())


def summaries_run_batch(ctx: TenantContext, *, now: datetime | None = None,
                        limit: int | None = None) -> dict[str, int]:
    """Regenerate the pending scopes that are due: high priority ones at once, the others once
    they have waited the batch window; by priority, layer precedence, then age. A spent
    budget stops the batch (the rest stay pending, the error is kept on the scope).

    Returns:
        ``{"scopes", "summaries", "modelCalls", "failed"}`` of this run.
    """
    now = now or timezone.now()
    window = timedelta(seconds=summary_settings(ctx).batch_window_seconds)
    pending = list(SummaryScope.objects.filter(
        Q(priority=Priority.HIGH) | Q(pending_since__lte=now - window),
        pending_since__isnull=False,
    ).annotate(rank=_precedence_order()).order_by("priority", "rank", "pending_since")[
        : limit or settings.SUMMARY_BATCH_SCOPES])
    done = {"scopes": 0, "summaries": 0, "modelCalls": 0, "failed": 0}
    for row in pending:
        try:
            with transaction.atomic():
                stored = summary_generate(ctx, scope=scope_of_row(row),
                                          trigger=row.trigger or "time")
        except BudgetExceeded as err:
            _record_error(row, f"{err.code}: {err.message}", now)
            done["failed"] += 1
            break
        except Exception as err:  # one bad scope must not stop the others
            logger.exception("summary generation failed for %s", row)
            _record_error(row, f"{type(err).__name__}: {err}"[:500], now)
            done["failed"] += 1
            continue
        done["scopes"] += 1
        done["summaries"] += len(stored)
        done["modelCalls"] += int(any(s.model != OFFLINE_MODEL for s in stored))
    BATCH_SIZE.observe(done["scopes"])
    if done["modelCalls"]:
        BATCH_EFFICIENCY.observe(done["summaries"] / done["modelCalls"])
    return done


def _record_error(row: SummaryScope, message: str, now: datetime) -> None:
    SummaryScope.objects.filter(pk=row.pk).update(last_error=message, last_error_at=now)


def summary_regenerate(ctx: TenantContext, *, scope_id: str) -> dict[str, Any]:
    """Regenerate one scope now (the high-priority job); a missing scope is skipped."""
    pk = parse_uuid(scope_id)
    row = SummaryScope.objects.filter(pk=pk).first() if pk else None
    if row is None:
        return {"skipped": True}
    try:
        with transaction.atomic():
            stored = summary_generate(ctx, scope=scope_of_row(row),
                                      trigger=row.trigger or "manual")
    except BudgetExceeded as err:
        _record_error(row, f"{err.code}: {err.message}", timezone.now())
        return {"failed": err.code}
    return {"summaries": len(stored)}


def summaries_backfill(ctx: TenantContext, *, layer: str | None = None, force: bool = False,
                       progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
    """Summarise every scope that holds active memories (of ``layer`` only, when given) and
    has no summary yet (every one with ``force``): for memories stored before summaries
    existed. ``progress(done, total)`` is called after each scope. A spent budget stops it.

    Returns:
        ``{"scopes": total, "generated": n, "summaries": rows written, "failed": n}``.
    """
    rows = Memory.objects.filter(state=State.ACTIVE, pruned_at__isnull=True)
    if layer:
        rows = rows.filter(layer=layer)
    scopes = sorted({scope_of_memory(r["layer"], r) for r in rows.values(*_COLUMNS).distinct()},
                    key=lambda s: (PRECEDENCE[s.layer], s.key))
    if not force:
        done_keys = set(LayerSummary.objects.values_list("scope__layer", "scope__scope_key"))
        scopes = [s for s in scopes if (s.layer.value, s.key) not in done_keys]
    result = {"scopes": len(scopes), "generated": 0, "summaries": 0, "failed": 0}
    for index, scope in enumerate(scopes, start=1):
        try:
            with transaction.atomic():
                stored = summary_generate(ctx, scope=scope, trigger="backfill")
        except BudgetExceeded:
            result["failed"] += 1
            raise
        result["generated"] += 1
        result["summaries"] += len(stored)
        if progress:
            progress(index, len(scopes))
    return result
