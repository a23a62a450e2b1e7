"""Gemini embeddings (`gemini-embedding-001`, 768 dimensions) through google-genai's async client.

Gemini's `title` belongs to the whole request, not to each text, so texts are grouped by
title (first-appearance order) and each group is sent in chunks of at most `batch_size`
(100, the API's limit); results are put back in input order. Vectors at 768 dimensions are
not unit length from the API, so every row is L2-normalised here. Each API call, failed or
not, is one ledger row with purpose `embed:<TASK_TYPE>`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
from google import genai
from google.genai import types as genai_types

from src.errors import MalformedOutput
from src.providers.costs import Ledger
from src.providers.embedding import check_inputs, ledgered_batch, pad_and_normalise
from src.providers.gemini_errors import PROVIDER, map_gemini_error
from src.providers.protocols import TaskType
from src.providers.redact import Redactor
from src.providers.resilience import Clock, Resilience
from src.providers.settings import EmbeddingSettings
from src.tokens import count_tokens

CHARS_PER_TOKEN = 6


class GeminiEmbedder:
    """Embedder over the Gemini API."""

    provider = PROVIDER

    def __init__(self, client: genai.Client, *, resilience: Resilience, ledger: Ledger,
                 settings: EmbeddingSettings | None = None, redactor: Redactor | None = None,
                 clock: Clock = time.monotonic):
        """`settings`: `providers.embeddings`, of which it reads the Gemini model, the
        dimensions, the batch size and the Gemini input limit (their defaults without it)."""
        settings = settings or EmbeddingSettings()
        batch_size = settings.batch_size
        if not 1 <= batch_size <= 100:
            raise ValueError(f"batch_size must be between 1 and 100, got {batch_size}")
        self._client = client
        self._resilience = resilience
        self._ledger = ledger
        self._redact = redactor or Redactor()
        self._clock = clock
        self.model_name = settings.gemini_model
        self.dimensions = settings.dimensions
        self.batch_size = batch_size
        # Text past the model's input limit is never read by it: cut before sending, at
        # CHARS_PER_TOKEN characters a token (generous, so nothing it would read is cut).
        self.max_input_chars = settings.gemini_max_input_tokens * CHARS_PER_TOKEN

    async def embed(self, texts: Sequence[str], task_type: TaskType,
                    titles: Sequence[str | None] | None = None) -> np.ndarray:
        """(n, dimensions) float32, unit rows, input order; see the module docstring for batching."""
        per_text_titles = check_inputs(texts, task_type, titles)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        groups: dict[str | None, list[int]] = {}
        for i, title in enumerate(per_text_titles):
            groups.setdefault(title, []).append(i)
        for title, indices in groups.items():
            for start in range(0, len(indices), self.batch_size):
                chunk = indices[start:start + self.batch_size]
                out[chunk] = await self._embed_batch([texts[i][:self.max_input_chars] for i in chunk],
                                                     task_type, title)
        return out

    async def _embed_batch(self, batch: list[str], task_type: TaskType, title: str | None) -> np.ndarray:
        purpose = f"embed:{task_type}"
        config = genai_types.EmbedContentConfig(
            task_type=task_type, output_dimensionality=self.dimensions, title=title)

        async def call_once() -> tuple[np.ndarray, int]:
            try:
                response = await self._client.aio.models.embed_content(
                    model=self.model_name, contents=batch, config=config)
            except Exception as exc:  # noqa: BLE001 - mapped in one place, raised typed
                raise map_gemini_error(exc) from exc
            return self._parse(response, batch)

        return await ledgered_batch(call_once, resilience=self._resilience, ledger=self._ledger,
                                    redact=self._redact, provider=PROVIDER, model=self.model_name,
                                    purpose=purpose, what=f"embed ({len(batch)} texts, {task_type})")

    def _parse(self, response: genai_types.EmbedContentResponse, batch: list[str]) -> tuple[np.ndarray, int]:
        embeddings = response.embeddings or []
        if len(embeddings) != len(batch):
            raise MalformedOutput(f"gemini returned {len(embeddings)} embeddings for {len(batch)} texts",
                                  provider=PROVIDER)
        rows = [e.values or [] for e in embeddings]
        bad = [len(r) for r in rows if len(r) != self.dimensions]
        if bad:
            raise MalformedOutput(f"gemini returned a {bad[0]}-dimensional embedding; "
                                  f"asked for {self.dimensions}", provider=PROVIDER)
        try:
            vectors = pad_and_normalise(np.asarray(rows, dtype=np.float32), self.dimensions)
        except ValueError as exc:
            raise MalformedOutput(f"gemini returned an unusable embedding: {exc}", provider=PROVIDER) from exc
        usage = response.usage_metadata
        tokens = getattr(usage, "prompt_token_count", None) if usage is not None else None
        if tokens is None:
            tokens = sum(count_tokens(t) for t in batch)
        return vectors, int(tokens)
