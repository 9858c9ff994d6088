"""The tenant scope of the running code: ``TenantContext`` and the database's ``app.tenant_id``.

Two locks guard every tenant-owned table:

1. PostgreSQL row-level security reads ``app.tenant_id``, which :func:`activate` sets with
   ``set_config(..., is_local => true)`` — the function form of ``SET LOCAL`` — so it lasts
   only until the end of the current transaction and never leaks to a pooled connection.
2. :class:`tenants.managers.TenantScopedManager` reads the same scope from a ``ContextVar``
   and raises :class:`MissingTenantContext` when there is none (fail-closed).

Cross-tenant access exists only through :func:`dangerously_cross_tenant`, for platform staff.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from django.db import connection, transaction

from memory_project.errors import ConfigurationError, MissingTenantContext
from tenants import config_cache

TENANT_GUC = "app.tenant_id"
API_KEY_PREFIX_GUC = "app.api_key_prefix"
CONSOLE_USER_GUC = "app.console_user_id"
#: The side doors of row-level security: a setting that opens one row of one table for
#: reading, before any tenant is known (migration ``tenants.0005``). Nothing else is one.
SIDE_DOORS = {
    API_KEY_PREFIX_GUC: "tenants_apikey: the key row with this prefix (authentication)",
    CONSOLE_USER_GUC: "console_consolemembership: this user's membership (console sign-in)",
}


@dataclass(frozen=True)
class TenantContext:
    """Who is calling and on behalf of which tenant.

    Attributes:
        tenant_id: the tenant (company) every read and write is bounded to.
        tenant_slug: the tenant's slug, which is also the ``companyId`` of the company layer.
        principal: ``"api_key:<prefix>"``, ``"user:<username>"`` or ``"system:<name>"``.
        roles: role names of the principal (``"admin"``, ``"writer"``, ``"reader"``, ...).
        api_key_id: the API key used, when the principal is one.
        allowed_layers: the layers a restricted key may touch; empty means every layer.
        pinned_identifiers: ``(("userId", "u1"), ...)``: identifiers a restricted key is
            bound to; calls may omit them (they are filled in) but not name other values.
        rate_limit: the key's own request limit per rate-limit window, ``None`` for the
            service default.
    """

    tenant_id: uuid.UUID
    tenant_slug: str
    principal: str
    roles: frozenset[str] = field(default_factory=frozenset)
    api_key_id: uuid.UUID | None = None
    allowed_layers: frozenset[str] = field(default_factory=frozenset)
    pinned_identifiers: tuple[tuple[str, str], ...] = ()
    rate_limit: int | None = None

    @property
    def is_restricted(self) -> bool:
        """``True`` when the key is limited to some layers or identifiers."""
        return bool(self.allowed_layers or self.pinned_identifiers)

    @property
    def is_authenticated(self) -> bool:
        """DRF treats the context as the request's user; it is always authenticated."""
        return True


_current: ContextVar[TenantContext | None] = ContextVar("tenant_context", default=None)
_cross_tenant: ContextVar[str | None] = ContextVar("cross_tenant_reason", default=None)


def current_context() -> TenantContext | None:
    """The active :class:`TenantContext`, or ``None`` outside any tenant scope."""
    return _current.get()


def require_context() -> TenantContext:
    """The active context. Raises :class:`MissingTenantContext` when there is none."""
    ctx = _current.get()
    if ctx is None:
        raise MissingTenantContext()
    return ctx


def cross_tenant_reason() -> str | None:
    """Why cross-tenant access is open right now, or ``None`` when it is not."""
    return _cross_tenant.get()


def set_guc(name: str, value: str) -> None:
    """``SET LOCAL name = value`` for the current transaction (parameterised)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, true)", [name, value])


def activate(ctx: TenantContext, *, checked_version: uuid.UUID | None = None) -> None:
    """Enter ``ctx`` for the rest of the current transaction (request scope).

    Must run inside a transaction; the request middleware opens one and calls
    :func:`deactivate` at the end of the request. ``checked_version``: the caller has just set
    ``app.tenant_id`` to ``ctx``'s tenant in this transaction, in the statement that read the
    tenant's ``config_version`` (``tenants.key_cache``); the setting is not made again, and
    that version serves the request's ``config_cache.pinned`` blocks (``config_cache.seed``).
    """
    if not connection.in_atomic_block:
        raise RuntimeError("activate() needs a transaction: the tenant GUC is transaction-local")
    _current.set(ctx)
    if checked_version is None:
        set_guc(TENANT_GUC, str(ctx.tenant_id))
    else:
        config_cache.seed(ctx.tenant_id, checked_version)


def deactivate() -> None:
    """Leave any tenant scope entered with :func:`activate`.

    The settings are transaction-local: inside the outermost transaction, which is about to
    end, they go with it; inside a nested one (a test's transaction) they are cleared, in one
    statement.
    """
    _current.set(None)
    _cross_tenant.set(None)
    config_cache.unseed()
    conn = connection
    if (conn.connection is not None and len(conn.atomic_blocks) > 1
            and not conn.needs_rollback):
        with conn.cursor() as cursor:
            cursor.execute("SELECT set_config(%s, '', true)", [TENANT_GUC])


@contextmanager
def side_door(name: str, value: str) -> Iterator[None]:
    """Open the side door ``name`` (one of :data:`SIDE_DOORS`) for ``value`` during the
    block, inside the caller's transaction, and close it after.

    Raises:
        ValueError: ``name`` is not a side door.
    """
    if name not in SIDE_DOORS:
        raise ValueError(f"{name} is not a row-level security side door")
    set_guc(name, value)
    try:
        yield
    finally:
        set_guc(name, "")


@contextmanager
def thread_transaction() -> Iterator[TenantContext]:
    """On a worker thread that copied its caller's context variables
    (``contextvars.copy_context().run``): a new transaction on this thread's connection with
    the caller's tenant set. Used by ``memories.retrieval.concurrency``.

    Raises:
        MissingTenantContext: the caller had no tenant scope.
    """
    ctx = require_context()
    connection.close_if_unusable_or_obsolete()  # a broken or expired connection reopens
    with transaction.atomic():
        set_guc(TENANT_GUC, str(ctx.tenant_id))
        yield ctx


@contextmanager
def tenant_scope(ctx: TenantContext) -> Iterator[TenantContext]:
    """Run a block as ``ctx``: a transaction with ``app.tenant_id`` set, and the ContextVar.

    The primitive under the doors of ``tenants.entry`` (tasks, jobs, commands, deferred
    work), which code outside ``tenants`` uses instead; tests use it directly. Restores the
    previous scope.
    """
    previous = _current.get()
    token = _current.set(ctx)
    try:
        with transaction.atomic():
            set_guc(TENANT_GUC, str(ctx.tenant_id))
            try:
                yield ctx
            finally:
                if connection.needs_rollback is False:
                    set_guc(TENANT_GUC, str(previous.tenant_id) if previous else "")
    finally:
        _current.reset(token)


@contextmanager
def dangerously_cross_tenant(reason: str) -> Iterator[None]:
    """Open every tenant's rows to the block: platform staff only, and always with a reason.

    The block's ORM queries run on the ``platform`` connection (``tenants.routers``), logged
    in as the ``memory_platform`` role, in a transaction of their own. The application's own
    connection cannot do this: its role is not a member, and no setting it can change opens
    the row-level security policies.

    The caller is responsible for having checked that the principal is platform staff and
    for writing the access to the audit log.

    Raises:
        ValueError: no reason given.
        ConfigurationError: no platform connection is configured (``DATABASE_PLATFORM_URL``).
    """
    from django.conf import settings

    if not reason:
        raise ValueError("cross-tenant access needs a reason")
    if "platform" not in settings.DATABASES:
        raise ConfigurationError("Cross-tenant access needs DATABASE_PLATFORM_URL (a login of "
                                 "the memory_platform role).")
    token = _cross_tenant.set(reason)
    try:
        with transaction.atomic(using="platform"):
            yield
    finally:
        _cross_tenant.reset(token)
