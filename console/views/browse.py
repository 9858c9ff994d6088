"""The memory browser of the explorer page (filters, chips, pages), its bulk actions and its
export. The filters are :class:`console.browse.BrowseForm`'s GET parameters."""

from __future__ import annotations

from datetime import UTC
from typing import Any, cast
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from console.access import ConsoleAccess, console_view
from console.browse import (
    EXPORT_LIMIT,
    FILTER_PARAMS,
    PAGE_SIZE,
    BrowseFilters,
    BrowseForm,
    csv_lines,
    export_rows,
    jsonl_lines,
    memories_browse,
)
from console.bulk import MAX_BULK, memories_bulk_apply
from console.models import ConsoleRole
from memories.models import Memory
from memory_project.errors import MemoryServiceError
from tenants.audit import audit_record

#: Export format (``as`` parameter) → content type.
EXPORT_TYPES: dict[str, str] = {"jsonl": "application/x-ndjson; charset=utf-8",
                                "csv": "text/csv; charset=utf-8"}


def _href(base: str, params: dict[str, Any]) -> str:
    return f"{base}?{urlencode(params)}" if params else base


def browse_context(request: HttpRequest, access: ConsoleAccess) -> dict[str, Any]:
    """The template context of ``templates/console/_memory_browser.html`` for a GET of the
    explorer: ``browse_form``, ``page`` (a Django ``Page`` of :data:`PAGE_SIZE` memories;
    a bad ``page`` parameter gives the first or last page), ``chips`` (``[{"label", "value",
    "remove"}]``, ``remove`` a URL without that filter), ``clear_url``, ``previous_url``,
    ``next_url``, ``export_jsonl``, ``export_csv``, ``return_query`` (filters and page, for
    the bulk form), ``page_ids``, ``has_memories`` (the tenant has any at all),
    ``browse_valid``, ``export_limit`` and ``max_bulk``. Invalid filters list nothing."""
    form = BrowseForm(request.GET)
    valid = form.is_valid()
    filters = form.filters() if valid else BrowseFilters()
    queryset = memories_browse(access.ctx, filters) if valid else Memory.objects.none()
    page = Paginator(queryset, PAGE_SIZE).get_page(request.GET.get("page"))
    base = reverse("console:memories", args=[access.tenant.slug])
    export = reverse("console:memory-export", args=[access.tenant.slug])
    params = filters.params()
    chips = [{"label": form[name].label if name.startswith("f_") else name, "value": value,
              "name": name,
              "remove": _href(base, {k: v for k, v in params.items() if k != name})}
             for name, value in params.items()]
    return {
        "browse_form": form, "browse_valid": valid, "page": page, "chips": chips,
        "clear_url": base,
        "previous_url": (_href(base, {**params, "page": page.previous_page_number()})
                         if page.has_previous() else None),
        "next_url": (_href(base, {**params, "page": page.next_page_number()})
                     if page.has_next() else None),
        "export_jsonl": _href(export, {**params, "as": "jsonl"}),
        "export_csv": _href(export, {**params, "as": "csv"}),
        "return_query": urlencode({**params, "page": page.number}),
        "page_ids": [str(m.pk) for m in page.object_list],
        "has_memories": page.paginator.count > 0 or Memory.objects.exists(),
        "export_limit": f"{EXPORT_LIMIT:,}", "max_bulk": MAX_BULK,
    }


def _back(access: ConsoleAccess, query: str) -> HttpResponse:
    """Redirect to the browser keeping only the filter and ``page`` parameters of
    ``query``."""
    given = QueryDict(query)
    kept = {k: given[k] for k in (*FILTER_PARAMS, "page") if given.get(k)}
    return redirect(_href(reverse("console:memories", args=[access.tenant.slug]), kept))


@require_POST
@console_view(ConsoleRole.ADMIN)
def memory_bulk(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """POST ``/console/t/<slug>/memories/bulk/``: ``action`` (``archive``, ``delete`` or
    ``restore``) on the checked ``ids`` (plus every ``page_ids`` when ``select_page`` is
    set), at most :data:`console.bulk.MAX_BULK`; then back to the browser with the filters
    of ``return_query`` and a message saying how many changed and how many were not found."""
    ids = request.POST.getlist("ids")
    if request.POST.get("select_page"):
        ids += request.POST.getlist("page_ids")
    back = _back(access, request.POST.get("return_query", ""))
    if not ids:
        messages.error(request, "Check at least one memory first.")
        return back
    try:
        outcome = memories_bulk_apply(access.ctx, action=request.POST.get("action", ""),
                                      memory_ids=ids)
    except MemoryServiceError as err:
        messages.error(request, err.message)
    else:
        messages.success(request, outcome.message())
    return back


@console_view(ConsoleRole.ADMIN)
def memory_export(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """GET ``/console/t/<slug>/memories/export/?<filters>&as=jsonl|csv``: the filtered
    memories, newest first, at most :data:`console.browse.EXPORT_LIMIT`, streamed as an
    attachment ``memories-<slug>-<YYYY-MM-DD>.<as>`` (see :func:`console.browse.export_row`
    for the fields). Audited as ``memories_exported`` with the format, filters and row
    count. Invalid filters or format: back to the browser, which shows the error."""
    form = BrowseForm(request.GET)
    fmt = request.GET.get("as", "")
    if fmt not in EXPORT_TYPES or not form.is_valid():
        if fmt not in EXPORT_TYPES:
            messages.error(request, "Export as jsonl or csv.")
        return _back(access, request.GET.urlencode())
    filters = form.filters()
    rows = min(memories_browse(access.ctx, filters).count(), EXPORT_LIMIT)
    audit_record(access.ctx, action="memories_exported", target_type="tenant",
                 target_id=access.tenant.pk,
                 details={"format": fmt, "filters": filters.params(), "rows": rows})
    lines = export_rows(access.ctx, filters)
    response = StreamingHttpResponse(jsonl_lines(lines) if fmt == "jsonl" else csv_lines(lines),
                                     content_type=EXPORT_TYPES[fmt])
    day = timezone.now().astimezone(UTC).date().isoformat()
    response["Content-Disposition"] = (
        f'attachment; filename="memories-{access.tenant.slug}-{day}.{fmt}"')
    # console_view's views are typed as returning HttpResponse; Django serves any response.
    return cast(HttpResponse, response)
