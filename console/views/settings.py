"""Tenant settings: retrieval and lifecycle settings, the summary triggers per layer, API keys
(shown once at creation, revocable, with their status), the tenant's console members (added,
given another role or removed by its admins, through :mod:`console.users`) and the periodic
jobs (django-celery-beat)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST
from django_celery_beat.models import PeriodicTask

from console import services
from console import users as console_users
from console.access import ConsoleAccess, console_view
from console.forms import SettingsForm, SummaryTriggersForm
from console.models import ConsoleRole
from console.selectors import api_key_rows
from memories.retrieval.recall import recall_settings
from memories.retrieval.search import default_threshold
from memories.services.lifecycle import lifecycle_settings
from memories.services.lifecycle_config import deleted_retention_days, lifecycle_section
from memories.services.settings import settings_get
from memory_project.errors import MemoryServiceError, NotFound
from tenants.audit import audit_cross_tenant_probe
from tenants.models import ApiKey
from tenants.permissions import Role
from tenants.services import api_key_create, api_key_revoke
from tenants.tenant_settings import section

KEY_ROLES = tuple(role.value for role in Role)
#: Lifetimes a new key may be given, in days ("" = it never expires).
KEY_EXPIRIES = (("", "never"), ("7", "in 7 days"), ("30", "in 30 days"),
                ("90", "in 90 days"), ("365", "in a year"))


def _initial(access: ConsoleAccess) -> dict[str, Any]:
    ctx = access.ctx
    _, half_life = recall_settings(ctx, None)
    decay = lifecycle_section(ctx, "decay")
    lifecycle = lifecycle_settings(ctx)
    cleanup = lifecycle["sessionCleanup"]
    return {
        "default_threshold": default_threshold(ctx), "recency_half_life_days": half_life,
        "decay_enabled": decay["enabled"], "decay_rate": decay["ratePerDay"],
        "decay_archive_threshold": decay["archiveThreshold"],
        "deleted_retention_days": deleted_retention_days(ctx),
        "cleanup_auto_delete": cleanup["autoDelete"],
        "cleanup_retention": cleanup["retentionPeriod"],
        "cleanup_promote": cleanup["promoteImportant"],
        "cleanup_promotion_threshold": cleanup["promotionThreshold"],
        "promotion_target": lifecycle.get("promotionTargetLayer") or "",
    }


def settings_patch(access: ConsoleAccess, data: dict[str, Any]) -> dict[str, Any]:
    """The settings patch (``memories.services.settings`` shape) for the form's values."""
    decay = lifecycle_section(access.ctx, "decay")
    patch: dict[str, Any] = {
        "search": {"defaultThreshold": data["default_threshold"]},
        "recall": {"recencyHalfLifeDays": data["recency_half_life_days"]},
        "lifecycle": {
            "deletedRetentionDays": data["deleted_retention_days"],
            "decay": {**decay, "enabled": data["decay_enabled"], "ratePerDay": data["decay_rate"],
                      "archiveThreshold": data["decay_archive_threshold"]},
            "sessionCleanup": {
                "autoDelete": data["cleanup_auto_delete"],
                "retentionPeriod": data["cleanup_retention"].strip(),
                "promoteImportant": data["cleanup_promote"],
                "promotionThreshold": data["cleanup_promotion_threshold"],
            },
            "promotionTargetLayer": data["promotion_target"] or None,
        },
    }
    if data.get("weight_relevance") is not None:
        scope = (data.get("weights_scope") or "").strip() or "default"
        patch["recall"]["scoreWeights"] = {
            scope: {w: data[f"weight_{w}"] for w in SettingsForm.WEIGHTS}}
    return patch


def _triggers(access: ConsoleAccess) -> SummaryTriggersForm:
    """The summary trigger form showing the stored ``summaries`` section."""
    return SummaryTriggersForm(initial=SummaryTriggersForm.initial_from(
        settings_get(access.ctx).get("summaries")))


def _page(request: HttpRequest, access: ConsoleAccess, form: SettingsForm,
          new_key: str | None = None, status: int = 200,
          triggers: SummaryTriggersForm | None = None,
          member_form: dict[str, str] | None = None) -> HttpResponse:
    weights = section(access.ctx, "recall").score_weights
    keys = api_key_rows(timezone.now())
    admin_keys = [row.key.pk for row in keys
                  if row.key.revoked_at is None and Role.ADMIN.value in row.key.roles]
    return render(request, "console/settings.html", {
        "access": access, "form": form, "weights": weights, "keys": keys,
        "members": console_users.tenant_members(access.ctx), "member_form": member_form or {},
        "member_roles": ConsoleRole.choices,
        "triggers": triggers or _triggers(access),
        "last_admin_keys": admin_keys if len(admin_keys) == 1 else [], "key_roles": KEY_ROLES,
        "key_expiries": KEY_EXPIRIES,
        "new_key": new_key, "schedules": PeriodicTask.objects.order_by("name"),
        "title": f"{access.tenant.name}: settings", "tab": "settings",
    }, status=status)


#: Session key holding a key just created, until the page after the redirect shows it once.
NEW_KEY_SESSION = "console_new_key"


def _new_key_once(request: HttpRequest, access: ConsoleAccess) -> str | None:
    """The raw key :func:`key_create` left for this tenant's page, removed as it is read."""
    left = request.session.pop(NEW_KEY_SESSION, None)
    if isinstance(left, dict) and left.get("tenant") == access.tenant.slug:
        return str(left.get("key"))
    return None


@console_view(ConsoleRole.ADMIN)
def tenant_settings(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/settings/``: show (GET) or save (POST) the settings. A GET right
    after :func:`key_create` shows the new key, once."""
    if request.method != "POST":
        return _page(request, access, SettingsForm(initial=_initial(access)),
                     new_key=_new_key_once(request, access))
    form = SettingsForm(request.POST)
    if form.is_valid():
        try:
            services.console_settings_update(access.ctx,
                                             patch=settings_patch(access, form.cleaned_data))
        except MemoryServiceError as err:
            form.add_error(None, err.message)
        else:
            messages.success(request, "Settings saved.")
            return redirect("console:settings", tenant_slug=access.tenant.slug)
    return _page(request, access, form, status=400)


@require_POST
@console_view(ConsoleRole.ADMIN)
def summary_triggers(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """POST ``.../settings/summaries/``: save the summary triggers per layer into the
    ``summaries`` section (its ``layers`` and ``batchWindowSeconds``; ``budget`` is kept),
    audited like every settings change. A value the section refuses is shown beside its
    cell (status 400) and nothing is saved."""
    triggers = SummaryTriggersForm(request.POST)
    if triggers.is_valid():
        try:
            services.console_settings_update(access.ctx,
                                             patch={"summaries": triggers.section()})
        except MemoryServiceError as err:
            triggers.show_error(err.message)
        else:
            messages.success(request, "Summary triggers saved.")
            return redirect(reverse("console:settings", args=[access.tenant.slug])
                            + "#summary-triggers")
    return _page(request, access, SettingsForm(initial=_initial(access)), status=400,
                 triggers=triggers)


@require_POST
@console_view(ConsoleRole.ADMIN)
def key_create(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """POST ``.../settings/keys/``: create a key, then redirect to the settings page, which
    shows it this once (post/redirect/get: reloading that page creates nothing)."""
    name = request.POST.get("name", "").strip()[:200]
    roles = [r for r in request.POST.getlist("roles") if r in KEY_ROLES] or ["admin"]
    days = request.POST.get("expires_in_days", "")
    if days not in dict(KEY_EXPIRIES):
        messages.error(request, "Choose when the key expires from the list.")
        return redirect("console:settings", tenant_slug=access.tenant.slug)
    expires_at = timezone.now() + timedelta(days=int(days)) if days else None
    key, raw_key = api_key_create(access.ctx, name=name, roles=roles, expires_at=expires_at)
    request.session[NEW_KEY_SESSION] = {"tenant": access.tenant.slug, "key": raw_key}
    messages.success(request, f"Key {key.prefix}… created.")
    return redirect("console:settings", tenant_slug=access.tenant.slug)


@require_POST
@console_view(ConsoleRole.ADMIN)
def key_revoke(request: HttpRequest, access: ConsoleAccess, key_id: uuid.UUID) -> HttpResponse:
    """POST ``.../settings/keys/<id>/revoke/``: revoke a key (another tenant's: 404)."""
    try:
        key = api_key_revoke(access.ctx, key_id=key_id)
    except NotFound:
        audit_cross_tenant_probe(access.ctx, model=ApiKey, object_id=key_id)
        return render(request, "console/not_found.html", status=404)
    messages.success(request, f"Key {key.prefix}… revoked.")
    return redirect("console:settings", tenant_slug=access.tenant.slug)


def _members_url(access: ConsoleAccess) -> str:
    return reverse("console:settings", args=[access.tenant.slug]) + "#members"


def _member_change(request: HttpRequest, access: ConsoleAccess,
                   change: Callable[[], str]) -> HttpResponse:
    """Run ``change`` (a change of a member that returns its success message) and go back to
    the members list with that message, or with the error of a refused change; a user who is
    not a member of this tenant answers 404."""
    try:
        done = change()
    except NotFound:
        return render(request, "console/not_found.html", status=404)
    except MemoryServiceError as err:
        messages.error(request, err.message)
    else:
        messages.success(request, done)
    return redirect(_members_url(access))


@require_POST
@console_view(ConsoleRole.ADMIN)
def member_add(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """POST ``.../settings/members/`` (``username``, ``password``, ``role``): create a new
    console user who is a member of this tenant. A refused value shows the page again (400)
    with the error and the username and role typed."""
    form = {"username": request.POST.get("username", "").strip()[:150],
            "role": request.POST.get("role", "")[:16]}
    try:
        user = console_users.console_member_create(
            access.ctx, username=form["username"], role=form["role"],
            password=request.POST.get("password", "")[:4096])
    except MemoryServiceError as err:
        return _page(request, access, SettingsForm(initial=_initial(access)), status=400,
                     member_form={**form, "error": err.message,
                                  "field": str(err.details.get("field", ""))})
    messages.success(request, f"{user.get_username()} can now sign in as {form['role']}.")
    return redirect(_members_url(access))


@require_POST
@console_view(ConsoleRole.ADMIN)
def member_role(request: HttpRequest, access: ConsoleAccess, user_id: int) -> HttpResponse:
    """POST ``.../settings/members/<user id>/role/`` (``role``): change a member's role. A
    user who is not a member of this tenant (another tenant's, or none) answers 404."""

    def change() -> str:
        membership = console_users.console_member_role(
            access.ctx, user_id=user_id, role=request.POST.get("role", ""),
            acting_user=request.user)
        return f"{membership.user.get_username()} is now {membership.get_role_display()}."

    return _member_change(request, access, change)


@require_POST
@console_view(ConsoleRole.ADMIN)
def member_remove(request: HttpRequest, access: ConsoleAccess, user_id: int) -> HttpResponse:
    """POST ``.../settings/members/<user id>/remove/``: remove a member from this tenant (the
    user can no longer open its console). Not a member of this tenant: 404."""

    def change() -> str:
        user = console_users.console_member_remove(access.ctx, user_id=user_id,
                                                   acting_user=request.user)
        return f"{user.get_username()} removed from {access.tenant.name}."

    return _member_change(request, access, change)
