"""The doors into a tenant scope outside a request. Nothing outside ``tenants`` enters one
any other way (``docs/doors.md`` lists every door).

A request enters its tenant through authentication (``tenants.authentication`` for the API,
``console.access`` for the console). Everything else comes in here:

- :func:`tenant_task`: the body of a Celery task that names a tenant by its id;
- :func:`tenant_job`: a command or a per-tenant loop that acts as the system for a tenant;
- :func:`each_tenant`: the active tenants, to enter one by one with :func:`tenant_job`;
- :func:`run_in_scope`: work that leaves the request or task that made its context (after
  the response, after commit, chunks of a streamed answer, an in-process caller).

Services never enter a scope: they run in the one their caller entered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tenants.context import TenantContext, tenant_scope
from tenants.models import Tenant
from tenants.services import system_context

T = TypeVar("T")


@contextmanager
def tenant_job(tenant: Tenant | TenantContext, name: str = "") -> Iterator[TenantContext]:
    """Run the block in a tenant's scope, in one transaction: as ``system:<name>`` for a
    :class:`Tenant`, or as an existing context (a command that built it once, a benchmark's
    worker thread)."""
    ctx = tenant if isinstance(tenant, TenantContext) else system_context(tenant, name)
    with tenant_scope(ctx):
        yield ctx


def each_tenant() -> Iterator[Tenant]:
    """The active tenants, in id order (enter each with :func:`tenant_job`)."""
    yield from Tenant.objects.filter(is_active=True).order_by("id")


def run_in_scope(ctx: TenantContext, func: Callable[..., T], /, *args: Any,
                 **kwargs: Any) -> T:
    """``func(*args, **kwargs)`` in ``ctx``'s tenant scope, in a transaction of its own: for
    work that outlives or leaves the request or task that made ``ctx``."""
    with tenant_scope(ctx):
        return func(*args, **kwargs)


def tenant_task(tenant_id: Any, principal: str, func: Callable[..., T], /, *args: Any,
                **kwargs: Any) -> T | dict[str, bool]:
    """The body of a Celery task for one tenant: load the tenant ``tenant_id`` and return
    ``func(ctx, *args, **kwargs)`` run in its scope as ``system:<principal>``.

    A missing or inactive tenant is skipped: returns ``{"skipped": True}`` (a task queued
    before the tenant was deactivated must not fail and be retried).
    """
    tenant = Tenant.objects.filter(pk=tenant_id, is_active=True).first()
    if tenant is None:
        return {"skipped": True}
    with tenant_job(tenant, principal) as ctx:
        return func(ctx, *args, **kwargs)
