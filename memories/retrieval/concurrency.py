"""Running a search's independent queries at the same time.

A hybrid search of three layers is six independent queries (a semantic and a keyword list
per layer). Each runs in PostgreSQL, so while one waits on the database another can run:
:func:`run_concurrently` gives them a shared, process-wide pool of ``MEMORY_SEARCH_THREADS``
threads. A pool thread has its own database connection and so its own transaction: the job
runs in a fresh ``transaction.atomic()`` with the caller's tenant set again, because that
setting is transaction-local (a cross-tenant caller's jobs go to the platform connection by
the copied context, ``tenants.routers``). The caller's
context variables (tenant, request id, trace context) are copied into the job; a job that
uses the cache takes ``memory_project.thread_cache.thread_cache()`` (a copied context gets no
Django cache client of its own).

A pool thread sees what is committed, not the caller's uncommitted writes; callers that
searched right after writing in the same transaction must not use it, so it is opt-in
(``concurrent=True``), taken by the read-only search and recall endpoints.

The caller runs the first job itself and takes back any job no pool thread has started yet,
so a busy pool never makes a search slower than running its queries one after another.
Measured by ``manage.py bench --parts layers`` and the search figures of ``make bench``.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from django.conf import settings
from django.db import connection

from tenants.context import thread_transaction

T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor | None:
    """The process-wide pool, created on first use; ``None`` when
    ``MEMORY_SEARCH_THREADS`` < 2 (concurrency off)."""
    global _pool
    threads = settings.MEMORY_SEARCH_THREADS
    if threads < 2:
        return None
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="search")
        return _pool


def _in_own_transaction(job: Callable[[], T]) -> T:
    """Run ``job`` on this thread's connection in a new transaction carrying the tenant
    settings of the context variables (copied from the caller)."""
    with thread_transaction():
        return job()


def run_concurrently(jobs: Sequence[Callable[[], T]], *, concurrent: bool = True) -> list[T]:
    """``[job() for job in jobs]``, in order, the jobs running at the same time when
    ``concurrent`` and the pool is on (see the module docstring); else one after another
    on the caller's connection and transaction.

    Raises:
        Whatever a job raised (the first failing job in order); ``MissingTenantContext``
        when run concurrently outside a tenant scope.
    """
    pool = _executor() if concurrent and len(jobs) > 1 else None
    if pool is None:
        return [job() for job in jobs]
    futures: list[Future[T]] = [
        pool.submit(contextvars.copy_context().run, _in_own_transaction, job)
        for job in jobs[1:]
    ]
    try:
        results = [jobs[0]()]
        for job, future in zip(jobs[1:], futures, strict=True):
            results.append(job() if future.cancel() else future.result())
    finally:
        for future in futures:
            future.cancel()
    return results


def shutdown() -> None:
    """Close every pool thread's database connection and stop the pool; the next concurrent
    search starts a new one."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is None:
        return
    size = pool._max_workers
    # One closing job per thread: each waits at the barrier, so no thread takes two.
    barrier = threading.Barrier(size, timeout=10)

    def close() -> None:
        connection.close()
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()

    for _ in range(size):
        pool.submit(close)
    pool.shutdown(wait=True)
