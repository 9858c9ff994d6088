"""Recording accesses: reference and access counters, and importance recomputed from
frequency and recency (seed 001 "Importance Scoring", seed 002 reference bumping)."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db.models import F, FloatField
from django.db.models.expressions import RawSQL
from django.utils import timezone

from memories.models import Memory
from memories.services.lifecycle_config import lifecycle_section
from memory_project.after_response import after_response
from tenants.context import TenantContext
from tenants.entry import run_in_scope

# -----------------------------------------------

# Both exponents are clamped (exp(-700) and 0.5^1000 are 0 to float8 precision anyway):
# PostgreSQL raises on underflow instead of returning 0, and a tiny saturation or half-life
# would then fail every access of the tenant.
_IMPORTANCE_SQL = (
    "LEAST(1.0, GREATEST(0.0,"
    " %s * COALESCE(base_importance, importance)"
    " + %s * (1.0 - exp(GREATEST(-700.0, -(access_count + 1)::float8 / %s)))"
    " + %s * power(0.5::float8, LEAST(1000.0, GREATEST(0.0, extract(epoch FROM"
    " (%s::timestamptz - COALESCE(last_accessed_at, created_at)))::float8) / 86400.0 / %s))"
    "))"
)


def importance_expression(ctx: TenantContext, now: datetime) -> RawSQL:
    """The SQL that recomputes ``importance`` as part of an access's one UPDATE.

    Seed 001 "Importance Scoring" (frequency and recency), weights from the tenant's
    ``lifecycle.importance`` settings (defaults in brackets)::

        importance = baseWeight [0.2] × base_importance
                   + frequencyWeight [0.5] × (1 − exp(−access_count / saturation [10]))
                   + recencyWeight [0.3] × 0.5 ^ (days since the previous access / halfLifeDays [7])

    clipped to [0, 1]. ``access_count`` is the count including this access; "the previous
    access" is ``last_accessed_at`` before this one (``created_at`` for the first), so a memory
    used again after a long gap gains less than one in steady use. ``base_importance`` is the
    importance the caller gave (``importance`` itself for rows that never had it recorded).
    All columns are read before the UPDATE changes them (SQL semantics), so the expression
    belongs in the same statement that bumps ``access_count`` and ``last_accessed_at``.
    """
    cfg = lifecycle_section(ctx, "importance")
    params = [float(cfg["baseWeight"]), float(cfg["frequencyWeight"]),
              float(cfg["saturation"]), float(cfg["recencyWeight"]), now,
              float(cfg["halfLifeDays"])]
    return RawSQL(_IMPORTANCE_SQL, params, output_field=FloatField())


def base_importance_expression() -> RawSQL:
    """The importance the caller gave (kept in ``base_importance``)."""
    return RawSQL("COALESCE(base_importance, importance)", [], output_field=FloatField())




# --- access and feedback ----------------------------------------------------------------------

def memory_references_record_after_response(ctx: TenantContext, *,
                                            memory_ids: list[uuid.UUID]) -> None:
    """:func:`memory_references_record` once the response has been sent, in its own
    transaction in ``ctx``'s tenant (``memory_project.after_response``: the answer does not
    wait for the row writes)."""
    if not memory_ids:
        return
    ids = list(memory_ids)

    after_response(lambda: run_in_scope(ctx, memory_references_record, ctx, memory_ids=ids))


def memory_references_record(ctx: TenantContext, *, memory_ids: list[uuid.UUID]) -> int:
    """Count a retrieval of ``memory_ids``: one UPDATE for the whole request (seed 002).

    Bumps ``reference_count``/``last_referenced_at`` (seed 002) and ``access_count``/
    ``last_accessed_at``, and recomputes ``importance`` from frequency and recency (seed 001
    "Importance Scoring", formula in :func:`importance_expression`), keeping the caller's
    importance in ``base_importance``. Returns the number of rows touched.
    """
    if not memory_ids:
        return 0
    now = timezone.now()
    return Memory.objects.filter(pk__in=memory_ids).update(
        reference_count=F("reference_count") + 1,
        last_referenced_at=now,
        importance=importance_expression(ctx, now),
        base_importance=base_importance_expression(),
        access_count=F("access_count") + 1,
        last_accessed_at=now,
    )
