"""Cross-encoder scores from a rerank server (plan §2.6), in one of two dialects.

    jina  POST {root}/v1/rerank  {"model", "query", "documents": [...]}
          → {"results": [{"index", "relevance_score"}, ...]}   llama.cpp --reranking, vLLM, Jina
    tei   POST {root}/rerank     {"query", "texts": [...], "truncate": true}
          → [{"index", "score"}, ...]                          text-embeddings-inference

`providers.rerank.dialect` picks one. Passages go in batches of `endpoint_batch_size` (a
cross-encoder scores each pair alone, so scores of different batches compare), each cut to
`max_length` × 4 characters; the scores come back in the order given, whatever order the
server sorts them in. Scores must lie in [0, 1] (the Reranker protocol; recall mixes them
with its weighted score): `endpoint_logits: true` squashes raw logits (llama.cpp's server)
with a sigmoid, and without it a score outside [0, 1] is ProviderRejected naming that
setting. Each request goes through the shared Resilience (retries, breaker); no ledger row,
as for FlashRank (a rerank is no model call of the budget's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import httpx2
from pydantic import SecretStr

from src.errors import MalformedOutput, ProviderError, ProviderRejected
from src.providers.endpoint_json import post_json
from src.providers.redact import Redactor
from src.providers.resilience import Resilience
from src.providers.settings import RerankSettings

PROVIDER = "rerank_endpoint"
#: characters per token, generously: text the model would read is never cut
CHARS_PER_TOKEN = 4


class EndpointReranker:
    """Reranker over a rerank HTTP endpoint."""

    skipped = False
    skip_reason: str | None = None

    def __init__(self, http: httpx2.AsyncClient, *, settings: RerankSettings, resilience: Resilience,
                 api_key: SecretStr | None = None, redactor: Redactor | None = None):
        """`http` has the server's root as its base URL (src/providers/endpoint_json.server_root)."""
        if settings.dialect == "jina" and not settings.endpoint_model:
            raise ValueError("providers.rerank.endpoint_model is not set (the jina dialect sends it)")
        self._http = http
        self._settings = settings
        self._resilience = resilience
        self._api_key = api_key
        self._redact = redactor or Redactor()
        self.name = f"endpoint {settings.endpoint_model or settings.dialect}"

    async def warm_up(self) -> None:
        """Nothing to load: the server holds the model."""

    async def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score in [0, 1] per passage, in the order given."""
        cut = self._settings.max_length * CHARS_PER_TOKEN
        texts = [p[:cut] for p in passages]
        scores: list[float] = []
        size = self._settings.endpoint_batch_size
        for start in range(0, len(texts), size):
            scores += await self._batch(query[:cut], texts[start:start + size])
        return scores

    def _request(self, query: str, texts: list[str]) -> tuple[str, dict]:
        if self._settings.dialect == "tei":
            return "rerank", {"query": query, "texts": texts, "truncate": True}
        return "v1/rerank", {"model": self._settings.endpoint_model, "query": query, "documents": texts,
                             "top_n": len(texts)}

    async def _batch(self, query: str, texts: list[str]) -> list[float]:
        path, body = self._request(query, texts)

        async def attempt() -> list[float]:
            try:
                data = await post_json(self._http, path, body, provider=PROVIDER, api_key=self._api_key)
                return self._parse(data, len(texts))
            except ProviderError as err:
                self._redact.error(err)
                raise

        return await self._resilience.call(attempt, what=f"rerank ({len(texts)} passages)")

    def _parse(self, data: object, n: int) -> list[float]:
        tei = self._settings.dialect == "tei"
        key = "score" if tei else "relevance_score"
        try:
            items = data if tei else data["results"]  # type: ignore[index]
            pairs = [(int(item["index"]), float(item[key])) for item in items]  # type: ignore[union-attr]
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            shape = "[{index, score}]" if tei else "results[{index, relevance_score}]"
            raise MalformedOutput(f"{PROVIDER} reply is not {shape} ({type(exc).__name__}: {exc})",
                                  provider=PROVIDER) from exc
        if sorted(i for i, _ in pairs) != list(range(n)):
            raise MalformedOutput(f"{PROVIDER} returned {len(pairs)} scores for {n} passages", provider=PROVIDER)
        scores = [0.0] * n
        for i, score in pairs:
            scores[i] = self._scaled(score)
        return scores

    def _scaled(self, score: float) -> float:
        if not math.isfinite(score):
            raise MalformedOutput(f"{PROVIDER} returned a non-finite score", provider=PROVIDER)
        if self._settings.endpoint_logits:
            return 1.0 / (1.0 + math.exp(-score)) if score >= 0 else math.exp(score) / (1.0 + math.exp(score))
        if not 0.0 <= score <= 1.0:
            raise ProviderRejected(f"{PROVIDER} returned the score {score:g}, outside [0, 1]: the server "
                                   "returns raw logits; set providers.rerank.endpoint_logits: true",
                                   provider=PROVIDER)
        return score
