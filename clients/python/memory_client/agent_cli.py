"""``memory-agent``: what an agent runs around its work (seed 003).

- ``memory-agent inject --agent NAME --project ID [--workspace DIR]`` writes the agent's 50
  most recent memories of the project to ``DIR/.claude/memory/MEMORY.md`` as a Markdown
  list, and writes nothing when there are none;
- ``memory-agent extract --agent NAME --project ID --transcript FILE`` sends what the agent
  did to the service, which extracts new learnings and stores them (``source:
  "extraction"``);
- ``memory-agent run --agent NAME --project ID [--workspace DIR] -- COMMAND ...`` does
  inject → run COMMAND (its output is shown and kept as the transcript) → extract, and
  exits with COMMAND's exit status.

The service is reached over HTTP with an API key (``--url``/``MEMORY_SERVICE_URL``,
``--api-key``/``MEMORY_API_KEY``): no database access is needed. Memory never fails the
agent's pipeline: when the service is down, slow or refuses, or the transcript cannot be
read, the command says why on stderr and exits 0 (``run``: with COMMAND's status).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

from memory_client.client import MemoryClient
from memory_client.errors import MemoryServiceError

MEMORY_FILE = Path(".claude") / "memory" / "MEMORY.md"
#: Characters of transcript sent; the service accepts at most this many (the end of a
#: longer transcript is sent: it holds the run's outcome).
MAX_TRANSCRIPT_CHARS = 200_000
DEFAULT_URL = "http://127.0.0.1:8000"


def _warn(message: str) -> None:
    print(f"memory-agent: {message}", file=sys.stderr)


def _client(args: argparse.Namespace) -> MemoryClient:
    return MemoryClient(args.url, args.api_key or "", timeout=args.timeout,
                        max_retries=args.retries)


def render(agent: str, project: str, memories: list[dict[str, Any]]) -> str:
    """The MEMORY.md text: a heading and one list item per memory, newest first (line
    breaks inside a memory become spaces, so each stays one item)."""
    lines = [f"# Memories of {agent} in project {project}", ""]
    lines += [f"- {' '.join(str(m['content']).split())}" for m in memories]
    return "\n".join(lines) + "\n"


def inject(args: argparse.Namespace) -> int:
    """Write MEMORY.md; 0 also when the service cannot be asked (the agent runs without it)."""
    target = Path(args.workspace) / MEMORY_FILE
    try:
        with _client(args) as client:
            memories = client.agent_memories(args.agent, project_id=args.project,
                                              user_id=args.user)["memories"]
    except MemoryServiceError as err:
        _warn(f"memories not injected, the agent runs without {MEMORY_FILE}: {err}")
        return 0
    if not memories:
        print(f"memory-agent: no memories of {args.agent} in {args.project}; "
              f"{MEMORY_FILE} not written")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(args.agent, args.project, memories), encoding="utf-8")
    print(f"memory-agent: wrote {len(memories)} memor{'y' if len(memories) == 1 else 'ies'} "
          f"to {target}")
    return 0


def read_transcript(path: Path) -> str | None:
    """The transcript's text (its end when longer than :data:`MAX_TRANSCRIPT_CHARS`), or
    ``None`` with a warning when it is missing, binary or empty."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            if size > MAX_TRANSCRIPT_CHARS * 4:
                handle.seek(size - MAX_TRANSCRIPT_CHARS * 4)
            raw = handle.read()
    except OSError as err:
        _warn(f"transcript not read ({err.strerror}): {path}")
        return None
    if b"\x00" in raw:
        _warn(f"transcript {path} is binary; nothing extracted")
        return None
    text = raw.decode("utf-8", errors="replace")
    if len(text) > MAX_TRANSCRIPT_CHARS or size > len(raw):
        _warn(f"transcript {path} is {size} bytes; its last {MAX_TRANSCRIPT_CHARS} "
              "characters are sent")
        text = text[-MAX_TRANSCRIPT_CHARS:]
    if not text.strip():
        _warn(f"transcript {path} is empty; nothing extracted")
        return None
    return text


def send_transcript(args: argparse.Namespace, text: str) -> int:
    """Queue the extraction; 0 whatever happens (a warning says what went wrong)."""
    try:
        with _client(args) as client:
            job = client.agent_extract(args.agent, project_id=args.project, transcript=text,
                                       user_id=args.user)
    except MemoryServiceError as err:
        _warn(f"extraction skipped, no memories saved: {err}")
        return 0
    print(f"memory-agent: extraction queued (job {job['jobId']})")
    return 0


def extract(args: argparse.Namespace) -> int:
    text = read_transcript(Path(args.transcript))
    return 0 if text is None else send_transcript(args, text)


def run(args: argparse.Namespace) -> int:
    """inject → COMMAND (output shown and kept) → extract; COMMAND's exit status."""
    command = [c for c in args.command if c != "--"] if args.command else []
    if not command:
        _warn("run needs a command after --")
        return 2
    inject(args)
    kept: deque[str] = deque()
    size = 0
    try:
        process = subprocess.Popen(command, cwd=args.workspace, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, errors="replace")
    except OSError as err:
        _warn(f"cannot run {command[0]}: {err.strerror}")
        return 127
    assert process.stdout is not None
    for line in process.stdout:
        sys.stdout.write(line)
        kept.append(line)
        size += len(line)
        while size > MAX_TRANSCRIPT_CHARS and len(kept) > 1:
            size -= len(kept.popleft())
    status = process.wait()
    transcript = "".join(kept)[-MAX_TRANSCRIPT_CHARS:]
    if transcript.strip():
        send_transcript(args, transcript)
    else:
        _warn("the command printed nothing; nothing extracted")
    return status


def parser() -> argparse.ArgumentParser:
    """The command line (``memory-agent --help``)."""
    main_parser = argparse.ArgumentParser(
        prog="memory-agent", description="Give an agent its memories before it runs and "
        "keep what it learned after.")
    sub = main_parser.add_subparsers(dest="action", required=True)
    for name, helptext in (("inject", "write .claude/memory/MEMORY.md"),
                           ("extract", "store the learnings of a transcript"),
                           ("run", "inject, run a command, extract from its output")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--agent", required=True, help="the agent's name")
        p.add_argument("--project", required=True, help="the project id")
        p.add_argument("--user", default=None, help="keep memories per user (optional)")
        p.add_argument("--url", default=os.environ.get("MEMORY_SERVICE_URL", DEFAULT_URL))
        p.add_argument("--api-key", default=os.environ.get("MEMORY_API_KEY"))
        p.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
        p.add_argument("--retries", type=int, default=2, help="retries on 429/503")
        if name in ("inject", "run"):
            p.add_argument("--workspace", default=".", help="the agent's workspace")
        if name == "extract":
            p.add_argument("--transcript", required=True, help="what the agent did (text)")
        if name == "run":
            p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    return main_parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``memory-agent``; returns the exit status."""
    args = parser().parse_args(argv)
    if not args.api_key:
        _warn("no API key: pass --api-key or set MEMORY_API_KEY")
        return 0 if args.action != "run" else run_without_memory(args)
    handler = {"inject": inject, "extract": extract, "run": run}[args.action]
    return int(handler(args))


def run_without_memory(args: argparse.Namespace) -> int:
    """``run`` when the service cannot be used: the command runs anyway."""
    command = [c for c in args.command if c != "--"]
    if not command:
        return 2
    try:
        return subprocess.call(command, cwd=args.workspace)
    except OSError as err:
        _warn(f"cannot run {command[0]}: {err.strerror}")
        return 127


if __name__ == "__main__":
    raise SystemExit(main())
