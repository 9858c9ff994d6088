"""The memory explorer: search (hybrid, semantic, keyword, recall) with the score's parts, and
a memory's page with its content, metadata, history, references and actions."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import messages
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from console import services
from console.access import ConsoleAccess, console_view
from console.forms import MemoryEditForm, SearchForm
from console.history import history_lines
from console.models import ConsoleRole
from governance.models import ReviewItem
from memories.models import UNSERVED_COLUMNS, Memory, State
from memories.retrieval.recall import RecallRequest, memory_recall
from memories.retrieval.search import SearchRequest, memory_search
from memories.selectors.memory import memory_history
from memories.services.deletion import memory_archive
from memory_project.errors import MemoryNotFound, MemoryServiceError
from tenants.audit import owned_or_not_found
from tenants.layers import LayerIdentifiers

RECENT = 25


def _search(access: ConsoleAccess, form: SearchForm) -> list[dict[str, Any]]:
    data = form.cleaned_data
    identifiers = LayerIdentifiers.from_mapping(form.identifiers())
    layers = tuple(data["layers"]) or None
    scope = data["scope"] or None
    if data["mode"] == "recall":
        recalled = memory_recall(access.ctx, RecallRequest(
            topic=data["query"], identifiers=identifiers, layers=layers, scope=scope,
            limit=data["limit"]))
        return [{
            "memory": r.candidate.memory, "layer": r.candidate.layer.value, "score": r.score,
            "parts": [("relevance", r.relevance), ("importance", r.importance),
                      ("recency", r.recency), ("confidence", r.effective_confidence),
                      ("similarity", r.candidate.similarity),
                      ("keyword", r.candidate.keyword_score)],
        } for r in recalled]
    found = memory_search(access.ctx, SearchRequest(
        query=data["query"], identifiers=identifiers, layers=layers, limit=data["limit"],
        threshold=data["threshold"], mode=data["mode"], scope=scope))
    return [{
        "memory": c.memory, "layer": c.layer.value, "score": c.score,
        "parts": [("similarity", c.similarity), ("semantic rank", c.semantic_rank),
                  ("keyword", c.keyword_score), ("keyword rank", c.keyword_rank),
                  ("rrf", c.rrf)],
    } for c in found.results]


@console_view(ConsoleRole.ADMIN)
def explorer(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/memories/``: the search box (GET) and the latest memories."""
    form = SearchForm(request.GET or None)
    results: list[dict[str, Any]] | None = None
    if form.is_bound and form.is_valid():
        try:
            results = _search(access, form)
        except MemoryServiceError as err:
            form.add_error(None, err.message)
    recent = Memory.objects.order_by("-id").defer(*UNSERVED_COLUMNS)[:RECENT]
    return render(request, "console/explorer.html", {
        "access": access, "form": form, "results": results, "recent": recent,
        "title": f"{access.tenant.name}: memories", "tab": "memories",
    })


def _memory_or_404(access: ConsoleAccess, memory_id: uuid.UUID) -> Memory:
    return owned_or_not_found(access.ctx, Memory.objects.defer(*UNSERVED_COLUMNS), memory_id,
                              not_found=MemoryNotFound)


def _render_memory(request: HttpRequest, access: ConsoleAccess, memory: Memory,
                   form: MemoryEditForm | None = None) -> HttpResponse:
    form = form or MemoryEditForm(initial={
        "metadata": memory.metadata, "kind": memory.kind, "scope": memory.scope,
        "importance": memory.importance, "confidence": memory.confidence,
        "sensitive": memory.sensitive, "private": memory.private, "version": memory.version,
    })
    key = str(memory.pk)
    return render(request, "console/memory.html", {
        "access": access, "memory": memory, "form": form,
        "metadata_json": json.dumps(memory.metadata, indent=2, sort_keys=True),
        "history": history_lines(memory_history(access.ctx, memory_id=memory.pk)),
        "reviews": ReviewItem.objects.filter(
            Q(memory_id=memory.pk) | Q(result_memory_id=memory.pk)).order_by("-created_at"),
        "merged_from": Memory.objects.filter(metadata__mergedInto=key).only("pk", "content"),
        "merged_into": (memory.metadata or {}).get("mergedInto"),
        "title": "Memory", "tab": "memories",
    }, status=400 if form.errors else 200)


@console_view(ConsoleRole.ADMIN)
def memory_detail(request: HttpRequest, access: ConsoleAccess,
                  memory_id: uuid.UUID) -> HttpResponse:
    """``/console/t/<slug>/memories/<id>/``: content, metadata, history, references (in
    every state, so that a deleted or archived memory can be restored)."""
    try:
        memory = _memory_or_404(access, memory_id)
    except MemoryNotFound:
        return render(request, "console/not_found.html", status=404)
    return _render_memory(request, access, memory)


@require_POST
@console_view(ConsoleRole.ADMIN)
def memory_action(request: HttpRequest, access: ConsoleAccess, memory_id: uuid.UUID,
                  action: str) -> HttpResponse:
    """POST ``.../memories/<id>/<action>/``: ``edit``, ``archive``, ``delete``, ``restore``."""
    try:
        memory = _memory_or_404(access, memory_id)
        if action == "edit":
            form = MemoryEditForm(request.POST)
            if not form.is_valid():
                return _render_memory(request, access, memory, form)
            if memory.state == State.DELETED:
                messages.error(request, "A deleted memory cannot be edited: restore it first.")
                return redirect("console:memory", tenant_slug=access.tenant.slug,
                                memory_id=memory_id)
            patch = {k: v for k, v in form.fields_patch().items() if getattr(memory, k) != v}
            services.console_memory_edit(
                access.ctx, memory_id=memory.pk, metadata=form.cleaned_data["metadata"],
                fields=patch, expected_version=form.cleaned_data["version"])
            messages.success(request, "Memory updated.")
        elif action == "archive":
            _, changed = memory_archive(access.ctx, memory_id=memory.pk)
            messages.success(request, "Memory archived." if changed else "Not active: unchanged.")
        elif action == "delete":
            services.console_memory_delete(access.ctx, memory_id=memory.pk)
            messages.success(request, "Memory deleted (it can be restored).")
        elif action == "restore":
            changed = services.console_memory_restore(access.ctx, memory_id=memory.pk)
            messages.success(request, "Memory restored." if changed else "Already active.")
        else:
            return render(request, "console/not_found.html", status=404)
    except MemoryNotFound:
        return render(request, "console/not_found.html", status=404)
    except MemoryServiceError as err:
        messages.error(request, err.message)
    return redirect("console:memory", tenant_slug=access.tenant.slug, memory_id=memory_id)

