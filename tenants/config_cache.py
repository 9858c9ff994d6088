"""Per-process cache of what every search reads about its tenant: settings, the policies in
force and the project → team → org hierarchy.

A search through REST read them in three queries, about 6 ms of a 33 ms semantic search of
the 100k-memory bench tenant (profiled in-process). They change rarely, so they are cached
per process, keyed by the tenant's ``config_version``:

- triggers (migration ``tenants.0003``) replace ``config_version`` with a new random UUID in
  the transaction that changes the tenant's settings, a policy, an organisation, a team or a
  project, whatever writes it (service, console, admin or plain SQL);
- every cached read first reads the version (one primary-key lookup, ~0.3 ms) and then, on a
  miss, the data; an entry is therefore never staler than the transaction reading it, and a
  transaction sees its own configuration writes;
- a version is random, never a counter, so an entry made inside a transaction that then
  rolled back belongs to a version no committed row will ever carry.

Cached values are shared between threads: :func:`cached` hands out deep copies.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Callable, Hashable
from typing import TypeVar

from cachetools import LRUCache
from django.db import connection

T = TypeVar("T")

_entries: LRUCache[tuple[uuid.UUID, uuid.UUID, str, Hashable], object] = LRUCache(
    maxsize=4096)
_lock = threading.Lock()


def config_version(tenant_id: uuid.UUID) -> uuid.UUID | None:
    """The tenant's current ``config_version`` as this transaction sees it (``None``: no such
    tenant)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT config_version FROM tenants_tenant WHERE id = %s", [tenant_id])
        row = cursor.fetchone()
    return row[0] if row else None


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
    version = config_version(tenant_id)
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


def clear() -> None:
    """Forget every entry (tests)."""
    with _lock:
        _entries.clear()
