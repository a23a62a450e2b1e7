"""Cross-encoder reranking with FlashRank (plan §2.6), from a local model folder only.

FlashRank downloads a model whenever `<cache_dir>/<model>/` is missing; we never let it:
`flashrank_missing()` checks the folder and its files first, and the factory falls back
to `SkippedReranker` with that reason. The Docker image puts the model there at build
time. Scoring is CPU-bound and runs through `asyncio.to_thread`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from src.errors import ProviderError
from src.providers.http_errors import short

log = logging.getLogger(__name__)

# Files FlashRank's pairwise loader opens besides the ONNX model itself.
TOKENIZER_FILES = ("tokenizer.json", "config.json", "tokenizer_config.json", "special_tokens_map.json")


def flashrank_model_file(model: str) -> str | None:
    """The ONNX file FlashRank expects for `model`, or None for a name it does not know."""
    from flashrank.Config import listwise_rankers, model_file_map

    if model in listwise_rankers:  # LLM listwise rankers need llama_cpp; not supported here
        return None
    return model_file_map.get(model)


def flashrank_missing(cache_dir: str | Path, model: str) -> str | None:
    """Why FlashRank cannot load `model` from `cache_dir` without a download; None when it can."""
    folder = Path(cache_dir) / model
    shown = os.path.join(str(cache_dir), model)  # as configured, e.g. ./data/models/flashrank/<model>
    model_file = flashrank_model_file(model)
    if model_file is None:
        return f"unknown FlashRank model {model!r}"
    if not folder.is_dir():
        return f"model folder missing: {shown}"
    absent = [name for name in (model_file, *TOKENIZER_FILES) if not (folder / name).is_file()]
    if absent:
        return f"model folder incomplete: {shown} lacks {', '.join(absent)}"
    return None


class FlashRankReranker:
    """Reranker over a FlashRank ONNX cross-encoder; scores are sigmoid(logit) in [0, 1]."""

    name = "flashrank"
    skipped = False
    skip_reason: str | None = None

    def __init__(self, cache_dir: str | Path, model: str = "ms-marco-MiniLM-L-12-v2",
                 max_length: int = 512):
        reason = flashrank_missing(cache_dir, model)
        if reason is not None:
            raise FileNotFoundError(reason)
        self.cache_dir = Path(cache_dir)
        self.model = model
        self.max_length = max_length
        self._ranker = None
        self._lock = asyncio.Lock()

    def _load(self):
        from flashrank import Ranker

        ranker = Ranker(model_name=self.model, cache_dir=str(self.cache_dir),
                        max_length=self.max_length, log_level="WARNING")
        log.info("loaded FlashRank %s from %s", self.model, self.cache_dir)
        return ranker

    async def warm_up(self) -> None:
        """Load the model now (in a thread) instead of on the first rerank."""
        if self._ranker is None:
            async with self._lock:
                if self._ranker is None:
                    try:
                        self._ranker = await asyncio.to_thread(self._load)
                    except Exception as exc:  # noqa: BLE001 - onnxruntime/tokenizers errors vary
                        raise ProviderError(f"FlashRank could not load {self.model}: "
                                            f"{type(exc).__name__}: {short(exc)}",
                                            provider=self.name) from exc

    async def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in the order given."""
        if not passages:
            return []
        await self.warm_up()
        try:
            return await asyncio.to_thread(self._score, query, list(passages))
        except Exception as exc:  # noqa: BLE001
            raise ProviderError(f"FlashRank failed: {type(exc).__name__}: {short(exc)}",
                                provider=self.name) from exc

    def _score(self, query: str, passages: list[str]) -> list[float]:
        from flashrank import RerankRequest

        request = RerankRequest(query=query, passages=[{"id": i, "text": p} for i, p in enumerate(passages)])
        scores = [0.0] * len(passages)
        for item in self._ranker.rerank(request):
            scores[item["id"]] = float(item["score"])
        return scores
