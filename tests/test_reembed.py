"""Embed-model check and background re-embedding (plan §4.9), on real PostgreSQL."""

from __future__ import annotations

import asyncio
import random

import pytest

from src.errors import ProviderRejected, ProviderSkipped, ProviderUnavailable
from src.providers.embedding import storage_text
from src.recall.reembed import (
    ReembedPacing,
    ReembedTiming,
    ReembedWorker,
    check_embed_model,
    count_stale,
    progress_bar,
)
from src.recall.search import search_hybrid
from src.recall.store import EMBED_MAX_CHARS, MemoryStore, NewMemory
from tests.fakes import HashEmbedder

TYPES = ["episodic", "semantic", "procedural", "preference", "reflection"]
QUOKKA = "the zephyr quokka migrates across the dunes at dawn"


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class TimedEmbedder(HashEmbedder):
    """Each embed call takes one second of the fake clock; optional scripted failures."""

    def __init__(self, clock: Clock, fail: list[Exception] | None = None, **kw):
        super().__init__(**kw)
        self.clock = clock
        self.fail = list(fail or [])
        self.before_embed = None

    async def embed(self, texts, task_type, titles=None):
        if self.before_embed is not None:
            await self.before_embed(len(self.calls))
        if self.fail:
            raise self.fail.pop(0)
        self.clock.t += 1.0
        return await super().embed(texts, task_type, titles)


async def _seed_stale(pool, old: int = 240, unembedded: int = 10) -> list[int]:
    """`old` rows embedded by another model, then `unembedded` rows with no vector."""
    items = [NewMemory(f"memory number {i} about topic {i % 7}", TYPES[i % 5]) for i in range(old - 1)]
    items.append(NewMemory(QUOKKA, "semantic"))
    ids = await MemoryStore(pool, HashEmbedder(model_name="old-model")).store_many(items)
    rows = await pool.fetch(
        "INSERT INTO memories (content, memory_type) SELECT 'unembedded note ' || g, 'episodic' "
        "FROM generate_series(1, $1::int) g RETURNING id", unembedded)
    return ids + [r["id"] for r in rows]


async def test_count_stale_counts_other_models_and_missing_vectors(pool):
    await _seed_stale(pool, old=30, unembedded=4)
    assert await count_stale(pool, "new-model") == 34
    assert await count_stale(pool, "old-model") == 4       # only the rows with no vector
    assert await count_stale(pool, "new-model") == await pool.fetchval(
        "SELECT count(*) FROM memories")


async def test_reembeds_in_batches_of_100_with_progress_and_the_row_becomes_vector_findable(pool):
    ids = await _seed_stale(pool)
    long_id = await pool.fetchval(
        "INSERT INTO memories (content, memory_type) VALUES ($1, 'narrative') RETURNING id",
        "x" * (EMBED_MAX_CHARS + 5000))
    clock = Clock()
    embedder = TimedEmbedder(clock, model_name="new-model")
    query_vec = (await HashEmbedder(model_name="new-model").embed([QUOKKA], "RETRIEVAL_QUERY"))[0]

    before = await search_hybrid(pool, QUOKKA, query_vec, embed_model="new-model", limit=5)
    quokka = next(h for h in before if h.content == QUOKKA)
    assert quokka.vec_rank is None and quokka.fts_rank == 1     # stale: keyword arm only
    assert quokka.similarity is None

    progress, sleeps, idle = [], [], []

    async def sleep(seconds):
        sleeps.append(seconds)

    async def wait_idle():
        idle.append(1)

    worker = ReembedWorker(pool, embedder, on_progress=lambda *a: progress.append(a),
                           wait_idle=wait_idle, timing=ReembedTiming(sleep=sleep, clock=clock))
    report = await worker.start()

    assert [len(c.texts) for c in embedder.calls] == [100, 100, 51]
    assert {c.task_type for c in embedder.calls} == {"RETRIEVAL_DOCUMENT"}
    rows = await pool.fetch("SELECT id, content, memory_type FROM memories ORDER BY id")
    sent = [t for c in embedder.calls for t in c.texts]
    titles = [t for c in embedder.calls for t in c.titles]
    assert titles == [r["memory_type"] for r in rows]
    assert sent == [storage_text(r["content"][:EMBED_MAX_CHARS], r["memory_type"]) for r in rows]
    assert sent[-1] == "Identity narrative: " + "x" * EMBED_MAX_CHARS     # cut as the store does
    assert rows[-1]["id"] == long_id and len(rows) == len(ids) + 1

    assert progress == [(100, 251, 100.0), (200, 251, 100.0), (251, 251, pytest.approx(251 / 3))]
    assert [progress_bar(*p) for p in progress] == [
        "re-embedding [###-------] 100/251 (100/s)",
        "re-embedding [#######---] 200/251 (100/s)",
        "re-embedding [##########] 251/251 (84/s)",
    ]
    assert sleeps == [0, 0, 0]                  # yielded to the loop after every batch
    assert len(idle) == 4                       # waited for idle before each batch and the last look
    assert (report.done, report.total, report.skipped, report.failures, report.stopped) == (
        251, 251, 0, 0, "complete")
    assert report.seconds == 3.0
    assert await count_stale(pool, "new-model") == 0

    after = await search_hybrid(pool, QUOKKA, query_vec, embed_model="new-model", limit=5)
    assert after[0].content == QUOKKA
    stored = (await HashEmbedder().embed([storage_text(QUOKKA, "semantic")], "RETRIEVAL_DOCUMENT"))[0]
    assert after[0].vec_rank == 1
    assert after[0].similarity == pytest.approx(float(stored @ query_vec), abs=2e-3)


async def test_provider_errors_back_off_and_retry(pool):
    await _seed_stale(pool, old=150, unembedded=0)
    clock = Clock()
    embedder = TimedEmbedder(clock, fail=[ProviderUnavailable("503"), ProviderUnavailable("503")],
                             model_name="new-model")
    sleeps = []

    async def sleep(seconds):
        sleeps.append(seconds)

    worker = ReembedWorker(pool, embedder, pacing=ReembedPacing(backoff_base_s=2.0),
                           timing=ReembedTiming(sleep=sleep, clock=clock, rng=random.Random(5)))
    report = await worker.run()
    jitter = random.Random(5)
    expected = [2.0 * (0.5 + 0.5 * jitter.random()), 4.0 * (0.5 + 0.5 * jitter.random())]
    assert sleeps == [pytest.approx(expected[0]), pytest.approx(expected[1]), 0, 0]
    assert (report.done, report.failures, report.skipped) == (150, 2, 0)
    assert await count_stale(pool, "new-model") == 0


async def test_an_outage_pauses_the_worker_and_it_resumes_the_same_batch(pool):
    await _seed_stale(pool, old=150, unembedded=0)
    clock = Clock()
    embedder = TimedEmbedder(clock, fail=[ProviderUnavailable("down")] * 2, model_name="new-model")
    sleeps = []

    async def sleep(seconds):
        sleeps.append(seconds)

    report = await ReembedWorker(pool, embedder, pacing=ReembedPacing(max_attempts=2, backoff_max_s=60.0),
                                 timing=ReembedTiming(sleep=sleep, clock=clock, rng=random.Random(1))).run()
    assert (report.done, report.skipped, report.failures, report.stopped) == (150, 0, 2, "complete")
    assert 60.0 in sleeps                           # paused for the longest backoff, then went on
    assert await count_stale(pool, "new-model") == 0


async def test_an_embedder_that_refuses_is_not_retried(pool):
    await _seed_stale(pool, old=5, unembedded=0)
    embedder = TimedEmbedder(Clock(), fail=[ProviderRejected("401 bad key")], model_name="new-model")
    sleeps = []

    async def sleep(seconds):
        sleeps.append(seconds)

    report = await ReembedWorker(pool, embedder, timing=ReembedTiming(sleep=sleep)).run()
    assert (report.done, report.failures, report.stopped) == (0, 1, "provider refused")
    assert sleeps == [] and len(embedder.calls) == 0  # the refused call raised before recording
    assert await count_stale(pool, "new-model") == 5


async def test_without_an_embedder_the_worker_stops(pool):
    await _seed_stale(pool, old=5, unembedded=0)
    embedder = TimedEmbedder(Clock(), fail=[ProviderSkipped("no embedder configured")],
                             model_name="new-model")
    report = await ReembedWorker(pool, embedder).run()
    assert (report.done, report.stopped) == (0, "no embedder")
    assert await count_stale(pool, "new-model") == 5


async def test_cancel_stops_cleanly_between_or_inside_batches(pool):
    await _seed_stale(pool, old=250, unembedded=0)
    clock = Clock()
    embedder = TimedEmbedder(clock, model_name="new-model")
    blocked = asyncio.Event()

    async def block_second(calls_so_far):
        if calls_so_far == 1:
            blocked.set()
            await asyncio.sleep(3600)

    embedder.before_embed = block_second
    worker = ReembedWorker(pool, embedder, timing=ReembedTiming(clock=clock))
    task = worker.start()
    await blocked.wait()
    await worker.stop()
    assert task.cancelled()
    assert worker.done == 100
    assert await count_stale(pool, "new-model") == 150
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE embed_model = 'new-model'") == 100


async def test_a_row_rewritten_during_embedding_is_left_alone(pool):
    ids = await _seed_stale(pool, old=20, unembedded=0)
    clock = Clock()
    embedder = TimedEmbedder(clock, model_name="new-model")

    async def consolidation_rewrites(calls_so_far):
        if calls_so_far == 0:
            await pool.execute("UPDATE memories SET content = 'merged and rewritten' WHERE id = $1",
                               ids[3])

    embedder.before_embed = consolidation_rewrites
    report = await ReembedWorker(pool, embedder, timing=ReembedTiming(clock=clock)).run()
    assert (report.done, report.skipped) == (19, 1)
    assert await pool.fetchval("SELECT embed_model FROM memories WHERE id = $1", ids[3]) == "old-model"


async def test_check_embed_model_starts_the_worker_only_when_needed(pool):
    embedder = HashEmbedder(model_name="new-model")
    assert await check_embed_model(pool, embedder) == (0, None)
    await _seed_stale(pool, old=12, unembedded=3)
    seen = []
    stale, worker = await check_embed_model(pool, embedder, on_progress=lambda *a: seen.append(a))
    assert stale == 15
    report = await worker.start()               # already running: the same task
    assert report.done == 15 and seen[-1][:2] == (15, 15)
    assert await count_stale(pool, "new-model") == 0


def test_progress_bar_edges():
    assert progress_bar(0, 0, 0.0) == "re-embedding [##########] 0/0 (0/s)"
    assert progress_bar(0, 1000, 0.0) == "re-embedding [----------] 0/1000 (0/s)"
    assert progress_bar(500, 1000, 120.4) == "re-embedding [#####-----] 500/1000 (120/s)"
    assert progress_bar(1200, 1000, 5.0) == "re-embedding [##########] 1200/1200 (5/s)"
    with pytest.raises(ValueError, match=r"batch_size must be in 1..100"):
        ReembedWorker(None, HashEmbedder(), pacing=ReembedPacing(batch_size=101))
