"""Writes the console makes, each one audited.

They call the memory, governance and tenants services (which enforce policies, write history
and check the tenant) and add the audit entry those services leave to their callers. Every
function runs in the caller's tenant scope (see :mod:`console.access`).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from console.access import membership_of
from console.models import ConsoleMembership, ConsoleRole
from memories.models import Memory
from memories.services.deletion import memory_delete, memory_restore
from memories.services.memory import memory_update
from memories.services.settings import settings_update
from memory_project.errors import InvalidInput
from tenants.audit import audit_record
from tenants.context import TenantContext


def console_memory_edit(ctx: TenantContext, *, memory_id: Any, metadata: dict[str, Any],
                        fields: dict[str, Any], expected_version: int | None = None,
                        content: str | None = None) -> Memory:
    """Replace a memory's metadata with ``metadata`` (keys left out are removed), set
    ``fields`` (``importance``, ``confidence``, ``kind``, ``scope``, ``sensitive``,
    ``private``) and, when given, its ``content`` (checked by the policies and re-embedded)
    through :func:`memories.services.memory.memory_update`; audited as ``memory_updated``.

    Not atomic on its own (the request transaction is): a policy violation must leave its
    audit entry and review item behind, as it does through the API.

    Raises:
        As :func:`memories.services.memory.memory_update` (MemoryNotFound, VersionConflict,
        PolicyViolation, InvalidInput).
    """
    current = Memory.objects.filter(pk=memory_id).values_list("metadata", flat=True).first()
    patch: dict[str, Any] = {key: None for key in (current or {}) if key not in metadata}
    patch.update(metadata)
    result = memory_update(ctx, memory_id=memory_id, content=content, metadata=patch,
                           fields=fields or None, expected_version=expected_version)
    changed = {*fields, "metadata", *(("content",) if content is not None else ())}
    audit_record(ctx, action="memory_updated", target_type="memory", target_id=result.memory.pk,
                 details={"fields": sorted(changed),
                          "version": result.memory.version})
    return result.memory


@transaction.atomic
def console_memory_delete(ctx: TenantContext, *, memory_id: Any) -> None:
    """Soft-delete a memory (restorable); audited as ``memory_deleted``."""
    memory_delete(ctx, memory_id=memory_id, hard=False)
    audit_record(ctx, action="memory_deleted", target_type="memory", target_id=memory_id,
                 details={"hard": False})


def console_memory_restore(ctx: TenantContext, *, memory_id: Any) -> bool:
    """Restore a soft-deleted, archived or pruned memory; audited as ``memory_restored``.

    Raises:
        MemoryNotFound: as :func:`memories.services.deletion.memory_restore`.
    """
    memory, restored = memory_restore(ctx, memory_id=memory_id)
    if restored:
        audit_record(ctx, action="memory_restored", target_type="memory", target_id=memory.pk)
    return restored


@transaction.atomic
def console_settings_update(ctx: TenantContext, *, patch: dict[str, Any]) -> dict[str, Any]:
    """Validate and merge a settings patch (:func:`memories.services.settings.settings_update`);
    audited as ``settings_updated`` with the patch.

    Raises:
        InvalidInput: see :func:`tenants.tenant_settings.validate_patch`.
    """
    merged = settings_update(ctx, patch=patch)
    audit_record(ctx, action="settings_updated", target_type="tenant", target_id=ctx.tenant_id,
                 details={"patch": patch})
    return merged


#: Audit action of every membership a console user is given or whose role changes.
MEMBERSHIP_CHANGE = "console_member_set"


@transaction.atomic
def console_member_set(ctx: TenantContext, *, user: Any, role: str) -> Any:
    """Make ``user`` a console member of ``ctx``'s tenant with ``role`` (``admin`` or
    ``reviewer``), replacing any membership of that tenant; audited as
    ``console_member_set`` with ``role`` and ``previousRole`` (``None`` for a new
    member). Runs in ``ctx``'s tenant scope. Returns the :class:`ConsoleMembership`.

    Raises:
        InvalidInput: an unknown role, or the user belongs to another tenant.
    """
    if role not in ConsoleRole.values:
        raise InvalidInput(f"role must be one of {', '.join(ConsoleRole.values)}.")
    existing = membership_of(user)
    if existing is not None and existing.tenant_id != ctx.tenant_id:
        raise InvalidInput(f"{user.get_username()} already belongs to another tenant.")
    membership, _ = ConsoleMembership.objects.update_or_create(
        user=user, defaults={"tenant_id": ctx.tenant_id, "role": role})
    audit_record(ctx, action=MEMBERSHIP_CHANGE, target_type="user",
                 target_id=user.get_username(),
                 details={"role": role, "previousRole": existing.role if existing else None})
    return membership
