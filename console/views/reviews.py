"""The review queue: blocked promotions and policy hits with their redaction preview;
approve, reject with a reason, one at a time or in bulk; who decided and when."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from console.access import ConsoleAccess, console_view
from console.models import ConsoleRole
from governance.models import ReviewItem, ReviewKind, ReviewStatus
from governance.selectors import review_list
from governance.services import MEMORY_GONE, review_decide
from memory_project.errors import MemoryServiceError, NotFound
from tenants.audit import audit_cross_tenant_probe, owned_or_not_found

PAGE = 100


@console_view(ConsoleRole.ADMIN, ConsoleRole.REVIEWER)
def reviews(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/reviews/?status=pending&kind=&page=``: the queue, newest first,
    :data:`PAGE` items a page, with the total and links to the other pages."""
    status = request.GET.get("status", ReviewStatus.PENDING)
    kind = request.GET.get("kind") or None
    if status not in ReviewStatus.values and status != "all":
        status = ReviewStatus.PENDING
    if kind not in ReviewKind.values:
        kind = None
    pages = Paginator(review_list(status=None if status == "all" else status, kind=kind), PAGE)
    page = pages.get_page(request.GET.get("page"))
    query = {"status": status, **({"kind": kind} if kind else {})}
    return render(request, "console/reviews.html", {
        "access": access, "items": page.object_list, "page": page, "query": urlencode(query),
        "status": status, "kind": kind,
        "statuses": [*ReviewStatus.values, "all"], "kinds": ReviewKind.values,
        "title": f"{access.tenant.name}: review queue", "tab": "reviews",
    })


@console_view(ConsoleRole.ADMIN, ConsoleRole.REVIEWER)
def review_detail(request: HttpRequest, access: ConsoleAccess,
                  item_id: uuid.UUID) -> HttpResponse:
    """``/console/t/<slug>/reviews/<id>/``: one item with its details."""
    try:
        item = owned_or_not_found(access.ctx, ReviewItem.objects.all(), item_id)
    except NotFound:
        return render(request, "console/not_found.html", status=404)
    return render(request, "console/review.html", {
        "access": access, "item": item, "title": "Review item", "tab": "reviews",
    })


def _parse_ids(values: list[str]) -> list[uuid.UUID] | None:
    try:
        return list(dict.fromkeys(uuid.UUID(v) for v in values))
    except ValueError:
        return None


@require_POST
@console_view(ConsoleRole.ADMIN, ConsoleRole.REVIEWER)
def review_decide_view(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """POST ``/console/t/<slug>/reviews/decide/``: ``items`` (one or more ids),
    ``decision`` (``approve`` | ``reject``) and ``reason`` (needed to reject). An id that is
    not one of this tenant's items (missing or another tenant's) answers 404 and nothing is
    decided."""
    single = request.POST.get("single", "")
    if single:
        item_value, _, decision = single.partition(":")
        ids = _parse_ids([item_value])
        reason = request.POST.get(f"reason_{item_value}", "") or request.POST.get("reason", "")
    else:
        ids = _parse_ids(request.POST.getlist("items"))
        decision = request.POST.get("decision", "")
        reason = request.POST.get("reason", "")
    back = redirect("console:reviews", tenant_slug=access.tenant.slug)
    if decision not in ("approve", "reject"):
        messages.error(request, "Choose approve or reject.")
        return back
    if not ids:
        if ids is None:
            return render(request, "console/not_found.html", status=404)
        messages.error(request, "Select at least one item.")
        return back
    known = set(ReviewItem.objects.filter(pk__in=ids).values_list("pk", flat=True))
    if len(known) != len(ids):
        for item_id in set(ids) - known:
            audit_cross_tenant_probe(access.ctx, model=ReviewItem, object_id=item_id)
        return render(request, "console/not_found.html", status=404)
    if decision == "reject" and not reason.strip():
        messages.error(request, "A rejection needs a reason.")
        return back
    done = closed = 0
    for item_id in ids:
        try:
            item = review_decide(access.ctx, item_id=item_id, approve=decision == "approve",
                                 reason=reason)
        except MemoryServiceError as err:
            messages.error(request, f"{item_id}: {err.message}")
            continue
        if decision == "approve" and item.status != ReviewStatus.APPROVED:
            closed += 1
        else:
            done += 1
    if done:
        verb = "approved" if decision == "approve" else "rejected"
        messages.success(request, f"{done} item(s) {verb}.")
    if closed:
        messages.warning(request, f"{closed} item(s) closed: {MEMORY_GONE[len('Closed: '):]}")
    return back
