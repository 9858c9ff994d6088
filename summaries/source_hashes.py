"""The current source hash of a scope, kept in the cache between changes of its sources.

Staleness (seed 001 "Summary Staleness Detection", "Staleness check on retrieval") compares a
summary's ``source_hash`` with the hash of its scope's sources now
(:func:`summaries.scopes.source_hash`): one aggregate over every active memory of the scope,
~2 µs a memory, which every summaries read and every context assembly paid, 0.2 s for the
100k-memory project of the bench (``docs/summaries.md``, "Freshness without reading every
source"). The seed computes the new hash when sources change; here it is computed at the
first read after a change and kept:

- The hash is cached (Django's cache: Redis, shared by every process) under a version token.
  Every change of the scope's sources replaces the token (:func:`sources_changed`: the memory
  store's signals, received by ``summaries.receivers``), at once and again at commit. A
  reader uses a cached hash only under the current token, so a hash computed from a snapshot
  older than a change is never served after it.
- Entries expire after ``SUMMARY_SOURCE_HASH_TTL`` seconds (300): a change that reaches the
  database without a signal (a bulk statement run by hand) is seen within that time.
- Without the cache (Redis down, through the ``redis`` circuit breaker), every read computes
  the hash, as before, and the request is flagged degraded; a write is never refused for it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from memory_project.resilience import REDIS, call_guarded, mark_degraded
from summaries.scopes import ScopeRef, source_hash

logger = logging.getLogger(__name__)


def _keys(tenant_id: uuid.UUID, scope: ScopeRef) -> tuple[str, str]:
    base = f"summaries:sources:{tenant_id}:{scope.layer.value}:{scope.key}"
    return f"{base}:version", f"{base}:hash"


def current_source_hash(tenant_id: uuid.UUID, scope: ScopeRef) -> str:
    """:func:`~summaries.scopes.source_hash` of ``scope`` (a shared scope) in the active
    tenant, from the cache when no change of its sources came since it was computed. One
    cache round trip when it is there; otherwise the aggregate, then one more to keep it."""
    version_key, hash_key = _keys(tenant_id, scope)
    try:
        found = call_guarded(REDIS, cache.get_many, [version_key, hash_key])
    except Exception as exc:  # Redis down: compute it, as without the cache
        logger.warning("source hash cache unavailable (read): %s", exc)
        mark_degraded("cache")
        return source_hash(scope)
    version, entry = found.get(version_key), found.get(hash_key)
    if isinstance(entry, tuple) and len(entry) == 2 and entry[0] == version:
        return str(entry[1])
    digest = source_hash(scope)
    try:
        call_guarded(REDIS, cache.set, hash_key, (version, digest),
                     settings.SUMMARY_SOURCE_HASH_TTL)
    except Exception as exc:
        logger.warning("source hash cache unavailable (write): %s", exc)
        mark_degraded("cache")
    return digest


def sources_changed(tenant_id: uuid.UUID, scopes: Iterable[ScopeRef]) -> None:
    """The sources of ``scopes`` changed in the current transaction: their cached hashes are
    no longer served, from now (readers in this transaction) and again once it commits
    (readers that computed a hash from the snapshot before the commit)."""
    keys = [_keys(tenant_id, scope)[0] for scope in set(scopes)]
    if not keys:
        return

    def renew() -> None:
        token = uuid.uuid4().hex
        try:
            call_guarded(REDIS, cache.set_many, dict.fromkeys(keys, token),
                         settings.SUMMARY_SOURCE_HASH_TTL)
        except Exception as exc:  # the write stands; a cached hash may live out its TTL
            logger.warning("source hash versions of %d scopes not renewed (for up to %ss "
                           "a cached hash may be served): %s", len(keys),
                           settings.SUMMARY_SOURCE_HASH_TTL, exc)
            mark_degraded("cache")

    renew()
    transaction.on_commit(renew)
