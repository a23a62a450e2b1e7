"""Recall on the committed evaluation set (bench/data, made by bench/recall_dataset.py).

    python -m bench recall                 # part of `make bench`
    python -m bench.bench_recall --tune    # the grid behind runtime.yaml's arms for this model

Imports the 2,395 memories through the CLI's bulk path with the configured embedder
(offline: MiniLM; `MOLTBOT_CONFIG` names another runtime.yaml), then asks the 324
questions and reports evidence recall@5/10/20 (the share of a question's evidence in
the top k, averaged) for:

- the vector arm alone and the full-text arm alone (the hybrid statement with the
  other arm's weight and recency at 0);
- the bare hybrid statement with the configured arm weights and rrf_k;
- the full pipeline (spreading, ACT-R, Dirichlet relevance; read-only, mean of 3 seeds)
  without rerank, and with rerank when a reranker model is installed.

`now` is fixed one day after the last session, so recency is reproducible.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench.common import bench_pool
from src.config import load_settings
from src.memory.jsonl import parse_line
from src.providers.factory import build_providers
from src.recall.bulk_import import write_batch
from src.recall.relevance import SEMANTIC_SIGNALS
from src.recall.retrieval import Cue, Retriever
from src.recall.search import search_hybrid
from src.recall.settings import RetrievalSettings
from src.weights.safety import Safety

DATA = Path(__file__).parent / "data"
NOW = datetime(2026, 11, 1, 18, 0, tzinfo=UTC)
KS = (5, 10, 20)
#: The pipeline's rows are the mean over these seeds of its random generator.
SEEDS = (12, 13, 14)


def _load_questions() -> list[dict]:
    with (DATA / "recall_questions.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


async def _import(pool, embedder) -> dict[int, int]:
    """Load the memories; return bench_id → memory id."""
    with (DATA / "recall_memories.jsonl").open(encoding="utf-8") as f:
        records = [parse_line(line, n) for n, line in enumerate(f, start=1)]
    for start in range(0, len(records), 500):
        await write_batch(pool, embedder, records[start:start + 500], {})
    rows = await pool.fetch("SELECT id, (metadata->>'bench_id')::int AS bid FROM memories")
    return {r["bid"]: r["id"] for r in rows}


def recall_at(found: list[list[int]], evidence: list[set[int]], k: int) -> float:
    """Mean over questions of |evidence ∩ top k| / |evidence|."""
    return float(np.mean([len(set(f[:k]) & e) / len(e) for f, e in zip(found, evidence, strict=True)]))


class Evaluation:
    """The store loaded once; each `run_*` returns the ranked ids per question."""

    def __init__(self, pool, embedder, reranker, settings: RetrievalSettings):
        self.pool, self.embedder, self.reranker, self.settings = pool, embedder, reranker, settings
        self.questions = _load_questions()
        self.model = embedder.model_name

    async def setup(self) -> None:
        ids = await _import(self.pool, self.embedder)
        self.evidence = [{ids[b] for b in q["evidence"]} for q in self.questions]
        self.vectors = await self.embedder.embed([q["question"] for q in self.questions], "RETRIEVAL_QUERY")

    async def hybrid(self, *, w_vector: float, w_fulltext: float, w_recency: float, k: float,
                     vector: bool = True) -> list[list[int]]:
        out = []
        for q, v in zip(self.questions, self.vectors, strict=True):
            hits = await search_hybrid(self.pool, q["question"], v if vector else None, embed_model=self.model,
                                       limit=20, k=k, w_vector=w_vector, w_fulltext=w_fulltext,
                                       w_recency=w_recency, candidates=self.settings.candidates, now=NOW)
            out.append([h.id for h in hits])
        return out

    async def pipeline(self, settings: RetrievalSettings, reranker=None, seed: int = 12) -> list[list[int]]:
        cfg = settings.model_copy(update={"keep": 20, "limit": max(settings.limit, 20)})
        retriever = Retriever(self.pool, self.embedder, reranker, Safety(), cfg)
        rng = np.random.default_rng(seed)
        out = []
        for q, v in zip(self.questions, self.vectors, strict=True):
            r = await retriever.retrieve(Cue(q["question"], vec=v), rng=rng, now=NOW, mutate=False)
            out.append(r.ids)
        return out

    def rows(self, label: str, *runs: list[list[int]]) -> list[dict]:
        """recall@k rows; several runs (the pipeline's seeds) are averaged."""
        return [{"name": f"{label}: recall@{k}",
                 "value": 100 * float(np.mean([recall_at(found, self.evidence, k) for found in runs])), "unit": "%"}
                for k in KS]

    async def pipelines(self, settings: RetrievalSettings, reranker=None) -> list[list[list[int]]]:
        """The pipeline once per seed of SEEDS (the Dirichlet blend and noise are random)."""
        return [await self.pipeline(settings, reranker, seed) for seed in SEEDS]


async def run() -> list[dict]:
    settings = load_settings(os.environ.get("MOLTBOT_CONFIG") or None, env={})   # another runtime.yaml
    providers = build_providers(settings.providers, settings.secrets, None, None)
    cfg = settings.recall.retrieval
    async with bench_pool("bench_recall") as pool:
        ev = Evaluation(pool, providers.embedder, providers.reranker, cfg)
        await ev.setup()
        arms = cfg.arm_weights(ev.model)
        k = cfg.rrf_k_for(ev.model)
        rows = [{"name": f"memories / questions ({ev.model})", "value": len(ev.evidence), "unit": "questions"}]
        rows += ev.rows("vector arm alone", await ev.hybrid(w_vector=1, w_fulltext=0, w_recency=0, k=k))
        rows += ev.rows("full-text arm alone", await ev.hybrid(w_vector=0, w_fulltext=1, w_recency=0, k=k,
                                                               vector=False))
        rows += ev.rows(f"bare hybrid (w_vector {arms.w_vector:g}, w_fulltext {arms.w_fulltext:g}, k {k:g})",
                        await ev.hybrid(w_vector=arms.w_vector, w_fulltext=arms.w_fulltext,
                                        w_recency=arms.w_recency, k=k))
        rows += ev.rows(f"full pipeline, no rerank (semantic: {cfg.semantic_signal}; mean of 3 seeds)",
                        *await ev.pipelines(cfg))
        for signal in SEMANTIC_SIGNALS:     # the alternatives measured for the semantic component
            if signal != cfg.semantic_signal:
                variant = cfg.model_copy(update={"semantic_signal": signal})
                rows += ev.rows(f"  variant: pipeline with semantic = {signal}", *await ev.pipelines(variant))
        if providers.reranker.skipped:
            rows.append({"name": f"full pipeline with rerank: skipped ({providers.reranker.skip_reason})",
                         "value": 0, "unit": "n/a"})
        else:
            rows += ev.rows("full pipeline with rerank", *await ev.pipelines(cfg, providers.reranker))
        await providers.aclose()
    return rows


async def tune() -> None:
    """Hybrid recall@10 over arm weights and rrf_k on even questions; odd ones held out."""
    settings = load_settings(os.environ.get("MOLTBOT_CONFIG") or None, env={})   # another runtime.yaml
    providers = build_providers(settings.providers, settings.secrets, None, None)
    async with bench_pool("bench_recall_tune") as pool:
        ev = Evaluation(pool, providers.embedder, None, settings.recall.retrieval)
        await ev.setup()
        tune_idx = [i for i in range(len(ev.questions)) if i % 2 == 0]
        held = [i for i in range(len(ev.questions)) if i % 2 == 1]
        results = []
        for k in (10, 30, 60, 100):
            for wv in (0.5, 1.0, 1.5, 2.0, 3.0):
                found = await ev.hybrid(w_vector=wv, w_fulltext=1.0, w_recency=0.1, k=k)
                r = [recall_at([found[i] for i in idx], [ev.evidence[i] for i in idx], 10) for idx in (tune_idx, held)]
                results.append((r[0], r[1], k, wv))
                print(f"k {k:>3}  w_vector {wv:<4}  recall@10 tune {r[0]:.3f}  held-out {r[1]:.3f}", flush=True)
        best = max(results)
        print(f"best on the tuning half: k {best[2]}, w_vector {best[3]} -> {best[0]:.3f} (held-out {best[1]:.3f})")
        await providers.aclose()


if __name__ == "__main__":
    if "--tune" in sys.argv:
        asyncio.run(tune())
    else:
        for row in asyncio.run(run()):
            print(f"{row['name']}: {row['value']:.1f}" if isinstance(row["value"], float) else row)
