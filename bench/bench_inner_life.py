"""The mind between messages (issue 15's benchmark).

    python -m bench inner_life

- Idle for 10 minutes in compressed time (burst mode) at 10k memories (event times spread
  over a year, no values or goals in the layer files): the DMN ticks every
  `dmn.interval_s` of simulated time, the loop drains what it queued; counted are DMN items
  (and by channel), cycles, LLM calls of an instant fake model, memories created, gut
  signals. No consolidation runs here (its scheduler is its own task).
- The gut per cycle at 100k memories, split: the arithmetic (one reading — attention
  centroid, delta —, the charge of 5 candidates, the emotional alignment of 20 recalled
  memories) and the delta log, both ways: in a transaction of its own (how the loop wrote it
  until issue 15's follow-up) and inside the cycle's thought_log transaction (how it writes it
  now); plus the deep pass's full L2 rebuild (one GROUP BY over 100k rows), which the cycle
  never pays.
- The delta log both ways again on a throw-away server with default durability (fsync on,
  as the service runs; the test server has fsync off): there a commit of its own is a WAL
  flush per cycle.

Own database on the embedded test server, dropped at the end.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta

import numpy as np

from bench.bench_loop import InstantLLM, _mind
from bench.bench_memory_store import TextMaker, _load, synthetic_store
from bench.common import build_hnsw, durable_pool
from src.dmn.generator import DmnGenerator, DmnQueue
from src.dmn.settings import DmnSettings
from src.gut import repository as gut_repo
from src.gut.gut import Gut
from src.gut.repository import DeltaRow
from src.loop.thought_log import ThoughtRow, record_cycle

IDLE_S = 600


def _p(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(round(0.95 * (len(ordered) - 1)))]


async def _idle(pool, embedder, tmp: str) -> list[dict]:
    llm = InstantLLM()
    mind = await _mind(pool, embedder, llm, tmp, "bench-idle")
    settings = DmnSettings()
    gen = DmnGenerator(pool, embed_model=embedder.model_name,
                       queue=DmnQueue(mind.loop.submit, lambda: mind.loop.queue.counts()["dmn"]),
                       rng=np.random.default_rng(5),
                       settings=settings)
    before = await pool.fetchval("SELECT count(*) FROM memories")
    t0 = datetime.now(UTC)
    cycles, ticks = 0, int(IDLE_S / settings.interval_s)
    started = time.perf_counter()
    for i in range(ticks):
        now = t0 + timedelta(seconds=i * settings.interval_s)
        await gen.tick(now)
        while len(mind.loop.queue):
            if await mind.loop.cycle(now) is not None:
                cycles += 1
    await mind.gates.exit.flush(reason="bench")
    wall = time.perf_counter() - started
    after = await pool.fetchval("SELECT count(*) FROM memories")
    channels = dict(await pool.fetch("SELECT channel, count(*) FROM dmn_items GROUP BY channel"))
    gut_inputs = await pool.fetchval("SELECT count(*) FROM thought_log WHERE source_tag = 'internal_gut'")
    await mind.close()
    rows = [{"name": "idle 10 min (compressed): DMN ticks", "value": ticks, "unit": "ticks"},
            {"name": "idle 10 min: DMN items, all channels", "value": sum(channels.values()), "unit": "items"}]
    rows += [{"name": f"idle 10 min: DMN items, {ch}", "value": int(n), "unit": "items"}
             for ch, n in sorted(channels.items())]
    rows += [{"name": "idle 10 min: cognitive cycles", "value": cycles, "unit": "cycles"},
             {"name": "idle 10 min: gut signals that became input", "value": int(gut_inputs), "unit": "inputs"},
             {"name": "idle 10 min: LLM calls (fake)", "value": len(llm.calls), "unit": "calls"},
             {"name": "idle 10 min: memories created", "value": int(after - before), "unit": "memories"},
             {"name": "idle 10 min: wall time (burst)", "value": wall, "unit": "s"}]
    return rows


def _delta_row(i: int, delta: np.ndarray, magnitude: float) -> DeltaRow:
    return DeltaRow(session_id="bench", cycle=i, delta=delta, magnitude=magnitude, context="bench focus",
                    action=[{"kind": "communicate"}], source_tag="external_user", at=datetime.now(UTC))


async def _thought_row(conn, i: int) -> None:
    await record_cycle(conn, ThoughtRow(
        session_id="bench", cycle=i, source_tag="external_user", attention_focus="bench focus", candidates=[],
        winner={"source": "user"}, context_summary={}, output="ok", actions=[{"kind": "communicate"}],
        confidence=None, escalated=False, duration_ms=1.0, cycle_started=datetime.now(UTC)))


async def _log_once(pool, i: int, delta: np.ndarray, magnitude: float) -> tuple[float, float, float, float]:
    """One cycle's delta log both ways, ms: (its own transaction — how the loop wrote it before;
    inside the cycle's thought_log transaction — how it does now; that whole transaction;
    the same transaction without the delta)."""
    t = time.perf_counter()
    await gut_repo.write_delta(pool, _delta_row(i, delta, magnitude))   # on the pool: commits alone
    own = _ms(t)
    t = time.perf_counter()
    async with pool.acquire() as conn, conn.transaction():             # as log_answered_cycle does
        await _thought_row(conn, i)
        t_in = time.perf_counter()
        await gut_repo.write_delta(conn, _delta_row(i, delta, magnitude))
        inside = _ms(t_in)
    with_delta = _ms(t)
    t = time.perf_counter()
    async with pool.acquire() as conn, conn.transaction():
        await _thought_row(conn, i)
    return own, inside, with_delta, _ms(t)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _log_rows(label: str, samples: list[tuple[float, ...]]) -> list[dict]:
    own, inside, with_delta, without = (list(x) for x in zip(*samples, strict=True))
    rows = []
    for name, xs in [("delta log, own transaction (before)", own),
                     ("delta log, in the cycle's thought_log transaction (after)", inside)]:
        p50, p95 = _p(xs)
        rows += [{"name": f"{label}: {name} p50", "value": p50, "unit": "ms"},
                 {"name": f"{label}: {name} p95", "value": p95, "unit": "ms"}]
    return rows + [{"name": f"{label}: the cycle's transaction with the delta p50", "value": _p(with_delta)[0],
                    "unit": "ms"},
                   {"name": f"{label}: the cycle's transaction without it p50", "value": _p(without)[0],
                    "unit": "ms"}]


async def _gut(pool, embedder, maker: TextMaker) -> list[dict]:
    gut = Gut()
    started = time.perf_counter()
    rows_seen = await gut.recompute_l2(pool, embedder.model_name)
    rebuild = _ms(started)
    focus = await embedder.embed(maker.texts(5), "RETRIEVAL_QUERY")
    candidates = await embedder.embed(maker.texts(5), "RETRIEVAL_QUERY")
    recalled = np.asarray(await embedder.embed(maker.texts(20), "RETRIEVAL_DOCUMENT"))
    compute, logs = [], []
    for i in range(300):
        t = time.perf_counter()
        gut.read([focus[i % 5], *focus[:4]])
        [gut.charge(c) for c in candidates]
        gut.alignment(recalled)
        compute.append(_ms(t))
        logs.append(await _log_once(pool, i, gut.reading.delta, gut.reading.magnitude))
    c50, c95 = _p(compute)
    rows = [{"name": f"100k: gut deep-pass L2 rebuild ({rows_seen:,} rows)", "value": rebuild, "unit": "ms"},
            {"name": "100k: gut arithmetic per cycle (reading + 5 charges + 20 alignments) p50", "value": c50,
             "unit": "ms"},
            {"name": "100k: gut arithmetic per cycle p95", "value": c95, "unit": "ms"}]
    rows += _log_rows("100k", logs)
    for when, k in (("before", 0), ("after", 1)):
        p50, p95 = _p([c + log[k] for c, log in zip(compute, logs, strict=True)])
        rows += [{"name": f"100k: gut per cycle, arithmetic + delta log ({when}) p50", "value": p50, "unit": "ms"},
                 {"name": f"100k: gut per cycle, arithmetic + delta log ({when}) p95", "value": p95, "unit": "ms"}]
    return rows


async def _durable_log() -> list[dict]:
    """The delta log on a server with default durability: each commit is a WAL flush."""
    delta = np.random.default_rng(15).normal(size=768) / 28
    async with durable_pool("bench-durable") as pool:
        logs = [await _log_once(pool, i, delta, float(np.linalg.norm(delta))) for i in range(300)]
    return _log_rows("fsync on", logs)


async def run() -> list[dict]:
    rows: list[dict] = []
    async with synthetic_store("bench_inner_life", max_size=6) as (pool, maker, store):
        embedder = store.embedder
        await pool.execute("DROP INDEX IF EXISTS idx_memories_embedding")
        await _load(store, maker, 10_000)
        # a store that grew over a year: event times spread uniformly (creative association
        # needs temporally distant memories; the generator's rng is seeded, this is too)
        async with pool.acquire() as conn:
            await conn.execute("SELECT setseed(0.15)")
            await conn.execute("UPDATE memories SET event_time = now() - random() * interval '365 days'")
        await build_hnsw(pool)
        with tempfile.TemporaryDirectory() as tmp:
            rows += await _idle(pool, embedder, tmp)
        await pool.execute("DROP INDEX IF EXISTS idx_memories_embedding")   # the gut never searches
        total = await pool.fetchval("SELECT count(*) FROM memories")
        await _load(store, maker, 100_000 - total)
        rows += await _gut(pool, embedder, maker)
    return rows + await _durable_log()
