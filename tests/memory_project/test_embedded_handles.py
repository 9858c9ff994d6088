"""The embedded PostgreSQL stops when the last process using it exits, even when another
process that attached was killed before it could detach (``memory_project.embedded``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_project.embedded import _forget_dead_handles

ATTACH = """
import sys
from pathlib import Path
from memory_project.embedded import start_postgres
start_postgres(Path(sys.argv[1]))
print("attached", flush=True)
sys.stdin.readline()
"""


def _attach(data_dir: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", ATTACH, str(data_dir)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2])
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "attached"
    return child


def test_it_forgets_the_pids_of_dead_processes(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / ".handle_pids.json").write_text(json.dumps([dead.pid, os.getpid()]))
    _forget_dead_handles(tmp_path)
    assert json.loads((tmp_path / ".handle_pids.json").read_text()) == [os.getpid()]


@pytest.mark.slow
def test_the_server_stops_after_a_killed_process_and_the_last_one_exit(tmp_path: Path) -> None:
    data_dir = tmp_path / "pg"
    postmaster = data_dir / "postmaster.pid"
    first = _attach(data_dir)
    try:
        second = _attach(data_dir)
        second.send_signal(signal.SIGTERM)  # dies without its exit hooks: its pid stays listed
        second.wait(timeout=30)
        assert second.pid in json.loads((data_dir / ".handle_pids.json").read_text())
        assert postmaster.exists()
        assert first.stdin is not None
        first.stdin.write("\n")
        first.stdin.flush()
        first.wait(timeout=60)
        deadline = time.monotonic() + 30
        while postmaster.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not postmaster.exists(), "the server kept running"
    finally:
        first.kill()
        if postmaster.exists():  # a failed run leaves no server behind
            os.kill(int(postmaster.read_text().split()[0]), signal.SIGTERM)
