"""``manage.py run_stack``: migrate, make sure the demo tenant exists, then serve.

Starts gunicorn (the API at http://HOST:PORT), a Celery worker, Celery beat and the local
language model's server (``llm_serve``, unless ``LLM_BASE_URL`` names another server,
``LLM_LOCAL_MODEL=none`` or ``LLM_OFFLINE``) as child processes, with the database and
Redis URLs of this process (the embedded ones when ``DATABASE_URL``/``REDIS_URL`` are unset).
Ctrl-C (or SIGTERM) stops all of them; the embedded PostgreSQL and Redis stop with this
process and keep their data under ``var/``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from memory_project.env import env_int, env_str
from memory_project.schedule import sync_beat_schedule

STOP_TIMEOUT_SECONDS = 15
_PR_SET_PDEATHSIG = 1


def child_environment() -> dict[str, str]:
    """The environment of the web server, the worker, beat and the model server: this
    process's own, with the database (all three roles), Redis and settings it resolved, so
    that children use the same embedded servers instead of starting their own."""
    return {
        **os.environ,
        "DATABASE_URL": settings.DATABASE_URL,
        "DATABASE_OWNER_URL": settings.DATABASE_OWNER_URL,
        # the platform role (console tenant list, security-log job): children that find
        # DATABASE_URL set do not start the embedded database, so they need it passed on
        **({"DATABASE_PLATFORM_URL": settings.DATABASE_PLATFORM_URL}
           if settings.DATABASE_PLATFORM_URL else {}),
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "memory_project.settings",
        "PROMETHEUS_MULTIPROC_DIR": _prometheus_dir(),
    }


def _die_with_parent() -> None:
    """``preexec_fn``: ask Linux to send SIGTERM to the child when run_stack dies."""
    # Not Linux: no prctl; Ctrl-C, SIGTERM and SIGHUP still stop every child.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Command(BaseCommand):
    help = "Run the whole service: migrations, demo tenant, gunicorn, Celery worker and beat."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=env_str("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=env_int("PORT", 8000))
        parser.add_argument("--no-celery", action="store_true", help="serve the API only")

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write("applying migrations (owner role) ...")
        call_command("migrate", database="owner", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        for name in sync_beat_schedule():
            self.stdout.write(f"scheduled job: {name}")
        self._ensure_demo_tenant()
        env = child_environment()
        commands = {"web": self._gunicorn(options["host"], options["port"])}
        if _serves_local_model():
            commands["llm"] = [sys.executable, str(settings.BASE_DIR / "manage.py"), "llm_serve"]
        if not options["no_celery"]:
            bin_dir = os.path.dirname(sys.executable)
            celery = os.path.join(bin_dir, "celery")
            commands["worker"] = [celery, "-A", "memory_project", "worker", "--loglevel=INFO",
                                  f"--concurrency={env_int('CELERY_CONCURRENCY', 1)}"]
            commands["beat"] = [celery, "-A", "memory_project", "beat", "--loglevel=INFO",
                                "--scheduler", settings.CELERY_BEAT_SCHEDULER]
        self._supervise(commands, env, options["host"], options["port"])

    def _gunicorn(self, host: str, port: int) -> list[str]:
        return [
            sys.executable, "-m", "gunicorn", "memory_project.wsgi:application",
            "--bind", f"{host}:{port}",
            "--workers", str(env_int("WEB_WORKERS", 2)),
            "--threads", str(env_int("WEB_THREADS", 4)),
            "--worker-class", "gthread",
            "--timeout", "120",
            "--access-logfile", "-",
            # Path without the query string (it holds identifiers such as userId), no referer.
            "--access-logformat", '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(M)sms',
            "--config", "python:memory_project.gunicorn_conf",
        ]

    def _ensure_demo_tenant(self) -> None:
        """``manage.py demo_tenant`` (the tenants app's command): creates the demo tenant once
        and prints its key."""
        call_command("demo_tenant", stdout=self.stdout)

    def _say(self, message: str, *, error: bool = False) -> None:
        """Print a status line; a closed terminal (SIGHUP) must not stop the shutdown."""
        with contextlib.suppress(OSError):
            (self.stderr if error else self.stdout).write(message)

    def _supervise(self, commands: dict[str, list[str]], env: dict[str, str],
                   host: str, port: int) -> None:
        children: dict[str, subprocess.Popen[bytes]] = {}
        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, stop)
        for name, argv in commands.items():
            children[name] = subprocess.Popen(
                argv, env=env, start_new_session=True, preexec_fn=_die_with_parent
            )
        self.stdout.write(f"serving http://{host}:{port}/ (API docs: /api/docs/); Ctrl-C stops")
        exit_code = 0
        while not stopping:
            for name, child in children.items():
                if child.poll() is not None:
                    self._say(f"{name} exited with {child.returncode}; stopping", error=True)
                    stopping, exit_code = True, 1
                    break
            time.sleep(0.5)
        self._say("stopping ...")
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                # The whole group: gunicorn's and Celery's own workers too.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        self._say("stopped")
        if exit_code:
            sys.exit(exit_code)


def _serves_local_model() -> bool:
    """Whether this stack runs the packaged local model (nothing else is configured)."""
    return not (settings.LLM_BASE_URL or settings.LLM_OFFLINE
                or settings.LLM_LOCAL_MODEL in ("", "none"))


def _prometheus_dir() -> str:
    """Where every process of the stack writes its Prometheus samples, so that ``/metrics``
    (served by any gunicorn worker) sums all of them. ``PROMETHEUS_MULTIPROC_DIR`` when set,
    else ``var/prometheus/``, emptied at start (the counters restart with the stack)."""
    configured = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if configured:
        return configured
    path = settings.VAR_DIR / "prometheus"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return str(path)
