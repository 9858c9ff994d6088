"""``manage.py bench``: ingest throughput, REST search latency, LoCoMo recall@10, and the
pgvector and Qdrant vector backends side by side (latency, recall@10 against exact search).

Prints figures, asserts nothing (``make bench``). Runs in its own database
(``memory_bench``), kept between runs so that the large tenants are filled once.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from bench import dataset, layers, machine
from bench import vectors as vector_bench
from bench.http import Client, Server
from bench.locomo import load_samples, questions, turns
from bench.management.commands.eval_locomo import evaluate
from memories.models import Memory
from memories.retrieval.semantic import pgvector_settings
from memories.services.tenant_vector_index import tenant_indexes_refresh
from tenants.entry import tenant_job
from tenants.models import Tenant
from tenants.services import system_context

DEFAULT_LOCOMO = Path(settings.BASE_DIR).parent / "shared" / "data" / "locomo" / "locomo-dev.json"
MODES = ("semantic", "keyword", "hybrid")
PARTS = ("ingest", "search", "layers", "recall", "vectors")


def percentiles(samples: list[float]) -> str:
    """``p50 / p95`` in milliseconds."""
    return f"{np.percentile(samples, 50):7.1f} {np.percentile(samples, 95):7.1f}"


class Command(BaseCommand):
    help = ("Benchmark: ingest memories/s, REST search p50/p95 at 10k and 100k, LoCoMo "
            "recall@10, pgvector vs Qdrant (p50/p95, recall@10 against exact search).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
        parser.add_argument("--large", type=int, default=100_000)
        parser.add_argument("--small", type=int, default=10_000)
        parser.add_argument("--other-tenants", type=int, default=9)
        parser.add_argument("--ingest", type=int, default=10_000)
        parser.add_argument("--queries", type=int, default=200)
        parser.add_argument("--parts", default=",".join(PARTS),
                            help=f"comma-separated subset of {','.join(PARTS)}")

    def say(self, text: str = "") -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def handle(self, *args: Any, **opts: Any) -> None:
        self.say(f"machine: {os.cpu_count()} cores; OPENBLAS_NUM_THREADS="
                 f"{os.environ.get('OPENBLAS_NUM_THREADS')}")
        database_url = dataset.use_bench_database()
        started = time.perf_counter()
        pool = dataset.ensure_pool(opts["locomo"])
        self.say(f"pool: LoCoMo turns imported ({time.perf_counter() - started:.1f} s)")
        large = self._filled(f"bench-{opts['large']}", pool, opts["large"])
        others = [self._filled(f"bench-other-{i}", pool, opts["small"])
                  for i in range(1, opts["other_tenants"] + 1)]
        self._index_if_needed()
        parts = {p.strip() for p in opts["parts"].split(",") if p.strip()}
        if unknown := parts - set(PARTS):
            raise CommandError(f"unknown parts {sorted(unknown)}; choose from {PARTS}")
        samples = load_samples(opts["locomo"])
        asked = [q.question for s in samples for q in questions(s)]
        tenants = ([others[0]] if others else []) + [large]
        with Server(database_url) as server:
            if "ingest" in parts:
                texts = self._ingest_texts(opts["locomo"], 2 * opts["ingest"])
                self._ingest(server, texts, opts["ingest"])
            if "search" in parts:
                self.say("\nREST search latency, ms (p50 p95), limit 10, one client, keep-alive; "
                         "memory table vacuumed before each tenant; REST: a request's time "
                         "beyond the search itself (HTTP, middleware, authentication, "
                         "serialization)")
                self.say(f"{'tenant size':>12} {'mode':>9} {'cached':>15} {'uncached':>15}"
                         f" {'REST p50':>9}   server ms (embed/rank/merge, uncached), "
                         "CPU steal")
                for tenant in tenants:
                    self._search(server, tenant, asked, opts["queries"])
        if "layers" in parts:
            self._layers(tenants, asked)
        if "recall" in parts:
            self._recall_table(pool, opts["locomo"])
        if "vectors" in parts:
            vector_bench.run(large, asked, opts["queries"], self.say,
                             cast(IO[str], self.stderr._out))

    def _layers(self, tenants: list[Tenant], asked: list[str]) -> None:
        self.say("\nthree equal layers, hybrid, ms per search (p50 p95): sequential vs threads")
        for tenant in tenants:
            size = dataset.count_project(tenant, dataset.BENCH_PROJECT)
            timings = layers.compare(system_context(tenant, "bench"), dataset.BENCH_PROJECT,
                                     asked[:50])
            self.say(f"{size:>12} sequential {percentiles(timings['sequential'])}   "
                     f"concurrent {percentiles(timings['concurrent'])}")

    def _filled(self, slug: str, pool: Tenant, count: int) -> Tenant:
        tenant, _key = dataset.tenant_with_key(slug)
        have = dataset.count_project(tenant, dataset.BENCH_PROJECT)
        if have < count:
            dataset.drop_vector_index()
            started = time.perf_counter()
            total = dataset.fill(tenant, pool, count, seed=slug)
            self.say(f"filled {slug}: {total} memories ({time.perf_counter() - started:.1f} s)")
        return tenant

    def _index_if_needed(self) -> None:
        started = time.perf_counter()
        dataset.build_vector_index()
        took = time.perf_counter() - started
        if took > 1:
            self.say(f"HNSW index built in {took:.1f} s")
        # What the hourly job does on a running server: large tenants get their own index.
        run = tenant_indexes_refresh(pgvector_settings(), concurrently=False, using="owner",
                                     say=lambda line: None)
        if run.built or run.dropped:
            self.say(f"tenant HNSW indexes: {len(run.built)} built, {len(run.dropped)} "
                     f"dropped, {len(run.kept)} kept ({time.perf_counter() - started:.1f} s)")

    def _ingest_texts(self, locomo: Path, count: int) -> list[str]:
        pool = [t.content for s in load_samples(locomo) for t in turns(s)]
        rng = random.Random(int(time.time()))
        seen: set[str] = set()
        while len(seen) < count:
            seen.add(f"{rng.choice(pool)} {rng.choice(pool)}")
        return list(seen)

    def _ingest(self, server: Server, texts: list[str], count: int) -> None:
        slug = f"bench-ingest-{int(time.time())}"
        tenant, key = dataset.tenant_with_key(slug)
        client = Client(server.port, key)
        item = {"layer": "user", "identifiers": {"userId": "bench"}}
        self.say(f"\ningest through REST, {count} memories each, new content (model runs)")
        bulk, single = texts[:count], texts[count:]
        started, cpu = time.perf_counter(), machine.cpu_times()
        for i in tqdm(range(0, len(bulk), 100), desc="bulk", file=self.stderr._out):
            status, _, _ = client.request("POST", "/api/v1/memories/bulk", {
                "memories": [{**item, "content": c} for c in bulk[i:i + 100]]})
            assert status == 201, status
        rate = len(bulk) / (time.perf_counter() - started)
        self.say(f"  bulk (100 per request): {rate:8.1f} memories/s   "
                 f"{machine.steal_label(cpu, machine.cpu_times())}")
        started, cpu = time.perf_counter(), machine.cpu_times()
        for content in tqdm(single, desc="single", file=self.stderr._out):
            status, _, _ = client.request("POST", "/api/v1/memories", {**item, "content": content})
            assert status == 201, status
        rate = len(single) / (time.perf_counter() - started)
        self.say(f"  single (1 per request):  {rate:8.1f} memories/s   "
                 f"{machine.steal_label(cpu, machine.cpu_times())}")
        with tenant_job(tenant, "bench"):
            Memory.objects.all().delete()

    def _search(self, server: Server, tenant: Tenant, asked: list[str], n: int) -> None:
        dataset.vacuum()
        _, key = dataset.tenant_with_key(tenant.slug)
        client = Client(server.port, key)
        size = dataset.count_project(tenant, dataset.BENCH_PROJECT)
        ids = {"projectId": dataset.BENCH_PROJECT}
        for mode in MODES:
            row: dict[str, list[float]] = {"cached": [], "uncached": []}
            server_ms: list[list[float]] = []
            overhead: list[float] = []
            cpu = machine.cpu_times()
            for kind in ("uncached", "cached"):
                for i in range(n):
                    base = asked[i % len(asked)]
                    query = f"{base} zq{time.time_ns()}" if kind == "uncached" else base
                    if kind == "cached" and i < len(asked):
                        client.request("POST", "/api/v1/memories/search",
                                       {"query": query, "identifiers": ids, "mode": mode})
                    started = time.perf_counter()
                    status, _, headers = client.request(
                        "POST", "/api/v1/memories/search",
                        {"query": query, "identifiers": ids, "mode": mode})
                    took = (time.perf_counter() - started) * 1000
                    row[kind].append(took)
                    assert status == 200, status
                    timing = _server_timing(headers.get("Server-Timing", ""))
                    overhead.append(took - timing[3])
                    if kind == "uncached":
                        server_ms.append(timing[:3])
            parts = "/".join(f"{v:.1f}" for v in np.mean(server_ms, axis=0))
            steal = machine.steal_label(cpu, machine.cpu_times())
            self.say(f"{size:>12} {mode:>9} {percentiles(row['cached']):>15} "
                     f"{percentiles(row['uncached']):>15} {np.percentile(overhead, 50):9.1f}"
                     f"   {parts}, {steal}")

    def _recall_table(self, pool: Tenant, locomo: Path) -> None:
        ctx = system_context(pool, "bench")
        self.say("\nLoCoMo dev evidence recall@k (categories 1-4), threshold 0 and default")
        self.say(f"{'mode':>9} {'R@1':>7} {'R@5':>7} {'R@10':>7} {'p50 ms':>8} {'p95 ms':>8}")
        for mode, threshold in (("semantic", 0.0), ("keyword", None), ("hybrid", 0.0),
                                ("hybrid", None), ("recall", None)):
            report = evaluate(ctx, locomo, mode, [1, 5, 10], threshold=threshold)
            r = report["recall"]["overall"]
            label = f"{mode}{'' if threshold is None else '@0'}"
            lat = report["latency_ms"]
            self.say(f"{label:>9} {r['1']:7.3f} {r['5']:7.3f} {r['10']:7.3f} "
                     f"{lat['p50']:8.1f} {lat['p95']:8.1f}")


def _server_timing(header: str) -> list[float]:
    """``[embedding, ranking, merge, search]`` ms from the search's ``Server-Timing`` header:
    ``search`` is the whole search, so a request's time minus it is what REST adds."""
    values = dict.fromkeys(("embedding", "ranking", "merge", "search"), 0.0)
    for part in header.split(","):
        name, _, dur = part.strip().partition(";dur=")
        if name in values and dur:
            values[name] = float(dur)
    return list(values.values())
