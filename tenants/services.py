"""Writes of the tenants app: tenants, API keys, the org → team → project hierarchy."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string
import threading
from datetime import datetime, timedelta
from typing import Any, NamedTuple, TypeVar

from cachetools import TTLCache
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from memory_project.errors import (
    AlreadyExists,
    InvalidInput,
    InvalidTenantContext,
    NotFound,
    Unauthorized,
)
from tenants import key_cache
from tenants.audit import audit_record
from tenants.context import API_KEY_PREFIX_GUC, TenantContext, activate, side_door
from tenants.layers import IDENTIFIER_FIELDS, Layer
from tenants.models import ApiKey, Organization, Project, Team, Tenant
from tenants.permissions import Role

KEY_PREFIX = "msk_"
PREFIX_LENGTH = 12
_LOOKUP_ALPHABET = string.ascii_lowercase + string.digits
# Avoid a write on every request: last_used_at moves at most once a minute.
LAST_USED_RESOLUTION = timedelta(seconds=60)
#: Keys this process recorded a use of in the last ``LAST_USED_RESOLUTION``.
_touched: TTLCache[object, bool] = TTLCache(
    maxsize=10_000, ttl=LAST_USED_RESOLUTION.total_seconds())
_touched_lock = threading.Lock()


def system_context(tenant: Tenant, name: str = "system") -> TenantContext:
    """A context for work the service does itself (commands, jobs) on ``tenant``."""
    return TenantContext(
        tenant_id=tenant.id,
        tenant_slug=tenant.slug,
        principal=f"system:{name}",
        roles=frozenset({"admin"}),
    )


def _audit(ctx: TenantContext, action: str, key: ApiKey) -> None:
    audit_record(ctx, action=action, target_type="api_key", target_id=key.pk,
                 details={"prefix": key.prefix, "name": key.name})


def _digest(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


@transaction.atomic
def tenant_set_active(ctx: TenantContext, /, *, active: bool) -> Tenant:
    """Deactivate (every key and console page of the tenant stops answering; its data stays)
    or reactivate ``ctx``'s tenant, audited in its log as ``ctx.principal``. Idempotent.
    Platform staff only: run inside ``dangerously_cross_tenant`` (the application's role may
    change a tenant's settings, never whether it is active)."""
    tenant = Tenant.objects.select_for_update().get(pk=ctx.tenant_id)
    if tenant.is_active != active:
        tenant.is_active = active
        tenant.save(update_fields=["is_active"])
        audit_record(ctx, action="tenant_activated" if active else "tenant_deactivated",
                     target_type="tenant", target_id=tenant.pk)
    return tenant


def tenant_create(*, name: str, slug: str | None = None) -> Tenant:
    """Create a tenant (company).

    Raises:
        InvalidInput: empty name, or the slug is taken.
    """
    name = name.strip()
    slug = slugify(slug or name)
    if not name or not slug:
        raise InvalidInput("A tenant needs a name.", operation="tenant.create")
    if Tenant.objects.filter(slug=slug).exists():
        raise InvalidInput(f"A tenant with slug {slug!r} exists.", operation="tenant.create")
    return Tenant.objects.create(name=name, slug=slug)


@transaction.atomic
def api_key_create(
    ctx: TenantContext,
    *,
    name: str = "",
    roles: list[str] | None = None,
    expires_at: datetime | None = None,
    allowed_layers: list[str] | None = None,
    pinned_identifiers: dict[str, str] | None = None,
    rate_limit: int | None = None,
) -> tuple[ApiKey, str]:
    """Create an API key for ``ctx``'s tenant.

    Args:
        allowed_layers: layer names the key may touch (empty/None: every layer).
        pinned_identifiers: camelCase identifiers the key is bound to (``{"userId": "u1"}``).
        rate_limit: requests per rate-limit window (None: the service default).

    A restricted creator (``ctx.is_restricted``) cannot create a wider key: the new key
    keeps every pin of the creator and only layers the creator has; a creator's own rate
    limit is an upper bound too (see :func:`restriction_narrowed`).

    Returns:
        ``(api_key, raw_key)``; ``raw_key`` exists only here and is never stored.

    Raises:
        InvalidInput: unknown role, layer or identifier name, empty identifier value.
        Unauthorized: the key would be wider than the creator's.
    """
    roles = roles or [Role.ADMIN.value]
    unknown_roles = sorted(set(roles) - {role.value for role in Role})
    if unknown_roles:
        raise InvalidInput(f"Unknown role(s): {', '.join(unknown_roles)}.",
                           details={"roles": [role.value for role in Role]})
    layers, pins, rate_limit = restriction_narrowed(
        ctx, allowed_layers=allowed_layers or [], pinned_identifiers=pinned_identifiers or {},
        rate_limit=rate_limit)
    lookup = "".join(secrets.choice(_LOOKUP_ALPHABET) for _ in range(PREFIX_LENGTH - 4))
    raw_key = f"{KEY_PREFIX}{lookup}{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(
        tenant_id=ctx.tenant_id,
        name=name,
        prefix=raw_key[:PREFIX_LENGTH],
        key_hash=_digest(raw_key),
        roles=roles,
        created_by=ctx.principal,
        expires_at=expires_at,
        allowed_layers=layers,
        pinned_identifiers=pins,
        rate_limit=rate_limit,
    )
    _audit(ctx, "api_key_created", key)
    return key, raw_key


def restriction_narrowed(
    ctx: TenantContext, *, allowed_layers: list[str], pinned_identifiers: dict[str, str],
    rate_limit: int | None,
) -> tuple[list[str], dict[str, str], int | None]:
    """Validate a new key's restrictions against its creator ``ctx``.

    An unrestricted creator may create any key. A restricted one: the new key inherits the
    creator's layers when it names none (and may name only a subset), inherits every pin
    (and may add pins, not change them), and inherits the creator's rate limit as a bound.

    Returns:
        ``(layers, pins, rate_limit)`` as they are stored.

    Raises:
        InvalidInput: unknown layer or identifier, or an empty identifier value.
        Unauthorized: the new key would reach something the creator cannot.
    """
    layer_names = {layer.value for layer in Layer}
    unknown = sorted(set(allowed_layers) - layer_names)
    if unknown:
        raise InvalidInput(f"Unknown layer(s): {', '.join(unknown)}.",
                           details={"allowed": sorted(layer_names)})
    bad = sorted(k for k, v in pinned_identifiers.items()
                 if k not in IDENTIFIER_FIELDS or not isinstance(v, str) or not v.strip())
    if bad:
        raise InvalidInput(f"Invalid identifier pin(s): {', '.join(bad)}.",
                           details={"allowed": list(IDENTIFIER_FIELDS)})
    if rate_limit is not None and rate_limit < 1:
        raise InvalidInput("rate_limit must be a positive number of requests.")
    layers = sorted(set(allowed_layers))
    pins = dict(pinned_identifiers)
    if ctx.allowed_layers:
        if not layers:
            layers = sorted(ctx.allowed_layers)
        elif not set(layers) <= ctx.allowed_layers:
            raise Unauthorized("A restricted key cannot create a key for other layers.",
                               details={"allowedLayers": sorted(ctx.allowed_layers)})
    for name, value in ctx.pinned_identifiers:
        if pins.setdefault(name, value) != value:
            raise Unauthorized(f"A key pinned to {name}={value!r} cannot create a key for "
                               "another value.")
    if ctx.rate_limit is not None:
        if rate_limit is None:
            rate_limit = ctx.rate_limit
        elif rate_limit > ctx.rate_limit:
            raise Unauthorized("A key cannot create a key with a higher rate limit.")
    return layers, pins, rate_limit


@transaction.atomic
def api_key_revoke(ctx: TenantContext, *, key_id: object) -> ApiKey:
    """Revoke a key of ``ctx``'s tenant (idempotent).

    Raises:
        NotFound: no such key in this tenant.
    """
    key = ApiKey.objects.filter(pk=key_id).first()
    if key is None:
        raise NotFound("API key not found.", operation="api_key.revoke")
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        _audit(ctx, "api_key_revoked", key)
    return key


def api_key_authenticate(raw_key: str, *, enter: bool = False) -> TenantContext:
    """Resolve a raw API key to a :class:`TenantContext`.

    The key row is read under row-level security through ``app.api_key_prefix``, which opens
    exactly the row whose prefix the caller already knows; the secret is then compared as a
    SHA-256 digest in constant time. Must run inside a transaction. A key seen before is
    served from ``tenants.key_cache`` while its tenant's configuration version is unchanged.
    ``enter``: the key's tenant is also entered for the rest of the transaction
    (``tenants.context.activate``; for a cached key, in the statement checking its version).

    Raises:
        InvalidTenantContext: unknown, malformed, revoked or expired key, or inactive tenant.
    """
    raw_key = raw_key.strip()
    digest = _digest(raw_key)
    if not raw_key.startswith(KEY_PREFIX) or len(raw_key) <= PREFIX_LENGTH or "\x00" in raw_key:
        raise InvalidTenantContext()
    cached = key_cache.cached_context(digest, enter=enter)
    if cached is not None:
        return cached
    with side_door(API_KEY_PREFIX_GUC, raw_key[:PREFIX_LENGTH]):
        key = ApiKey._base_manager.select_related("tenant").filter(
            prefix=raw_key[:PREFIX_LENGTH]).first()
    now = timezone.now()
    if (
        key is None
        or not hmac.compare_digest(key.key_hash, digest)
        or key.revoked_at is not None
        or (key.expires_at is not None and key.expires_at <= now)
        or not key.tenant.is_active
    ):
        raise InvalidTenantContext()
    ctx = TenantContext(
        tenant_id=key.tenant_id, tenant_slug=key.tenant.slug, principal=f"api_key:{key.prefix}",
        roles=frozenset(key.roles or []), api_key_id=key.id,
        allowed_layers=frozenset(key.allowed_layers or []),
        pinned_identifiers=tuple(sorted((key.pinned_identifiers or {}).items())),
        rate_limit=key.rate_limit,
    )
    key_cache.remember(digest, ctx, version=key.tenant.config_version,
                       expires_at=key.expires_at)
    if enter:
        activate(ctx)
    return ctx


def api_key_use_due(key_id: object) -> bool:
    """Whether this process should record a use of the key now: ``True`` at most once per
    ``LAST_USED_RESOLUTION`` per key and process (then :func:`api_key_touch`)."""
    with _touched_lock:
        if key_id in _touched:
            return False
        _touched[key_id] = True
        return True


def api_key_touch(key_id: object) -> None:
    """Record that a key was used (at most once per minute). Needs the key's tenant in scope."""
    now = timezone.now()
    ApiKey.objects.filter(pk=key_id).exclude(last_used_at__gt=now - LAST_USED_RESOLUTION).update(
        last_used_at=now
    )


def check_addressable(external_id: str, field: str, *, operation: str) -> None:
    """An id that names the object in its URL (``/api/v1/orgs/{orgId}``) cannot hold ``/``:
    an object created with one could never be fetched or deleted.

    Raises:
        InvalidInput: a ``/`` in the id, or an id of blanks only.
    """
    if "/" in external_id or not external_id.strip():
        raise InvalidInput(f"{field} must not contain '/' or be blank.", operation=operation,
                           details={"field": field})


class HierarchyLevel(NamedTuple):
    """One level of the org → team → project hierarchy."""

    #: ``org``, ``team`` or ``project``: its operations are ``<name>.list|get|create|delete``.
    name: str
    #: The identifier that names a node (``orgId``, ``teamId``, ``projectId``).
    field: str
    #: The parent level's model and the field that holds the parent (none for an org), and
    #: whether a parent is required (a team needs its org; a project may stand alone).
    parent_model: type[Any] | None
    parent_attr: str
    parent_required: bool


_LEVELS: dict[type[Any], HierarchyLevel] = {
    Organization: HierarchyLevel("org", "orgId", None, "", False),
    Team: HierarchyLevel("team", "teamId", Organization, "org", True),
    Project: HierarchyLevel("project", "projectId", Team, "team", False),
}
_Node = TypeVar("_Node", Organization, Team, Project)


def hierarchy_level(model: type[Any]) -> HierarchyLevel:
    """The level of the hierarchy ``model`` holds.

    Raises:
        KeyError: ``model`` is not ``Organization``, ``Team`` or ``Project``.
    """
    return _LEVELS[model]


@transaction.atomic
def hierarchy_create(ctx: TenantContext, model: type[_Node], *, external_id: str, name: str = "",
                     parent_id: str | None = None) -> _Node:
    """Create an org, team or project of ``ctx``'s tenant (see :class:`HierarchyLevel`),
    under the parent level's node ``parent_id`` when one is given.

    Raises:
        InvalidInput: ``external_id`` cannot be stored or addressed, or the parent is unknown.
        AlreadyExists: ``external_id`` is taken in this tenant (409).
    """
    level, field, parent_model, parent_attr, parent_required = _LEVELS[model]
    operation = f"{level}.create"
    check_addressable(external_id, field, operation=operation)
    parent = None
    if parent_model is not None and (parent_id or parent_required):
        parent = parent_model.objects.filter(external_id=parent_id).first()
        if parent is None:
            raise InvalidInput(f"Unknown {_LEVELS[parent_model].field} {parent_id!r}.",
                               operation=operation)
    if model.objects.filter(external_id=external_id).exists():
        raise AlreadyExists(f"{field} {external_id!r} exists.", operation=operation)
    extra = {parent_attr: parent} if parent_attr else {}
    return model.objects.create(tenant_id=ctx.tenant_id, external_id=external_id, name=name,
                                **extra)


def org_create(ctx: TenantContext, *, external_id: str, name: str = "") -> Organization:
    """Create an organisation in ``ctx``'s tenant; raises as :func:`hierarchy_create`."""
    return hierarchy_create(ctx, Organization, external_id=external_id, name=name)


def team_create(ctx: TenantContext, *, external_id: str, org_id: str, name: str = "") -> Team:
    """Create a team under the organisation whose ``orgId`` is ``org_id``; raises as
    :func:`hierarchy_create` (``InvalidInput`` names an unknown org)."""
    return hierarchy_create(ctx, Team, external_id=external_id, name=name, parent_id=org_id)


def project_create(
    ctx: TenantContext, *, external_id: str, team_id: str | None = None, name: str = ""
) -> Project:
    """Create a project, optionally under the team whose ``teamId`` is ``team_id``; raises as
    :func:`hierarchy_create` (``InvalidInput`` names an unknown team)."""
    return hierarchy_create(ctx, Project, external_id=external_id, name=name,
                            parent_id=team_id)


@transaction.atomic
def project_get_or_create(ctx: TenantContext, *, external_id: str, name: str = "") -> Project:
    """The project ``external_id`` of ``ctx``'s tenant, created when missing (importers)."""
    project = Project.objects.filter(external_id=external_id).first()
    return project or Project.objects.create(
        tenant_id=ctx.tenant_id, external_id=external_id, name=name
    )


@transaction.atomic
def hierarchy_delete(ctx: TenantContext, *, model: type[Any], external_id: str) -> bool:
    """Delete an org, team or project of ``ctx``'s tenant; ``False`` when there is none."""
    deleted, _ = model.objects.filter(external_id=external_id).delete()
    return bool(deleted)


@transaction.atomic
def tenant_settings_update(ctx: TenantContext, *, patch: dict[str, object]) -> dict[str, object]:
    """Merge ``patch`` into the tenant's settings, one level deep per section.

    ``{"recall": {"scoreWeights": {...}}}`` replaces ``recall.scoreWeights`` and keeps the
    other keys of ``recall``. Callers validate the values (see
    ``memories.services.settings``). Returns the new settings.
    """
    tenant = Tenant.objects.select_for_update().get(pk=ctx.tenant_id)
    merged = dict(tenant.settings or {})
    for section, values in patch.items():
        if isinstance(values, dict) and isinstance(merged.get(section), dict):
            merged[section] = {**merged[section], **values}
        else:
            merged[section] = values
    tenant.settings = merged
    tenant.save(update_fields=["settings"])
    return merged
