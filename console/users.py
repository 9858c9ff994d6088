"""Console users and their memberships: the lists (reads) and the writes: create, change
role, move to another tenant, remove the membership, deactivate or reactivate the user.

Two kinds of callers:

- **tenant services** (``console_member_*``) take the caller's :class:`TenantContext` and run
  in that tenant's scope, like every service: a tenant admin on the Settings page, or the
  platform operations below. They only ever see the members of that tenant, so another
  tenant's user answers exactly like a missing one (:class:`NotFound`).
- **platform operations** (``platform_*``) are what a platform admin (Django superuser) does
  on ``/console/users/``. A membership row is tenant-owned (row-level security), so each one
  enters the scope of every tenant it changes through :func:`tenants.entry.run_in_scope` as
  ``system:console:<username>`` (what ``console.views.platform`` does for tenants), and reads
  a user's current membership through the side door of
  :func:`console.access.membership_of`. No row-level security is loosened.

Every change lands in the audit log of the tenant it affects (``console_user_created``,
``console_member_set``, ``console_member_removed``, ``console_user_deactivated``,
``console_user_reactivated``); a change that affects no tenant (a platform admin created,
promoted or demoted, a user without a membership (de)activated) is logged on this module's
logger instead, since the audit log belongs to a tenant.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from console.access import PLATFORM, membership_of
from console.models import ConsoleMembership, ConsoleRole
from console.services import console_member_set
from memory_project.errors import ConfigurationError, InvalidInput, NotFound
from tenants.audit import audit_record
from tenants.context import TenantContext, dangerously_cross_tenant
from tenants.entry import run_in_scope
from tenants.models import Tenant
from tenants.services import system_context

logger = logging.getLogger(__name__)

USER_CREATE = "console_user_created"
MEMBERSHIP_REMOVE = "console_member_removed"
USER_DEACTIVATE = "console_user_deactivated"
USER_REACTIVATE = "console_user_reactivated"
#: Where a platform admin may put a user: a tenant role, or ``platform`` (superuser).
PLACEMENT_ROLES = (ConsoleRole.REVIEWER.value, ConsoleRole.ADMIN.value, PLATFORM)


# --- reads --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConsoleUserRow:
    """One user on a console user list. ``tenant``/``role``: their membership (``None`` and
    ``""`` without one); ``last_admin``: they are the only active admin of that tenant
    (removing, demoting or deactivating them leaves it without one)."""

    user: Any
    tenant: Tenant | None
    role: str
    last_admin: bool


def _rows(users: list[Any], memberships: dict[Any, ConsoleMembership]) -> list[ConsoleUserRow]:
    admins: dict[Any, int] = {}
    for user in users:
        member = memberships.get(user.pk)
        if member is not None and member.role == ConsoleRole.ADMIN and user.is_active:
            admins[member.tenant_id] = admins.get(member.tenant_id, 0) + 1
    rows = []
    for user in users:
        member = memberships.get(user.pk)
        rows.append(ConsoleUserRow(
            user=user, tenant=member.tenant if member else None,
            role=member.role if member else "",
            last_admin=bool(member and member.role == ConsoleRole.ADMIN and user.is_active
                            and admins.get(member.tenant_id) == 1)))
    return rows


def console_users_list() -> tuple[list[ConsoleUserRow], bool]:
    """Every Django user by username, with their membership (platform admins' list).

    Memberships are read across tenants through the platform connection (committed rows).
    Returns ``(rows, memberships_known)``; without a platform connection configured the
    rows carry no membership and ``memberships_known`` is ``False``.
    """
    users = list(get_user_model().objects.order_by("username"))
    try:
        with dangerously_cross_tenant("console user list"):
            memberships = {m.user_id: m for m in ConsoleMembership.objects
                           .dangerously_all_tenants().select_related("tenant")}
    except ConfigurationError:
        return _rows(users, {}), False
    return _rows(users, memberships), True


def tenant_members(ctx: TenantContext) -> list[ConsoleUserRow]:
    """The console members of ``ctx``'s tenant (read in its scope), by username."""
    memberships = list(ConsoleMembership.objects.select_related("user", "tenant")
                       .order_by("user__username"))
    return _rows([m.user for m in memberships], {m.user_id: m for m in memberships})


def active_tenants() -> list[Tenant]:
    """The active tenants by name: where a console user may be given a role."""
    return list(Tenant.objects.filter(is_active=True).order_by("name"))


# --- writes -------------------------------------------------------------------------------


def _invalid(message: str, field: str = "") -> InvalidInput:
    return InvalidInput(message, operation="console.user", details={"field": field} if field
                        else {})


def _check_role(role: str, allowed: tuple[str, ...]) -> None:
    if role not in allowed:
        raise _invalid(f"Choose a role: {', '.join(allowed)}.", "role")


def _new_user(*, username: str, password: str, email: str = "", superuser: bool = False) -> Any:
    """Validate and save a new Django user (no membership).

    Raises:
        InvalidInput: blank, malformed or taken username, malformed email, or a password the
            configured password validators refuse (``details["field"]`` names the field).
    """
    model = get_user_model()
    username = model.normalize_username(username.strip())
    if not username:
        raise _invalid("A username is required.", "username")
    if not password:
        raise _invalid("A password is required.", "password")
    user = model(username=username, email=model.objects.normalize_email(email.strip()),
                 is_superuser=superuser, is_staff=superuser)
    try:
        user.full_clean(exclude=["password"])
    except ValidationError as err:
        field, problems = next(iter(err.message_dict.items()))
        raise _invalid(" ".join(problems), field) from None
    try:
        password_validation.validate_password(password, user)
    except ValidationError as err:
        raise _invalid(" ".join(err.messages), "password") from None
    user.set_password(password)
    try:
        with transaction.atomic():
            user.save()
    except IntegrityError:  # taken between the check and the insert
        raise _invalid("A user with that username already exists.", "username") from None
    return user


def _member(user_id: int) -> ConsoleMembership:
    """The membership of ``user_id`` in the tenant in scope.

    Raises:
        NotFound: no such user, or not a member of this tenant (the same answer).
    """
    membership = ConsoleMembership.objects.select_related("user").filter(
        user_id=user_id).first()
    if membership is None:
        raise NotFound("No such console member.", operation="console.member")
    return membership


def _is_self(membership: ConsoleMembership, acting_user: Any) -> bool:
    """A tenant member acting on their own membership (a superuser's own membership is not
    what gives them access, so they may change it)."""
    return bool(membership.user_id == acting_user.pk and not acting_user.is_superuser)


@transaction.atomic
def console_member_create(ctx: TenantContext, *, username: str, password: str, role: str,
                          email: str = "") -> Any:
    """Create a Django user who is ``role`` (``admin`` | ``reviewer``) of ``ctx``'s tenant;
    audited as ``console_user_created`` and ``console_member_set``. Returns the user.

    Raises:
        InvalidInput: unknown role, or see :func:`_new_user` (username taken, password
            refused, ...); nothing is saved.
    """
    _check_role(role, tuple(ConsoleRole.values))
    user = _new_user(username=username, password=password, email=email)
    audit_record(ctx, action=USER_CREATE, target_type="user", target_id=user.get_username(),
                 details={"role": role})
    console_member_set(ctx, user=user, role=role)
    return user


@transaction.atomic
def console_member_role(ctx: TenantContext, *, user_id: int, role: str,
                        acting_user: Any) -> ConsoleMembership:
    """Change the role of the member ``user_id`` of ``ctx``'s tenant (a no-op when it is
    already ``role``); audited as ``console_member_set``.

    Raises:
        NotFound: no member ``user_id`` in this tenant (missing and foreign users alike).
        InvalidInput: unknown role, or a tenant admin demoting themselves.
    """
    membership = _member(user_id)
    _check_role(role, tuple(ConsoleRole.values))
    if role == membership.role:
        return membership
    if _is_self(membership, acting_user):
        raise _invalid("You cannot demote yourself: ask another admin of the tenant.", "role")
    result: ConsoleMembership = console_member_set(ctx, user=membership.user, role=role)
    return result


@transaction.atomic
def console_member_remove(ctx: TenantContext, *, user_id: int, acting_user: Any,
                          reason: str = "") -> Any:
    """Remove the membership of ``user_id`` in ``ctx``'s tenant (the user stays, without
    console access); audited as ``console_member_removed`` with the previous role and
    ``reason`` when one is given. Returns the user.

    Raises:
        NotFound: no member ``user_id`` in this tenant (missing and foreign users alike).
        InvalidInput: a tenant admin removing themselves.
    """
    membership = _member(user_id)
    if _is_self(membership, acting_user):
        raise _invalid("You cannot remove yourself: ask another admin of the tenant.")
    user, role = membership.user, membership.role
    membership.delete()
    audit_record(ctx, action=MEMBERSHIP_REMOVE, target_type="user",
                 target_id=user.get_username(),
                 details={"previousRole": role, **({"reason": reason} if reason else {})})
    return user


# --- platform operations (superusers only; the caller checks) ---------------------------------


def platform_context(tenant: Tenant, actor: Any) -> TenantContext:
    """The context a platform admin ``actor`` acts in on ``tenant``:
    ``system:console:<username>``, as for tenant creation and deactivation."""
    return system_context(tenant, f"console:{actor.get_username()}")


def _user(user_id: int) -> Any:
    """Raises NotFound: no such user."""
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        raise NotFound("No such console user.", operation="console.user")
    return user


def _active_tenant(slug: str) -> Tenant:
    """Raises InvalidInput: no active tenant ``slug``."""
    tenant = Tenant.objects.filter(slug=slug, is_active=True).first() if slug else None
    if tenant is None:
        raise _invalid("Choose an active tenant for a tenant admin or reviewer.", "tenant")
    return tenant


def _remove_in(membership: ConsoleMembership, actor: Any, reason: str) -> None:
    ctx = platform_context(membership.tenant, actor)
    run_in_scope(ctx, console_member_remove, ctx, user_id=membership.user_id,
                 acting_user=actor, reason=reason)


def _set_platform_admin(user: Any, actor: Any, on: bool) -> None:
    if bool(user.is_superuser) == on:
        return
    user.is_superuser = user.is_staff = on
    user.save(update_fields=["is_superuser", "is_staff"])
    logger.warning("console user %s %s by %s", user.get_username(),
                   "made a platform admin" if on else "is no longer a platform admin",
                   actor.get_username())


@transaction.atomic
def platform_user_create(*, actor: Any, username: str, password: str, role: str,
                         tenant_slug: str = "", email: str = "") -> Any:
    """Create a console user: ``role`` ``admin`` | ``reviewer`` of the active tenant
    ``tenant_slug`` (see :func:`console_member_create`, audited there), or ``platform``: a
    superuser with no membership (logged). Returns the user.

    Raises:
        InvalidInput: unknown role, no such active tenant, username taken, password refused.
    """
    _check_role(role, PLACEMENT_ROLES)
    if role == PLATFORM:
        user = _new_user(username=username, password=password, email=email, superuser=True)
        logger.warning("platform admin %s created by %s", user.get_username(),
                       actor.get_username())
        return user
    ctx = platform_context(_active_tenant(tenant_slug), actor)
    return run_in_scope(ctx, console_member_create, ctx, username=username, password=password,
                        role=role, email=email)


@transaction.atomic
def platform_user_place(*, actor: Any, user_id: int, role: str, tenant_slug: str = "") -> Any:
    """Set where user ``user_id`` works: ``admin`` | ``reviewer`` of the active tenant
    ``tenant_slug`` (moved out of any other tenant, and no longer a platform admin), or
    ``platform`` (a superuser; any membership is removed). Audited in every tenant it
    changes. Returns the user.

    Raises:
        NotFound: no such user.
        InvalidInput: unknown role, no such active tenant, or ``actor`` demoting themselves.
    """
    user = _user(user_id)
    _check_role(role, PLACEMENT_ROLES)
    if user.pk == actor.pk and role != PLATFORM:
        raise _invalid("You cannot demote yourself: ask another platform admin.", "role")
    current = membership_of(user)
    if role == PLATFORM:
        if current is not None:
            _remove_in(current, actor, "made a platform admin")
        _set_platform_admin(user, actor, True)
        return user
    tenant = _active_tenant(tenant_slug)
    if current is not None and current.tenant_id != tenant.pk:
        _remove_in(current, actor, "moved to another tenant")
    if current is None or current.tenant_id != tenant.pk or current.role != role:
        ctx = platform_context(tenant, actor)
        run_in_scope(ctx, console_member_set, ctx, user=user, role=role)
    _set_platform_admin(user, actor, False)
    return user


@transaction.atomic
def platform_user_set_active(*, actor: Any, user_id: int, active: bool) -> Any:
    """Deactivate (they can no longer sign in, and someone signed in as them is signed out
    at their next request) or reactivate user ``user_id``; audited as
    ``console_user_deactivated`` / ``console_user_reactivated`` in their tenant's log.
    Idempotent. Returns the user.

    Raises:
        NotFound: no such user.
        InvalidInput: ``actor`` deactivating themselves.
    """
    user = _user(user_id)
    if user.pk == actor.pk and not active:
        raise _invalid("You cannot deactivate yourself: ask another platform admin.")
    if bool(user.is_active) == active:
        return user
    user.is_active = active
    user.save(update_fields=["is_active"])
    action = USER_REACTIVATE if active else USER_DEACTIVATE
    current = membership_of(user)
    if current is None:
        logger.warning("%s: %s by %s", action, user.get_username(), actor.get_username())
    else:
        ctx = platform_context(current.tenant, actor)
        run_in_scope(ctx, audit_record, ctx, action=action, target_type="user",
                     target_id=user.get_username(), details={"role": current.role})
    return user


@transaction.atomic
def platform_membership_remove(*, actor: Any, user_id: int) -> Any:
    """Remove user ``user_id``'s membership (:func:`console_member_remove`, audited in that
    tenant). Returns the user.

    Raises:
        NotFound: no such user.
        InvalidInput: the user has no membership.
    """
    user = _user(user_id)
    current = membership_of(user)
    if current is None:
        raise _invalid(f"{user.get_username()} has no tenant membership.")
    _remove_in(current, actor, "")
    return user
