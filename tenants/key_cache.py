"""Per-process cache of authenticated API keys, checked against the database on every use.

Authenticating a key took four round trips (open the key's row by prefix, read it with its
tenant, close the row, enter the tenant): a seventh of a semantic search through REST
(``docs/performance.md``, "Caches of the request path"). A cached key costs one primary-key
lookup instead: the tenant's ``config_version``, which triggers (migrations ``tenants.0003``
and ``tenants.0004``) replace in the transaction that creates, revokes, deletes or changes any
of the tenant's keys (their last use aside), deactivates the tenant or renames it. An entry is
served only while that version is the one it was made under, the tenant is active and the key
has not expired, so a revocation is honoured by the next request in every process, exactly as
without the cache. The request's authentication checks the version and enters the tenant
(``app.tenant_id``) in one statement. Entries are keyed by the key's SHA-256 digest; the raw
key is never kept.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from datetime import datetime

from cachetools import LRUCache
from django.db import connection
from django.utils import timezone

from tenants.context import TENANT_GUC, TenantContext, activate


@dataclass(frozen=True)
class _Entry:
    ctx: TenantContext
    version: uuid.UUID
    expires_at: datetime | None


_entries: LRUCache[str, _Entry] = LRUCache(maxsize=10_000)
_lock = threading.Lock()


#: The version check that also enters the tenant: ``app.tenant_id`` is set only when the
#: version is still the cached one (else it is emptied), in the same round trip.
_CHECK_AND_ENTER = (
    "SELECT config_version, set_config(%s, CASE WHEN config_version = %s THEN %s ELSE '' END,"
    " true) FROM tenants_tenant WHERE id = %s AND is_active")


def cached_context(digest: str, *, enter: bool = False) -> TenantContext | None:
    """The context of the key whose digest is ``digest`` when it is cached and still valid
    (one query); ``None`` otherwise (authenticate from the database).

    ``enter``: a valid key's tenant is also entered for the rest of the transaction
    (``tenants.context.activate``), by the same statement that checks the version: one round
    trip where checking, then entering, took two. Must run inside a transaction then.
    """
    with _lock:
        entry = _entries.get(digest)
    if entry is None:
        return None
    if entry.expires_at is not None and entry.expires_at <= timezone.now():
        forget(digest)
        return None
    tenant_id = entry.ctx.tenant_id
    with connection.cursor() as cursor:
        if enter:
            cursor.execute(_CHECK_AND_ENTER, [TENANT_GUC, entry.version, str(tenant_id),
                                              tenant_id])
        else:
            cursor.execute("SELECT config_version FROM tenants_tenant WHERE id = %s "
                           "AND is_active", [tenant_id])
        row = cursor.fetchone()
    if row is None or row[0] != entry.version:
        forget(digest)
        return None
    if enter:
        activate(entry.ctx, checked_version=entry.version)
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
