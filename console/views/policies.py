"""The policy editor: list, create, edit and delete a tenant's policies, with a "try it" box
that runs the definition on sample text before it is saved."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from console.access import ConsoleAccess, console_view
from console.forms import PolicyForm
from console.models import ConsoleRole
from governance.models import Policy
from governance.policies import Decision
from governance.selectors import policy_list
from governance.services import policy_create, policy_delete, policy_try, policy_update
from memory_project.errors import MemoryServiceError, NotFound
from tenants.audit import owned_or_not_found


@console_view(ConsoleRole.ADMIN)
def policies(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/policies/``: the tenant's policies."""
    return render(request, "console/policies.html", {
        "access": access, "policies": policy_list(),
        "title": f"{access.tenant.name}: policies", "tab": "policies",
    })


def _policy_or_none(access: ConsoleAccess, policy_id: uuid.UUID) -> Policy | None:
    try:
        return owned_or_not_found(access.ctx, Policy.objects.all(), policy_id)
    except NotFound:
        return None


def _edit(request: HttpRequest, access: ConsoleAccess, policy: Policy | None) -> HttpResponse:
    decision: Decision | None = None
    status = 200
    if request.method == "POST":
        form = PolicyForm(request.POST)
        if form.is_valid():
            data = form.policy_data()
            try:
                if request.POST.get("action") == "try":
                    tried = {k: v for k, v in data.items() if k != "name" or v}
                    decision = policy_try(access.ctx, data=tried,
                                          text=form.cleaned_data["sample_text"],
                                          layer=form.cleaned_data["sample_layer"],
                                          metadata=form.cleaned_data["sample_metadata"],
                                          review_preview=True)
                elif policy is None:
                    created = policy_create(access.ctx, data=data)
                    messages.success(request, f"Policy {created.name!r} created.")
                    return redirect("console:policy", tenant_slug=access.tenant.slug,
                                    policy_id=created.pk)
                else:
                    policy_update(access.ctx, policy_id=policy.pk, data=data)
                    messages.success(request, f"Policy {data['name']!r} saved.")
                    return redirect("console:policy", tenant_slug=access.tenant.slug,
                                    policy_id=policy.pk)
            except MemoryServiceError as err:
                form.add_error(None, err.message)
        if form.errors:
            status = 400
    else:
        form = PolicyForm(initial=PolicyForm.initial_from(policy) if policy else None)
    context: dict[str, Any] = {
        "access": access, "form": form, "policy": policy, "decision": decision,
        "title": f"Policy {policy.name}" if policy else "New policy", "tab": "policies",
    }
    return render(request, "console/policy_form.html", context, status=status)


@console_view(ConsoleRole.ADMIN)
def policy_new(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """``/console/t/<slug>/policies/new/``: create a policy (``action=try`` only tries it)."""
    return _edit(request, access, None)


@console_view(ConsoleRole.ADMIN)
def policy_edit(request: HttpRequest, access: ConsoleAccess,
                policy_id: uuid.UUID) -> HttpResponse:
    """``/console/t/<slug>/policies/<id>/``: edit a policy (``action=try`` only tries it)."""
    policy = _policy_or_none(access, policy_id)
    if policy is None:
        return render(request, "console/not_found.html", status=404)
    return _edit(request, access, policy)


@require_POST
@console_view(ConsoleRole.ADMIN)
def policy_remove(request: HttpRequest, access: ConsoleAccess,
                  policy_id: uuid.UUID) -> HttpResponse:
    """POST ``/console/t/<slug>/policies/<id>/delete/``."""
    if _policy_or_none(access, policy_id) is None:
        return render(request, "console/not_found.html", status=404)
    try:
        policy_delete(access.ctx, policy_id=policy_id)
    except NotFound:
        return render(request, "console/not_found.html", status=404)
    messages.success(request, "Policy deleted.")
    return redirect("console:policies", tenant_slug=access.tenant.slug)
