"""How often an assembled context holds the evidence of LoCoMo questions, against plain
top-k memories at the same token budget.

For every conversation of a LoCoMo file imported into a tenant (``import_locomo``: one
project per ``sample_id``, one project-layer memory per turn with metadata ``diaId``):

1. The project scope's summaries exist (generated when missing, or always with
   ``generate``); the time per summary is the scope's generation time divided by the depths
   written.
2. For each question with evidence (categories 1–4, ``bench.locomo.questions``) and each
   budget ``B``:

   - *context*: ``summaries.context.context_assemble`` with the question and ``B``. The
     evidence turns it holds are those of its memories plus those of the memories quoted by
     its summaries' sentences (a sentence counts only when it cites exactly one memory:
     then it is that memory's text, word for word).
   - *top-k*: the same hybrid search the context runs (limit 100, threshold 0, project
     layer), highest score first, each memory a Markdown bullet as the context writes it
     (``- [13 Oct 2023] content``, ``summaries.markdown.bullet``), added while
     the rendering counted with ``summaries.tokens.count_tokens`` stays within ``B`` (a
     memory that does not fit is skipped and the next one tried, as the context does).

   "any" is the share of questions with at least one evidence turn included, "recall" the
   mean share of a question's evidence turns included.

Reads only, apart from the summaries it generates.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from bench.locomo import CATEGORY_NAMES, Question, cited_turns, load_samples, questions
from memories.embedding.embedders import get_embedder
from memories.models import Memory
from memories.retrieval.search import Mode, SearchRequest, search_candidates
from memory_project.errors import InvalidInput
from summaries.context import (
    MAX_CANDIDATES,
    SUMMARY_SHARE,
    AssembledContext,
    ContextRequest,
    context_assemble,
)
from summaries.generation import summary_generate
from summaries.markdown import bullet
from summaries.models import Depth, LayerSummary
from summaries.scopes import scope_for
from summaries.tokens import count_many, count_tokens
from tenants.context import TenantContext
from tenants.entry import tenant_job
from tenants.layers import PRECEDENCE, Layer, LayerIdentifiers

#: Row label of every question together.
ALL = "all"
_SESSION_OF = re.compile(r"D(\d+):\d+")
METHODS = ("context", "topk")


@dataclass
class Tally:
    """Figures of one method over a set of questions."""

    any_hits: list[float] = field(default_factory=list)
    recalls: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    def add(self, evidence: tuple[str, ...], found: set[str], tokens: int) -> None:
        """Count one question: its evidence turns, the turns included, the tokens used."""
        hits = sum(1 for e in evidence if e in found)
        self.any_hits.append(1.0 if hits else 0.0)
        self.recalls.append(hits / len(evidence))
        self.tokens.append(tokens)

    def as_dict(self) -> dict[str, float]:
        """``{"any", "recall", "tokens"}`` (means; 0 for no question)."""
        def mean(values: list[float] | list[int]) -> float:
            return float(np.mean(values)) if values else 0.0
        return {"any": round(mean(self.any_hits), 4), "recall": round(mean(self.recalls), 4),
                "tokens": round(mean(self.tokens), 1)}


def first_sessions(sample: dict[str, Any], sessions: int) -> dict[str, Any]:
    """A LoCoMo sample cut to its first ``sessions`` sessions, with only the questions whose
    evidence turns all lie in them (a small, self-consistent slice)."""
    conversation = {key: value for key, value in sample["conversation"].items()
                    if not key.startswith("session_")
                    or int(key.split("_")[1]) <= sessions}
    qa = []
    for q in sample.get("qa") or []:
        cited = [int(n) for n in _SESSION_OF.findall(" ".join(map(str, q.get("evidence") or [])))]
        if cited and max(cited) <= sessions:
            qa.append(q)
    return {**sample, "conversation": conversation, "qa": qa}


def turn_map(sample_id: str) -> dict[str, tuple[str, ...]]:
    """Memory id → the LoCoMo turns it stands for, for the project ``sample_id`` (in the
    caller's tenant scope)."""
    rows = Memory.objects.filter(layer="project", project_id=sample_id).values_list(
        "id", "metadata")
    return {str(pk): cited_turns(metadata or {}) for pk, metadata in rows}


def context_turns(result: AssembledContext, turns_of: dict[str, tuple[str, ...]]) -> set[str]:
    """The turns an assembled context holds: its memories', and those of the memories that
    its summaries' single-source sentences quote."""
    found: set[str] = set()
    for pk in result.memory_ids:
        found.update(turns_of.get(pk, ()))
    for served, _ in result.summaries:
        for sentence in served.summary.sentences:
            ids = sentence.get("sourceIds") or []
            if len(ids) == 1:
                found.update(turns_of.get(str(ids[0]), ()))
    return found


def summary_turns(result: AssembledContext, turns_of: dict[str, tuple[str, ...]]) -> set[str]:
    """The turns only the context's summaries hold (not also one of its memories)."""
    from_memories = {t for pk in result.memory_ids for t in turns_of.get(pk, ())}
    return context_turns(result, turns_of) - from_memories


def ranked_memories(ctx: TenantContext, sample_id: str, query: str) -> list[Memory]:
    """The hybrid search context assembly runs, restricted to the project layer: up to
    :data:`summaries.context.MAX_CANDIDATES` memories, highest score first."""
    found = search_candidates(ctx, SearchRequest(
        query=query, identifiers=LayerIdentifiers(projectId=sample_id), layers=("project",),
        limit=MAX_CANDIDATES, threshold=0.0, mode=Mode.HYBRID))
    hits = sorted(found.results, key=lambda h: (-h.score, PRECEDENCE[h.layer]))
    return [h.memory for h in hits]


def render_bullets(memories: Iterable[Memory]) -> str:
    """Memories as Markdown bullets, one line each (``""`` for none)."""
    lines = [bullet(m.content, m.occurred_at) for m in memories]
    return "\n".join(lines) + ("\n" if lines else "")


def pack_top_k(ranked: list[Memory], budget: int) -> tuple[list[Memory], int]:
    """The top-k baseline: ``ranked`` memories in order, each added while the bullet list
    stays within ``budget`` tokens (one that does not fit is skipped). Returns the memories
    and the token count of their rendering (:func:`render_bullets`), never over ``budget``."""
    costs = count_many([bullet(m.content, m.occurred_at) + "\n" for m in ranked])
    kept: list[Memory] = []
    used = 0
    for memory, cost in zip(ranked, costs, strict=True):
        if used + cost <= budget:
            kept.append(memory)
            used += cost
    tokens = count_tokens(render_bullets(kept))
    while kept and tokens > budget:  # the per-line counts are an estimate of the whole
        kept.pop()
        tokens = count_tokens(render_bullets(kept))
    return kept, tokens


def warm_up() -> None:
    """Load the embedding model and the tokenizer, so that neither the first generation's
    time nor the first context's latency includes loading them."""
    get_embedder().encode(["warm up"])  # no cache in front: the model itself
    count_tokens("warm up")


def ensure_summaries(ctx: TenantContext, sample_id: str, *, force: bool) -> dict[str, Any]:
    """Make sure the project scope of ``sample_id`` has its summaries: generate them when it
    has none, or when ``force``. Commits them (a transaction of its own).

    Returns:
        ``{"sample", "generated", "seconds", "depths", "secondsPerSummary", "model",
        "tokens": {depth: tokens}}`` (``seconds`` and ``secondsPerSummary`` ``None`` when
        nothing was generated).
    """
    scope = scope_for(Layer.PROJECT, LayerIdentifiers(projectId=sample_id))
    with tenant_job(ctx):
        existing = list(LayerSummary.objects.filter(
            scope__layer=scope.layer.value, scope__scope_key=scope.key, scope__personal_key=""))
    seconds: float | None = None
    if force or not existing:
        with tenant_job(ctx):
            started = time.perf_counter()
            existing = summary_generate(ctx, scope=scope, trigger="manual")
            seconds = time.perf_counter() - started
    existing.sort(key=lambda s: Depth.values.index(s.depth))
    return {
        "sample": sample_id,
        "generated": seconds is not None,
        "seconds": None if seconds is None else round(seconds, 3),
        "depths": len(existing),
        "secondsPerSummary": (None if seconds is None
                              else round(seconds / max(1, len(existing)), 3)),
        "model": existing[0].model if existing else None,
        "tokens": {s.depth: s.token_count for s in existing},
    }


def _imported(ctx: TenantContext, samples: list[dict[str, Any]]) -> list[str]:
    with tenant_job(ctx):
        present = set(Memory.objects.filter(layer="project").values_list(
            "project_id", flat=True).distinct())
    return [str(s["sample_id"]) for s in samples if str(s["sample_id"]) in present]


def _percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


def evaluate(ctx: TenantContext, path: Path, budgets: list[int], *, generate: bool = False,
             limit_questions: int | None = None, summary_share: float = SUMMARY_SHARE,
             progress: Any = None) -> dict[str, Any]:
    """Run the evaluation (module docstring) for ``ctx``'s tenant.

    Args:
        budgets: token budgets, each within ``summaries.context``'s 50..32000.
        generate: regenerate every conversation's summaries first (else only missing ones).
        limit_questions: ask at most this many questions per conversation (file order).
        summary_share: the ``summary_share`` of every context request.
        progress: a stream for the progress bar (``None``: no bar).

    Returns:
        ``{"samples", "skipped", "budgets", "questions", "generation": [...],
        "results": {budget: {"rows": {category: {"n", "context", "topk"}},
        "latency_ms": {"p50", "p95"}, "diagnostics": {...}}}}``; a method's figures are
        ``{"any", "recall", "tokens"}``.

    Raises:
        InvalidInput: the file is not LoCoMo's format, or none of its conversations is in
            the tenant.
    """
    samples = load_samples(path)
    sample_ids = _imported(ctx, samples)
    if not sample_ids:
        raise InvalidInput("Import first: none of the file's conversations is in this "
                           "tenant (project layer, projectId = sample_id).")
    warm_up()
    generation = [ensure_summaries(ctx, sample_id, force=generate) for sample_id in sample_ids]
    asked: list[Question] = []
    for sample in samples:
        if str(sample["sample_id"]) in sample_ids:
            asked.extend(list(questions(sample))[:limit_questions])
    tallies: dict[int, dict[str, dict[str, Tally]]] = {
        b: defaultdict(lambda: {m: Tally() for m in METHODS}) for b in budgets}
    latencies: dict[int, list[float]] = {b: [] for b in budgets}
    diagnostics: dict[int, dict[str, list[float]]] = {
        b: defaultdict(list) for b in budgets}
    bar = tqdm(total=len(asked), desc="eval context", unit="q", file=progress,
               disable=progress is None)
    for sample_id in sample_ids:
        with tenant_job(ctx):
            turns_of = turn_map(sample_id)
            identifiers = LayerIdentifiers(projectId=sample_id)
            for q in (q for q in asked if q.sample_id == sample_id):
                ranked = ranked_memories(ctx, sample_id, q.question)
                rows = (CATEGORY_NAMES[q.category], ALL)
                for budget in budgets:
                    started = time.perf_counter()
                    result = context_assemble(ctx, ContextRequest(
                        identifiers=identifiers, query=q.question, budget=budget,
                        summary_share=summary_share))
                    latencies[budget].append((time.perf_counter() - started) * 1000)
                    found = context_turns(result, turns_of)
                    kept, tokens = pack_top_k(ranked, budget)
                    baseline = {t for m in kept for t in turns_of.get(str(m.pk), ())}
                    for row in rows:
                        tallies[budget][row]["context"].add(q.evidence, found,
                                                            result.token_count)
                        tallies[budget][row]["topk"].add(q.evidence, baseline, tokens)
                    _diagnose(diagnostics[budget], q, result, turns_of, len(kept))
                bar.update(1)
    bar.close()
    return {
        "samples": sample_ids,
        "skipped": [str(s["sample_id"]) for s in samples
                    if str(s["sample_id"]) not in sample_ids],
        "budgets": budgets,
        "questions": len(asked),
        "summaryShare": summary_share,
        "generation": generation,
        "results": {str(b): {
            "rows": {row: {"n": len(by_method["context"].recalls),
                           **{m: by_method[m].as_dict() for m in METHODS}}
                     for row, by_method in tallies[b].items()},
            "latency_ms": {"p50": _percentile(latencies[b], 50),
                           "p95": _percentile(latencies[b], 95)},
            "diagnostics": {k: round(float(np.mean(v)), 4) if v else 0.0
                            for k, v in diagnostics[b].items()},
        } for b in budgets},
    }


def _diagnose(out: dict[str, list[float]], q: Question, result: AssembledContext,
              turns_of: dict[str, tuple[str, ...]], topk_count: int) -> None:
    """Where the context's budget went: summary tokens, memories, evidence via summaries."""
    summary_tokens = sum(s.summary.token_count for s, _ in result.summaries)
    via_summary = summary_turns(result, turns_of) & set(q.evidence)
    out["summaryIncluded"].append(1.0 if result.summaries else 0.0)
    out["summaryTokens"].append(float(summary_tokens))
    out["contextMemories"].append(float(len(result.memories)))
    out["topkMemories"].append(float(topk_count))
    out["evidenceViaSummary"].append(len(via_summary) / len(q.evidence))


def report_lines(report: dict[str, Any]) -> list[str]:
    """The report as plain text: generation per conversation, then one table per budget."""
    lines: list[str] = []
    for g in report["generation"]:
        tokens = " ".join(f"{d}={n}" for d, n in g["tokens"].items()) or "none"
        if g["generated"]:
            timing = (f"generated {g['depths']} summaries in {g['seconds']:.3f} s "
                      f"({g['secondsPerSummary']:.3f} s per summary)")
        else:
            timing = f"{g['depths']} summaries present (not regenerated)"
        lines.append(f"{g['sample']}: {timing}; model={g['model']}; tokens: {tokens}")
    if report["skipped"]:
        lines.append(f"not in the tenant (skipped): {', '.join(report['skipped'])}")
    lines.append(f"questions={report['questions']} summary_share={report['summaryShare']}")
    order = [*CATEGORY_NAMES.values(), ALL]
    header = ("category".ljust(12) + "n".rjust(5) + "ctx any".rjust(9) + "ctx rec".rjust(9)
              + "ctx tok".rjust(9) + "top any".rjust(9) + "top rec".rjust(9)
              + "top tok".rjust(9))
    for budget in report["budgets"]:
        figures = report["results"][str(budget)]
        lines.extend(["", f"budget={budget}", header])
        for row in [r for r in order if r in figures["rows"]]:
            f = figures["rows"][row]
            c, t = f["context"], f["topk"]
            lines.append(f"{row.ljust(12)}{f['n']:5d}{c['any']:9.3f}{c['recall']:9.3f}"
                         f"{c['tokens']:9.1f}{t['any']:9.3f}{t['recall']:9.3f}"
                         f"{t['tokens']:9.1f}")
        d = figures["diagnostics"]
        lines.append(f"context: summary in {d.get('summaryIncluded', 0.0):.1%} of questions, "
                     f"mean summary tokens {d.get('summaryTokens', 0.0):.1f}, "
                     f"mean memories {d.get('contextMemories', 0.0):.1f} "
                     f"(top-k {d.get('topkMemories', 0.0):.1f}), "
                     f"recall via summaries only {d.get('evidenceViaSummary', 0.0):.3f}")
        lat = figures["latency_ms"]
        lines.append(f"context_assemble latency ms: p50={lat['p50']} p95={lat['p95']}")
    return lines
