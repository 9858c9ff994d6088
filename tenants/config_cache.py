"""Per-process cache of what every search reads about its tenant: settings, the policies in
force and the project → team → org hierarchy.

A search through REST read them in three queries, a sixth of a semantic search (figures:
``docs/performance.md``, "Caches of the request path"). They change rarely, so they are cached
per process, keyed by the tenant's ``config_version``:

- triggers (migration ``tenants.0003``) replace ``config_version`` with a new random UUID in
  the transaction that changes the tenant's settings, a policy, an organisation, a team or a
  project, whatever writes it (service, console, admin or plain SQL);
- every cached read first reads the version (one primary-key lookup) and then, on a
  miss, the data; an entry is therefore never staler than the transaction reading it, and a
  transaction sees its own configuration writes;
- a version is random, never a counter, so an entry made inside a transaction that then
  rolled back belongs to a version no committed row will ever carry.

Cached values are shared between threads: :func:`cached` hands out deep copies.

A read-only operation that consults the configuration several times (a search reads the
settings, the hierarchy and the policies) runs inside :func:`pinned`: the version is read once
per tenant for the whole block, threads started with a copy of its context included, instead
of once per read (three primary-key lookups saved per REST search). Its configuration is then
the one in force when the block began, as for a snapshot.
"""

from __future__ import annotations

import contextvars
import copy
import threading
import uuid
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from cachetools import LRUCache
from django.db import connection

T = TypeVar("T")

_entries: LRUCache[tuple[uuid.UUID, uuid.UUID, str, Hashable], object] = LRUCache(
    maxsize=4096)
_lock = threading.Lock()
#: ``{tenant id: config_version}`` read so far inside :func:`pinned`; ``None`` outside.
_pins: contextvars.ContextVar[dict[uuid.UUID, uuid.UUID | None] | None] = (
    contextvars.ContextVar("config_pins", default=None))
#: The version the request's authentication read (:func:`seed`); ``None`` outside a request.
_seeded: contextvars.ContextVar[dict[uuid.UUID, uuid.UUID | None] | None] = (
    contextvars.ContextVar("config_seeded", default=None))


def config_version(tenant_id: uuid.UUID) -> uuid.UUID | None:
    """The tenant's current ``config_version`` as this transaction sees it (``None``: no such
    tenant)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT config_version FROM tenants_tenant WHERE id = %s", [tenant_id])
        row = cursor.fetchone()
    return row[0] if row else None


def current_version(tenant_id: uuid.UUID) -> uuid.UUID | None:
    """:func:`config_version`, read once per tenant inside :func:`pinned`."""
    pins = _pins.get()
    if pins is not None and tenant_id in pins:
        return pins[tenant_id]
    version = config_version(tenant_id)
    if pins is not None:
        pins[tenant_id] = version
    return version


def version_bump(tenant_id: uuid.UUID) -> None:
    """Give the tenant a new ``config_version`` in this transaction: every process drops what
    it cached about the tenant (here and in ``memories.embedding.embedders``' local cache) once it
    commits. Used by erasure, whose effect must reach every process's memory."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE tenants_tenant SET config_version = gen_random_uuid() "
                       "WHERE id = %s", [tenant_id])


def cached(tenant_id: uuid.UUID, name: str, key: Hashable, load: Callable[[], T]) -> T:
    """``load()`` for ``(name, key)`` of ``tenant_id``, from the cache when the tenant's
    configuration has not changed since it was loaded.

    Args:
        tenant_id: the tenant the value belongs to (``load`` runs in its scope).
        name: what is cached (``"settings"``, ``"policies"``, ...).
        key: the arguments ``load`` depends on besides the tenant.
        load: reads the value from the database.

    Returns:
        A deep copy of the cached value (callers may change it).
    """
    version = current_version(tenant_id)
    if version is None:
        return load()
    entry = (tenant_id, version, name, key)
    with _lock:
        found = _entries.get(entry, _entries)
    if found is _entries:
        found = load()
        with _lock:
            _entries[entry] = found
    return copy.deepcopy(found)  # type: ignore[return-value]


def seed(tenant_id: uuid.UUID, version: uuid.UUID) -> None:
    """Record ``version``, read by this transaction's authentication (``tenants.key_cache``),
    as ``tenant_id``'s for the request's :func:`pinned` blocks, which then start from it
    instead of reading it again (one primary-key lookup per search). Cleared by
    :func:`unseed` when the request's tenant scope ends (``tenants.context.deactivate``)."""
    _seeded.set({tenant_id: version})


def unseed() -> None:
    """Forget the version recorded by :func:`seed`."""
    _seeded.set(None)


@contextmanager
def pinned() -> Iterator[None]:
    """Read each tenant's ``config_version`` at most once inside the block (not at all for
    the version the request's authentication read: :func:`seed`).

    For read-only operations only: a configuration write inside the block is not seen by
    the block's later reads. Nested blocks share the outer block's versions.
    """
    token = _pins.set(dict(_seeded.get() or {})) if _pins.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _pins.reset(token)


def clear() -> None:
    """Forget every entry (tests)."""
    with _lock:
        _entries.clear()
