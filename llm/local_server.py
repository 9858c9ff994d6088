"""The local model's OpenAI-compatible server: llama.cpp's own HTTP server (``xllamacpp``),
in a process of its own that ``run_stack`` starts beside gunicorn and Celery.

It listens on ``127.0.0.1:LLM_LOCAL_PORT`` only, answers ``/v1/chat/completions`` (with JSON
schema ``response_format``), ``/v1/models`` and ``/health``, runs one request at a time on
``LLM_LOCAL_THREADS`` threads, and lowers its own scheduling priority (``LLM_LOCAL_NICE``)
so that a burst of generation never takes the CPU from search: the web workers go first.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
from django.conf import settings

from llm.weights import ensure_weights

logger = logging.getLogger(__name__)


def server_params(model_path: Path, *, port: int, threads: int, context: int) -> Any:
    """``xllamacpp.CommonParams`` for one loopback server of ``model_path``."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.model_alias = "local"
    params.port = port
    params.hostnames = ["127.0.0.1"]
    params.n_ctx = context
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.warmup = False
    return params


def serve(*, model: str | None = None, port: int | None = None) -> None:
    """Join the weights (first run), start the server and block until SIGTERM/SIGINT."""
    import xllamacpp

    name = model or settings.LLM_LOCAL_MODEL
    path = ensure_weights(name)
    os.nice(settings.LLM_LOCAL_NICE)
    params = server_params(path, port=port or settings.LLM_LOCAL_PORT,
                           threads=settings.LLM_LOCAL_THREADS, context=settings.LLM_LOCAL_CONTEXT)
    server = xllamacpp.Server(params)
    logger.info("local model %s serving on 127.0.0.1:%s", name, params.port)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    del server


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_process(*, port: int, model: str | None = None) -> subprocess.Popen[bytes]:
    """``manage.py llm_serve`` as a child process on ``port`` (commands and tests that need a
    model of their own), with this process's database and Redis URLs."""
    argv = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "llm_serve",
            "--port", str(port)]
    if model:
        argv += ["--model", model]
    env = {**os.environ, "DATABASE_URL": settings.DATABASE_URL,
           "REDIS_URL": settings.REDIS_URL}
    return subprocess.Popen(argv, env=env, cwd=settings.BASE_DIR,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_healthy(process: subprocess.Popen[bytes], port: int, *, timeout: float,
                 on_wait: Callable[[], None] | None = None) -> None:
    """Block until the server on ``port`` answers ``/health`` with 200.

    Raises:
        RuntimeError: the process exited, or ``timeout`` seconds passed.
    """
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"llm_serve exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"llm_serve did not become healthy within {timeout:.0f} s")
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        if on_wait:
            on_wait()
        time.sleep(1)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 20 s."""
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
