"""Who the signed-in user is in the console, and the tenant scope every console page runs in.

Every tenant page has the tenant's slug in its URL and goes through :func:`console_view`:

- a platform admin (Django superuser) may open any active tenant;
- a tenant admin or reviewer (a :class:`console.models.ConsoleMembership`) may open only
  their own tenant; any other slug, like an unknown one, answers 404;
- a reviewer may open only the review queue (other pages answer 403).

The page then runs inside the request transaction with ``app.tenant_id`` set (``SET LOCAL``
through :func:`tenants.context.activate`), exactly like an API call: row-level security and
the scoped managers bound every read and write to that tenant, and the principal recorded in
the audit log is ``user:<username>``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from console.models import ConsoleMembership, ConsoleRole
from tenants.context import CONSOLE_USER_GUC, TenantContext, activate, side_door
from tenants.models import Tenant

PLATFORM = "platform"


@dataclass(frozen=True)
class ConsoleAccess:
    """The tenant a console page works on, the caller's context and console role.

    ``role`` is ``"platform"`` (superuser), ``"admin"`` or ``"reviewer"``.
    """

    tenant: Tenant
    ctx: TenantContext
    role: str

    @property
    def is_platform(self) -> bool:
        return self.role == PLATFORM

    @property
    def can_administer(self) -> bool:
        return self.role in (PLATFORM, ConsoleRole.ADMIN)


def membership_of(user: Any) -> ConsoleMembership | None:
    """The console membership of ``user`` (read under row-level security through
    ``app.console_user_id``, which opens only that user's row). Must run in a transaction."""
    if not getattr(user, "is_authenticated", False):
        return None
    with side_door(CONSOLE_USER_GUC, str(user.pk)):
        return ConsoleMembership._base_manager.select_related("tenant").filter(
            user_id=user.pk).first()


def enter_tenant(request: HttpRequest, slug: str, roles: frozenset[str]) -> ConsoleAccess:
    """Resolve and enter the tenant ``slug`` for the signed-in user.

    Raises:
        Http404: no such active tenant, or not the member's tenant (the same answer).
        PermissionDenied: the member's role may not open this page.
    """
    user = request.user
    tenant = Tenant.objects.filter(slug=slug, is_active=True).first()
    if user.is_superuser:
        role = PLATFORM
    else:
        membership = membership_of(user)
        if membership is None or tenant is None or membership.tenant_id != tenant.id:
            raise Http404("No such tenant.")
        role = membership.role
    if tenant is None:
        raise Http404("No such tenant.")
    if role != PLATFORM and role not in roles:
        raise PermissionDenied("Your role cannot open this page.")
    ctx = TenantContext(
        tenant_id=tenant.id, tenant_slug=tenant.slug,
        principal=f"user:{user.get_username()}",
        roles=frozenset({"reviewer"} if role == ConsoleRole.REVIEWER else {"admin"}),
    )
    activate(ctx)
    return ConsoleAccess(tenant=tenant, ctx=ctx, role=role)


View = Callable[..., HttpResponse]


def console_view(*roles: str) -> Callable[[View], View]:
    """Decorate a tenant page ``view(request, access, **kwargs)``; the URL passes
    ``tenant_slug``. ``roles``: member roles allowed besides platform admins."""
    allowed = frozenset(roles)

    def decorate(view: View) -> View:
        @login_required(login_url="console:login")
        @functools.wraps(view)
        def wrapper(request: HttpRequest, tenant_slug: str, **kwargs: Any) -> HttpResponse:
            try:
                access = enter_tenant(request, tenant_slug, allowed)
                return view(request, access, **kwargs)
            except Http404:
                return render(request, "console/not_found.html", status=404)
            except PermissionDenied:
                membership = membership_of(request.user)
                return render(request, "console/forbidden.html", status=403, context={
                    "role": membership.role if membership else "none"})
        return wrapper
    return decorate
