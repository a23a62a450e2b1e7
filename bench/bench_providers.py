"""Provider benchmarks: offline embeddings per second, FlashRank rerank latency.

    python -m bench.bench_providers

- WordLlama (the offline embedder) through its async API (worker thread, padding,
  normalisation included): texts per second at batch 1 and batch 100.
- FlashRank reranking 20 passages with the tiny ONNX cross-encoder the tests build
  (tests/providers/tiny_cross_encoder.py), so this measures FlashRank's own path
  (tokenisation, onnxruntime, sorting, thread hop), not a real MiniLM's compute.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

WORDS = ("memory user prefers jazz piano morning coffee travel paris database vector cat sleeps "
         "garden rain book reading code test bug weather mountain sea").split()


def _sentences(n: int, offset: int = 0) -> list[str]:
    return [" ".join(WORDS[(i * 7 + j + offset) % len(WORDS)] for j in range(12)) for i in range(n)]


async def _embeddings_per_second(batch: int, texts_total: int) -> float:
    from src.providers.embed_wordllama import WordLlamaEmbedder

    embedder = WordLlamaEmbedder()
    await embedder.warm_up()
    await embedder.embed(_sentences(batch), "RETRIEVAL_DOCUMENT")  # first call out of the timing
    batches = [_sentences(batch, offset=k) for k in range(texts_total // batch)]
    started = time.perf_counter()
    for texts in batches:
        await embedder.embed(texts, "RETRIEVAL_DOCUMENT")
    return batch * len(batches) / (time.perf_counter() - started)


async def _rerank_latencies(runs: int) -> list[float]:
    from src.providers.rerank_flashrank import FlashRankReranker
    from tests.providers.tiny_cross_encoder import build_tiny_cross_encoder

    with tempfile.TemporaryDirectory() as cache:
        build_tiny_cross_encoder(Path(cache))
        reranker = FlashRankReranker(cache)
        await reranker.warm_up()
        passages = _sentences(20)
        await reranker.rerank("where does the cat sleep", passages)
        latencies = []
        for i in range(runs):
            started = time.perf_counter()
            await reranker.rerank(f"{WORDS[i % len(WORDS)]} cat sleeps", passages)
            latencies.append((time.perf_counter() - started) * 1000.0)
    return latencies


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _run() -> list[dict]:
    single = await _embeddings_per_second(1, 300)
    hundred = await _embeddings_per_second(100, 3000)
    latencies = await _rerank_latencies(200)
    return [
        {"name": "offline embeddings (wordllama), batch 1", "value": round(single, 1), "unit": "texts/s"},
        {"name": "offline embeddings (wordllama), batch 100", "value": round(hundred, 1), "unit": "texts/s"},
        {"name": "rerank 20 passages (FlashRank, tiny test model) p50",
         "value": round(statistics.median(latencies), 2), "unit": "ms"},
        {"name": "rerank 20 passages (FlashRank, tiny test model) p95",
         "value": round(_percentile(latencies, 0.95), 2), "unit": "ms"},
    ]


def run() -> list[dict]:
    """Measure and return rows {name, value, unit}."""
    return asyncio.run(_run())


def format_rows(rows: list[dict]) -> str:
    width = max(len(r["name"]) for r in rows)
    return "\n".join(f"{r['name']:<{width}}  {r['value']:>10}  {r['unit']}" for r in rows)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    logging.basicConfig(level=logging.WARNING)
    print(format_rows(run()))
