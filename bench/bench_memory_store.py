"""Memory store and hybrid search at 10k and 100k rows.

    python -m bench memory_store

Runs in its own database on the embedded test server (data/test-pg, fsync off),
dropped at the end. Rows are synthetic: text drawn from a Zipf-distributed
vocabulary of 30,000 made-up words plus English stop words, so full text has both
common words (thousands of matching rows) and rare ones (a handful); vectors from
a stand-in embedder that sums fixed random word vectors (so `store_many` runs end
to end: cleaning, embed calls of 100, halfvec encoding, one COPY).

- bulk load (`store_many`, 5,000 items per call) into an empty table without the
  HNSW index, rows/s at 10k and 100k;
- HNSW build at 100k with maintenance_work_mem = 2GB;
- `store_many` of 1,000 more rows with the HNSW index present;
- p50/p95 of `search_hybrid` (the one statement, rows decoded) over 200 questions
  of 2–4 common words (vocabulary ranks 1–100) and 200 of rare words (ranks
  5,000–30,000), and of each arm alone (100 questions each).
"""

from __future__ import annotations

import itertools
import statistics
import time
import zlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import asyncpg
import numpy as np

from bench.common import bench_pool, build_hnsw
from src.recall.search import search_hybrid
from src.recall.store import MemoryStore, NewMemory

MODEL = "bench-random-768"
VOCABULARY = 30_000
STOP_WORDS = "the a and of to in was i it with for on my that at we is".split()


class WordVectorEmbedder:
    """A fast stand-in embedder: the sum of fixed random vectors of a text's words.

    Texts that share words point the same way, as with a real model, so a question's
    vector finds the memories that share its words and the two arms overlap as they
    would in use. (Pure random unit vectors gave the same order of HNSW build time
    here: 214 s at 100k, with another benchmark running.)

    A text with no word of the vocabulary (English: the safety boundaries, the mind's own
    answers) is the sum of vectors drawn from each of its words' CRC-32, so two such texts
    are as alike as their words. One shared fallback vector made all of them the same
    point: every such user turn sat at cosine 1.0 to the immutable boundaries and the
    loop bench's turns went to System 2 as "identity touched" (issue 24).
    """

    model_name = MODEL
    dimensions = 768

    def __init__(self, words: Sequence[str], seed: int = 7):
        rng = np.random.default_rng(seed)
        self._index = {w: i for i, w in enumerate(words)}
        self._vectors = rng.standard_normal((len(words), self.dimensions), dtype=np.float32)
        self._fallback = rng.standard_normal(self.dimensions, dtype=np.float32)   # a text of no words

    async def embed(self, texts: Sequence[str], task_type: str, titles=None) -> np.ndarray:
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = text.lower().split()
            ids = [i for i in map(self._index.get, tokens) if i is not None]
            out[row] = self._vectors[ids].sum(axis=0) if ids else self._unknown(tokens)
        return _unit(out)

    def _unknown(self, tokens: Sequence[str]) -> np.ndarray:
        if not tokens:
            return self._fallback
        return sum((np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self.dimensions, dtype=np.float32)
                    for t in tokens), np.zeros(self.dimensions, dtype=np.float32))


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _vocabulary(rng: np.random.Generator) -> list[str]:
    syllables = [c + v for c in "bdfgklmnprtvz" for v in "aeiou"]
    words: list[str] = []
    seen: set[str] = set()
    for parts in itertools.chain(itertools.product(syllables, repeat=2),
                                 itertools.product(syllables, repeat=3)):
        word = "".join(parts)
        if word not in seen:
            seen.add(word)
            words.append(word)
    order = rng.permutation(len(words))[:VOCABULARY]
    return [words[i] for i in order]


class TextMaker:
    """Sentences of 15–60 words, 35% stop words, the rest Zipf–Mandelbrot over the vocabulary.

    p(rank r) ∝ (r + 50)^-1.07: the most common made-up word is in ~9% of memories,
    the 50th in ~4%, a word of rank 5,000 in 0.07% — roughly how content words
    (after stop words) spread over short chat messages.
    """

    def __init__(self, seed: int = 11):
        self.rng = np.random.default_rng(seed)
        self.words = _vocabulary(self.rng)
        ranks = np.arange(1, VOCABULARY + 1, dtype=np.float64)
        self.p = (ranks + 50) ** -1.07
        self.p /= self.p.sum()

    def texts(self, n: int) -> list[str]:
        lengths = self.rng.integers(15, 61, size=n)
        draws = self.rng.choice(VOCABULARY, size=int(lengths.sum()), p=self.p)
        stops = self.rng.random(draws.size) < 0.35
        stop_pick = self.rng.integers(0, len(STOP_WORDS), size=draws.size)
        tokens = [STOP_WORDS[s] if is_stop else self.words[d]
                  for d, is_stop, s in zip(draws, stops, stop_pick, strict=True)]
        out, start = [], 0
        for length in lengths:
            out.append(" ".join(tokens[start:start + length]))
            start += length
        return out

    def question(self, lo: int, hi: int) -> str:
        picks = self.rng.integers(lo, hi, size=int(self.rng.integers(2, 5)))
        return "what about the " + " ".join(self.words[i] for i in picks) + "?"


@asynccontextmanager
async def synthetic_store(prefix: str, *, max_size: int = 4) -> AsyncIterator[tuple[asyncpg.Pool, TextMaker, MemoryStore]]:
    """A benchmark database (bench/common.bench_pool) with the Zipf text maker and a store
    embedding through the word-vector stand-in: what every synthetic benchmark starts from."""
    async with bench_pool(prefix, max_size=max_size) as pool:
        maker = TextMaker()
        yield pool, maker, MemoryStore(pool, WordVectorEmbedder(maker.words))


async def _load(store: MemoryStore, maker: TextMaker, n: int, chunk: int = 5_000) -> float:
    texts = maker.texts(n)
    started = time.perf_counter()
    for i in range(0, n, chunk):
        await store.store_many([NewMemory(t) for t in texts[i:i + chunk]])
    return n / (time.perf_counter() - started)


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(round(0.95 * (len(ordered) - 1)))]


async def _timed_searches(conn: asyncpg.Connection, questions: list[str],
                          vectors: np.ndarray | None) -> list[float]:
    times = []
    for i, question in enumerate(questions):
        vec = None if vectors is None else vectors[i]
        started = time.perf_counter()
        await search_hybrid(conn, question, vec, embed_model=MODEL)
        times.append((time.perf_counter() - started) * 1000)
    return times


async def run() -> list[dict]:
    rows: list[dict] = []
    async with synthetic_store("bench_memory_store", max_size=4) as (pool, maker, store):
        embedder = store.embedder
        await pool.execute("DROP INDEX idx_memories_embedding")
        for n in (10_000, 100_000):
            await pool.execute("TRUNCATE memories CASCADE")
            rate = await _load(store, maker, n)
            rows.append({"name": f"store_many bulk load, {n:,} rows (no HNSW yet)",
                         "value": rate, "unit": "rows/s"})

        rows.append({"name": "HNSW build at 100k (maintenance_work_mem 2GB)",
                     "value": await build_hnsw(pool), "unit": "s"})
        rate = await _load(store, maker, 1_000, chunk=1_000)
        rows.append({"name": "store_many of 1,000 rows with HNSW present (at 100k)",
                     "value": rate, "unit": "rows/s"})

        n_q = 200
        common = [maker.question(0, 100) for _ in range(n_q)]
        rare = [maker.question(5_000, VOCABULARY) for _ in range(n_q)]
        vectors = await embedder.embed(common, "RETRIEVAL_QUERY")
        rare_vectors = await embedder.embed(rare, "RETRIEVAL_QUERY")
        async with pool.acquire() as conn:
            await _timed_searches(conn, common[:20], vectors)  # warm the cache
            matched = {}
            for label, qs in (("common", common), ("rare", rare)):
                counts = [await conn.fetchval(
                    "SELECT count(*) FROM memories WHERE content_tsv @@ "
                    "websearch_to_tsquery('english', replace($1, ' ', ' or '))", q) for q in qs[:20]]
                matched[label] = statistics.mean(counts)
            half = n_q // 2  # the arms alone are context for the hybrid figures: 100 each
            for label, qs, vecs in (
                (f"hybrid top-20, {n_q} common-word questions", common, vectors),
                (f"hybrid top-20, {n_q} rare-word questions", rare, rare_vectors),
                (f"full-text arm alone (no vector), {half} common", common[:half], None),
                (f"full-text arm alone (no vector), {half} rare", rare[:half], None),
                (f"vector arm alone (stop-word question), {half}", ["the and of"] * half, vectors),
            ):
                p50, p95 = _percentiles(await _timed_searches(conn, qs, vecs))
                rows.append({"name": f"search_hybrid at 100k: {label}, p50", "value": p50, "unit": "ms"})
                rows.append({"name": f"search_hybrid at 100k: {label}, p95", "value": p95, "unit": "ms"})
        rows.append({"name": "rows matching a common-word question (mean of 20)",
                     "value": matched["common"], "unit": "rows"})
        rows.append({"name": "rows matching a rare-word question (mean of 20)",
                     "value": matched["rare"], "unit": "rows"})
    return rows
