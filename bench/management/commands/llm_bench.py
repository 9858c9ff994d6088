"""``manage.py llm_bench [--model NAME] [--runs 3] [--locomo FILE --turns 20]``: figures of
the local model, not a test.

Starts ``llm_serve`` in its own process on a free port and prints: load time, first-token
latency and generation speed (tokens/s, streamed, median of ``--runs``), and the server's
peak resident memory. With ``--locomo``, it also runs the ``graph`` purpose (entities and
relations) on the first ``--turns`` substantial turns of the file through the model and
through the offline fallback, and one cited summary of them at each depth, printing
everything for checking by hand (README "Language model" gives the figures measured).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import psutil
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from openai import OpenAI

from llm.local_server import free_port, start_process, stop_process, wait_healthy
from llm.purposes.graph import PURPOSE as GRAPH
from llm.purposes.graph import GraphInput
from llm.purposes.summarize import DEPTHS, Source, SummaryInput
from llm.purposes.summarize import PURPOSE as SUMMARIZE
from llm.runner import ask_model
from llm.weights import MODELS

PROMPT = ("Write three sentences about why people keep diaries, then list three things a "
          "diary can help someone remember.")


class Command(BaseCommand):
    help = "Speed, latency and memory of the local model; graph and summary output on LoCoMo."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", choices=sorted(MODELS), default=None,
                            help="default: LLM_LOCAL_MODEL")
        parser.add_argument("--runs", type=int, default=3)
        parser.add_argument("--max-tokens", type=int, default=128)
        parser.add_argument("--locomo", type=Path, default=None,
                            help="a LoCoMo file: also print extraction and summaries")
        parser.add_argument("--turns", type=int, default=20)

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["runs"] <= 20 or not 1 <= options["turns"] <= 200:
            raise CommandError("--runs must be within 1..20 and --turns within 1..200")
        model = options["model"] or settings.LLM_LOCAL_MODEL
        port = free_port()
        started = time.perf_counter()
        server = start_process(port=port, model=model)
        try:
            try:
                wait_healthy(server, port, timeout=900,
                             on_wait=lambda: self.stderr.write("waiting for the model server"))
            except RuntimeError as err:
                raise CommandError(str(err)) from None
            self.stdout.write(f"model {model}: ready in {time.perf_counter() - started:.1f} s "
                              "(weights joined on first use, then loaded)")
            base = f"http://127.0.0.1:{port}/v1"
            self._speed(base, options["runs"], options["max_tokens"])
            if options["locomo"]:
                self._quality(base, options["locomo"], options["turns"])
            rss = _peak_rss_mib(server.pid)
            self.stdout.write(f"peak resident memory of the model server: {rss:.0f} MiB")
        finally:
            stop_process(server)

    def _speed(self, base: str, runs: int, max_tokens: int) -> None:
        client = OpenAI(base_url=base, api_key="not-needed", max_retries=0, timeout=600)
        firsts, speeds = [], []
        for run in range(1, runs + 1):
            # A different first line each run: no prompt prefix is reused from the last run.
            prompt = f"Request {run} of {runs}. {PROMPT}"
            started = time.perf_counter()
            first: float | None = None
            tokens = 0
            stream = client.chat.completions.create(
                model="local", messages=[{"role": "user", "content": prompt}],
                max_tokens=max_tokens, temperature=0, stream=True,
                stream_options={"include_usage": True})
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content and first is None:
                    first = time.perf_counter()
                if chunk.usage:
                    tokens = chunk.usage.completion_tokens
            end = time.perf_counter()
            if first is None or tokens < 2:
                raise CommandError("the model streamed no tokens")
            firsts.append((first - started) * 1000)
            speeds.append((tokens - 1) / (end - first))
            self.stderr.write(f"run {run}/{runs}: first token {firsts[-1]:.0f} ms, "
                              f"{speeds[-1]:.1f} tokens/s, {tokens} tokens")
        self.stdout.write(f"first-token latency: median {statistics.median(firsts):.0f} ms "
                          f"(min {min(firsts):.0f}, max {max(firsts):.0f}) over {runs} runs")
        self.stdout.write(f"generation: median {statistics.median(speeds):.1f} tokens/s "
                          f"(min {min(speeds):.1f}, max {max(speeds):.1f})")

    def _quality(self, base: str, path: Path, count: int) -> None:
        from bench.locomo import load_samples, turns

        settings.LLM_BASE_URL = base
        settings.LLM_TIMEOUTS = '{"graph": 600, "summarize": 600}'
        picked = [t for sample in load_samples(path) for t in turns(sample)
                  if len(t.text.split()) >= 8][:count]
        latencies = []
        for i, turn in enumerate(picked, start=1):
            self.stderr.write(f"graph {i}/{len(picked)}")
            payload = GraphInput(turn.content)
            started = time.perf_counter()
            try:
                value, outcome, _, _ = ask_model(GRAPH, payload, "local")
                model_side = ", ".join(f"{e.name}/{e.type}" for e in value.entities)
                relations = ", ".join(f"{r.source}-{r.type}->{r.target}"
                                      for r in value.relations)
            except Exception as exc:
                model_side, relations, outcome = f"failed: {exc}", "", "error"
            latencies.append(time.perf_counter() - started)
            offline = GRAPH.fallback(payload)
            self.stdout.write(
                f"[{turn.dia_id}] {turn.content}\n  model ({outcome}): {model_side}\n"
                f"  relations: {relations}\n  spaCy: "
                + ", ".join(f"{e.name}/{e.type}" for e in offline.entities))
        self.stdout.write(f"graph extraction: median {statistics.median(latencies):.1f} s "
                          "per turn")
        sources = tuple(Source(t.dia_id, t.content) for t in picked)
        for depth in DEPTHS:
            self.stderr.write(f"summary ({depth})")
            summary_input = SummaryInput(depth, sources, "the conversation")
            started = time.perf_counter()
            try:
                summary, outcome, tokens, _ = ask_model(SUMMARIZE, summary_input, "local")
                text = " ".join(f"{s.text} {list(s.source_ids)}" for s in summary)
            except Exception as exc:
                text, outcome, tokens = f"failed: {exc}", "error", (0, 0)
            self.stdout.write(f"summary {depth} ({outcome}, {tokens[1]} tokens, "
                              f"{time.perf_counter() - started:.1f} s): {text}")
            fallback = " ".join(s.text for s in SUMMARIZE.fallback(summary_input))
            self.stdout.write(f"extractive {depth}: {fallback}")


def _peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (``VmHWM``), in MiB; its current RSS elsewhere."""
    status = Path(f"/proc/{pid}/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float(psutil.Process(pid).memory_info().rss) / (1 << 20)
