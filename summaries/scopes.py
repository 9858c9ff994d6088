"""Layer scopes: what one summary covers, and the fingerprint of its sources.

A scope is one layer and the identifiers the layer requires (seed 001 "Layer Requirements
Matrix"): ``project`` with ``projectId=p1`` covers every active memory of layer ``project``
whose ``project_id`` is ``p1``. A personalized scope adds ``userId`` or ``sessionId``
(``personal``): the same sources, written for that user or session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from memories.models import Memory, State
from memories.retrieval.partition import layer_queryset
from summaries.models import SummaryScope
from tenants.context import TenantContext
from tenants.layers import (
    IDENTIFIER_FIELDS,
    REQUIRED,
    Layer,
    LayerIdentifiers,
    require_identifiers,
)

#: Identifiers a summary can be personalized by (seed 001: "scope personalization to user
#: or session").
PERSONAL_IDENTIFIERS = {"user": "userId", "session": "sessionId"}


@dataclass(frozen=True)
class ScopeRef:
    """A layer scope: ``identifiers`` are exactly the layer's required ones (camelCase);
    ``personal`` is ``("userId", "u1")``, ``("sessionId", "s1")`` or ``None``."""

    layer: Layer
    identifiers: tuple[tuple[str, str], ...]
    personal: tuple[str, str] | None = None

    @property
    def key(self) -> str:
        """``projectId=p1`` (``&``-joined in the matrix's order); values are kept verbatim,
        so the key is unambiguous only with :attr:`identifiers` beside it."""
        return "&".join(f"{name}={value}" for name, value in self.identifiers)

    @property
    def personal_key(self) -> str:
        """``userId=u1``, or ``""`` for the shared summary."""
        return f"{self.personal[0]}={self.personal[1]}" if self.personal else ""

    def as_identifiers(self) -> LayerIdentifiers:
        """The scope's identifiers as a :class:`LayerIdentifiers`."""
        return LayerIdentifiers(**dict(self.identifiers))

    def describe(self) -> str:
        """Words for a prompt or a page: ``project p1``, ``agent a1 of user u1``."""
        values = dict(self.identifiers)
        if self.layer == Layer.AGENT:
            text = f"agent {values['agentId']} of user {values['userId']}"
        elif self.layer == Layer.SESSION:
            text = f"session {values['sessionId']} of user {values['userId']}"
        else:
            text = f"{self.layer.value} {next(iter(values.values()))}"
        if self.personal:
            text += f", for {self.personal[0].removesuffix('Id')} {self.personal[1]}"
        return text

    def shared(self) -> ScopeRef:
        """The same scope without personalization."""
        return ScopeRef(self.layer, self.identifiers)


def scope_for(layer: Layer, identifiers: LayerIdentifiers,
              personal: tuple[str, str] | None = None) -> ScopeRef:
    """The scope of ``layer`` for ``identifiers`` (already resolved).

    Raises:
        MissingIdentifier: a required identifier is absent.
    """
    require_identifiers(layer, identifiers)
    return ScopeRef(layer, tuple((name, str(getattr(identifiers, name)))
                                 for name in REQUIRED[layer]), personal)


def scope_of_memory(layer: str, row: dict[str, Any]) -> ScopeRef:
    """The scope a memory belongs to, from its ``layer`` and identifier columns."""
    parsed = Layer(layer)
    return ScopeRef(parsed, tuple((name, str(row[IDENTIFIER_FIELDS[name]]))
                                  for name in REQUIRED[parsed]))


def scopes_of_memories(rows: Iterable[dict[str, Any]]) -> set[ScopeRef]:
    """The distinct scopes of memory rows (``values("layer", "user_id", …)``)."""
    return {scope_of_memory(row["layer"], row) for row in rows}


def sources(scope: ScopeRef) -> QuerySet[Memory]:
    """The scope's source memories: active, not pruned (``layer_queryset``), oldest first."""
    return layer_queryset(scope.layer, scope.as_identifiers()).order_by("id")


def source_hash(scope: ScopeRef) -> str:
    """SHA-256 (hex) over the scope's sources, ``id:content_hash`` in id order: it changes
    when a source is added, removed, archived or its content changes (seed 001 "Content
    hash comparison"). Computed in the database, one aggregate over the scope's index."""
    queryset = sources(scope).values("id", "content_hash")
    sql, params = queryset.query.sql_with_params()
    wrapped = (f"SELECT encode(sha256(convert_to(coalesce(string_agg(t.id::text || ':' || "
               f"t.content_hash, ',' ORDER BY t.id), ''), 'UTF8')), 'hex') FROM ({sql}) t")
    with connection.cursor() as cursor:
        cursor.execute(wrapped, params)
        row = cursor.fetchone()
    return str(row[0]) if row else hashlib.sha256(b"").hexdigest()


def scope_of_row(row: SummaryScope) -> ScopeRef:
    """The :class:`ScopeRef` a stored scope row stands for."""
    layer = Layer(row.layer)
    personal = None
    if row.personal_key:
        name, _, value = row.personal_key.partition("=")
        personal = (name, value)
    return ScopeRef(layer, tuple((name, str(row.identifiers[name])) for name in REQUIRED[layer]),
                    personal)


def has_memories(personal: tuple[str, str]) -> bool:
    """Whether the user or session ``("userId", …)``/``("sessionId", …)`` holds any active
    memory: a personalized summary is only worth writing for one that does."""
    return Memory.objects.filter(**{IDENTIFIER_FIELDS[personal[0]]: personal[1]},
                                 state=State.ACTIVE).exists()


def scope_row(ctx: TenantContext, scope: ScopeRef) -> SummaryScope:
    """``scope``'s bookkeeping row, created when missing."""
    row, _ = SummaryScope.objects.get_or_create(
        tenant_id=ctx.tenant_id, layer=scope.layer.value, scope_key=scope.key,
        personal_key=scope.personal_key, defaults={"identifiers": dict(scope.identifiers)})
    return row
