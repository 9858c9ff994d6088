"""Browsing a tenant's memories without a search: the filter form, the selector building the
filtered queryset, and the rows of an export of it.

Every filter is an optional GET parameter and they combine with AND. Their names are a
contract other pages link to (the dashboard drills down to ``?layer=agent``,
``?state=archived`` or ``?kind=fact``): ``layer``, ``kind``, ``state``, ``tag``,
``created_after``, ``created_before`` (``YYYY-MM-DD``, inclusive, UTC days), ``contains``
(case-insensitive substring of the content, at most :data:`CONTAINS_MAX` characters) and the
layer identifiers as ``f_agentId`` … ``f_companyId`` (prefixed so that they do not collide with
the search form's ``agentId`` … on the same page).

``Memory.objects`` hides no state (only the rows of other tenants, and what a restricted API
key may not touch): soft-deleted and archived memories are listed unless ``state`` narrows it.
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django import forms
from django.db.models import QuerySet

from memories.models import UNSERVED_COLUMNS, Kind, Memory, State
from tenants.context import TenantContext
from tenants.entry import run_in_scope
from tenants.layers import IDENTIFIER_FIELDS, Layer

#: Memories a page of the browser shows.
PAGE_SIZE = 50
#: Rows one export holds at most (newest first); narrow the filters for older ones.
EXPORT_LIMIT = 100_000
#: Rows an export reads per short transaction.
EXPORT_CHUNK = 1_000
#: Longest ``contains`` text accepted, in characters.
CONTAINS_MAX = 200
#: Filter parameter → (identifier name, model column), e.g. ``f_userId`` → ``userId``.
IDENTIFIER_PARAMS: dict[str, tuple[str, str]] = {
    f"f_{name}": (name, column) for name, column in IDENTIFIER_FIELDS.items()}
#: Every filter parameter, in the order chips show them.
FILTER_PARAMS: tuple[str, ...] = ("layer", "kind", "state", "tag", "created_after",
                                  "created_before", "contains", *IDENTIFIER_PARAMS)
#: The columns of an export, in order.
EXPORT_FIELDS: tuple[str, ...] = ("id", "created_at", "updated_at", "occurred_at", "layer",
                                  "identifiers", "kind", "state", "tags", "importance",
                                  "confidence", "content", "metadata")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_DATE = {"type": "date"}


@dataclass(frozen=True)
class BrowseFilters:
    """Valid filters of the browser; empty strings and ``None`` mean "any".

    ``identifiers`` maps a filter parameter (``f_userId``) to the exact identifier value.
    """

    layer: str = ""
    kind: str = ""
    state: str = ""
    tag: str = ""
    created_after: date | None = None
    created_before: date | None = None
    contains: str = ""
    identifiers: dict[str, str] = field(default_factory=dict)

    def params(self) -> dict[str, str]:
        """The GET parameters of the filters that are set (``{"layer": "agent", ...}``), in
        :data:`FILTER_PARAMS` order; dates as ``YYYY-MM-DD``."""
        values: dict[str, Any] = {
            "layer": self.layer, "kind": self.kind, "state": self.state, "tag": self.tag,
            "created_after": self.created_after, "created_before": self.created_before,
            "contains": self.contains, **self.identifiers}
        return {name: str(values[name]) for name in FILTER_PARAMS if values.get(name)}


class BrowseForm(forms.Form):
    """The browser's filters (all optional). Invalid when a choice is unknown, a date is not
    ``YYYY-MM-DD``, ``created_after`` is later than ``created_before``, or a text is too
    long; the page then lists nothing until the filters are fixed."""

    layer = forms.ChoiceField(required=False,
                              choices=[("", "any layer"), *((x.value, x.value) for x in Layer)])
    kind = forms.ChoiceField(required=False, choices=[("", "any kind"), *Kind.choices])
    state = forms.ChoiceField(required=False, choices=[("", "any state"), *State.choices])
    tag = forms.CharField(required=False, max_length=100, help_text="one tag, exact")
    created_after = forms.DateField(required=False, label="Created from",
                                    input_formats=["%Y-%m-%d"],
                                    widget=forms.DateInput(attrs=_DATE, format="%Y-%m-%d"))
    created_before = forms.DateField(required=False, label="Created until",
                                     input_formats=["%Y-%m-%d"],
                                     widget=forms.DateInput(attrs=_DATE, format="%Y-%m-%d"))
    contains = forms.CharField(required=False, max_length=CONTAINS_MAX, label="Content contains",
                               help_text=f"any case; at most {CONTAINS_MAX} characters")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param, (name, _column) in IDENTIFIER_PARAMS.items():
            self.fields[param] = forms.CharField(required=False, max_length=255, label=name)

    def clean(self) -> dict[str, Any]:
        """The cleaned data; a form error when ``created_after`` is after
        ``created_before``."""
        data = super().clean() or {}
        after, before = data.get("created_after"), data.get("created_before")
        if after and before and after > before:
            raise forms.ValidationError(
                "Created from must not be after Created until.", code="date_order")
        return data

    def identifier_fields(self) -> list[forms.BoundField]:
        """The bound ``f_*`` identifier fields, in layer order."""
        return [self[param] for param in IDENTIFIER_PARAMS]

    def identifiers_given(self) -> bool:
        """Whether any ``f_*`` identifier filter has a value (the page then shows them open)."""
        return any(self.data.get(param) for param in IDENTIFIER_PARAMS)

    def filters(self) -> BrowseFilters:
        """The cleaned filters; call only after ``is_valid()`` returned ``True``."""
        data = self.cleaned_data
        return BrowseFilters(
            layer=data.get("layer") or "", kind=data.get("kind") or "",
            state=data.get("state") or "", tag=data.get("tag") or "",
            created_after=data.get("created_after"), created_before=data.get("created_before"),
            contains=data.get("contains") or "",
            identifiers={p: data[p] for p in IDENTIFIER_PARAMS if data.get(p)})


def _day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, UTC)


def memories_browse(ctx: TenantContext, filters: BrowseFilters) -> QuerySet[Memory]:
    """The memories of ``ctx``'s tenant matching every filter set in ``filters``, newest first
    (``-id``: ids are UUIDv7), in every state unless ``filters.state`` says one; embeddings
    and search columns deferred. Lazy: nothing is read until it is evaluated, which must be
    inside ``ctx``'s tenant scope (row-level security and the scoped manager bound it).

    ``created_after``/``created_before`` are whole UTC days, both included; ``contains`` is a
    case-insensitive substring of the content (``ILIKE``, wildcards escaped); ``tag`` one
    entry of ``metadata.tags``.

    Raises:
        MissingTenantContext: when evaluated outside a tenant scope.
    """
    queryset = Memory.objects.all()
    exact = {"layer": filters.layer, "kind": filters.kind, "state": filters.state}
    queryset = queryset.filter(**{k: v for k, v in exact.items() if v})
    if filters.tag:
        queryset = queryset.filter(metadata__contains={"tags": [filters.tag]})
    if filters.created_after:
        queryset = queryset.filter(created_at__gte=_day_start(filters.created_after))
    if filters.created_before and filters.created_before < date.max:
        queryset = queryset.filter(
            created_at__lt=_day_start(filters.created_before + timedelta(days=1)))
    if filters.contains:
        queryset = queryset.filter(content__icontains=filters.contains)
    columns = {IDENTIFIER_PARAMS[p][1]: v for p, v in filters.identifiers.items()}
    if columns:
        queryset = queryset.filter(**columns)
    return queryset.order_by("-id").defer(*UNSERVED_COLUMNS)


def export_row(memory: Memory) -> dict[str, Any]:
    """One memory as an export row: the :data:`EXPORT_FIELDS`, times ISO 8601 with their
    zone (``occurred_at`` ``None`` when the writer gave none), ``identifiers`` camelCase,
    ``tags`` from ``metadata.tags`` (``[]`` when none)."""
    tags = (memory.metadata or {}).get("tags")
    return {
        "id": str(memory.pk), "created_at": memory.created_at.isoformat(),
        "updated_at": memory.updated_at.isoformat(),
        "occurred_at": memory.occurred_at.isoformat() if memory.occurred_at else None,
        "layer": memory.layer,
        "identifiers": memory.identifiers, "kind": memory.kind, "state": memory.state,
        "tags": tags if isinstance(tags, list) else [], "importance": memory.importance,
        "confidence": memory.confidence, "content": memory.content,
        "metadata": memory.metadata or {},
    }


def _export_chunk(ctx: TenantContext, filters: BrowseFilters, before: uuid.UUID | None,
                  size: int) -> list[dict[str, Any]]:
    queryset = memories_browse(ctx, filters)
    if before is not None:
        queryset = queryset.filter(id__lt=before)
    return [export_row(m) for m in queryset[:size].iterator(chunk_size=size)]


def export_rows(ctx: TenantContext, filters: BrowseFilters, *, limit: int = EXPORT_LIMIT,
                chunk_size: int = EXPORT_CHUNK) -> Iterator[dict[str, Any]]:
    """The export rows (:func:`export_row`) of :func:`memories_browse`, newest first, at
    most ``limit``.

    Read by keyset pagination (``id < last``) in chunks of ``chunk_size``, each in a short
    transaction of its own inside ``ctx``'s tenant scope (``tenants.entry.run_in_scope``):
    the iterator may be consumed by a streaming response, after the request's transaction
    and scope have ended, and never holds a transaction open while the client reads.
    """
    last: uuid.UUID | None = None
    left = limit
    while left > 0:
        chunk = run_in_scope(ctx, _export_chunk, ctx, filters, last, min(chunk_size, left))
        yield from chunk
        if len(chunk) < min(chunk_size, left):
            return
        left -= len(chunk)
        last = uuid.UUID(chunk[-1]["id"])


def jsonl_lines(rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """``rows`` as JSON Lines (UTF-8, one object per line)."""
    for row in rows:
        yield json.dumps(row, ensure_ascii=False).encode() + b"\n"


def _cell(value: Any) -> str:
    """A CSV cell: lists and objects as JSON; text a spreadsheet would read as a formula
    (leading ``=``, ``+``, ``-``, ``@``) gets a leading ``'``; ``None`` is empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return "'" + value if value.startswith(_FORMULA_START) else value
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def csv_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """``rows`` as CSV: a header of :data:`EXPORT_FIELDS`, then one line per row."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(EXPORT_FIELDS)
    yield out.getvalue()
    for row in rows:
        out.seek(0)
        out.truncate()
        writer.writerow([_cell(row[name]) for name in EXPORT_FIELDS])
        yield out.getvalue()
