"""The memory explorer: search (hybrid, semantic, keyword, recall) with the score's parts and
the memory browser (``console.views.browse``); a memory's page with its content, metadata,
history, references and actions."""

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
from console.views.browse import browse_context
from governance.models import ReviewItem
from memories.models import UNSERVED_COLUMNS, Memory, State
from memories.retrieval.recall import RecallRequest, memory_recall
from memories.retrieval.search import SearchRequest, memory_search
from memories.selectors.memory import memory_history
from memories.services.deletion import memory_archive
from memory_project.errors import MemoryNotFound, MemoryServiceError
from tenants.audit import owned_or_not_found
from tenants.layers import IDENTIFIER_FIELDS, LayerIdentifiers

#: What each part of a result's score means: shown on hover, and in the page's legend.
PART_MEANINGS = {
    "similarity": "cosine similarity of the query's and the memory's embeddings (1: the same "
                  "meaning, 0: unrelated)",
    "semantic rank": "position in the list ordered by similarity (1: the most similar)",
    "keyword": "BM25 score of the words the query and the memory share (higher: more and "
               "rarer words in common)",
    "keyword rank": "position in the list ordered by BM25",
    "rrf": "reciprocal rank fusion of the two ranks: the sum over the lists of 1 / (60 + rank)",
    "relevance": "0.5 × similarity + 0.5 × BM25 divided by the best BM25 among the candidates",
    "importance": "the memory's importance (0 to 1)",
    "recency": "0.5 to the power of (age / the tenant's recency half-life)",
    "confidence": "the memory's confidence after its decay",
}

#: What the score column means in each mode (memories.retrieval.search and .recall).
SCORE_MEANINGS = {
    "hybrid": "the learned reranker's estimate (0 to 1) that the memory answers the query, "
              "from its BM25 and similarity, its neighbours' and cues of its text (the rrf part "
              "is the plain reciprocal rank fusion of the same lists)",
    "semantic": "the cosine similarity",
    "keyword": "the BM25 score",
    "recall": "the tenant's weights × relevance, importance, recency and confidence "
              "(by default 0.4, 0.3, 0.2 and 0.1)",
}


def _parts(pairs: list[tuple[str, float | None]]) -> list[tuple[str, float, str]]:
    """``(name, value, meaning)`` of the parts that have a value."""
    return [(name, value, PART_MEANINGS[name]) for name, value in pairs if value is not None]


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
            "parts": _parts([("relevance", r.relevance), ("importance", r.importance),
                             ("recency", r.recency), ("confidence", r.effective_confidence),
                             ("similarity", r.candidate.similarity),
                             ("keyword", r.candidate.keyword_score)]),
        } for r in recalled]
    found = memory_search(access.ctx, SearchRequest(
        query=data["query"], identifiers=identifiers, layers=layers, limit=data["limit"],
        threshold=data["threshold"], mode=data["mode"], scope=scope))
    return [{
        "memory": c.memory, "layer": c.layer.value, "score": c.score,
        "parts": _parts([("similarity", c.similarity), ("semantic rank", c.semantic_rank),
                         ("keyword", c.keyword_score), ("keyword rank", c.keyword_rank),
                         ("rrf", c.rrf)]),
    } for c in found.results]


#: GET parameters of the search form: the explorer searches when one of them is given (the
#: browser's filters alone only filter the list).
SEARCH_PARAMS = frozenset({*SearchForm.base_fields, *IDENTIFIER_FIELDS})


@console_view(ConsoleRole.ADMIN)
def explorer(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/memories/``: the search box (GET, when a search parameter is
    given) and the memory browser (filters, pages, bulk actions, export:
    :func:`console.views.browse.browse_context`)."""
    searching = not SEARCH_PARAMS.isdisjoint(request.GET)
    form = SearchForm(request.GET if searching else None)
    results: list[dict[str, Any]] | None = None
    if form.is_bound and form.is_valid():
        try:
            results = _search(access, form)
        except MemoryServiceError as err:
            form.add_error(None, err.message)
    return render(request, "console/explorer.html", {
        **browse_context(request, access),
        "access": access, "form": form, "results": results,
        "score_meaning": SCORE_MEANINGS.get(form.cleaned_data.get("mode", ""), "")
        if results is not None else "",
        "part_meanings": sorted(PART_MEANINGS.items()),
        "title": f"{access.tenant.name}: memories", "tab": "memories",
    })


def _memory_or_404(access: ConsoleAccess, memory_id: uuid.UUID) -> Memory:
    return owned_or_not_found(access.ctx, Memory.objects.defer(*UNSERVED_COLUMNS), memory_id,
                              not_found=MemoryNotFound)


def _render_memory(request: HttpRequest, access: ConsoleAccess, memory: Memory,
                   form: MemoryEditForm | None = None) -> HttpResponse:
    form = form or MemoryEditForm(initial={
        "content": memory.content, "metadata": memory.metadata, "kind": memory.kind,
        "scope": memory.scope,
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
            content = form.cleaned_data["content"]
            services.console_memory_edit(
                access.ctx, memory_id=memory.pk, metadata=form.cleaned_data["metadata"],
                fields=patch, expected_version=form.cleaned_data["version"],
                content=content if content not in (None, memory.content) else None)
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

