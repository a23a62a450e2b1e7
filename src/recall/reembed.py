"""Embed-model check and background re-embedding (plan §4.9).

A row is *stale* when its vector was not made by the current embedder: its
`embed_model` differs, or it has no embedding at all (the embedder was down when
it was stored; `embed_model` is NULL then). Stale rows are already invisible to
the vector arm of search (it filters on `embed_model`), and the keyword arm still
finds them, so nothing breaks while they wait — they are only harder to recall.

`ReembedWorker` re-embeds them in the background, in batches of 100 (the Gemini
batch limit): the same text the store embeds (type prefix + content cut at
`EMBED_MAX_CHARS`, RETRIEVAL_DOCUMENT, title = memory type, via
`embed_memories`), then one `UPDATE … FROM unnest(ids, vectors)` per batch that
sets `embedding` and `embed_model` and nothing else. Batches walk the table by id
(keyset), so the whole run reads the table once however few rows are stale.

The UPDATE re-checks each row: still stale, same memory type and same content
(md5) as when it was read. A row that consolidation rewrote or re-embedded in
the meantime is left alone rather than given a vector of its old text.

Between batches the worker yields to the event loop (and waits on `wait_idle`,
when given, so it runs in the loop's idle time). Provider errors are logged and
retried after an exponential backoff with jitter; after `max_attempts` failures
a batch is left stale for the next run and the worker moves on. Without a
configured embedder (ProviderSkipped) it stops. Cancel the task to stop it: a
batch is one statement, so a cancel never leaves half a batch written.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg
import numpy as np
from pgvector import HalfVector

from src.db.sql import Executor
from src.errors import ProviderError, ProviderSkipped
from src.providers.embedding import embed_memories
from src.providers.protocols import Embedder
from src.recall.store import EMBED_MAX_CHARS, EMBEDDING_DIMENSIONS

log = logging.getLogger(__name__)

Progress = Callable[[int, int, float], object]

_STALE = "(embedding IS NULL OR embed_model IS DISTINCT FROM $1::text)"

_COUNT_STALE = f"SELECT count(*) FROM memories WHERE {_STALE}"

_NEXT_BATCH = f"""
SELECT id, left(content, $3::int) AS content, memory_type, md5(content) AS digest
FROM memories
WHERE id > $2::bigint AND {_STALE}
ORDER BY id
LIMIT $4::int
"""

#: `reindex --all`: every row, whatever made its vector (same content re-check).
_NEXT_ANY = """
SELECT id, left(content, $3::int) AS content, memory_type, md5(content) AS digest
FROM memories
WHERE id > $2::bigint AND $1::text IS NOT NULL
ORDER BY id
LIMIT $4::int
"""
_COUNT_ANY = "SELECT count(*) FROM memories WHERE id > $1::bigint"

_WRITE_ANY = """
UPDATE memories AS m
SET embedding = u.vec, embed_model = $1::text
FROM unnest($2::bigint[], $3::halfvec[], $4::text[], $5::text[]) AS u(id, vec, memory_type, digest)
WHERE m.id = u.id AND m.memory_type = u.memory_type AND md5(m.content) = u.digest
"""

_WRITE_BATCH = """
UPDATE memories AS m
SET embedding = u.vec, embed_model = $1::text
FROM unnest($2::bigint[], $3::halfvec[], $4::text[], $5::text[]) AS u(id, vec, memory_type, digest)
WHERE m.id = u.id
  AND (m.embedding IS NULL OR m.embed_model IS DISTINCT FROM $1::text)
  AND m.memory_type = u.memory_type
  AND md5(m.content) = u.digest
"""


async def count_stale(db: Executor, model: str) -> int:
    """Rows whose vector is not from `model`, including rows with no vector."""
    return await db.fetchval(_COUNT_STALE, model)


async def count_after(db: Executor, last_id: int) -> int:
    """Rows after `last_id` (what `reindex --all` still has to do)."""
    return await db.fetchval(_COUNT_ANY, last_id)


# reindex_runs (sql/020): where a run got to, so `reindex` resumes after a crash.
_OPEN_RUN = """
SELECT id, last_id, done FROM reindex_runs
WHERE embed_model = $1 AND scope = $2 AND finished_at IS NULL
ORDER BY id DESC LIMIT 1
"""
_NEW_RUN = "INSERT INTO reindex_runs (embed_model, scope) VALUES ($1, $2) RETURNING id, last_id, done"
_CHECKPOINT = "UPDATE reindex_runs SET last_id = $2, done = $3, updated_at = now() WHERE id = $1"
_FINISH_RUN = "UPDATE reindex_runs SET finished_at = now(), updated_at = now() WHERE id = $1"


@dataclass(frozen=True)
class RunState:
    run_id: int
    last_id: int                    # every row up to this id is done
    done: int                       # rows re-embedded so far by this run
    resumed: bool


async def open_run(db: Executor, model: str, scope: str) -> RunState:
    """The unfinished run of `model` and `scope` ('stale' or 'all') to resume, or a new one."""
    row = await db.fetchrow(_OPEN_RUN, model, scope)
    resumed = row is not None
    if row is None:
        row = await db.fetchrow(_NEW_RUN, model, scope)
    return RunState(row["id"], row["last_id"], row["done"], resumed)


async def checkpoint_run(db: Executor, run_id: int, last_id: int, done: int) -> None:
    """Record progress after a written batch (a crash re-does at most one batch)."""
    await db.execute(_CHECKPOINT, run_id, last_id, done)


async def finish_run(db: Executor, run_id: int) -> None:
    await db.execute(_FINISH_RUN, run_id)


def progress_bar(done: int, total: int, rate: float, width: int = 10) -> str:
    """`re-embedding [#####-----] 500/1000 (120/s)` for the console."""
    total = max(total, done)
    filled = width if total == 0 else int(width * done / total)
    return f"re-embedding [{'#' * filled}{'-' * (width - filled)}] {done}/{total} ({rate:.0f}/s)"


@dataclass(frozen=True)
class ReembedReport:
    done: int                       # rows given a current vector
    total: int                      # stale rows seen (counted at start, grown if more appeared)
    skipped: int                    # rows left stale: their batch kept failing, or changed meanwhile
    failures: int                   # failed embed attempts
    seconds: float
    stopped: str                    # "complete", "no embedder"


@dataclass(frozen=True)
class ReembedPacing:
    """The worker's pacing: rows per batch, and how often and how long it retries a failed embed."""

    batch_size: int = 100
    max_attempts: int = 5
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0


@dataclass(frozen=True)
class ReembedTiming:
    """How the worker waits and measures: its sleep, its monotonic clock, its backoff jitter."""

    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random | None = None       # None: a fresh random.Random()


@dataclass(frozen=True)
class ReindexRun:
    """A `reindex` run: every row (`--all`) or the stale ones, where it resumes, its checkpoint."""

    everything: bool = False
    start_after: int = 0                   # rows after this id only: where a crashed run got to
    # called with (last id, rows done) after each written batch
    on_batch: Callable[[int, int], Awaitable[object]] | None = None


class ReembedWorker:
    """Re-embeds stale rows in the background; `start()` it, `stop()` or cancel it."""

    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, *, pacing: ReembedPacing | None = None,
                 on_progress: Progress | None = None,
                 wait_idle: Callable[[], Awaitable[object]] | None = None,
                 timing: ReembedTiming | None = None, reindex: ReindexRun | None = None):
        pacing = pacing or ReembedPacing()
        timing = timing or ReembedTiming()
        reindex = reindex or ReindexRun()
        batch_size, max_attempts = pacing.batch_size, pacing.max_attempts
        if not 1 <= batch_size <= 100:
            raise ValueError(f"batch_size must be in 1..100 (the embedding batch limit), "
                             f"got {batch_size!r}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts!r}")
        self.pool = pool
        self.embedder = embedder
        self.model = embedder.model_name
        self.batch_size = batch_size
        self.on_progress = on_progress
        self.max_attempts = max_attempts
        self.backoff_base_s = pacing.backoff_base_s
        self.backoff_max_s = pacing.backoff_max_s
        self.wait_idle = wait_idle
        self._sleep = timing.sleep
        self._rng = timing.rng or random.Random()
        self._clock = timing.clock
        self.done = 0
        self.total = 0
        self._task: asyncio.Task[ReembedReport] | None = None
        # `reindex`: every row (`--all`), from where a crashed run stopped, with a
        # checkpoint (last id, rows done) after each written batch
        self.everything = reindex.everything
        self.start_after = reindex.start_after
        self.on_batch = reindex.on_batch

    def start(self, known_stale: int | None = None) -> asyncio.Task[ReembedReport]:
        """Run in the background; the task's result is the ReembedReport."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(known_stale), name="reembed")
        return self._task

    async def stop(self) -> None:
        """Cancel the background run and wait until it has stopped."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if asyncio.current_task() is not None and asyncio.current_task().cancelling():
                    raise

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
        return ceiling * (0.5 + 0.5 * self._rng.random())      # "equal jitter"

    async def run(self, known_stale: int | None = None) -> ReembedReport:
        """Re-embed every stale row, batch by batch; return when none is left.

        `known_stale`: the count the caller already has (each count is a full scan)."""
        started = self._clock()
        if known_stale is not None:
            self.total = known_stale
        elif self.everything:
            self.total = await count_after(self.pool, self.start_after)
        else:
            self.total = await count_stale(self.pool, self.model)
        self.done = 0
        skipped = failures = 0
        last_id = self.start_after
        log.info("re-embedding %d memories with %s", self.total, self.model)
        try:
            while True:
                if self.wait_idle is not None:
                    await self.wait_idle()
                rows = await self.pool.fetch(_NEXT_ANY if self.everything else _NEXT_BATCH, self.model,
                                             last_id, EMBED_MAX_CHARS, self.batch_size)
                if not rows:
                    break
                vectors, fails, stop = await self._embed(rows)
                failures += fails
                if stop is not None:    # no embedder, or one that refuses (bad key): retrying cannot help
                    return self._report(started, skipped, failures, stop)
                if vectors is None:
                    # still failing after max_attempts: the provider is down. Wait the longest
                    # backoff and try the same batch again; the worker outlives an outage.
                    log.warning("re-embedding paused for %.0f s: the embedder keeps failing",
                                self.backoff_max_s)
                    await self._sleep(self.backoff_max_s)
                    continue
                written = await self._write(rows, vectors)
                skipped += len(rows) - written
                self.done += written
                last_id = rows[-1]["id"]
                self.total = max(self.total, self.done + skipped)
                if self.on_batch is not None:
                    await self.on_batch(last_id, self.done)
                self._report_progress(started)
                await self._sleep(0)                       # let the loop run between batches
        except asyncio.CancelledError:
            log.info("re-embedding stopped at %d/%d", self.done, self.total)
            raise
        return self._report(started, skipped, failures, "complete")

    async def _embed(self, rows: list[asyncpg.Record]) -> tuple[np.ndarray | None, int, str | None]:
        """(vectors or None, failed attempts, reason to stop the run or None).

        Only transient errors are retried (the embedder's own policy has already retried
        each call); an embedder that is missing or refuses stops the run.
        """
        for attempt in range(1, self.max_attempts + 1):
            try:
                vectors = await embed_memories(self.embedder, [r["content"] for r in rows],
                                               [r["memory_type"] for r in rows])
                vectors = np.asarray(vectors, dtype=np.float32)
                if vectors.shape != (len(rows), EMBEDDING_DIMENSIONS) or not np.isfinite(vectors).all():
                    raise ProviderError(f"embedder {self.model} returned shape {vectors.shape} "
                                        f"(or non-finite values) for {len(rows)} texts",
                                        provider=self.model)
                return vectors, attempt - 1, None
            except ProviderSkipped as exc:
                log.warning("re-embedding stopped: no embedder configured (%s)", exc)
                return None, 0, "no embedder"
            except ProviderError as exc:
                if not exc.transient:
                    log.warning("re-embedding stopped: the embedder refuses (%s); rows stay stale", exc)
                    return None, attempt, "provider refused"
                if attempt == self.max_attempts:
                    return None, attempt, None
                delay = self._backoff(attempt)
                log.warning("re-embedding: embed failed (attempt %d of %d), retrying in %.1f s: %s",
                            attempt, self.max_attempts, delay, exc)
                await self._sleep(delay)
        raise AssertionError("unreachable")

    async def _write(self, rows: list[asyncpg.Record], vectors: np.ndarray) -> int:
        status = await self.pool.execute(
            _WRITE_ANY if self.everything else _WRITE_BATCH, self.model, [r["id"] for r in rows], [HalfVector(v) for v in vectors],
            [r["memory_type"] for r in rows], [r["digest"] for r in rows])
        return int(status.split()[-1])

    def _rate(self, started: float) -> float:
        elapsed = self._clock() - started
        return self.done / elapsed if elapsed > 0 else 0.0

    def _report_progress(self, started: float) -> None:
        rate = self._rate(started)
        log.info("%s", progress_bar(self.done, self.total, rate))
        if self.on_progress is not None:
            self.on_progress(self.done, self.total, rate)

    def _report(self, started: float, skipped: int, failures: int, stopped: str) -> ReembedReport:
        seconds = self._clock() - started
        log.info("re-embedding %s: %d done, %d left stale, %d failed attempts, %.1f s", stopped,
                 self.done, skipped, failures, seconds)
        return ReembedReport(self.done, self.total, skipped, failures, seconds, stopped)


async def check_embed_model(pool: asyncpg.Pool, embedder: Embedder, *, start: bool = True,
                            on_progress: Progress | None = None) -> tuple[int, ReembedWorker | None]:
    """Start-up check of plan §4.9: count stale rows; if any, start the worker in the background."""
    stale = await count_stale(pool, embedder.model_name)
    if stale == 0:
        return 0, None
    log.warning("%d memories need re-embedding with %s; re-embedding in the background "
                "(until then only keyword search finds them)", stale, embedder.model_name)
    worker = ReembedWorker(pool, embedder, on_progress=on_progress)
    if start:
        worker.start(known_stale=stale)
    return stale, worker


__all__ = ["ReembedPacing", "ReembedReport", "ReembedTiming", "ReembedWorker", "ReindexRun", "RunState",
           "check_embed_model", "checkpoint_run", "count_after", "count_stale", "finish_run", "open_run",
           "progress_bar"]
