"""Platform admins' tenant management: create a tenant (with its first admin API key, shown
once) and deactivate or reactivate one. Superusers only; everything else answers 403."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from memory_project.errors import ConfigurationError, MemoryServiceError
from tenants.context import TenantContext, dangerously_cross_tenant
from tenants.entry import run_in_scope
from tenants.models import Tenant
from tenants.services import api_key_create, system_context, tenant_create, tenant_set_active

#: Session key holding a new tenant's first key until the tenant list shows it once.
NEW_TENANT_SESSION = "console_new_tenant_key"


def _forbidden(request: HttpRequest) -> HttpResponse:
    return render(request, "console/forbidden.html", {"role": "not a platform admin"},
                  status=403)


def platform_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Decorate a platform admins' page: anonymous callers go to the sign-in page, anyone
    signed in who is not a superuser gets the console's 403 page."""
    @login_required(login_url="console:login")
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_superuser:
            return _forbidden(request)
        return view(request, *args, **kwargs)
    return wrapper


def _actor(request: HttpRequest) -> str:
    return f"console:{request.user.get_username()}"


@require_POST
@platform_view
def tenant_new(request: HttpRequest) -> HttpResponse:
    """POST ``/console/tenants/new/`` (``name``, optional ``slug``): create the tenant and
    an admin API key for it; the tenant list shows the key once after the redirect."""
    try:
        tenant = tenant_create(name=request.POST.get("name", "")[:200],
                               slug=request.POST.get("slug", "")[:100] or None)
    except MemoryServiceError as err:
        messages.error(request, err.message)
        return redirect("console:index")
    ctx = system_context(tenant, _actor(request))

    def first_key(scoped: TenantContext) -> str:
        return api_key_create(scoped, name="first admin key", roles=["admin"])[1]

    request.session[NEW_TENANT_SESSION] = {"tenant": tenant.slug,
                                           "key": run_in_scope(ctx, first_key, ctx)}
    messages.success(request, f"Tenant {tenant.name} ({tenant.slug}) created.")
    return redirect("console:index")


@require_POST
@platform_view
def tenant_active(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    """POST ``/console/tenants/<slug>/active/`` (``active``: ``on`` | ``off``)."""
    tenant = Tenant.objects.filter(slug=tenant_slug).first()
    if tenant is None:
        return render(request, "console/not_found.html", status=404)
    active = request.POST.get("active") == "on"
    ctx = system_context(tenant, _actor(request))
    try:
        with dangerously_cross_tenant("platform admin console: tenant activation"):
            run_in_scope(ctx, tenant_set_active, ctx, active=active)
    except ConfigurationError as err:  # no platform connection configured
        messages.error(request, err.message)
        return redirect("console:index")
    messages.success(request, f"Tenant {tenant.name} {'reactivated' if active else 'deactivated'}.")
    return redirect("console:index")
