"""What every embedder shares: the memory-type prefixes (plan §2.1), input checks, padding.

Storage embeds `MEMORY_TYPE_PREFIXES[type] + content` with task RETRIEVAL_DOCUMENT and
`title=memory_type`; queries embed the bare text with RETRIEVAL_QUERY; novelty checks use
SEMANTIC_SIMILARITY; consolidation clustering uses CLUSTERING.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from src.errors import MalformedOutput, ProviderError
from src.providers.costs import CallUsage, Ledger, status_of
from src.providers.protocols import TASK_TYPES, Embedder

MEMORY_TYPE_PREFIXES: dict[str, str] = {
    "episodic": "Personal experience memory: ",
    "semantic": "Factual knowledge: ",
    "procedural": "How-to instruction: ",
    "preference": "User preference: ",
    "reflection": "Self-reflection insight: ",
    "correction": "Past error correction: ",
    "narrative": "Identity narrative: ",
    "tension": "Internal contradiction: ",
}


def storage_text(content: str, memory_type: str) -> str:
    """The text embedded for a stored memory: its type prefix, then the content."""
    try:
        prefix = MEMORY_TYPE_PREFIXES[memory_type]
    except KeyError:
        known = ", ".join(MEMORY_TYPE_PREFIXES)
        raise ValueError(f"unknown memory type {memory_type!r}; expected one of: {known}") from None
    return prefix + content


async def embed_memories(
    embedder: Embedder, contents: Sequence[str], memory_types: Sequence[str]
) -> np.ndarray:
    """Embed memories for storage: prefix by type, RETRIEVAL_DOCUMENT, title = memory type."""
    if len(contents) != len(memory_types):
        raise ValueError(f"{len(contents)} contents but {len(memory_types)} memory types")
    texts = [storage_text(c, t) for c, t in zip(contents, memory_types, strict=True)]
    return await embedder.embed(texts, "RETRIEVAL_DOCUMENT", titles=list(memory_types))


async def embed_for_novelty(
    embedder: Embedder, contents: Sequence[str], memory_types: Sequence[str]
) -> np.ndarray:
    """Embed candidates for a novelty check (plan §2.1): SEMANTIC_SIMILARITY, no title.

    The text is the one storage embeds (type prefix + content), so the only
    difference from the stored vector is the task the model optimises for.
    """
    if len(contents) != len(memory_types):
        raise ValueError(f"{len(contents)} contents but {len(memory_types)} memory types")
    texts = [storage_text(c, t) for c, t in zip(contents, memory_types, strict=True)]
    return await embedder.embed(texts, "SEMANTIC_SIMILARITY")


async def embed_for_clustering(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Embed texts to group them (consolidation, plan §2.1, §4.2): task type CLUSTERING."""
    return await embedder.embed(list(texts), "CLUSTERING")


def check_inputs(
    texts: Sequence[str], task_type: str, titles: Sequence[str | None] | None
) -> list[str | None]:
    """Validate an embed request; return one title per text (None where absent).

    Empty texts are refused: they have no direction, and a zero vector breaks cosine.
    Titles only mean something for RETRIEVAL_DOCUMENT (the Gemini API's rule too).
    """
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single string")
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}; expected one of: {', '.join(TASK_TYPES)}")
    for i, text in enumerate(texts):
        if not text.strip():
            raise ValueError(f"cannot embed an empty text (index {i})")
    if titles is None:
        return [None] * len(texts)
    if len(titles) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(titles)} titles")
    if task_type != "RETRIEVAL_DOCUMENT" and any(t is not None for t in titles):
        raise ValueError("titles are only allowed with task type RETRIEVAL_DOCUMENT")
    return list(titles)


def pad_and_normalise(vectors: np.ndarray, dimensions: int) -> np.ndarray:
    """Zero-pad rows to `dimensions` (cosine is unchanged) and scale each to unit length."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] > dimensions:
        raise ValueError(f"expected (n, <= {dimensions}) vectors, got shape {vectors.shape}")
    out = np.zeros((vectors.shape[0], dimensions), dtype=np.float32)
    out[:, : vectors.shape[1]] = vectors
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    if np.any(norms == 0) or not np.all(np.isfinite(norms)):
        raise ValueError("an embedding has zero or non-finite length")
    return out / norms


async def offline_vectors(run: Callable[[list[str]], np.ndarray], texts: Sequence[str], *, max_chars: int,
                          dimensions: int, provider: str) -> np.ndarray:
    """An in-process model's rows for `texts` (wordllama, MiniLM): each text cut to `max_chars`
    first (tokenizing a megabyte only to keep its opening tokens is wasted work), `run` in a
    worker thread (CPU work stays off the event loop), zero-padded to `dimensions` and
    L2-normalised; an unusable row is MalformedOutput, a provider failure like any other."""
    raw = await asyncio.to_thread(run, [t[:max_chars] for t in texts])
    try:
        return pad_and_normalise(raw, dimensions)
    except ValueError as exc:
        raise MalformedOutput(f"{provider} produced an unusable embedding: {exc}", provider=provider) from exc


async def ledgered_batch(call_once: Callable[[], Awaitable[tuple[np.ndarray, int]]], *, resilience, ledger: Ledger,
                         redact, provider: str, model: str, purpose: str, what: str) -> np.ndarray:
    """One embedding batch through the resilience wrapper (retries, breaker), its errors'
    secrets redacted, and one ledger row per attempt; `call_once` returns (vectors, tokens in).
    The remote embedders share it (src/providers/embed_gemini.py, embed_endpoint.py)."""
    async def attempt() -> tuple[np.ndarray, int]:
        try:
            return await call_once()
        except ProviderError as err:
            redact.error(err)
            raise

    async def on_success(result: tuple[np.ndarray, int], latency_ms: float) -> None:
        await ledger.record(provider=provider, model=model, purpose=purpose, ok=True,
                            usage=CallUsage(tokens_in=result[1], latency_ms=latency_ms))

    async def on_failure(err: ProviderError, latency_ms: float) -> None:
        await ledger.record(provider=provider, model=model, purpose=purpose, ok=False,
                            usage=CallUsage(latency_ms=latency_ms), error=f"{type(err).__name__}: {err}",
                            status=status_of(err))

    vectors, _ = await resilience.call(attempt, what=what, on_success=on_success, on_failure=on_failure)
    return vectors
