"""``manage.py graph_bench [--edges 100000] [--samples 200]``: the knowledge graph at scale.

Builds a synthetic tenant graph (``bench.graph``) in a scratch directory of its own, then
prints: snapshot export time, cold start from the object store (first answer, whole graph),
traversal latency p50/p95 (neighbours at depth 1–3, memories of an entity, shortest path),
how long a write takes to be acknowledged (committed and published) and what the first read
after it costs (the reader reloading), backup and restore times. Prints figures, asserts
nothing. With ``S3_ENDPOINT_URL`` set, the
object store is that S3-compatible server.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.test import override_settings

from bench import graph as bench
from graph import store
from graph.objects import reset_object_store


class Command(BaseCommand):
    help = "Knowledge graph figures at scale: export, cold start, traversal, backup, restore."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--edges", type=int, default=100_000)
        parser.add_argument("--samples", type=int, default=200)
        parser.add_argument("--writes", type=int, default=20)

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = str(uuid.uuid4())
        with bench.scratch() as root, override_settings(
                GRAPH_DIR=f"{root}/graph", OBJECT_STORE_DIR=f"{root}/objects",
                GRAPH_REDIS_PREFIX=f"graph-bench-{tenant}:"):
            reset_object_store()
            store.forget_readers()
            rows = bench.synthetic_rows(options["edges"], tenant)
            edges = len(rows["memory_edges"]) + len(rows["entity_edges"])
            self.stdout.write(f"graph: {len(rows['memory_nodes'])} memories, "
                              f"{len(rows['entities'])} entities, {edges} edges")
            export = bench.load(tenant, rows)
            self.stdout.write(f"snapshot export (all partitions, two-phase commit): "
                              f"{export:.2f} s")
            first, whole = bench.cold_start(tenant)
            self.stdout.write(f"cold start from object storage: first answer {first:.2f} s, "
                              f"whole graph loaded {whole:.2f} s")
            for name, values in bench.latencies(tenant, rows, options["samples"]).items():
                self.stdout.write(f"{name:<24}{bench.summary(values)}")
            acknowledged, first_reads = bench.freshness(tenant, rows, options["writes"])
            self.stdout.write(f"{'write acknowledged':<24}{bench.summary(acknowledged)}")
            self.stdout.write(f"{'first read after it':<24}{bench.summary(first_reads)}")
            backed, restored = bench.backup_and_restore(tenant)
            self.stdout.write(f"backup {backed:.2f} s, point-in-time restore {restored:.2f} s")
            store.forget_readers()
        reset_object_store()
