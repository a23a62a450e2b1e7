"""Offline embeddings with WordLlama (weights inside the wheel, numpy only, 256-d).

Loaded with `cache_dir` pointing at the installed package and downloads disabled, so it
never touches the network. Vectors are zero-padded to 768 (cosine is unchanged) and
L2-normalised. WordLlama has no task types or titles: they are accepted and ignored
(the memory-type prefix is already in the text). Free, so nothing goes to the ledger.
The model loads on first use in a worker thread; CPU work always runs via to_thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from src.providers.embedding import check_inputs, offline_vectors
from src.providers.protocols import TaskType

log = logging.getLogger(__name__)


def wordllama_package_dir() -> Path:
    """The installed wordllama package: it holds weights/ and tokenizers/."""
    import wordllama

    return Path(wordllama.__file__).parent


def wordllama_weights(config: str = "l2_supercat", dim: int = 256) -> Path:
    """Where the wheel keeps the weights for `config` at `dim` dimensions."""
    return wordllama_package_dir() / "weights" / f"{config}_{dim}.safetensors"


def wordllama_model_name(config: str = "l2_supercat", dim: int = 256) -> str:
    """The `embed_model` tag, e.g. 'wordllama-l2-supercat-256'."""
    return f"wordllama-{config.replace('_', '-')}-{dim}"


class WordLlamaEmbedder:
    """Embedder that runs on the CPU with no network and no key."""

    provider = "wordllama"

    def __init__(self, *, config: str = "l2_supercat", dim: int = 256, dimensions: int = 768,
                 max_tokens: int = 2048):
        if dim > dimensions:
            raise ValueError(f"wordllama dim {dim} exceeds the column width {dimensions}")
        self.config = config
        self.dim = dim
        self.dimensions = dimensions
        self.model_name = wordllama_model_name(config, dim)
        self.max_tokens = max_tokens
        self._model = None
        self._lock = asyncio.Lock()

    def _load(self):
        from wordllama import WordLlama

        model = WordLlama.load(config=self.config, dim=self.dim, cache_dir=wordllama_package_dir(),
                               disable_download=True)
        # The library pads a batch to its longest text and never truncates: one megabyte line
        # made every row of its batch a megabyte of tokens (GBs). Cap the tokens per text.
        model.tokenizer.enable_truncation(max_length=self.max_tokens)
        log.info("loaded %s", self.model_name)
        return model

    async def warm_up(self) -> None:
        """Load the model now (in a thread) instead of on the first embed."""
        if self._model is None:
            async with self._lock:
                if self._model is None:
                    self._model = await asyncio.to_thread(self._load)

    async def embed(self, texts: Sequence[str], task_type: TaskType,
                    titles: Sequence[str | None] | None = None) -> np.ndarray:
        """(n, dimensions) float32, unit rows, input order."""
        check_inputs(texts, task_type, titles)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        await self.warm_up()
        # a token is rarely longer than 8 characters
        return await offline_vectors(lambda cut: self._model.embed(cut, norm=False), texts,
                                     max_chars=self.max_tokens * 8, dimensions=self.dimensions, provider=self.provider)
