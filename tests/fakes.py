"""Fakes at the provider seam only. Each records what it is sent, so tests can check it."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from src.providers.protocols import TASK_TYPES

_WORD = re.compile(r"[a-z0-9]+")


def _word_vector(word: str, dims: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dims).astype(np.float32)


@dataclass
class EmbedCall:
    texts: list[str]
    task_type: str
    titles: list[str | None] | None


@dataclass
class HashEmbedder:
    """Bag-of-words embedder: texts sharing words point the same way, deterministically.

    `ignore` lists words it pretends not to understand (to build cases where the
    vector arm misses and only full text finds a memory); `alias` reads a word as another
    (a paraphrase it knows: "medicine" and "penicillin" both as "drug", so a question and a
    fact that share no word still point the same way). Records every call.
    """

    model_name: str = "fake-hash-768"
    dimensions: int = 768
    ignore: frozenset[str] = frozenset()
    alias: dict[str, str] = field(default_factory=dict)
    calls: list[EmbedCall] = field(default_factory=list)

    async def embed(self, texts: Sequence[str], task_type: str,
                    titles: Sequence[str | None] | None = None) -> np.ndarray:
        assert not isinstance(texts, str), "embed() takes a sequence of texts"
        assert task_type in TASK_TYPES, task_type
        if titles is not None:
            assert len(titles) == len(texts)
        self.calls.append(EmbedCall(list(texts), task_type, None if titles is None else list(titles)))
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for i, text in enumerate(texts):
            words = [self.alias.get(w, w) for w in _WORD.findall(text.lower()) if w not in self.ignore]
            for w in words or ["<empty>"]:
                out[i] += _word_vector(w, self.dimensions)
            out[i] /= np.linalg.norm(out[i])
        return out
