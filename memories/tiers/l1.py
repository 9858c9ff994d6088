"""L1: the in-process LRU of memory entries (seed 004 "L1 cache management").

- **Size.** At most ``MEMORY_L1_CACHE_SIZE`` entries per process (0 turns L1 off); the least
  recently used one is evicted first (``cachetools.TTLCache``, which evicts by LRU when
  full). Entries also expire after ``MEMORY_L1_TTL_SECONDS``, a bound on staleness should an
  invalidation ever be missed.
- **Invalidation in every process.** Triggers on the memories table (migration
  ``memories.0016``) send ``NOTIFY memory_l1, '<tenant id>:<memory id>'`` for every update of
  an entry's columns and every delete. PostgreSQL delivers a notification only when its
  transaction commits, so a failed or rolled-back write never touches L1 (seed 004 "Badger
  write failure"), and every write path (API, jobs, admin, SQL) is covered. Each process
  listens on a connection of its own in a daemon thread (started on first use, again after a
  fork) and drops the named entries. While that connection is down, L1 serves nothing and
  is emptied when it comes back: a notification missed meanwhile cannot leave a stale entry.
- **Races.** An entry read from L2 is put into L1 only if no invalidation arrived since the
  read began (:meth:`EntryCache.generation`); otherwise the next read fetches it again.

Keys are ``(tenant id, memory id)``: a lookup names the caller's tenant, so one tenant's
entries are never served to another.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable

import psycopg
from cachetools import TTLCache
from django.conf import settings
from django.db import connections

from memories.tiers.entries import MemoryEntry

logger = logging.getLogger(__name__)

CHANNEL = "memory_l1"
#: Longest wait between two attempts to (re)connect the listener, seconds.
MAX_BACKOFF_SECONDS = 30.0

Key = tuple[str, str]


class EntryCache:
    """A thread-safe LRU of :class:`MemoryEntry` keyed by tenant and memory id."""

    def __init__(self, maxsize: int, ttl: float) -> None:
        self.maxsize = maxsize
        self._entries: TTLCache[Key, MemoryEntry] = TTLCache(maxsize=max(1, maxsize), ttl=ttl)
        self._lock = threading.Lock()
        self._generation = 0
        self.listening = threading.Event()

    @property
    def enabled(self) -> bool:
        """Whether L1 may serve: a size above 0 and invalidations being received."""
        return self.maxsize > 0 and self.listening.is_set()

    def generation(self) -> int:
        """A counter that moves on every invalidation; pass it to :meth:`put_many`."""
        with self._lock:
            return self._generation

    def get_many(self, tenant_id: uuid.UUID, ids: Iterable[str]) -> dict[str, MemoryEntry]:
        """The cached entries of ``tenant_id`` among ``ids`` (each hit becomes the most
        recently used); nothing when L1 is off or not listening."""
        if not self.enabled:
            return {}
        tenant = str(tenant_id)
        with self._lock:
            found = {i: self._entries.get((tenant, i)) for i in ids}
        return {i: e for i, e in found.items() if e is not None}

    def put_many(self, tenant_id: uuid.UUID, entries: Iterable[MemoryEntry], *,
                 generation: int) -> int:
        """Cache ``entries`` of ``tenant_id`` unless an invalidation arrived after
        ``generation`` was taken; returns how many were cached."""
        if not self.enabled:
            return 0
        tenant = str(tenant_id)
        with self._lock:
            if generation != self._generation:
                return 0
            stored = 0
            for entry in entries:
                self._entries[(tenant, entry.id)] = entry
                stored += 1
            return stored

    def invalidate(self, keys: Iterable[Key]) -> None:
        """Drop ``keys`` (missing ones are ignored)."""
        with self._lock:
            self._generation += 1
            for key in keys:
                self._entries.pop(key, None)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._generation += 1
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def parse_payload(payload: str) -> Key | None:
    """``(tenant id, memory id)`` of a notification's ``'<tenant>:<memory>'``, else ``None``."""
    tenant, sep, memory = payload.partition(":")
    return (tenant, memory) if sep and tenant and memory else None


class _Listener:
    """The daemon thread that applies notifications to one :class:`EntryCache`."""

    def __init__(self, cache: EntryCache) -> None:
        self.cache = cache
        self.stopped = threading.Event()

    def run(self) -> None:
        backoff = 0.5
        while not self.stopped.is_set():
            try:
                self._listen()
                backoff = 0.5
            except Exception as exc:  # connection lost: serve from L2 until back
                logger.warning("L1 invalidation listener reconnecting: %s", exc)
            self.cache.listening.clear()
            self.cache.clear()
            self.stopped.wait(backoff)
            backoff = min(MAX_BACKOFF_SECONDS, backoff * 2)

    def _listen(self) -> None:
        params = connections["default"].get_connection_params()
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            self.cache.clear()
            self.cache.listening.set()
            while not self.stopped.is_set():
                # Each notification as it arrives; the timeout only lets the loop see ``stopped``.
                for note in conn.notifies(timeout=1.0):
                    key = parse_payload(note.payload)
                    if key is not None:
                        self.cache.invalidate([key])


_lock = threading.Lock()
_cache: EntryCache | None = None
_pid = 0
_listener: _Listener | None = None
_thread: threading.Thread | None = None


def l1_cache(*, wait_seconds: float = 0.0) -> EntryCache:
    """This process's L1 (created, with its listener thread, on first use and again after a
    fork). ``wait_seconds``: how long to wait for the listener to be ready (tests)."""
    global _cache, _pid, _listener, _thread
    with _lock:
        if _cache is None or _pid != os.getpid():
            _cache = EntryCache(settings.MEMORY_L1_CACHE_SIZE, settings.MEMORY_L1_TTL_SECONDS)
            _pid = os.getpid()
            if _cache.maxsize > 0:
                _listener = _Listener(_cache)
                _thread = threading.Thread(target=_listener.run, name="memory-l1-listener",
                                           daemon=True)
                _thread.start()
        cache = _cache
    if wait_seconds:
        deadline = time.monotonic() + wait_seconds
        while not cache.listening.is_set() and time.monotonic() < deadline:
            cache.listening.wait(0.05)
    return cache


def l1_forget(keys: Iterable[Key]) -> None:
    """Drop ``keys`` from this process's L1, if it has one (a writer's own invalidation, on
    commit; creates nothing)."""
    with _lock:
        cache = _cache if _pid == os.getpid() else None
    if cache is not None:
        cache.invalidate(keys)


def l1_start() -> None:
    """Create this process's L1 and start its listener (a web worker's warm-up, so the first
    read finds it listening)."""
    l1_cache()


def l1_reset(*, join_seconds: float = 5.0) -> None:
    """Stop this process's listener (waiting up to ``join_seconds`` for its connection to
    close) and forget its L1 (tests, settings changes)."""
    global _cache, _listener, _thread
    with _lock:
        listener, thread = _listener, (_thread if _pid == os.getpid() else None)
        _cache, _listener, _thread = None, None, None
    if listener is not None:
        listener.stopped.set()
    if thread is not None:
        thread.join(join_seconds)
