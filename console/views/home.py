"""Sign-in landing: platform admins choose a tenant; members go to their tenant. The
platform admins' tenant switcher."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from console.access import membership_of
from console.models import ConsoleRole
from console.selectors import tenant_counts
from console.views.platform import NEW_TENANT_SESSION, platform_view
from tenants.models import Tenant


@login_required(login_url="console:login")
def index(request: HttpRequest) -> HttpResponse:
    """``/console/``: the tenant list (platform admins) or the member's first page."""
    if request.user.is_superuser:
        counts = tenant_counts()
        rows = [(tenant, (counts or {}).get(tenant.pk, {}))
                for tenant in Tenant.objects.order_by("name")]
        left = request.session.pop(NEW_TENANT_SESSION, None)
        return render(request, "console/index.html", {
            "rows": rows, "counted": counts is not None, "new_tenant_key": left,
            "title": "Tenants", "platform_page": "tenants"})
    membership = membership_of(request.user)
    if membership is None or not membership.tenant.is_active:
        return render(request, "console/no_access.html", {"title": "No console access"},
                      status=403)
    page = "reviews" if membership.role == ConsoleRole.REVIEWER else "dashboard"
    return redirect(f"console:{page}", tenant_slug=membership.tenant.slug)


#: The switcher keeps the page: a tenant page's ``tab`` name → its URL name.
SWITCH_PAGES = {
    "dashboard": "dashboard", "memories": "memories", "graph": "graph",
    "summaries": "summaries", "policies": "policies", "reviews": "reviews",
    "llm": "llm-usage", "audit": "audit", "settings": "settings",
}


@platform_view
def switch(request: HttpRequest) -> HttpResponse:
    """GET ``/console/switch/?tenant=<slug>&page=<tab>``: redirect a platform admin to the
    same page (``page``, default the dashboard) of another active tenant.

    Anyone else gets the console's 403 page; an unknown or inactive tenant the console's
    404 page.
    """
    slug = request.GET.get("tenant", "")[:100]
    if not Tenant.objects.filter(slug=slug, is_active=True).exists():
        return render(request, "console/not_found.html", status=404)
    page = SWITCH_PAGES.get(request.GET.get("page", ""), "dashboard")
    return redirect(f"console:{page}", tenant_slug=slug)
