"""The service under test: gunicorn in a child process, and a keep-alive HTTP client."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

import redis
from django.conf import settings

from memory_project.redis_urls import with_database


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: The bench server's database of the embedded Redis: its cache, rate limits and Celery queue
#: stay apart from the service's (database 0), so a worker of ``make run`` on the same Redis
#: never takes the bench's jobs, whose tenants live in the bench database only.
BENCH_REDIS_DB = 15


def bench_redis_url() -> str | None:
    """The embedded Redis's database :data:`BENCH_REDIS_DB`; ``None`` with a Redis of the
    user's own (``REDIS_URL`` set), which the bench uses as it is and never empties."""
    if os.environ.get("REDIS_URL"):
        return None
    return with_database(settings.REDIS_URL, BENCH_REDIS_DB)


class Server:
    """gunicorn serving the project on 127.0.0.1 against ``database_url`` (one worker). On
    the embedded Redis it uses :func:`bench_redis_url`, emptied when the server stops
    (nothing runs the jobs the bench's writes queue)."""

    def __init__(self, database_url: str, threads: int = 4, *,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.own_redis = bench_redis_url()
        self.redis_url = self.own_redis or settings.REDIS_URL
        env = {**os.environ, "DATABASE_URL": database_url,
               "DATABASE_OWNER_URL": settings.DATABASE_OWNER_URL, "REDIS_URL": self.redis_url,
               "DJANGO_SETTINGS_MODULE": "memory_project.settings",
               # One key sends thousands of requests a minute here: no per-key limit.
               "RATE_LIMIT_REQUESTS": "0"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "memory_project.wsgi:application",
             "--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--threads", str(threads),
             "--worker-class", "gthread", "--timeout", "300", "--log-level", "warning",
             *extra_args],
            env=env,
        )

    def __enter__(self) -> Server:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                status, _, _ = Client(self.port, "").request("GET", "/health")
                if status == 200:
                    return self
            except OSError:
                time.sleep(0.2)
        self.process.kill()
        raise RuntimeError("the bench server did not start")

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
        if self.own_redis:
            with redis.Redis.from_url(self.own_redis) as client:
                client.flushdb()


#: What a keep-alive connection the server closed while idle raises on its next request
#: (gunicorn closes one after ``--keep-alive`` seconds, 2 by default).
_CLOSED_WHILE_IDLE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class Client:
    """One keep-alive HTTP/1.1 connection with an API key; reopened once when the server
    closed it while idle, so a pause between requests does not fail the next one."""

    def __init__(self, port: int, api_key: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        self.headers = {"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"}

    def request(self, method: str, path: str, body: Any = None
                ) -> tuple[int, Any, dict[str, str]]:
        """``(status, parsed JSON body or None, headers)``.

        Raises:
            OSError: the server cannot be reached, or closed a fresh connection too."""
        payload = None if body is None else json.dumps(body)
        reused = self.conn.sock is not None
        try:
            self.conn.request(method, path, body=payload, headers=self.headers)
            response = self.conn.getresponse()
        except _CLOSED_WHILE_IDLE:
            if not reused:
                raise
            self.conn.close()  # the server never read the request: send it on a new connection
            self.conn.request(method, path, body=payload, headers=self.headers)
            response = self.conn.getresponse()
        raw = response.read()
        data = json.loads(raw) if raw and response.getheader("Content-Type", "").startswith(
            "application/json") else None
        return response.status, data, dict(response.getheaders())
