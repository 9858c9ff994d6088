"""``memory-agent`` (seed 003 "Memory injection before agent run" and "Memory extraction after
agent run") against the live test server: the installed command, inject → run → extract, the
cap of 50, and every way it must not fail an agent's pipeline."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memory_client.agent_cli import MAX_TRANSCRIPT_CHARS, main

from memories.models import Memory
from memory_project.celery import app
from tenants.context import tenant_scope

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "owner"])
MEMORY_MD = Path(".claude") / "memory" / "MEMORY.md"
AGENT = {"agentId": "coder", "userId": "_shared", "projectId": "p1"}


@pytest.fixture(autouse=True)
def _owner_flushes(owner_flushes: None) -> None:
    """Transactional tests: the owner role empties the tables afterwards."""


@pytest.fixture
def eager() -> Iterator[None]:
    """Queued jobs run in place when their transaction commits (no worker in the tests)."""
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


def agent_args(action: str, server: str, key: str, *extra: str) -> list[str]:
    return [action, "--agent", "coder", "--project", "p1", "--url", server,
            "--api-key", key, "--retries", "0", "--timeout", "20", *extra]


def closed_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def stored(tenant: Any) -> dict[str, str]:
    with tenant_scope(tenant.ctx):
        return {m.content: m.metadata.get("agentSource", "") for m in Memory.objects.filter(
            layer="agent", agent_id="coder", project_id="p1", state="active")}


def test_inject_writes_nothing_when_the_agent_has_no_memories(
        live_server: Any, tenant_a: Any, tmp_path: Path, capsys: Any) -> None:
    assert main(agent_args("inject", live_server.url, tenant_a.key,
                           "--workspace", str(tmp_path))) == 0
    assert not (tmp_path / ".claude").exists()
    assert "not written" in capsys.readouterr().out


def test_inject_writes_three_memories_as_a_markdown_list(
        live_server: Any, tenant_a: Any, tmp_path: Path) -> None:
    for text in ("Tests run with make test", "The API lives under /api/v1",
                 "Migrations need\nthe owner role"):
        tenant_a.add(text, "agent", identifiers=AGENT)
    assert main(agent_args("inject", live_server.url, tenant_a.key,
                           "--workspace", str(tmp_path))) == 0
    assert (tmp_path / MEMORY_MD).read_text() == (
        "# Memories of coder in project p1\n\n"
        "- Migrations need the owner role\n"
        "- The API lives under /api/v1\n"
        "- Tests run with make test\n")


def test_inject_writes_the_50_most_recent_of_55(live_server: Any, tenant_a: Any,
                                                tmp_path: Path) -> None:
    for i in range(55):
        tenant_a.add(f"Learning {i:02d} of the project", "agent", identifiers=AGENT)
    assert main(agent_args("inject", live_server.url, tenant_a.key,
                           "--workspace", str(tmp_path))) == 0
    items = [line for line in (tmp_path / MEMORY_MD).read_text().splitlines()
             if line.startswith("- ")]
    assert items == [f"- Learning {i:02d} of the project" for i in range(54, 4, -1)]


def test_the_installed_command_runs_inject_run_extract(
        live_server: Any, tenant_a: Any, tmp_path: Path, eager: None) -> None:
    tenant_a.add("Always run make lint before pushing", "agent", identifiers=AGENT)
    script = Path(sys.executable).with_name("memory-agent")
    work = ("import pathlib; print(pathlib.Path('.claude/memory/MEMORY.md').read_text()); "
            "print('Learning: the bench database must be filled before make bench.'); "
            "print('Note: the quick lane skips the browser tests.'); "
            "print('Opened three files.')")
    done = subprocess.run(
        [str(script), *agent_args("run", live_server.url, tenant_a.key, "--workspace",
                                  str(tmp_path), "--", sys.executable, "-c", work)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "- Always run make lint before pushing" in done.stdout
    assert "extraction queued" in done.stdout
    assert stored(tenant_a) == {
        "Always run make lint before pushing": "",
        "the bench database must be filled before make bench.": "extraction",
        "the quick lane skips the browser tests.": "extraction",
    }


def test_run_keeps_the_commands_exit_status(live_server: Any, tenant_a: Any,
                                            tmp_path: Path) -> None:
    assert main(agent_args("run", live_server.url, tenant_a.key, "--workspace",
                           str(tmp_path), "--", sys.executable, "-c",
                           "import sys; print('failing on purpose'); sys.exit(3)")) == 3
    assert main(agent_args("run", live_server.url, tenant_a.key, "--workspace",
                           str(tmp_path), "--", "no-such-command-here")) == 127


def test_a_service_that_is_down_never_stops_the_agent(tmp_path: Path, capsys: Any) -> None:
    url = closed_url()
    assert main(agent_args("inject", url, "k", "--workspace", str(tmp_path))) == 0
    assert not (tmp_path / ".claude").exists()
    assert "runs without .claude/memory/MEMORY.md" in capsys.readouterr().err
    transcript = tmp_path / "run.log"
    transcript.write_text("Learning: always check the service first.\n")
    assert main(agent_args("extract", url, "k", "--transcript", str(transcript))) == 0
    assert "extraction skipped" in capsys.readouterr().err
    assert main(agent_args("run", url, "k", "--workspace", str(tmp_path), "--",
                           sys.executable, "-c", "print('agent ran')")) == 0
    assert "agent ran" in capsys.readouterr().out


def test_bad_transcripts_are_skipped_with_a_warning(live_server: Any, tenant_a: Any,
                                                    tmp_path: Path, capsys: Any) -> None:
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    empty = tmp_path / "empty.log"
    empty.write_text("  \n")
    for path, said in ((binary, "is binary"), (empty, "is empty"),
                       (tmp_path / "missing.log", "not read")):
        assert main(agent_args("extract", live_server.url, tenant_a.key,
                               "--transcript", str(path))) == 0
        assert said in capsys.readouterr().err
    with tenant_scope(tenant_a.ctx):
        assert not Memory.objects.exists()


@pytest.mark.slow
def test_a_50_mb_transcript_sends_its_end(live_server: Any, tenant_a: Any, tmp_path: Path,
                                          capsys: Any, eager: None) -> None:
    big = tmp_path / "big.log"
    with big.open("w") as handle:
        line = "Compiling module number one of many in the workspace.\n"
        handle.write(line * (50_000_000 // len(line)))
        handle.write("Learning: the release build needs the cargo cache warmed first.\n")
    assert main(agent_args("extract", live_server.url, tenant_a.key,
                           "--transcript", str(big))) == 0
    captured = capsys.readouterr()
    assert f"its last {MAX_TRANSCRIPT_CHARS} characters are sent" in captured.err
    assert "extraction queued" in captured.out
    assert stored(tenant_a) == {
        "the release build needs the cargo cache warmed first.": "extraction"}


def test_without_an_api_key_it_says_so_and_the_agent_still_runs(tmp_path: Path,
                                                                capsys: Any) -> None:
    args = ["run", "--agent", "coder", "--project", "p1", "--api-key", "", "--workspace",
            str(tmp_path), "--", sys.executable, "-c", "print('ran anyway')"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "no API key" in captured.err


def test_a_bad_agent_name_is_reported_not_raised(live_server: Any, tenant_a: Any,
                                                 tmp_path: Path, capsys: Any) -> None:
    args = agent_args("inject", live_server.url, tenant_a.key, "--workspace", str(tmp_path))
    args[2] = "has a space/and slash"
    assert main(args) == 0
    assert "Invalid agent name" in capsys.readouterr().err


def test_the_manage_py_command_is_the_same_command(live_server: Any, tenant_a: Any,
                                                   tmp_path: Path) -> None:
    tenant_a.add("Deploy on Tuesdays only", "agent", identifiers=AGENT)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "manage.py"), "memory_agent",
         *agent_args("inject", live_server.url, tenant_a.key, "--workspace", str(tmp_path))],
        capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr
    assert "- Deploy on Tuesdays only" in (tmp_path / MEMORY_MD).read_text()
