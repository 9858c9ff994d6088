"""LoCoMo import and evaluation (``import_locomo``, ``eval_locomo``) on a small file."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from bench.locomo import load_samples, questions, recall_at_k, turns
from bench.management.commands import import_locomo as import_command
from memories.models import Memory
from memories.services import memory as memory_service
from tenants.context import tenant_scope
from tenants.models import Project

pytestmark = pytest.mark.django_db

SAMPLES = [
    {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Caroline", "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel, how was your week?"},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "Busy! I went hiking."},
                {"speaker": "Caroline", "dia_id": "D1:3",
                 "text": "My dog Biscuit is a Weimaraner puppy.",
                 "blip_caption": "a photo of a grey dog on a sofa"},
                {"speaker": "Melanie", "dia_id": "D1:4", "text": "So cute, I love dogs."},
                {"speaker": "Caroline", "dia_id": "D1:5", "text": "We adopted him in April."},
            ],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [
                {"speaker": "Melanie", "dia_id": "D2:1", "text": "I started pottery classes."},
                {"speaker": "Caroline", "dia_id": "D2:2", "text": "Nice, where are they?"},
                {"speaker": "Melanie", "dia_id": "D2:3", "text": "At the studio downtown."},
            ],
        },
        "qa": [
            {"question": "What breed is Biscuit, the Weimaraner owner's puppy?",
             "answer": "Weimaraner", "evidence": ["D1:3"], "category": 4},
            {"question": "When did Caroline adopt her dog?", "answer": "April 2023",
             "evidence": ["D1:3; D1:5"], "category": 2},
            {"question": "What hobbies does Melanie have?", "answer": "hiking, pottery",
             "evidence": ["D1:2", "D2:1"], "category": 1},
            {"question": "What is Caroline's favourite pottery glaze?",
             "adversarial_answer": "blue", "evidence": ["D2:1"], "category": 5},
        ],
    },
    {
        "sample_id": "conv-2",
        "conversation": {
            "speaker_a": "Jon", "speaker_b": "Gina",
            "session_1_date_time": "9:00 am on 1 June, 2023",
            "session_1": [
                {"speaker": "Jon", "dia_id": "D1:1", "text": "I lost my job at the bank."},
                {"speaker": "Gina", "dia_id": "D1:2", "text": "Sorry! I opened a clothing store."},
                {"speaker": "Jon", "dia_id": "D1:3", "text": "I want to open a dance studio."},
            ],
        },
        "qa": [
            {"question": "Would Jon enjoy a career in dance?", "answer": "Likely yes",
             "evidence": ["D1:3"], "category": 3},
            {"question": "What did Gina open?", "answer": "a clothing store", "evidence": [],
             "category": 4},
        ],
    },
]
TURNS = {"conv-1": 8, "conv-2": 3}


@pytest.fixture
def locomo_file(tmp_path) -> Any:
    path = tmp_path / "locomo_small.json"
    path.write_text(json.dumps(SAMPLES))
    return path


def run(command: str, *args: Any, **options: Any) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(command, *map(str, args), stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def project_memories(tenant: Any, sample_id: str) -> dict[str, Memory]:
    with tenant_scope(tenant.ctx):
        rows = Memory.objects.filter(layer="project", project_id=sample_id)
        return {m.metadata["diaId"]: m for m in rows}


# --- parsing ---------------------------------------------------------------------------

def test_it_parses_turns_context_and_questions() -> None:
    conv = list(turns(SAMPLES[0]))
    assert [t.dia_id for t in conv] == ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5",
                                        "D2:1", "D2:2", "D2:3"]
    third = conv[2]
    assert third.content == ("Caroline: My dog Biscuit is a Weimaraner puppy. "
                             "[shares an image: a photo of a grey dog on a sofa]")
    assert third.context == "Melanie: Busy! I went hiking.\nMelanie: So cute, I love dogs."
    assert conv[5].context == "Caroline: Nice, where are they?"  # sessions do not mix
    assert third.occurred_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert replace(third, session_date="8 May 2023").occurred_at is None  # another form
    asked = list(questions(SAMPLES[0]))
    assert [(q.category, q.evidence) for q in asked] == [
        (4, ("D1:3",)), (2, ("D1:3", "D1:5")), (1, ("D1:2", "D2:1"))]
    assert [q.category for q in questions(SAMPLES[1])] == [3]  # no evidence: skipped
    assert recall_at_k(["D1:5", "D1:1", "D1:3"], ("D1:3", "D1:5"), 1) == 0.5
    assert recall_at_k(["D1:5", "D1:1", "D1:3"], ("D1:3", "D1:5"), 3) == 1.0


# --- import ----------------------------------------------------------------------------

def test_import_creates_a_project_and_a_memory_per_turn(tenant_a, locomo_file) -> None:
    out, _ = run("import_locomo", locomo_file, tenant=tenant_a.tenant.slug)
    assert f"imported 11 turns from 2 conversations into tenant {tenant_a.tenant.slug}" in out
    assert "0 already present" in out
    with tenant_scope(tenant_a.ctx):
        assert sorted(Project.objects.values_list("external_id", flat=True)) == [
            "conv-1", "conv-2"]
        assert Memory.objects.count() == 11
    for sample_id, count in TURNS.items():
        assert len(project_memories(tenant_a, sample_id)) == count
    conv1 = project_memories(tenant_a, "conv-1")
    dog = conv1["D1:3"]
    assert dog.layer == "project" and dog.kind == "episode"
    assert dog.content.startswith("Caroline: My dog Biscuit is a Weimaraner puppy.")
    assert dog.metadata == {
        "source": {"type": "import", "reference": "locomo:conv-1:D1:3"},
        "tags": ["locomo", "conv-1"],
        "speaker": "Caroline", "session": 1, "sessionDate": "1:56 pm on 8 May, 2023",
        "diaId": "D1:3", "imageCaption": "a photo of a grey dog on a sofa",
    }
    assert dog.context == "Melanie: Busy! I went hiking.\nMelanie: So cute, I love dogs."
    # the session's time is the turn's time on the conversation's clock (the reranker's
    # dates); created_at stays the time of the import
    assert dog.occurred_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert conv1["D2:1"].occurred_at == datetime(2023, 5, 20, 10, 0, tzinfo=UTC)
    assert dog.created_at > dog.occurred_at
    assert "imageCaption" not in conv1["D1:4"].metadata
    assert conv1["D2:1"].metadata["session"] == 2
    assert conv1["D2:1"].metadata["sessionDate"] == "10:00 am on 20 May, 2023"
    assert conv1["D1:1"].context == "Melanie: Busy! I went hiking."


def test_import_is_idempotent(tenant_a, locomo_file) -> None:
    run("import_locomo", locomo_file, tenant=tenant_a.tenant.slug)
    out, _ = run("import_locomo", locomo_file, tenant=tenant_a.tenant.slug)
    assert "imported 0 turns from 2 conversations" in out
    assert "11 already present" in out
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.count() == 11
        assert Project.objects.count() == 2


def test_import_stays_in_its_tenant(tenant_a, tenant_b, locomo_file) -> None:
    run("import_locomo", locomo_file, tenant=tenant_a.tenant.slug)
    with tenant_scope(tenant_b.ctx):
        assert Memory.objects.count() == 0 and Project.objects.count() == 0


@pytest.mark.parametrize("content", ['{"sample_id": "x"}', "not json at all",
                                     '[{"sample_id": "x", "conversation": []}]',
                                     '[{"conversation": {}}]'])
def test_a_non_locomo_file_is_refused(tenant_a, tmp_path, content) -> None:
    path = tmp_path / "other.json"
    path.write_text(content)
    with pytest.raises(CommandError):
        run("import_locomo", path, tenant=tenant_a.tenant.slug)
    with pytest.raises(CommandError):
        run("eval_locomo", path, tenant=tenant_a.tenant.slug, json=True)
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.count() == 0


def test_a_missing_file_or_tenant_is_refused(tenant_a, tmp_path, locomo_file) -> None:
    with pytest.raises(CommandError):
        run("import_locomo", tmp_path / "absent.json", tenant=tenant_a.tenant.slug)
    with pytest.raises(CommandError, match="No tenant"):
        run("import_locomo", locomo_file, tenant="no-such-tenant")
    with pytest.raises(CommandError, match="--threads"):
        run("import_locomo", locomo_file, tenant=tenant_a.tenant.slug, threads=0)


def test_import_loads_the_model_on_the_threads_asked_for(tenant_a, locomo_file,
                                                          monkeypatch) -> None:
    from memories.embedding import threads

    seen: list[int] = []
    original = memory_service.memory_bulk_add

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(threads.model_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(import_command, "memory_bulk_add", recording)
    run("import_locomo", locomo_file, tenant=tenant_a.tenant.slug, threads=3)
    assert seen and set(seen) == {3}
    assert threads.model_threads() == settings.EMBEDDING_TORCH_THREADS  # after the command


# --- evaluation ------------------------------------------------------------------------

def evaluate(tenant: Any, path: Any, mode: str = "keyword", k: str = "1,5") -> dict[str, Any]:
    out, _ = run("eval_locomo", path, tenant=tenant.tenant.slug, k=k, mode=mode, json=True)
    return json.loads(out)


def test_eval_before_import_is_refused(tenant_a, locomo_file) -> None:
    with pytest.raises(CommandError, match="Import first"):
        run("eval_locomo", locomo_file, tenant=tenant_a.tenant.slug, json=True)


@pytest.mark.parametrize("k", ["0,5", "a,b", "1,101"])
def test_eval_refuses_bad_cutoffs(tenant_a, locomo_file, k) -> None:
    with pytest.raises(CommandError, match="--k"):
        run("eval_locomo", locomo_file, tenant=tenant_a.tenant.slug, k=k, json=True)


def test_eval_reports_recall_per_category_and_latency(tenant_a, locomo_file) -> None:
    run("import_locomo", locomo_file, tenant=tenant_a.tenant.slug)
    report = evaluate(tenant_a, locomo_file)
    assert report["mode"] == "keyword" and report["k"] == [1, 5]
    assert report["questions"] == 4
    assert set(report["recall"]) == {"multi-hop", "temporal", "open-domain", "single-hop",
                                     "overall"}
    assert report["count"] == {"multi-hop": 1, "temporal": 1, "open-domain": 1,
                               "single-hop": 1, "overall": 4}
    for by_k in report["recall"].values():
        assert set(by_k) == {"1", "5"}
        assert all(0.0 <= v <= 1.0 for v in by_k.values())
        assert by_k["1"] <= by_k["5"]
    # the evidence turn is the only one holding "Biscuit" and "Weimaraner"
    assert report["recall"]["single-hop"]["1"] == 1.0
    overall = report["recall"]["overall"]["5"]
    per_category = [report["recall"][c]["5"] for c in
                    ("multi-hop", "temporal", "open-domain", "single-hop")]
    assert overall == pytest.approx(sum(per_category) / 4, abs=1e-4)
    latency = report["latency_ms"]
    assert 0 < latency["p50"] <= latency["p95"]


def test_eval_reads_only_and_prints_a_table(tenant_a, locomo_file) -> None:
    run("import_locomo", locomo_file, tenant=tenant_a.tenant.slug)
    before = {m.pk: m.reference_count for m in project_memories(tenant_a, "conv-1").values()}
    out, _ = run("eval_locomo", locomo_file, tenant=tenant_a.tenant.slug, k="1,5",
                 mode="hybrid")
    lines = out.splitlines()
    assert lines[0] == "mode=hybrid threshold=None questions=4"
    assert lines[1].split() == ["category", "R@1", "R@5", "n"]
    assert [line.split()[0] for line in lines[2:7]] == [
        "multi-hop", "temporal", "open-domain", "single-hop", "overall"]
    assert lines[-1].startswith("latency ms: p50=")
    after = {m.pk: m.reference_count for m in project_memories(tenant_a, "conv-1").values()}
    assert after == before


@pytest.mark.parametrize("mode", ["semantic", "hybrid", "recall"])
def test_eval_runs_every_mode(tenant_a, locomo_file, mode) -> None:
    run("import_locomo", locomo_file, tenant=tenant_a.tenant.slug)
    out, _ = run("eval_locomo", locomo_file, tenant=tenant_a.tenant.slug, k="1,5",
                 mode=mode, json=True, threshold=0.0)
    report = json.loads(out)
    assert report["mode"] == mode and report["threshold"] == 0.0
    assert report["count"]["overall"] == 4
    assert report["recall"]["single-hop"]["5"] == 1.0
    assert all(0.0 <= v <= 1.0 for by_k in report["recall"].values() for v in by_k.values())


def test_load_samples_reads_the_file(locomo_file) -> None:
    samples = load_samples(locomo_file)
    assert [s["sample_id"] for s in samples] == ["conv-1", "conv-2"]


# --- conversation ingestion --------------------------------------------------------------

def test_ingest_locomo_feeds_sessions_and_eval_credits_the_cited_turns(tenant_a,
                                                                       locomo_file) -> None:
    out, _ = run("ingest_locomo", locomo_file, tenant=tenant_a.tenant.slug)
    assert "fed 11 turns of 2 conversations" in out and "(offline fallback)" in out
    with tenant_scope(tenant_a.ctx):
        stored = {m.content: m.metadata for m in Memory.objects.filter(project_id="conv-1")}
    biscuit = stored["Caroline: My dog Biscuit is a Weimaraner puppy."]
    assert biscuit["sourceMessages"] == ["D1:3"]
    assert biscuit["source"] == {"type": "conversation"}
    assert "Caroline: Hey Mel, how was your week?" not in stored  # a question is no fact
    report, _ = run("eval_locomo", locomo_file, tenant=tenant_a.tenant.slug, k="10",
                    mode="keyword", json=True)
    assert json.loads(report)["recall"]["single-hop"]["10"] == 1.0
