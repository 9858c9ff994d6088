"""Per-process cache of authenticated API keys, checked against the database on every use.

Authenticating a key took four round trips (open the key's row by prefix, read it with its
tenant, close the row, enter the tenant): a seventh of a semantic search through REST
(``docs/performance.md``, "Caches of the request path"). A cached key costs one primary-key
lookup instead: the tenant's ``config_version``, which triggers (migrations ``tenants.0003``
and ``tenants.0004``) replace in the transaction that creates, revokes, deletes or changes any
of the tenant's keys (their last use aside), deactivates the tenant or renames it. An entry is
served only while that version is the one it was made under, the tenant is active and the key
has not expired, so a revocation is honoured by the next request in every process, exactly as
without the cache. Entries are keyed by the key's SHA-256 digest; the raw key is never kept.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from datetime import datetime

from cachetools import LRUCache
from django.db import connection
from django.utils import timezone

from tenants.context import TenantContext


@dataclass(frozen=True)
class _Entry:
    ctx: TenantContext
    version: uuid.UUID
    expires_at: datetime | None


_entries: LRUCache[str, _Entry] = LRUCache(maxsize=10_000)
_lock = threading.Lock()


def cached_context(digest: str) -> TenantContext | None:
    """The context of the key whose digest is ``digest`` when it is cached and still valid
    (one query); ``None`` otherwise (authenticate from the database)."""
    with _lock:
        entry = _entries.get(digest)
    if entry is None:
        return None
    if entry.expires_at is not None and entry.expires_at <= timezone.now():
        forget(digest)
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT config_version FROM tenants_tenant WHERE id = %s AND is_active",
                       [entry.ctx.tenant_id])
        row = cursor.fetchone()
    if row is None or row[0] != entry.version:
        forget(digest)
        return None
    return entry.ctx


def remember(digest: str, ctx: TenantContext, *, version: uuid.UUID,
             expires_at: datetime | None) -> None:
    """Cache ``ctx`` for the key ``digest``, read under the tenant's ``version``."""
    with _lock:
        _entries[digest] = _Entry(ctx, version, expires_at)


def forget(digest: str) -> None:
    """Drop the entry of ``digest``, if any."""
    with _lock:
        _entries.pop(digest, None)


def clear() -> None:
    """Forget every key (tests)."""
    with _lock:
        _entries.clear()
