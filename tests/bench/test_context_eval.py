"""``eval_context`` on a small LoCoMo slice: the first two sessions of the dev set's first
conversation, imported with ``import_locomo``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from bench.context_eval import (
    ALL,
    METHODS,
    evaluate,
    first_sessions,
    pack_top_k,
    ranked_memories,
    render_bullets,
)
from bench.locomo import CATEGORY_NAMES, load_samples, questions
from summaries.models import LayerSummary
from summaries.tokens import count_tokens
from tenants.context import tenant_scope

pytestmark = pytest.mark.django_db

#: Sessions 1-3 of LoCoMo's conversation conv-26, verbatim, with the questions they answer.
DEV_FILE = (Path(__file__).resolve().parents[1] / "summaries" / "data"
            / "locomo_conv26_sessions_1_3.json")
BUDGETS = [100, 300, 1000]


@pytest.fixture
def locomo_slice(tmp_path: Path) -> Path:
    sample = first_sessions(load_samples(DEV_FILE)[0], 2)
    path = tmp_path / "locomo_slice.json"
    path.write_text(json.dumps([sample]))
    return path


def run(command: str, **options: Any) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(command, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def imported(tenant: Any, path: Path) -> dict[str, Any]:
    """Import the slice into ``tenant`` (``import_locomo``); returns its one sample."""
    call_command("import_locomo", str(path), tenant=tenant.tenant.slug,
                 stdout=io.StringIO(), stderr=io.StringIO())
    sample: dict[str, Any] = load_samples(path)[0]
    return sample


def test_the_slice_keeps_only_questions_its_sessions_answer(locomo_slice: Path) -> None:
    [sample] = load_samples(locomo_slice)
    assert {k for k in sample["conversation"] if k.startswith("session_")} == {
        "session_1", "session_1_date_time", "session_2", "session_2_date_time"}
    asked = list(questions(sample))
    assert asked and all(e.startswith(("D1:", "D2:")) for q in asked for e in q.evidence)


def test_it_reports_both_methods_per_category_and_budget(tenant_a: Any,
                                                          locomo_slice: Path) -> None:
    sample = imported(tenant_a, locomo_slice)
    report = evaluate(tenant_a.ctx, locomo_slice, BUDGETS)
    asked = list(questions(sample))
    assert report["samples"] == [sample["sample_id"]] and report["skipped"] == []
    assert report["questions"] == len(asked)
    [generation] = report["generation"]
    assert generation["generated"] and generation["depths"] == 3
    assert set(generation["tokens"]) == {"sentence", "paragraph", "detailed"}
    assert generation["secondsPerSummary"] == pytest.approx(generation["seconds"] / 3,
                                                            abs=1e-3)
    expected_rows = {CATEGORY_NAMES[q.category] for q in asked} | {ALL}
    assert set(report["results"]) == {str(b) for b in BUDGETS}
    for budget in BUDGETS:
        figures = report["results"][str(budget)]
        assert set(figures["rows"]) == expected_rows
        assert figures["rows"][ALL]["n"] == len(asked)
        assert sum(figures["rows"][c]["n"] for c in expected_rows - {ALL}) == len(asked)
        for row in figures["rows"].values():
            for method in METHODS:
                assert 0.0 <= row[method]["any"] <= 1.0
                assert 0.0 <= row[method]["recall"] <= row[method]["any"]
                assert 0 < row[method]["tokens"] <= budget
        latency = figures["latency_ms"]
        assert 0 < latency["p50"] <= latency["p95"]
    # a larger budget holds at least as much of the plain top-k list
    recalls = [report["results"][str(b)]["rows"][ALL]["topk"]["recall"] for b in BUDGETS]
    assert recalls == sorted(recalls)


def test_summaries_are_reused_unless_regeneration_is_asked(tenant_a: Any,
                                                           locomo_slice: Path) -> None:
    imported(tenant_a, locomo_slice)
    first = evaluate(tenant_a.ctx, locomo_slice, [500], limit_questions=2)
    assert first["generation"][0]["generated"] and first["questions"] == 2
    again = evaluate(tenant_a.ctx, locomo_slice, [500], limit_questions=2)
    assert not again["generation"][0]["generated"]
    assert again["generation"][0]["tokens"] == first["generation"][0]["tokens"]
    forced = evaluate(tenant_a.ctx, locomo_slice, [500], limit_questions=2, generate=True)
    assert forced["generation"][0]["generated"]
    with tenant_scope(tenant_a.ctx):
        assert LayerSummary.objects.count() == 3


def test_the_top_k_baseline_never_exceeds_the_budget(tenant_a: Any,
                                                     locomo_slice: Path) -> None:
    sample = imported(tenant_a, locomo_slice)
    with tenant_scope(tenant_a.ctx):
        for q in list(questions(sample))[:5]:
            ranked = ranked_memories(tenant_a.ctx, q.sample_id, q.question)
            assert ranked
            for budget in (50, 120, 400, 2000):
                kept, tokens = pack_top_k(ranked, budget)
                assert tokens == count_tokens(render_bullets(kept)) <= budget
                assert [m.pk for m in kept] == [m.pk for m in ranked if m in kept]


def test_the_command_prints_a_table_per_budget(tenant_a: Any, locomo_slice: Path) -> None:
    imported(tenant_a, locomo_slice)
    out, _ = run("eval_context", tenant=tenant_a.tenant.slug, file=str(locomo_slice),
                 budgets="1000,200", limit_questions=3)
    lines = out.splitlines()
    assert lines[0].startswith("conv-26: generated 3 summaries in ")
    assert "s per summary" in lines[0] and "tokens: sentence=" in lines[0]
    tables = [i for i, line in enumerate(lines) if line.startswith("budget=")]
    assert [lines[i] for i in tables] == ["budget=200", "budget=1000"]
    for i in tables:
        assert lines[i + 1].split() == ["category", "n", "ctx", "any", "ctx", "rec", "ctx",
                                        "tok", "top", "any", "top", "rec", "top", "tok"]
    assert sum(line.startswith("all ") for line in lines) == 2
    assert sum(line.startswith("context_assemble latency ms: p50=") for line in lines) == 2
    report = json.loads(run("eval_context", tenant=tenant_a.tenant.slug,
                            file=str(locomo_slice), budgets="300", json=True)[0])
    assert report["budgets"] == [300]


@pytest.mark.parametrize("budgets", ["0,500", "a,b", "500,40000", ""])
def test_the_command_refuses_bad_budgets(tenant_a: Any, locomo_slice: Path,
                                         budgets: str) -> None:
    with pytest.raises(CommandError, match="--budgets"):
        run("eval_context", tenant=tenant_a.tenant.slug, file=str(locomo_slice),
            budgets=budgets)


def test_the_command_refuses_a_tenant_without_the_conversations(
        tenant_a: Any, tenant_b: Any, locomo_slice: Path) -> None:
    imported(tenant_a, locomo_slice)
    with pytest.raises(CommandError, match="Import first"):
        run("eval_context", tenant=tenant_b.tenant.slug, file=str(locomo_slice))
