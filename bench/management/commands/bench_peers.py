"""``manage.py bench_peers``: this service and mem0's open-source library side by side on the
LoCoMo dev file — ingest turns/s, query p50/p95 and evidence recall@1/5/10 (``make bench-peers``).

mem0 runs in its own virtual environment (``.venv-peers``, ``requirements/peers-mem0.txt``)
through ``bench/peers/mem0_runner.py``, which prints one JSON object. This service is measured
in the bench database (``memory_bench``) in its own tenant (``bench-peers``), emptied before
and after, its embedding cache evicted so that every turn goes through the model: the turns
go in through ``import_locomo`` (timed), the questions through ``eval_locomo``'s evaluation
(hybrid search). Figures, not tests: it asserts nothing.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from bench import dataset, machine
from bench.locomo import load_samples, questions, turns
from bench.management.commands.eval_locomo import evaluate
from bench.peers.report import category_table, summary_table
from memories.embedding.embedders import cache_evict, get_embedder
from memories.models import Memory
from memory_project.errors import MemoryServiceError
from tenants.entry import tenant_job
from tenants.models import Tenant
from tenants.services import system_context, tenant_create

BASE_DIR = Path(settings.BASE_DIR)
DEFAULT_LOCOMO = BASE_DIR.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
RUNNER = BASE_DIR / "bench" / "peers" / "mem0_runner.py"
PEERS_PYTHON = BASE_DIR / ".venv-peers" / "bin" / "python"
KS = [1, 5, 10]
BENCH_TENANT = "bench-peers"


def run_mem0(python: Path, locomo: Path, *, timeout: float, threshold: float,
             torch_threads: int, progress: Any = None) -> dict[str, Any]:
    """Run the mem0 runner in the peers' environment; its JSON report, or ``{"error"}``.

    Its progress bars go to ``progress`` (stderr when ``None``); a run longer than
    ``timeout`` seconds is killed and reported as failed.
    """
    if not python.exists():
        return {"error": f"{python} is missing: run `make bench-peers`"}
    command = [str(python), str(RUNNER), str(locomo), "--k", ",".join(map(str, KS)),
               "--threshold", str(threshold), "--torch-threads", str(torch_threads)]
    # The service's own settings must not leak into mem0's process, nor its venv onto PATH.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DJANGO_", "VIRTUAL_ENV", "PYTHON"))}
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=progress or sys.stderr,
                              timeout=timeout, check=False, env=env, text=True)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s"}
    if done.returncode != 0:
        return {"error": f"runner exited with {done.returncode} (its stderr is above)"}
    try:
        report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"runner printed no JSON: {done.stdout[-200:]!r}"}
    return report


def empty_tenant(texts: list[str]) -> Tenant:
    """The dedicated bench tenant, without memories and with none of ``texts`` in its
    embedding cache (Redis and this process), so that its import runs the model on every turn
    as a new tenant's would. (A tenant cannot be deleted by the app's role: its audit entries
    are append-only.)"""
    tenant = Tenant.objects.filter(slug=BENCH_TENANT).first() or tenant_create(
        name=BENCH_TENANT, slug=BENCH_TENANT)
    clear_memories(tenant)
    cache_evict(tenant.id, texts)
    return tenant


def clear_memories(tenant: Tenant) -> None:
    """Delete every memory of ``tenant`` (as ``bench`` cleans its ingest tenants)."""
    with tenant_job(tenant, "bench-peers"):
        Memory.objects.all().delete()


def _conditions(before: machine.CpuTimes | None) -> str:
    """CPU steal since ``before`` and the 1-minute load average now (this run included)."""
    return f"{machine.steal_label(before, machine.cpu_times())}, load {os.getloadavg()[0]:.1f}"


class Command(BaseCommand):
    help = ("This service and mem0 (open-source, offline) side by side on LoCoMo dev: "
            "ingest turns/s, query p50/p95, evidence R@1/5/10.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
        parser.add_argument("--peers-python", type=Path, default=PEERS_PYTHON,
                            help="the Python of the peers' virtual environment")
        parser.add_argument("--timeout", type=float, default=1800,
                            help="seconds the mem0 run may take")
        parser.add_argument("--threshold", type=float, default=None,
                            help="this service's semantic threshold (default: the tenant's, as "
                                 "the API uses)")
        parser.add_argument("--mem0-threshold", type=float, default=0.1,
                            help="mem0's search threshold (default: mem0's own, 0.1)")
        parser.add_argument("--skip-mem0", action="store_true", help="measure this service only")
        parser.add_argument("--json", action="store_true",
                            help="print the reports as one JSON object instead of the table")

    def say(self, text: str = "") -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def handle(self, *args: Any, **opts: Any) -> None:
        locomo: Path = opts["locomo"]
        try:
            samples = load_samples(locomo)
        except MemoryServiceError as err:
            raise CommandError(err.message) from None
        n_turns = sum(1 for s in samples for _ in turns(s))
        n_questions = sum(1 for s in samples for _ in questions(s))
        threads = settings.EMBEDDING_TORCH_THREADS
        progress: Any = self.stderr._out
        systems: list[dict[str, Any]] = []

        if not opts["skip_mem0"]:
            progress.write(f"mem0: running {RUNNER.name} in {opts['peers_python']} "
                           f"(timeout {opts['timeout']:.0f} s)\n")
            before = machine.cpu_times()
            mem0 = run_mem0(opts["peers_python"], locomo, timeout=opts["timeout"],
                            threshold=opts["mem0_threshold"], torch_threads=threads,
                            progress=progress)
            mem0["steal"] = _conditions(before)
            mem0["system"] = f"{mem0.get('system', 'mem0')} (infer=False)"
            systems.append(mem0)

        service = self._service(samples, locomo, opts["threshold"], progress)
        systems.insert(0, service)

        if opts["json"]:
            self.say(json.dumps({"systems": systems}))
            return
        self.say(f"LoCoMo dev: {len(samples)} conversations, {n_turns} turns, {n_questions} "
                 f"questions (categories 1-4), top {max(KS)} per question; "
                 f"{os.cpu_count()} cores (steal and load in the last column)")
        self.say()
        for line in summary_table(systems, tuple(KS)):
            self.say(line)
        self.say()
        for line in category_table(systems, max(KS)):
            self.say(line)
        self.say()
        for line in self._notes(systems, threads):
            self.say(line)

    def _service(self, samples: list[dict[str, Any]], locomo: Path, threshold: float | None,
                 progress: Any) -> dict[str, Any]:
        """Import into the emptied bench tenant (timed), evaluate hybrid search, empty it."""
        dataset.use_bench_database()
        get_embedder().encode(["warm up"])  # loaded before timing, as mem0's model is
        contents = [t.content for s in samples for t in turns(s)]
        tenant = empty_tenant(contents + [q.question for s in samples for q in questions(s)])
        try:
            before = machine.cpu_times()
            started = time.perf_counter()
            # on the cores mem0's model gets (torch_threads), not import_locomo's default
            call_command("import_locomo", str(locomo), tenant=BENCH_TENANT, stdout=io.StringIO(),
                         stderr=progress,
                         threads=settings.EMBEDDING_TORCH_THREADS or os.cpu_count() or 1)
            ingest_s = time.perf_counter() - started
            ctx = system_context(tenant, "bench-peers")
            report = evaluate(ctx, locomo, "hybrid", KS, progress=progress, threshold=threshold)
            steal = _conditions(before)
        finally:
            clear_memories(tenant)
        label = "" if threshold is None else f"@{threshold:g}"
        return {
            **report,
            "system": f"this service (hybrid{label})",
            "turns": len(contents),
            "ingest_s": round(ingest_s, 2),
            "ingest_turns_per_s": round(len(contents) / ingest_s, 1),
            "steal": steal,
        }

    def _notes(self, systems: list[dict[str, Any]], threads: int) -> list[str]:
        notes = [
            "How each was run (one process at a time, the embedding model on "
            f"{threads or 'its default number of'} thread(s), all-MiniLM-L6-v2 for both; this "
            f"service on {settings.EMBEDDING_RUNTIME}, mem0 on torch):",
            "- this service: import_locomo (memory_bulk_add, 64 turns per batch, one memory per "
            "turn with its dia_id) into the emptied bench-peers tenant of the bench database; "
            "eval_locomo's hybrid search, in-process, no HTTP.",
        ]
        for s in systems[1:]:
            config = s.get("config") or {}
            if s.get("error"):
                notes.append(f"- {s['system']}: {s['error']}")
                continue
            bm25 = ("on" if config.get("bm25_keyword_search")
                    else "off (needs fastembed's Qdrant/bm25 model from the hub)")
            attempts = s.get("network_attempts") or []
            short = s.get("short_results")
            notes.append(
                f"- {s['system']}: add(infer=False), one call per turn, so no LLM extracts "
                f"facts and each turn is stored as it is, like import_locomo; "
                f"{config.get('vector_store', '')}; search(top_k={config.get('top_k')}, "
                f"threshold={config.get('threshold')}) filtered by user_id = conversation "
                f"({short} of {s.get('questions')} searches returned fewer than "
                f"{config.get('top_k')}); "
                f"BM25 keyword leg {bm25}; telemetry off; network attempts refused: "
                f"{len(attempts)}{' ' + ', '.join(attempts[:3]) if attempts else ''}."
            )
        notes.append("- steal: CPU time the hypervisor gave other guests; load: the 1-minute "
                     "load average at the end of that system's run, its own process included.")
        return notes
