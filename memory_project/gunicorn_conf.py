"""gunicorn hooks (``--config python:memory_project.gunicorn_conf``, set by ``run_stack``)."""

from __future__ import annotations

from typing import Any


def child_exit(server: Any, worker: Any) -> None:
    """A worker exited: drop its live gauges from the Prometheus multiprocess directory
    (its counters and histograms stay, so totals never go backwards)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def post_worker_init(worker: Any) -> None:
    """gunicorn's own 400/414/431 answers use the JSON error envelope
    (``memory_project.gunicorn_errors``)."""
    from memory_project.gunicorn_errors import install

    install()
