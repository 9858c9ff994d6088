"""The ONNX Runtime embedder gives the vectors sentence-transformers gives (issue: parity
cosine ≥ 0.999 on 1,000 LoCoMo texts), without importing torch to serve."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memories.embedding.embedders import SentenceTransformerEmbedder
from memories.embedding.onnx_runtime import OnnxEmbedder, export_onnx, onnx_path

DATA = Path(__file__).parent / "data" / "locomo_texts_1000.json"

pytestmark = pytest.mark.real_embedder


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    return OnnxEmbedder().load()


@pytest.mark.slow
def test_it_matches_the_sentence_transformers_vectors_on_1000_locomo_texts(onnx) -> None:
    texts = json.loads(DATA.read_text())["texts"]
    assert len(texts) == 1000
    ours = onnx.encode(texts)
    reference = SentenceTransformerEmbedder().encode(texts)
    cosine = (ours * reference).sum(axis=1)
    assert ours.shape == (1000, 384) and ours.dtype == np.float32
    assert cosine.min() >= 0.999, f"min cosine {cosine.min():.6f}"
    nearest = np.argsort(-(ours[:50] @ ours.T), axis=1)[:, :10]
    expected = np.argsort(-(reference[:50] @ reference.T), axis=1)[:, :10]
    assert (nearest[:, 0] == expected[:, 0]).all()


def test_a_text_gets_the_same_vector_alone_and_padded_in_a_batch(onnx) -> None:
    short = "hi"
    long = "Caroline: I went to a LGBTQ support group yesterday and it was so powerful."
    alone = onnx.encode([short])[0]
    batched = onnx.encode([long, short, long + " " + long])
    assert float(alone @ batched[1]) > 0.99999
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)


def test_it_keeps_the_order_of_the_texts(onnx) -> None:
    texts = ["a much longer text about pottery classes and camping", "short", "medium text here"]
    together = onnx.encode(texts)
    for index, text in enumerate(texts):
        assert float(together[index] @ onnx.encode([text])[0]) > 0.99999


def test_it_truncates_at_the_models_max_sequence_length(onnx) -> None:
    words = " ".join(f"word{i}" for i in range(2000))
    assert onnx.encode([words]).shape == (1, 384)
    assert float(onnx.encode([words])[0] @ onnx.encode([words + " tail"])[0]) > 0.99999


def test_the_export_is_reused_and_named_by_the_weights(onnx) -> None:
    path = export_onnx()
    assert path == onnx_path() and path.exists()
    assert "all-MiniLM-L6-v2-" in path.name and path.suffix == ".onnx"
    mtime = path.stat().st_mtime_ns
    assert export_onnx().stat().st_mtime_ns == mtime


def test_serving_does_not_import_torch(onnx) -> None:
    export_onnx()
    code = (
        "import os, sys, django; os.environ['DJANGO_SETTINGS_MODULE']='memory_project.settings';"
        "django.setup(); from memories.embedding.embedders import get_embedder;"
        "v = get_embedder().encode(['hello']); print(type(get_embedder()).__name__, v.shape,"
        " 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True, cwd=Path(__file__).parents[2])
    assert out.stdout.split()[-4:] == ["OnnxEmbedder", "(1,", "384)", "False"]


def test_it_falls_back_to_sentence_transformers_when_onnx_cannot_load(monkeypatch) -> None:
    from memories.embedding import onnx_runtime

    def broken(source: Path) -> None:
        raise OSError("read-only file system")

    monkeypatch.setattr(onnx_runtime, "_open", broken)
    embedder = OnnxEmbedder()
    vector = embedder.encode(["hello world"])
    assert vector.shape == (1, 384) and embedder.loaded
    assert isinstance(embedder._fallback, SentenceTransformerEmbedder)


def test_a_bulk_command_runs_its_own_count_of_batches_at_once(settings) -> None:
    from memories.embedding import onnx_runtime
    from memories.embedding.threads import model_threads, parallel_batches, use_threads

    settings.EMBEDDING_PARALLEL_BATCHES = 1
    assert parallel_batches() == 1
    with use_threads(3):
        assert parallel_batches() == 3 and model_threads() == 3
        _, session = onnx_runtime._open(onnx_runtime.weights_dir())
        # each batch runs on the configured intra-op threads: the cores come from batches
        assert session.get_session_options().intra_op_num_threads == \
            settings.EMBEDDING_TORCH_THREADS
    assert parallel_batches() == 1  # only inside the block
    settings.EMBEDDING_PARALLEL_BATCHES = 0
    assert parallel_batches() == (os.cpu_count() or 1)  # 0: one per core
    with pytest.raises(ValueError), use_threads(-1):
        pass


def test_batches_run_side_by_side_give_the_vectors_of_one_by_one(onnx, settings,
                                                                 monkeypatch) -> None:
    texts = json.loads(DATA.read_text())["texts"][:200]
    settings.EMBEDDING_PARALLEL_BATCHES = 1
    one_by_one = onnx.encode(texts)
    threads: set[int] = set()
    run = onnx._session.run

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.add(threading.get_ident())
        time.sleep(0.005)  # each batch outlasts the start of the next worker thread
        return run(*args, **kwargs)

    monkeypatch.setattr(onnx._session, "run", recording, raising=False)
    settings.EMBEDDING_PARALLEL_BATCHES = 3
    side_by_side = onnx.encode(texts)
    assert len(threads) == 3
    assert np.array_equal(side_by_side, one_by_one)
