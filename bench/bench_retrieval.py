"""The recall pipeline at 10k and 100k memories (issue 4's benchmark).

    python -m bench retrieval

Own database on the embedded test server, dropped at the end. Synthetic rows and the
stand-in embedder come from bench_memory_store (Zipf vocabulary, word-sum vectors).
Reported, p50 / p95 over the same questions in the same run:

- the bare hybrid SQL statement (`search_hybrid`), and with the own arm (a question about the user);
- the read-only pipeline without rerank: query embedding + hybrid + 1-hop spreading +
  ACT-R + Dirichlet relevance (`Retriever.retrieve(mutate=False)`, no reranker);
- the same with rerank (FlashRank with the tiny test ONNX model);
- the mutation write-back for 20 rows (5 retrieved, 15 near-misses, co-access);
- 1-hop and 2-hop spreading with 1M co-access rows.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench.bench_memory_store import TextMaker, _load, synthetic_store
from bench.common import build_hnsw
from src.providers.rerank_flashrank import FlashRankReranker
from src.recall.mutation import mutate_after_retrieval
from src.recall.retrieval import Retriever
from src.recall.search import search_hybrid
from src.recall.settings import RetrievalSettings
from src.weights.safety import Safety
from tests.providers.tiny_cross_encoder import build_tiny_cross_encoder

QUESTIONS = 150


def _p(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(round(0.95 * (len(ordered) - 1)))]


def _rows(label: str, samples: list[float]) -> list[dict]:
    p50, p95 = _p(samples)
    return [{"name": f"{label} p50", "value": p50, "unit": "ms"},
            {"name": f"{label} p95", "value": p95, "unit": "ms"}]


async def _time(fn, args_list) -> list[float]:
    out = []
    for args in args_list:
        started = time.perf_counter()
        await fn(*args)
        out.append((time.perf_counter() - started) * 1000.0)
    return out


async def _measure(pool, embedder, reranker, maker: TextMaker, n: int) -> list[dict]:
    rows: list[dict] = []
    questions = [maker.question(0, 3_000) for _ in range(QUESTIONS)]
    vectors = await embedder.embed(questions, "RETRIEVAL_QUERY")
    plain = Retriever(pool, embedder, None, Safety(), RetrievalSettings())
    ranked = Retriever(pool, embedder, reranker, Safety(), RetrievalSettings())
    rng = np.random.default_rng(5)
    now = datetime.now(UTC)
    # warm caches and prepared statements
    for q, v in zip(questions[:10], vectors[:10], strict=True):
        await search_hybrid(pool, q, v, embed_model=embedder.model_name)
        await plain.retrieve(q, rng=rng, now=now, mutate=False)
        await ranked.retrieve(q, rng=rng, now=now, mutate=False)
    bare = await _time(lambda q, v: search_hybrid(pool, q, v, embed_model=embedder.model_name),
                       list(zip(questions, vectors, strict=True)))
    rows += _rows(f"{n // 1000}k: bare hybrid statement", bare)
    # a question about the user adds the own arm; every synthetic row is the user's, so it
    # compares the full OWN_EXACT newest rows: its most expensive case
    own = await _time(lambda q, v: search_hybrid(pool, q, v, embed_model=embedder.model_name, w_own=0.5),
                      list(zip(questions, vectors, strict=True)))
    rows += _rows(f"{n // 1000}k: bare hybrid statement with the own arm", own)
    pipeline = await _time(lambda q: plain.retrieve(q, rng=rng, now=now, mutate=False), [(q,) for q in questions])
    rows += _rows(f"{n // 1000}k: read-only pipeline, no rerank", pipeline)
    rows.append({"name": f"{n // 1000}k: pipeline / bare statement (p50)",
                 "value": _p(pipeline)[0] / _p(bare)[0], "unit": "x"})
    reranked = await _time(lambda q: ranked.retrieve(q, rng=rng, now=now, mutate=False), [(q,) for q in questions])
    rows += _rows(f"{n // 1000}k: read-only pipeline with rerank (tiny model)", reranked)

    ids = await pool.fetchval("SELECT array_agg(id) FROM (SELECT id FROM memories TABLESAMPLE SYSTEM (5) LIMIT 20000) s")
    picks = [np.random.default_rng(i).choice(ids, 20, replace=False).tolist() for i in range(QUESTIONS)]
    safety = Safety()
    writeback = await _time(
        lambda p: mutate_after_retrieval(pool, p[:5], p[5:], safety=safety, at=datetime.now(UTC)),
        [(p,) for p in picks])
    rows += _rows(f"{n // 1000}k: mutation write-back, 20 rows", writeback)
    hot = await pool.fetchrow("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'memories'")
    if hot and hot["n_tup_upd"]:
        rows.append({"name": f"{n // 1000}k: HOT share of memory updates so far",
                     "value": 100.0 * hot["n_tup_hot_upd"] / hot["n_tup_upd"], "unit": "%"})
    return rows


async def _co_access(pool, n_pairs: int, max_id: int) -> float:
    started = time.perf_counter()
    await pool.execute(
        """INSERT INTO memory_co_access (memory_id_a, memory_id_b, co_access_count, last_co_accessed)
           SELECT LEAST(a, b), GREATEST(a, b), 1 + (random() * 9)::int, now()
             FROM (SELECT 1 + (random() * ($2 - 1))::bigint AS a, 1 + (random() * ($2 - 1))::bigint AS b
                     FROM generate_series(1, $1)) p
            WHERE a <> b
           ON CONFLICT DO NOTHING""", n_pairs, max_id)
    await pool.execute("ANALYZE memory_co_access")
    return time.perf_counter() - started


async def run() -> list[dict]:
    rows: list[dict] = []
    async with synthetic_store("bench_retrieval", max_size=4) as (pool, maker, store):
        embedder = store.embedder
        with tempfile.TemporaryDirectory() as cache:
            build_tiny_cross_encoder(Path(cache))
            reranker = FlashRankReranker(cache)
            await reranker.warm_up()
            loaded = 0
            for n in (10_000, 100_000):
                await pool.execute("DROP INDEX IF EXISTS idx_memories_embedding")
                rate = await _load(store, maker, n - loaded)
                rows.append({"name": f"bulk load up to {n // 1000}k (store_many, no HNSW)", "value": rate,
                             "unit": "rows/s"})
                loaded = n
                rows.append({"name": f"HNSW build at {n // 1000}k", "value": await build_hnsw(pool), "unit": "s"})
                rows += await _measure(pool, embedder, reranker, maker, n)

            seconds = await _co_access(pool, 1_050_000, 100_000)
            count = await pool.fetchval("SELECT count(*) FROM memory_co_access")
            rows.append({"name": "co-access rows generated", "value": int(count), "unit": "rows"})
            rows.append({"name": "co-access generation", "value": seconds, "unit": "s"})
            retriever = Retriever(pool, embedder, None, Safety(), RetrievalSettings())
            seeds = [np.random.default_rng(i).integers(1, 100_000, 3).tolist() for i in range(QUESTIONS)]
            for hops in (1, 2):
                samples = await _time(lambda s, h=hops: retriever._spread(s, h), [(s,) for s in seeds])
                rows += _rows(f"100k + 1M co-access: {hops}-hop spreading from 3 seeds", samples)
    return rows
