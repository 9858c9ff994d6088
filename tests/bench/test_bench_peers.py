"""``make bench-peers`` without mem0: the runner reads LoCoMo and scores recall@k exactly as
``import_locomo``/``eval_locomo`` do, refuses the network, and the table prints its figures."""

from __future__ import annotations

import json
import socket
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench import locomo
from bench.management.commands.bench_peers import DEFAULT_LOCOMO, run_mem0
from bench.peers import mem0_runner as runner
from bench.peers.report import category_table, summary_table

SAMPLE: dict[str, Any] = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_2_date_time": "10:00 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "  I started pottery.  "},
            {"speaker": "Ann", "dia_id": "D2:2", "text": "   "},  # empty: skipped
            {"speaker": "Ann", "text": "no dia_id: skipped"},
        ],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "My dog is a puppy.",
             "blip_caption": "a grey dog"},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "So cute."},
        ],
    },
    "qa": [
        {"question": "What pet?", "answer": "dog", "evidence": ["D1:1"], "category": 4},
        {"question": "When pottery?", "evidence": ["D2:1; D1:2", "D2:1"], "category": 2},
        {"question": "Adversarial", "evidence": ["D1:1"], "category": 5},  # not retrieval
        {"question": "No evidence", "evidence": [], "category": 1},
        {"question": "Both", "evidence": ["D1:1", "D2:1"], "category": 1},
    ],
}


def test_it_reads_turns_and_questions_like_the_service() -> None:
    got = list(runner.turns(SAMPLE))
    assert [(t.dia_id, t.session, t.content) for t in got] == [
        ("D1:1", 1, "Ann: My dog is a puppy. [shares an image: a grey dog]"),
        ("D1:2", 1, "Bob: So cute."),
        ("D2:1", 2, "Bob: I started pottery."),
    ]
    theirs = list(locomo.turns(SAMPLE))
    assert [(t.dia_id, t.content, t.metadata()["sessionDate"]) for t in theirs] == [
        (t.dia_id, t.content, t.session_date) for t in got]
    asked = list(runner.questions(SAMPLE))
    assert [(q.question, q.category, q.evidence) for q in asked] == [
        ("What pet?", 4, ("D1:1",)), ("When pottery?", 2, ("D2:1", "D1:2")),
        ("Both", 1, ("D1:1", "D2:1")),
    ]
    assert asked == [runner.Question(q.sample_id, q.question, q.category, q.evidence)
                     for q in locomo.questions(SAMPLE)]


@pytest.mark.skipif(not DEFAULT_LOCOMO.exists(), reason="no LoCoMo dev file")
def test_it_reads_the_dev_file_like_the_service() -> None:
    samples = runner.load_samples(DEFAULT_LOCOMO)
    mine = [(t.sample_id, t.dia_id, t.content) for s in samples for t in runner.turns(s)]
    theirs = [(t.sample_id, t.dia_id, t.content) for s in samples for t in locomo.turns(s)]
    assert mine == theirs and len(mine) > 100
    assert [tuple(vars(q).values()) for s in samples for q in runner.questions(s)] == [
        tuple(vars(q).values()) for s in samples for q in locomo.questions(s)]


@pytest.mark.parametrize(("retrieved", "evidence", "k", "expected"), [
    (["D1:1", "D1:2", "D2:1"], ("D2:1",), 1, 0.0),
    (["D1:1", "D1:2", "D2:1"], ("D2:1",), 3, 1.0),
    (["D1:1", "D1:2", "D2:1"], ("D1:1", "D2:1"), 2, 0.5),
    (["D1:1", "D1:1"], ("D1:1", "D2:1"), 10, 0.5),  # a turn found twice counts once
    ([], ("D1:1",), 5, 0.0),
])
def test_it_scores_recall_at_k_as_eval_locomo(retrieved: list[str], evidence: tuple[str, ...],
                                               k: int, expected: float) -> None:
    assert runner.recall_at_k(retrieved, evidence, k) == expected
    assert locomo.recall_at_k(retrieved, evidence, k) == expected


def test_it_reports_per_category_and_overall() -> None:
    asked = list(runner.questions(SAMPLE))  # single-hop D1:1; temporal D2:1+D1:2; multi-hop
    scores = runner.Scores([1, 5])
    scores.add(asked[0], ["D1:1"], 10.0)
    scores.add(asked[1], ["D1:1", "D2:1"], 20.0)
    scores.add(asked[2], ["D2:2", "D1:2", "D2:1"], 40.0)
    report = scores.report()
    assert report["recall"] == {
        "single-hop": {"1": 1.0, "5": 1.0},
        "temporal": {"1": 0.0, "5": 0.5},
        "multi-hop": {"1": 0.0, "5": 0.5},
        "overall": {"1": 0.3333, "5": 0.6667},
    }
    assert report["count"] == {"single-hop": 1, "temporal": 1, "multi-hop": 1, "overall": 3}
    assert report["latency_ms"] == {"p50": 20.0,
                                    "p95": round(float(np.percentile([10, 20, 40], 95)), 2)}


def test_it_refuses_connections_that_leave_the_machine() -> None:
    guard = runner.NetworkGuard()
    restore = guard.install()
    try:
        with pytest.raises(OSError, match="network disabled"):
            socket.getaddrinfo("huggingface.co", 443)
        with socket.socket() as sock, pytest.raises(OSError, match="network disabled"):
            sock.connect(("203.0.113.7", 443))
        with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
            sock.connect(("127.0.0.1", 9))  # loopback passes the guard (nothing listens)
    finally:
        restore()
    assert guard.attempts == ["resolve 'huggingface.co'", "connect 203.0.113.7:443"]
    assert socket.getaddrinfo("127.0.0.1", 80)


SYSTEMS: list[dict[str, Any]] = [
    {"system": "this service (hybrid)", "ingest_turns_per_s": 61.23,
     "latency_ms": {"p50": 31.04, "p95": 58.0}, "steal": "steal 3%, load 1.2",
     "recall": {"overall": {"1": 0.25, "5": 0.5, "10": 0.75},
                "temporal": {"10": 0.8}, "single-hop": {"10": 0.7}},
     "count": {"overall": 3, "temporal": 1, "single-hop": 2}},
    {"system": "mem0 2.2.1 (infer=False)", "ingest_turns_per_s": 18.8,
     "latency_ms": {"p50": 48.03, "p95": 72.0},
     "recall": {"overall": {"1": 0.1548, "5": 0.3532, "10": 0.4675},
                "temporal": {"10": 0.619}, "single-hop": {"10": 0.4868}},
     "count": {"overall": 3, "temporal": 1, "single-hop": 2}},
    {"system": "peer that failed", "error": "timed out after 5 s"},
]


def test_it_prints_one_row_per_system() -> None:
    lines = summary_table(SYSTEMS)
    assert lines[0].split() == ["system", "ingest", "turns/s", "p50", "ms", "p95", "ms",
                                "R@1", "R@5", "R@10", "steal"]
    assert lines[2].split() == ["this", "service", "(hybrid)", "61.2", "31.0", "58.0", "0.250",
                                "0.500", "0.750", "steal", "3%,", "load", "1.2"]
    assert lines[3].split() == ["mem0", "2.2.1", "(infer=False)", "18.8", "48.0", "72.0",
                                "0.155", "0.353", "0.468"]
    assert lines[4] == f"{'peer that failed':<24}  failed: timed out after 5 s"
    end = lines[0].index("R@10") + len("R@10")  # the columns line up under their headers
    assert lines[2].index("0.750") + 5 == lines[3].index("0.468") + 5 == end
    assert lines[2].index("61.2") + 4 == lines[0].index("turns/s") + len("turns/s")


def test_it_prints_recall_at_10_per_category_side_by_side() -> None:
    lines = category_table(SYSTEMS)
    assert "this service (hybrid)" in lines[0] and "mem0 2.2.1 (infer=False)" in lines[0]
    assert "peer that failed" not in lines[0]
    assert [line.split() for line in lines[2:]] == [
        ["temporal", "1", "0.800", "0.619"],
        ["single-hop", "2", "0.700", "0.487"],
        ["overall", "3", "0.750", "0.468"],
    ]


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_it_reads_the_runners_json_and_reports_its_failures(tmp_path: Path) -> None:
    report = {"system": "mem0 9", "recall": {"overall": {"10": 0.5}}}
    ok = _script(tmp_path, f"echo progress >&2; echo '{json.dumps(report)}'")
    assert run_mem0(ok, DEFAULT_LOCOMO, timeout=30, threshold=0.1, torch_threads=1) == report
    assert "missing" in run_mem0(tmp_path / "nope", DEFAULT_LOCOMO, timeout=30, threshold=0.1,
                                 torch_threads=1)["error"]
    slow = _script(tmp_path, "exec sleep 5")
    assert run_mem0(slow, DEFAULT_LOCOMO, timeout=0.5, threshold=0.1,
                    torch_threads=1) == {"error": "timed out after 0.5 s"}
    failing = _script(tmp_path, "exit 3")
    assert run_mem0(failing, DEFAULT_LOCOMO, timeout=30, threshold=0.1,
                    torch_threads=1)["error"].startswith("runner exited with 3")
