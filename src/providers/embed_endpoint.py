"""Embeddings from an OpenAI-compatible server: `POST {root}/v1/embeddings`, `{"model", "input"}`.

Ollama, llama.cpp's `llama-server --embedding`, vLLM and text-embeddings-inference all speak
it (`providers.embeddings.provider: openai_compat`, README "Embeddings and rerank from a local
server"). Texts go in batches of at most `openai_batch_size` (default 32, TEI's own cap), each
cut to `openai_max_input_chars` first and preceded by its task type's `openai_task_prefixes`
entry (the API has no task types). Each batch is one call through the shared Resilience
(retries, breaker; timeout `openai_timeout_s`) and one ledger row `embed:<TASK_TYPE>` ($0
unless the model is priced). The reply's rows are put in input order by their `index`; a
reply with another count of vectors, a missing index or a non-numeric row is MalformedOutput.

Dimensions, the stated decision (notes.md, "### providers"): the memories column is
`halfvec(768)`.
- Wider vectors (1024 of mxbai-embed-large or bge-large, 4096 of Qwen3-Embedding-8B) keep
  their first 768 components and are re-normalised: Matryoshka truncation. For models
  trained for it (nomic-embed-text v1.5, mxbai-embed-large, Qwen3-Embedding, jina v3) it is
  their intended shortening; for others it loses information, which `python -m src.memory
  calibrate` shows (near-duplicates and unrelated pairs overlap).
- Narrower vectors (384 of all-MiniLM or bge-small) are zero-padded to 768, the convention
  the offline embedders already follow (MiniLM's 384-d and wordllama's 256-d rows are stored
  that way, `pad_and_normalise`): cosine is unchanged, so no width is refused.
- The first reply's width is remembered; a later reply of another width means the model
  behind the name changed, and its vectors cannot be compared with the stored ones:
  ProviderRejected, naming the fix (another `openai_model` name, or `reindex --all`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import httpx2
import numpy as np
from pydantic import SecretStr

from src.errors import MalformedOutput, ProviderRejected
from src.providers.costs import Ledger
from src.providers.embedding import check_inputs, ledgered_batch, pad_and_normalise
from src.providers.endpoint_json import post_json
from src.providers.protocols import TaskType
from src.providers.redact import Redactor
from src.providers.resilience import Clock, Resilience
from src.providers.settings import EmbeddingSettings
from src.tokens import count_tokens

PROVIDER = "openai_compat_embed"
PATH = "v1/embeddings"


def fit_width(rows: np.ndarray, dimensions: int) -> np.ndarray:
    """Rows cut to their first `dimensions` components (Matryoshka) or zero-padded to them,
    then each scaled to unit length; ValueError for a zero or non-finite row."""
    rows = np.asarray(rows, dtype=np.float32)
    if rows.ndim == 2 and rows.shape[1] > dimensions:
        rows = rows[:, :dimensions]
    return pad_and_normalise(rows, dimensions)


class EndpointEmbedder:
    """Embedder over an OpenAI-compatible `/v1/embeddings` endpoint."""

    provider = PROVIDER

    def __init__(self, http: httpx2.AsyncClient, *, settings: EmbeddingSettings, resilience: Resilience,
                 ledger: Ledger, api_key: SecretStr | None = None, redactor: Redactor | None = None,
                 clock: Clock = time.monotonic):
        """`http` has the server's root as its base URL (src/providers/endpoint_json.server_root)."""
        if not settings.openai_model:
            raise ValueError("providers.embeddings.openai_model is not set")
        self._http = http
        self._settings = settings
        self._resilience = resilience
        self._ledger = ledger
        self._api_key = api_key
        self._redact = redactor or Redactor()
        self._clock = clock
        self.model_name = settings.openai_model
        self.dimensions = settings.dimensions
        self.batch_size = settings.openai_batch_size
        #: the width the server's vectors have (known after the first reply)
        self.native_dimensions: int | None = None

    async def embed(self, texts: Sequence[str], task_type: TaskType,
                    titles: Sequence[str | None] | None = None) -> np.ndarray:
        """(n, dimensions) float32, unit rows, input order. Titles are accepted and not sent
        (the API has none; storage puts the memory type in the text)."""
        check_inputs(texts, task_type, titles)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        prefix = self._settings.openai_task_prefixes.get(task_type, "")
        cut = self._settings.openai_max_input_chars
        for start in range(0, len(texts), self.batch_size):
            batch = [prefix + t[:cut] for t in texts[start:start + self.batch_size]]
            out[start:start + len(batch)] = await self._embed_batch(batch, task_type)
        return out

    async def _embed_batch(self, batch: list[str], task_type: TaskType) -> np.ndarray:
        purpose = f"embed:{task_type}"
        body = {"model": self.model_name, "input": batch}

        async def call_once() -> tuple[np.ndarray, int]:
            return self._parse(await post_json(self._http, PATH, body, provider=PROVIDER, api_key=self._api_key),
                               batch)

        return await ledgered_batch(call_once, resilience=self._resilience, ledger=self._ledger,
                                    redact=self._redact, provider=PROVIDER, model=self.model_name,
                                    purpose=purpose, what=f"embed ({len(batch)} texts, {task_type})")

    def _parse(self, data: object, batch: list[str]) -> tuple[np.ndarray, int]:
        """The reply's vectors in input order, fitted to the column, and its token count."""
        try:
            items = data["data"]  # type: ignore[index]
            order = [int(item.get("index", i)) for i, item in enumerate(items)]
            rows = [[float(x) for x in item["embedding"]] for item in items]
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedOutput(f"{PROVIDER} reply lacks data[].embedding as numbers "
                                  f"({type(exc).__name__}: {exc})", provider=PROVIDER) from exc
        if sorted(order) != list(range(len(batch))):
            raise MalformedOutput(f"{PROVIDER} returned {len(rows)} embeddings for {len(batch)} texts "
                                  f"(indices {sorted(order)[:5]}…)", provider=PROVIDER)
        widths = {len(r) for r in rows}
        if len(widths) != 1:
            raise MalformedOutput(f"{PROVIDER} returned vectors of different widths {sorted(widths)}",
                                  provider=PROVIDER)
        self._check_width(widths.pop())
        by_index = dict(zip(order, rows, strict=True))
        ordered = [by_index[i] for i in range(len(batch))]
        try:
            vectors = fit_width(np.asarray(ordered, dtype=np.float32), self.dimensions)
        except ValueError as exc:
            raise MalformedOutput(f"{PROVIDER} returned an unusable embedding: {exc}", provider=PROVIDER) from exc
        usage = data.get("usage") if isinstance(data, dict) else None
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if not isinstance(tokens, int):
            tokens = sum(count_tokens(t) for t in batch)
        return vectors, tokens

    def _check_width(self, width: int) -> None:
        if width == 0:
            raise MalformedOutput(f"{PROVIDER} returned empty vectors", provider=PROVIDER)
        if self.native_dimensions is None:
            self.native_dimensions = width
            return
        if width != self.native_dimensions:
            raise ProviderRejected(
                f"{PROVIDER}: {self.model_name} answered with {width}-wide vectors after "
                f"{self.native_dimensions}-wide ones: the model behind the name changed; name it "
                "differently in providers.embeddings.openai_model (the store is re-embedded at start) "
                "or run `python -m src.memory reindex --all`", provider=PROVIDER)
