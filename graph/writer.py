"""The graph's single writer (seed 001 "Write Coordination for Single-Writer Constraint").

DuckDB lets one process at a time open a database file for writing, and the service runs
several (gunicorn workers, Celery workers). So:

1. :func:`graph_write` appends the operation to a Redis list (``<prefix>queue``): FIFO;
2. whichever process then holds the writer lock (``SET <prefix>lock <token> NX PX``,
   acquired with exponential backoff, 10 ms doubling to 1 s) opens the file, drains the
   queue in order — each operation in its own DuckDB transaction — publishes the touched
   tenants' changed partitions as a new snapshot, closes the file, releases the lock, and
   answers each operation on its own list (``<prefix>ack:<id>``);
3. the caller returns only when its answer arrives: after the commit AND the snapshot that
   readers load. An operation that fails (a missing edge end, …) rolls back alone and its
   caller gets the error; the lock not obtained within ``GRAPH_WRITE_TIMEOUT_SECONDS``
   (default 30 s, seed 001) raises :class:`GraphWriteTimeout`.

If publishing fails (object store down) the commit stands, the caller is told
``published: false``, and the tenant's dirty partitions are kept in Redis
(``<prefix>dirty:<tenant>``) for the next drain or the checkpoint job to publish.

Metrics: ``graph_write_queue_depth`` (gauge), ``graph_write_wait_seconds`` (histogram),
``graph_write_lock_timeouts_total`` (counter), ``graph_writes_total{op,outcome}``, and
``graph_write_contended_total``: writes that waited over :data:`CONTENTION_SECONDS`, each
also logged as a warning (seed 001: "alert if contention exceeds threshold").
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import redis
from django.conf import settings
from prometheus_client import Counter, Gauge, Histogram

from graph import ops, store
from graph.coordination import key, redis_client
from graph.restore import restore_backup
from memory_project.errors import MemoryServiceError, ServiceUnavailable

logger = logging.getLogger(__name__)

QUEUE_DEPTH = Gauge("graph_write_queue_depth", "Graph writes waiting for the writer")
WAIT_SECONDS = Histogram("graph_write_wait_seconds", "Time from enqueue to acknowledgement")
LOCK_TIMEOUTS = Counter("graph_write_lock_timeouts_total",
                        "Graph writes that timed out waiting for the writer")
WRITES = Counter("graph_writes_total", "Graph write operations", ["op", "outcome"])
CONTENDED = Counter("graph_write_contended_total",
                    "Graph writes that waited longer than the contention threshold")
#: A write that waits longer is logged as contention (a warning, for alerting) and counted.
CONTENTION_SECONDS = 5.0

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


#: Every write operation the writer applies, by name.
OPERATIONS = {**ops.OPERATIONS, "restore_backup": restore_backup}


class GraphWriteTimeout(ServiceUnavailable):
    """The graph writer did not answer in time (``GRAPH_WRITE_TIMEOUT``, 503, retryable)."""

    code = "GRAPH_WRITE_TIMEOUT"
    default_message = "The graph writer did not answer in time; retry later."


class GraphWriteFailed(MemoryServiceError):
    """An operation the writer rolled back; carries the original error's code and details."""

    status = 422
    default_message = "The graph write failed."


def graph_write(tenant_id: uuid.UUID | str, op: str, payload: dict[str, Any], *,
                timeout: float | None = None) -> dict[str, Any]:
    """Apply one write operation (:data:`OPERATIONS`) to a tenant's graph and
    return its result once it is committed and published (module doc).

    Returns:
        The operation's result plus ``published`` (bool) and ``version`` (snapshot version).

    Raises:
        GraphWriteTimeout: no answer within ``timeout`` (default ``GRAPH_WRITE_TIMEOUT_SECONDS``).
        GraphWriteFailed: the operation failed and was rolled back (its code and details).
        ValueError: unknown ``op``.
    """
    if op not in OPERATIONS:
        raise ValueError(f"unknown graph operation {op!r}")
    client = redis_client()
    request = str(uuid.uuid4())
    started = time.monotonic()
    client.rpush(key("queue"), json.dumps({"id": request, "tenant": str(tenant_id), "op": op,
                                           "payload": payload}))
    QUEUE_DEPTH.set(client.llen(key("queue")))
    limit = settings.GRAPH_WRITE_TIMEOUT_SECONDS if timeout is None else timeout
    backoff = 0.01
    while True:
        with writer_lock(block=False) as held:
            if held:
                drain()
        answer = client.blpop([key(f"ack:{request}")], timeout=max(backoff, 0.01))
        if answer is not None:
            waited = time.monotonic() - started
            WAIT_SECONDS.observe(waited)
            if waited > CONTENTION_SECONDS:
                CONTENDED.inc()
                logger.warning("graph write contention: %s waited %.1f s for the writer "
                               "(queue depth %s)", op, waited, client.llen(key("queue")))
            return _answered(json.loads(answer[1]))
        if time.monotonic() - started > limit:
            LOCK_TIMEOUTS.inc()
            _withdraw(client, request)
            raise GraphWriteTimeout(details={"timeoutSeconds": limit, "op": op})
        backoff = min(backoff * 2, 1.0)


def _answered(answer: dict[str, Any]) -> dict[str, Any]:
    if "error" in answer:
        error = GraphWriteFailed(answer["error"]["message"], details=answer["error"]["details"])
        error.code = answer["error"]["code"]
        error.status = answer["error"].get("status", 422)
        raise error
    return dict(answer["result"])


def _withdraw(client: redis.Redis, request: str) -> None:
    """Take a timed-out request out of the queue if the writer has not reached it."""
    raw: Any
    for raw in client.lrange(key("queue"), 0, -1):
        if json.loads(raw).get("id") == request:
            client.lrem(key("queue"), 1, raw)


@contextmanager
def writer_lock(*, block: bool = True, timeout: float | None = None) -> Iterator[bool]:
    """Hold the writer lock (Redis ``SET NX PX``) while the block runs; yields whether it is
    held. ``block``: wait with exponential backoff up to ``timeout`` (default
    ``GRAPH_LOCK_TIMEOUT_SECONDS``, 30 s: seed 001)."""
    client = redis_client()
    token = str(uuid.uuid4())
    lease = int(settings.GRAPH_LOCK_TIMEOUT_SECONDS * 1000)
    deadline = time.monotonic() + (settings.GRAPH_LOCK_TIMEOUT_SECONDS if timeout is None
                                   else timeout)
    backoff = 0.01
    held = bool(client.set(key("lock"), token, nx=True, px=lease))
    while not held and block and time.monotonic() < deadline:
        time.sleep(backoff)
        backoff = min(backoff * 2, 1.0)
        held = bool(client.set(key("lock"), token, nx=True, px=lease))
    if block and not held:
        LOCK_TIMEOUTS.inc()
    try:
        yield held
    finally:
        if held:
            client.eval(_RELEASE, 1, key("lock"), token)


def drain() -> int:
    """Apply every queued operation in FIFO order; the caller holds :func:`writer_lock`.

    Returns:
        The number of operations applied (failed ones included).
    """
    client = redis_client()
    answers: list[tuple[str, dict[str, Any]]] = []
    touched: set[str] = set()
    with store.writer_connection() as conn:
        while (raw := client.lpop(key("queue"))) is not None:
            request = json.loads(cast(bytes, raw))
            tenant = request["tenant"]
            answers.append((request["id"], _apply(conn, tenant, request)))
            touched.add(tenant)
        QUEUE_DEPTH.set(0)
        versions = {tenant: store.publish(conn, tenant) for tenant in sorted(touched)}
    for request_id, answer in answers:
        if "result" in answer:
            version = versions.get(answer.pop("tenant"))
            answer["result"].update(published=version is not None, version=version)
        else:
            answer.pop("tenant", None)
        client.rpush(key(f"ack:{request_id}"), json.dumps(answer, default=str))
        client.expire(key(f"ack:{request_id}"), 120)
    return len(answers)


def _apply(conn: Any, tenant: str, request: dict[str, Any]) -> dict[str, Any]:
    op = request["op"]
    conn.execute("BEGIN TRANSACTION")
    try:
        applied = OPERATIONS[op](conn, tenant, request["payload"])
        conn.execute("COMMIT")
    except Exception as exc:
        conn.execute("ROLLBACK")
        WRITES.labels(op, "failed").inc()
        if isinstance(exc, MemoryServiceError):
            return {"error": {"code": exc.code, "message": exc.message,
                              "details": exc.details, "status": exc.status}}
        logger.exception("graph operation %s failed for tenant %s", op, tenant)
        return {"error": {"code": "GRAPH_WRITE_FAILED", "message": str(exc)[:300],
                          "details": {"op": op}, "status": 500}}
    WRITES.labels(op, "applied").inc()
    store.mark_dirty(tenant, applied.dirty)
    return {"result": applied.result, "tenant": tenant}
