"""The language-model layer without a model: every purpose's offline fallback gives a useful
answer, the packaged weights are checked before use, and the ``llm`` breaker opens on a
failure rate (seed 001 MR-H2)."""

from __future__ import annotations

import contextlib
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from llm import weights
from llm.models import LlmUsage
from llm.purposes.graph import extract_graph
from llm.purposes.memories import Message, extract_memories
from llm.purposes.query import refine_query
from llm.purposes.summarize import Source, summarize
from memory_project.breaker import CircuitBreaker
from memory_project.errors import ConfigurationError, InvalidInput
from memory_project.management.commands.run_stack import _serves_local_model
from tenants.context import tenant_scope
from tests.contract import TenantApiContract


@pytest.mark.django_db
def test_every_purpose_answers_offline_and_says_so(tenant_a: Any) -> None:
    with tenant_scope(tenant_a.ctx):
        found = extract_graph(tenant_a.ctx, text="Maria works at Google in Lisbon since "
                                                 "March 2021.")
        summary = summarize(tenant_a.ctx, depth="sentence", sources=[
            Source("m1", "Maria works at Google in Lisbon."),
            Source("m2", "Maria likes jazz and plays the piano at Google events."),
            Source("m3", "The weather was nice.")])
        memories = extract_memories(
            tenant_a.ctx, reference_time=datetime(2023, 5, 8, 12, 0),
            messages=[Message("Maria", "Hi there!"),
                      Message("Maria", "I adopted a cat named Pixel yesterday. Do you like "
                                       "cats?")])
        refined = refine_query(tenant_a.ctx, query="Where does Maria work and what does "
                                                   "she play?")
        outcomes = list(LlmUsage.objects.values_list("purpose", "outcome"))
    assert found.fallback and {("Maria", "person"), ("Google", "organisation"), (
        "Lisbon", "place")} <= {(e.name, e.type) for e in found.value.entities}
    assert ("maria", "google", "WORKS_ON") in {(r.source, r.target, r.type)
                                               for r in found.value.relations}
    assert summary.fallback and summary.sentences[0].source_ids in (("m1",), ("m2",))
    assert [(m.text, m.occurred_on) for m in memories.value] == [
        ("Maria: I adopted a cat named Pixel yesterday.", "2023-05-07")]
    assert refined.fallback and refined.value.subqueries == (
        "Where does Maria work?", "what does she play?")
    assert {"Maria", "work", "play"} <= set(refined.value.keywords)
    assert sorted(outcomes) == [("graph", "fallback"), ("memories", "fallback"),
                                ("query", "fallback"), ("summarize", "fallback")]


@pytest.mark.django_db
def test_purposes_refuse_input_they_cannot_answer(tenant_a: Any) -> None:
    with tenant_scope(tenant_a.ctx):
        for call in (lambda: summarize(tenant_a.ctx, depth="novel", sources=[Source("1", "x")]),
                     lambda: summarize(tenant_a.ctx, depth="sentence", sources=[]),
                     lambda: extract_memories(tenant_a.ctx, messages=[],
                                              reference_time=datetime(2023, 1, 1)),
                     lambda: refine_query(tenant_a.ctx, query=" "),
                     lambda: refine_query(tenant_a.ctx, query="x" * 2001)):
            with pytest.raises(InvalidInput):
                call()


def _parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: list[bytes]) -> list[str]:
    """Installable-looking part modules in ``tmp_path``, each with ``get_part_path()``."""
    names = []
    for i, chunk in enumerate(chunks):
        name = f"fake_weights_part{i}_{tmp_path.name}"
        (tmp_path / f"{name}.bin").write_bytes(chunk)
        (tmp_path / f"{name}.py").write_text(
            "from pathlib import Path\n"
            f"def get_part_path():\n    return Path(__file__).with_name('{name}.bin')\n")
        names.append(name)
    monkeypatch.syspath_prepend(str(tmp_path))
    return names


def test_weights_are_joined_once_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             settings: Any) -> None:
    import hashlib

    settings.VAR_DIR = tmp_path / "var"
    modules = _parts(tmp_path, monkeypatch, [b"GGUF-part-one;", b"part-two"])
    good = hashlib.sha256(b"GGUF-part-one;part-two").hexdigest()
    monkeypatch.setitem(weights.MODELS, "tiny", weights.PackagedModel(
        "tiny", "tiny.gguf", tuple(modules), good, 22))
    path = weights.ensure_weights("tiny")
    assert path.read_bytes() == b"GGUF-part-one;part-two"
    assert path.parent == tmp_path / "var" / "models"

    monkeypatch.setitem(weights.MODELS, "tampered", weights.PackagedModel(
        "tampered", "tampered.gguf", tuple(modules), "0" * 64, 22))
    with pytest.raises(ConfigurationError, match="SHA-256"):
        weights.ensure_weights("tampered")
    assert not list((tmp_path / "var" / "models").glob("tampered*"))
    with pytest.raises(ConfigurationError, match="Unknown local model"):
        weights.ensure_weights("gpt-5")
    monkeypatch.setitem(weights.MODELS, "absent", weights.PackagedModel(
        "absent", "absent.gguf", ("no_such_weights_module",), None, None))
    with pytest.raises(ConfigurationError, match="not installed"):
        weights.ensure_weights("absent")
    for name in modules:
        sys.modules.pop(name, None)


def test_the_breaker_opens_on_five_percent_failures_of_at_least_twenty_calls() -> None:
    now = [0.0]
    breaker = CircuitBreaker("llm-test", fail_max=5, window_seconds=300, reset_seconds=30,
                             clock=lambda: now[0], failure_rate=0.05, min_calls=20)

    def call(fail: bool) -> None:
        def work() -> None:
            if fail:
                raise RuntimeError("model failed")
        with contextlib.suppress(RuntimeError):
            breaker.call(work)

    call(True)  # 1 of 1: too few calls for the rate
    assert breaker.current_state == "closed"
    for _ in range(18):
        now[0] += 1
        call(False)
    assert breaker.current_state == "closed"  # 1 failure in 19 calls
    now[0] += 1
    call(False)  # 1 in 20 = 5 %, but a success does not open
    now[0] += 1
    call(True)  # 2 in 21 ≥ 5 %
    assert breaker.current_state == "open"


def test_run_stack_serves_the_local_model_only_when_nothing_else_is_configured(
        settings: Any) -> None:
    settings.LLM_OFFLINE, settings.LLM_BASE_URL = False, ""
    settings.LLM_LOCAL_MODEL = "qwen2.5-coder-1.5b"
    assert _serves_local_model()
    settings.LLM_BASE_URL = "https://api.openai.com/v1"
    assert not _serves_local_model()
    settings.LLM_BASE_URL, settings.LLM_LOCAL_MODEL = "", "none"
    assert not _serves_local_model()


class TestLlmUsageApiContract(TenantApiContract):
    """The tenant API contract (``tests.contract``) for this module's endpoints."""

    operations = ('llm.usage',)
