"""Platform admins' console users page, ``/console/users/``: every user with their tenant and
role; create one, change their role or tenant, deactivate or reactivate them, remove their
membership. Superusers only (anyone else signed in gets the 403 page); every change is made
by :mod:`console.users`, then the page is shown again with a message (post/redirect/get)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from console import users as console_users
from console.access import PLATFORM
from console.views.platform import platform_view
from memory_project.errors import MemoryServiceError, NotFound

#: The roles the forms offer, in order: value and label.
PLACEMENTS = (("reviewer", "reviewer"), ("admin", "tenant admin"), (PLATFORM, "platform admin"))
#: Users per page of the list.
PAGE_SIZE = 50
#: The fields of the new-user form kept when it is shown again with an error.
NEW_USER_FIELDS = ("username", "email", "tenant", "role")


def _page(request: HttpRequest, form: dict[str, str] | None = None,
          status: int = 200) -> HttpResponse:
    rows, known = console_users.console_users_list()
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "console/users.html", {
        "rows": page.object_list, "page": page, "memberships_known": known,
        "tenants": console_users.active_tenants(),
        "placements": PLACEMENTS, "form": form or {}, "title": "Console users",
        "platform_page": "users",
    }, status=status)


@require_GET
@platform_view
def users(request: HttpRequest) -> HttpResponse:
    """``/console/users/``: the user list and the new-user form."""
    return _page(request)


@require_POST
@platform_view
def user_new(request: HttpRequest) -> HttpResponse:
    """POST ``/console/users/new/`` (``username``, ``email``, ``password``, ``role``:
    reviewer | admin | platform, ``tenant``: a slug unless platform). A refused value shows
    the page again (400) with the error and the values typed (not the password)."""
    form = {name: request.POST.get(name, "").strip()[:254] for name in NEW_USER_FIELDS}
    try:
        user = console_users.platform_user_create(
            actor=request.user, username=form["username"], email=form["email"],
            password=request.POST.get("password", "")[:4096], role=form["role"],
            tenant_slug=form["tenant"])
    except MemoryServiceError as err:
        return _page(request, {**form, "error": err.message,
                               "field": str(err.details.get("field", ""))}, status=400)
    messages.success(request, f"Console user {user.get_username()} created.")
    return redirect("console:users")


def _change(request: HttpRequest, change: Callable[..., Any], success: str,
            **kwargs: Any) -> HttpResponse:
    """Run ``change(actor=..., **kwargs)``; a missing user answers the console's 404, a
    refused change comes back as an error message."""
    try:
        user = change(actor=request.user, **kwargs)
    except NotFound:
        return render(request, "console/not_found.html", status=404)
    except MemoryServiceError as err:
        messages.error(request, err.message)
    else:
        messages.success(request, success.format(user=user.get_username()))
    return redirect("console:users")


@require_POST
@platform_view
def user_place(request: HttpRequest, user_id: int) -> HttpResponse:
    """POST ``/console/users/<id>/membership/`` (``role``, ``tenant``): change the user's
    role, move them to another tenant, or make them a platform admin."""
    return _change(request, console_users.platform_user_place, "{user}: role changed.",
                   user_id=user_id, role=request.POST.get("role", ""),
                   tenant_slug=request.POST.get("tenant", "")[:100])


@require_POST
@platform_view
def user_active(request: HttpRequest, user_id: int) -> HttpResponse:
    """POST ``/console/users/<id>/active/`` (``active``: ``on`` | ``off``)."""
    active = request.POST.get("active") == "on"
    return _change(request, console_users.platform_user_set_active,
                   "{user} " + ("reactivated." if active else "deactivated."),
                   user_id=user_id, active=active)


@require_POST
@platform_view
def user_membership_remove(request: HttpRequest, user_id: int) -> HttpResponse:
    """POST ``/console/users/<id>/membership/remove/``: the user keeps their account but no
    longer belongs to a tenant."""
    return _change(request, console_users.platform_membership_remove,
                   "{user} no longer belongs to a tenant.", user_id=user_id)
