"""Layer summaries in the console: every summarised scope of the tenant, one scope's depths
with their freshness and each sentence's source memories, a "Regenerate now" button, and the
context preview (exactly what an agent would receive for some identifiers, a query and a
token budget)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from console.access import ConsoleAccess, console_view
from console.forms import ContextPreviewForm
from console.models import ConsoleRole
from memories.models import Memory
from memory_project.errors import MemoryServiceError, NotFound
from summaries import selectors
from summaries.context import ContextRequest, context_as_dict, context_assemble
from summaries.models import Priority, SummaryScope
from summaries.scopes import scope_of_row
from summaries.selectors import ServedSummary
from summaries.services import summary_request
from tenants.audit import audit_cross_tenant_probe, audit_record, owned_or_not_found
from tenants.layers import Layer, LayerIdentifiers

#: Scopes the list shows at most (``summaries.selectors.scope_list``'s limit).
LIST_LIMIT = 200
#: Why a summary is stale, in words.
REASONS = {"sources_changed": "its sources changed since it was written",
           "invalidated": "a source it cites was deleted or replaced",
           "max_age": "older than the layer's maxAge"}


@dataclass(frozen=True)
class SourceLine:
    """A memory a sentence cites: its id and the stored memory (``None``: no longer
    stored, e.g. erased)."""

    id: str
    memory: Memory | None


@dataclass(frozen=True)
class SentenceLine:
    """One sentence of a summary and the memories it rests on."""

    text: str
    sources: list[SourceLine]


@dataclass(frozen=True)
class DepthPanel:
    """One depth of a scope's summary as the detail page shows it."""

    served: ServedSummary
    sentences: list[SentenceLine]
    reasons: list[str]

    @property
    def depth(self) -> str:
        """The summary's depth (sentence, paragraph or detailed)."""
        return self.served.summary.depth


def _panels(served: list[ServedSummary]) -> list[DepthPanel]:
    """The depths with each sentence's sources, the source memories read in one query."""
    cited = {str(i) for s in served for sentence in s.summary.sentences
             for i in sentence.get("sourceIds", [])}
    found = {str(m.pk): m for m in Memory.objects.filter(pk__in=sorted(cited)).only(
        "id", "content", "layer", "state", "created_at")} if cited else {}
    return [DepthPanel(
        served=s,
        sentences=[SentenceLine(str(sentence.get("text", "")), [
            SourceLine(str(i), found.get(str(i))) for i in sentence.get("sourceIds", [])])
            for sentence in s.summary.sentences],
        reasons=[REASONS.get(r, r) for r in s.freshness.reasons],
    ) for s in served]


@console_view(ConsoleRole.ADMIN)
def summary_list(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/summaries/?layer=``: the tenant's summarised scopes, newest
    generation first, with their change counter, pending regeneration and last error; an
    unknown layer shows every layer."""
    layer = request.GET.get("layer", "")
    if layer not in {x.value for x in Layer}:
        layer = ""
    rows = selectors.scope_list(access.ctx, layer=layer or None, limit=LIST_LIMIT)
    return render(request, "console/summaries.html", {
        "access": access, "rows": rows, "layer": layer, "layers": [x.value for x in Layer],
        "limited": len(rows) >= LIST_LIMIT, "limit": LIST_LIMIT,
        "title": f"{access.tenant.name}: summaries", "tab": "summaries",
    })


@console_view(ConsoleRole.ADMIN)
def summary_detail(request: HttpRequest, access: ConsoleAccess,
                   scope_id: uuid.UUID) -> HttpResponse:
    """``/console/t/<slug>/summaries/<scope id>/``: the scope's depths side by side, each
    with its tokens, model, age and freshness, and every sentence with the memories it
    cites. Another tenant's scope answers like a missing one (404, recorded as a probe)."""
    found = selectors.scope_summaries(access.ctx, scope_id=scope_id)
    if found is None:
        audit_cross_tenant_probe(access.ctx, model=SummaryScope, object_id=scope_id)
        return render(request, "console/not_found.html", status=404)
    row, served = found
    scope = scope_of_row(row)
    return render(request, "console/summary.html", {
        "access": access, "row": row, "scope": scope, "panels": _panels(served),
        "title": f"Summary of {scope.describe()}", "tab": "summaries",
    })


@require_POST
@console_view(ConsoleRole.ADMIN)
def summary_regenerate(request: HttpRequest, access: ConsoleAccess,
                       scope_id: uuid.UUID) -> HttpResponse:
    """POST ``.../summaries/<scope id>/regenerate/``: queue the scope's regeneration at high
    priority (audited), then back to the scope's page; a spent summarization budget is a
    message there."""
    try:
        row = owned_or_not_found(access.ctx, SummaryScope.objects.all(), scope_id)
    except NotFound:
        return render(request, "console/not_found.html", status=404)
    try:
        summary_request(access.ctx, scope=scope_of_row(row), priority=Priority.HIGH,
                        trigger="manual")
    except MemoryServiceError as err:
        messages.error(request, err.message)
    else:
        audit_record(access.ctx, action="summary_regeneration_requested",
                     target_type="summary_scope", target_id=row.pk,
                     details={"layer": row.layer, "scope": row.scope_key})
        messages.success(request, "Regeneration queued: the summaries are rewritten shortly.")
    return redirect("console:summary", tenant_slug=access.tenant.slug, scope_id=row.pk)


def _preview(access: ConsoleAccess, form: ContextPreviewForm) -> dict[str, Any] | None:
    """The assembled context for the form's values, or ``None`` with the error on the
    form. Neither references nor summary reads are counted: a preview is not a retrieval."""
    data = form.cleaned_data
    try:
        assembled = context_assemble(access.ctx, ContextRequest(
            identifiers=LayerIdentifiers.from_mapping(form.identifiers()),
            query=data["query"] or None, budget=data["budget"], depth=data["depth"] or None),
            observe=False)
    except MemoryServiceError as err:
        form.show_error(err)
        return None
    as_dict = context_as_dict(assembled)
    return {"context": assembled, "data": as_dict, "markdown": assembled.markdown(),
            "json": json.dumps(as_dict, indent=2, ensure_ascii=False)}


@console_view(ConsoleRole.ADMIN)
def context_preview(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/context/?userId=&projectId=&query=&budget=&depth=``: what an agent
    would receive (``POST /api/v1/context``): the Markdown, its token count against the
    budget, every layer's score and why a layer was left out, the ids included and the
    warnings. Bad input is shown on the form (status 200)."""
    form = ContextPreviewForm(request.GET or None)
    preview = _preview(access, form) if form.is_bound and form.is_valid() else None
    return render(request, "console/context.html", {
        "access": access, "form": form, "preview": preview,
        "title": f"{access.tenant.name}: context preview", "tab": "summaries",
    })
