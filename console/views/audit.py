"""The tenant's audit log: filters (action, actor, date range), pages, and export of the
filtered entries as CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.access import ConsoleAccess, console_view
from console.forms import AuditFilterForm
from console.models import ConsoleRole
from governance.selectors import audit_actions, audit_list
from tenants.audit import audit_record
from tenants.models import AuditEntry

PAGE = 100
#: Entries one export holds at most (newest first); narrow the filters for older ones.
EXPORT_LIMIT = 10_000
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
FIELDS = ["createdAt", "actor", "action", "targetType", "targetId", "details"]


def _range(form: AuditFilterForm) -> dict[str, Any]:
    data = form.cleaned_data
    since = datetime.combine(data["since"], time.min, UTC) if data.get("since") else None
    until = (datetime.combine(data["until"], time.min, UTC) + timedelta(days=1)
             if data.get("until") else None)
    return {"action": data.get("action") or None, "actor": data.get("actor") or None,
            "since": since, "until": until}


def _row(entry: AuditEntry) -> dict[str, Any]:
    return {"createdAt": entry.created_at.isoformat(), "actor": entry.actor,
            "action": entry.action, "targetType": entry.target_type,
            "targetId": entry.target_id, "details": entry.details}


def _cell(value: Any) -> str:
    """A CSV cell a spreadsheet shows as text (a leading ``=``, ``+``, ``-`` or ``@`` would
    be read as a formula)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return "'" + text if text.startswith(_FORMULA_START) else text


def _export(rows: list[dict[str, Any]], fmt: str) -> HttpResponse:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    if fmt == "json":
        response = HttpResponse(json.dumps(rows, indent=1), content_type="application/json")
    else:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows({k: _cell(v) for k, v in row.items()} for row in rows)
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.{fmt}"'
    return response


@console_view(ConsoleRole.ADMIN)
def audit_log(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/audit/?action=&actor=&since=&until=&page=&export=csv|json``:
    the audit log, newest first, :data:`PAGE` entries a page; ``export`` downloads the
    filtered entries (at most :data:`EXPORT_LIMIT`) and is itself audited."""
    form = AuditFilterForm(request.GET or None, actions=audit_actions())
    filters: dict[str, Any] = {}
    if form.is_bound and form.is_valid():
        filters = _range(form)
    elif form.is_bound:
        return render(request, "console/audit.html", {
            "access": access, "form": form, "page": None, "title": "Audit log",
            "tab": "audit"}, status=400)
    entries = audit_list(**filters)
    fmt = request.GET.get("export")
    if fmt in ("csv", "json"):
        rows = [_row(e) for e in entries[:EXPORT_LIMIT]]
        audit_record(access.ctx, action="audit_exported", target_type="audit",
                     details={"format": fmt, "entries": len(rows),
                              **{k: str(v) for k, v in filters.items() if v}})
        return _export(rows, fmt)
    page = Paginator(entries, PAGE).get_page(request.GET.get("page"))
    query = urlencode({k: v for k, v in request.GET.items() if k not in ("page", "export")})
    return render(request, "console/audit.html", {
        "access": access, "form": form, "page": page, "query": query,
        "export_limit": EXPORT_LIMIT, "title": f"{access.tenant.name}: audit log",
        "tab": "audit",
    })
