"""``manage.py eval_locomo FILE --tenant T --k 1,5,10 --mode hybrid``: evidence recall@k.

Asks every question of categories 1–4 against its conversation's project (imported with
``import_locomo``) and prints evidence recall@k per category and overall — the share of the
turns that answer a question found among the first k results — and query latency p50/p95.
Reads only: nothing is bumped or changed.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from bench.locomo import CATEGORY_NAMES, cited_turns, load_samples, questions, recall_at_k
from memories.models import Memory
from memories.retrieval.recall import RecallRequest, memory_recall
from memories.retrieval.rerank import load_reranker, using_reranker
from memories.retrieval.search import Fusion, Mode, SearchRequest, memory_search
from memory_project.errors import MemoryServiceError
from tenants.context import TenantContext
from tenants.entry import tenant_job
from tenants.layers import LayerIdentifiers
from tenants.management.commands.create_api_key import find_tenant
from tenants.services import system_context

MODES = ("semantic", "keyword", "hybrid", "recall")


def retrieve(ctx: TenantContext, mode: str, sample_id: str, question: str, k: int,
             threshold: float | None = None, graph_hops: int = 0,
             fusion: str = Fusion.RERANK) -> list[Any]:
    """The first ``k`` memories for ``question`` in the conversation ``sample_id``."""
    identifiers = LayerIdentifiers(projectId=sample_id)
    if mode == "recall":
        recalled = memory_recall(ctx, RecallRequest(
            topic=question, identifiers=identifiers, layers=("project",), limit=k,
            min_confidence=0.0,
        ))
        return [r.candidate.memory for r in recalled]
    found = memory_search(ctx, SearchRequest(
        query=question, identifiers=identifiers, layers=("project",), limit=k, threshold=threshold,
        mode=Mode(mode), graph_hops=graph_hops, fusion=fusion,
    ))
    return [c.memory for c in found.results]


def evaluate(ctx: TenantContext, path: Path, mode: str, ks: list[int],
             progress: Any = None, threshold: float | None = None,
             graph_hops: int = 0, fold: tuple[str, ...] = (), fusion: str = Fusion.RERANK,
             reranker: Path | None = None) -> dict[str, Any]:
    """Run the evaluation; returns ``{"mode", "k", "questions", "recall": {category: {k: r}},
    "latency_ms": {"p50", "p95"}}``. ``fold``: ask only the questions of these sample ids;
    ``fusion``: hybrid's ordering; ``reranker``: a weights file in place of the shipped one
    (``train_reranker --out``)."""
    if reranker is not None:
        with using_reranker(load_reranker(reranker)):
            return evaluate(ctx, path, mode, ks, progress, threshold, graph_hops, fold, fusion)
    samples = [s for s in load_samples(path) if not fold or s["sample_id"] in fold]
    if not samples:
        raise CommandError(f"No conversation {', '.join(fold)} in {path}.")
    asked = [q for s in samples for q in questions(s)]
    scores: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    latencies: list[float] = []
    depth = max(ks)
    bar = tqdm(asked, desc=f"eval {mode}", unit="q", file=progress, disable=progress is None)
    with tenant_job(ctx):
        stored = Memory.objects.filter(layer="project")
        missing = [s["sample_id"] for s in samples
                   if not stored.filter(project_id=s["sample_id"]).exists()]
        if missing:
            raise CommandError(f"Import first: no memories for {', '.join(missing)}.")
        for q in bar:
            start = time.perf_counter()
            memories = retrieve(ctx, mode, q.sample_id, q.question, depth, threshold, graph_hops,
                                fusion)
            latencies.append((time.perf_counter() - start) * 1000)
            retrieved = [cited_turns(m.metadata or {}) for m in memories]
            for k in ks:
                value = recall_at_k(retrieved, q.evidence, k)
                scores[CATEGORY_NAMES[q.category]][k].append(value)
                scores["overall"][k].append(value)
    return {
        "mode": mode,
        "graph_hops": graph_hops,
        "threshold": threshold,
        "fusion": fusion if mode == "hybrid" else None,
        "fold": list(fold),
        "k": ks,
        "questions": len(asked),
        "recall": {
            cat: {str(k): round(float(np.mean(v)), 4) for k, v in by_k.items()}
            for cat, by_k in scores.items()
        },
        "count": {cat: len(by_k[ks[0]]) for cat, by_k in scores.items()},
        "latency_ms": {
            "p50": round(float(np.percentile(latencies, 50)), 2) if latencies else None,
            "p95": round(float(np.percentile(latencies, 95)), 2) if latencies else None,
        },
    }


class Command(BaseCommand):
    help = "Evidence recall@k of LoCoMo questions (categories 1-4), per category and overall."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--k", default="1,5,10", help="comma-separated cut-offs")
        parser.add_argument("--mode", default="hybrid", choices=MODES)
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument(
            "--threshold", type=float, default=None,
            help="cosine similarity threshold of the semantic list (default: the tenant's "
                 "default, as the API uses; 0 ranks every memory)",
        )
        parser.add_argument("--graph-hops", type=int, default=0, choices=range(4),
                            help="graph expansion of hybrid search (0: off)")
        parser.add_argument("--fold", default="",
                            help="comma-separated sample ids: ask only their questions")
        parser.add_argument("--fusion", default=Fusion.RERANK, choices=[f.value for f in Fusion],
                            help="hybrid's ordering: the reranker (default) or plain RRF")
        parser.add_argument("--reranker", type=Path, default=None,
                            help="reranker weights to use instead of the shipped ones")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            ks = sorted({int(k) for k in options["k"].split(",") if k.strip()})
        except ValueError:
            raise CommandError("--k must be comma-separated integers, e.g. 1,5,10") from None
        if not ks or ks[0] < 1 or ks[-1] > 100:
            raise CommandError("--k values must be within 1..100")
        ctx = system_context(find_tenant(options["tenant"]), "eval_locomo")
        try:
            report = evaluate(ctx, options["file"], options["mode"], ks,
                              progress=None if options["json"] else self.stderr._out,
                              threshold=options["threshold"],
                              graph_hops=options["graph_hops"],
                              fold=tuple(x for x in options["fold"].split(",") if x.strip()),
                              fusion=options["fusion"], reranker=options["reranker"])
        except MemoryServiceError as err:
            raise CommandError(err.message) from None
        if options["json"]:
            self.stdout.write(json.dumps(report))
            return
        hops = f" graph_hops={report['graph_hops']}" if report["graph_hops"] else ""
        fusion = (f" fusion={report['fusion']}"
                  if report["fusion"] and report["fusion"] != Fusion.RERANK else "")
        fold = f" fold={','.join(report['fold'])}" if report["fold"] else ""
        self.stdout.write(f"mode={report['mode']}{hops}{fusion}{fold} "
                          f"threshold={report['threshold']} questions={report['questions']}")
        header = "category".ljust(12) + "".join(f"R@{k}".rjust(8) for k in ks) + "      n"
        self.stdout.write(header)
        order = [*CATEGORY_NAMES.values(), "overall"]
        for cat in [c for c in order if c in report["recall"]]:
            row = "".join(f"{report['recall'][cat][str(k)]:8.3f}" for k in ks)
            self.stdout.write(f"{cat.ljust(12)}{row}{report['count'][cat]:7d}")
        lat = report["latency_ms"]
        self.stdout.write(f"latency ms: p50={lat['p50']} p95={lat['p95']}")
