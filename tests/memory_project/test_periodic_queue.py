"""The beat's jobs have a queue of their own (``PERIODIC_JOBS_QUEUE``), which every worker
consumes beside the default one: a backlog of request jobs (graph extraction, summaries)
delays a periodic job by one job, not by the whole backlog."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from graph.services import EXTRACT_TASK
from memory_project.celery import app
from memory_project.schedule import BEAT_SCHEDULE, periodic_task_names
from tests.memory_project.test_celery_worker import _env


def test_every_beat_task_is_routed_to_the_periodic_queue_and_request_jobs_are_not() -> None:
    names = periodic_task_names()
    assert {"memories.run_job", "memories.planner_statistics", "jobs.outbox_drain",
            "graph.checkpoint", "summaries.run_due"} <= set(names)
    assert len(names) == len({e.get("task", "memories.run_job") for e in BEAT_SCHEDULE.values()})
    router = app.amqp.router
    for name in names:
        assert router.route({}, name)["queue"].name == settings.PERIODIC_JOBS_QUEUE, name
    for name in (EXTRACT_TASK, "memories.tenant_job", "memories.l3_sync"):
        assert router.route({}, name)["queue"].name == settings.CELERY_TASK_DEFAULT_QUEUE
    # a worker started without -Q consumes both
    assert {q.name for q in settings.CELERY_TASK_QUEUES} == {
        settings.CELERY_TASK_DEFAULT_QUEUE, settings.PERIODIC_JOBS_QUEUE}


@pytest.mark.slow
def test_a_periodic_job_overtakes_a_backlog_on_a_real_worker(tmp_path: Path,
                                                             django_db_setup: Any) -> None:
    """Four jobs wait on the default queue and one on the periodic queue before a worker
    (one process, no -Q) starts: the periodic one runs first or second, not fifth."""
    suffix = uuid.uuid4().hex[:8]
    default, periodic = f"test-{suffix}-jobs", f"test-{suffix}-periodic"
    backlog = [app.send_task("celery.accumulate", args=[i], queue=default).id for i in range(4)]
    overtaking = app.send_task("celery.accumulate", args=["periodic"], queue=periodic).id
    log = tmp_path / "worker.log"
    env = {**_env(), "CELERY_QUEUE": default, "CELERY_PERIODIC_QUEUE": periodic}
    with log.open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "memory_project", "worker", "--pool", "solo",
             "--concurrency", "1", "--loglevel", "INFO", "--without-heartbeat",
             "--without-mingle", "--without-gossip"], env=env, stdout=out,
            stderr=subprocess.STDOUT)
        try:
            order: list[str] = []
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and len(order) < 5:
                time.sleep(0.5)
                order = re.findall(r"Task celery\.accumulate\[([0-9a-f-]+)\] succeeded",
                                   log.read_text())
        finally:
            worker.terminate()
            worker.wait(timeout=20)
    assert sorted(order) == sorted([*backlog, overtaking]), log.read_text()[-2000:]
    assert order.index(overtaking) <= 1, order
    assert [i for i in order if i != overtaking] == backlog  # each queue stays in order


def test_settings_name_the_queues(settings: Any) -> None:
    assert settings.CELERY_TASK_DEFAULT_QUEUE == "celery"
    assert settings.PERIODIC_JOBS_QUEUE == "periodic"
