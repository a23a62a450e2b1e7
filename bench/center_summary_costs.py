"""What the trigger-kept center summary (sql/080) saves and costs, on a loaded store.

Called by bench_consolidation (100k) and bench_web (10k):

- the Phase C monitors' inputs: the pre-080 full scans (entropy with numeric log, the
  CBA axes over every row) against `run_monitors` on the summary;
- the overview's histogram and shape counts: scan (the pre-080 queries, still used for a
  mind not yet migrated) against the summary;
- what the triggers cost: a 20-row weight write-back through the choke point (a
  retrieval's size) and a 2,000-row one (a decay tick's), with and without the update
  trigger;
- the check and rebuild the deep pass runs (full scans), and that the summary still
  equals a scan after everything the benchmark did.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import asyncpg

from src.consolidation.monitors import run_monitors
from src.web import queries as q
from src.weights.apply import AccessTouch, WeightChange, apply_weight_changes
from src.weights.center_summary import CENTER_BINS, rebuild_summary, summary_differences
from src.weights.safety import Safety

# The pre-080 monitor queries, for comparison only.
_SCAN_ENTROPY = """
WITH c AS (SELECT depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS w FROM memories),
     t AS (SELECT sum(w) AS total, count(*) AS n FROM c)
SELECT COALESCE(-sum((w / t.total) * log(2.0, (w / t.total)::numeric)), 0)::float8 AS h, max(t.n) AS n
  FROM c, t WHERE w > 0 AND t.total > 0"""
_SCAN_AXES = """
SELECT count(*) FILTER (WHERE NOT (depth_weight_alpha < 2 AND depth_weight_beta < 2)) AS informed,
       count(*) FILTER (WHERE depth_weight_alpha > 5 AND depth_weight_beta > 5)        AS contested,
       count(*) FILTER (WHERE memory_type = 'tension'
                          AND COALESCE(metadata->>'resolved', 'false') <> 'true')       AS open_tensions,
       array_agg(depth_weight_alpha) FILTER (WHERE metadata->>'kind' IN ('value', 'goal')) AS v_alpha
  FROM memories"""


async def _timed(fn: Callable[[], Awaitable[object]], n: int) -> float:
    """p50 ms of n runs."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)


async def _write_back(pool: asyncpg.Pool, rng: random.Random, top: int, size: int, triggers: bool) -> float:
    """One choke-point batch of `size` changes (a fifth reinforced and touched); ms.

    Rolled back, so the store stays as it was; without `triggers` only sql/080's update
    trigger is off (inside the transaction), every other trigger (foreign keys) still runs."""
    ids = rng.sample(range(1, top + 1), size)
    cut = max(1, size // 5)
    changes = ([WeightChange(i, "reinforce", 0.1, "bench", "retrieval-like") for i in ids[:cut]]
               + [WeightChange(i, "contradict", 0.05, "bench", "near-miss-like") for i in ids[cut:]])
    async with pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            if not triggers:
                await conn.execute("ALTER TABLE memories DISABLE TRIGGER memory_center_update")
            t = time.perf_counter()
            await apply_weight_changes(conn, changes, safety=Safety(),
                                       touch=AccessTouch(ids[:cut], datetime.now(UTC)))
            return (time.perf_counter() - t) * 1000
        finally:
            await tx.rollback()


async def measure(pool: asyncpg.Pool, label: str, runs: int = 5) -> list[dict]:
    """Rows for the benchmark table; `label` prefixes each measure (e.g. "100k")."""
    top = await pool.fetchval("SELECT max(id) FROM memories")
    rows = [
        {"name": f"{label}: monitors' inputs by full scan (pre-080: entropy + CBA axes) p50",
         "value": await _timed(lambda: pool.fetch(_SCAN_ENTROPY), runs)
         + await _timed(lambda: pool.fetch(_SCAN_AXES), runs), "unit": "ms"},
        {"name": f"{label}: run_monitors on the summary p50",
         "value": await _timed(lambda: run_monitors(pool, Safety(), "bench"), runs), "unit": "ms"},
        {"name": f"{label}: overview histogram + shape counts by scan (pre-080) p50",
         "value": await _timed(lambda: q.center_histogram_scan(pool, CENTER_BINS), runs)
         + await _timed(lambda: q.shape_counts_scan(pool), runs), "unit": "ms"},
        {"name": f"{label}: overview histogram + shape counts from the summary p50",
         "value": await _timed(lambda: q.center_histogram(pool, CENTER_BINS), runs)
         + await _timed(lambda: q.shape_counts(pool), runs), "unit": "ms"},
    ]
    rng = random.Random(80)
    for size, n in ((20, 60), (2_000, 5)):
        with_t, without = [], []
        for _ in range(n):          # interleaved, so load on the shared machine hits both alike
            with_t.append(await _write_back(pool, rng, top, size, True))
            without.append(await _write_back(pool, rng, top, size, False))
        rows += [{"name": f"{label}: choke point write-back of {size:,} rows, with / without the summary trigger p50",
                  "value": statistics.median(with_t), "unit": f"ms (without {statistics.median(without):.1f})"}]
    rows += [
        {"name": f"{label}: summary check against a scan (deep pass) p50",
         "value": await _timed(lambda: summary_differences(pool), 3), "unit": "ms"},
        {"name": f"{label}: summary rebuild p50", "value": await _timed(lambda: rebuild_summary(pool), 3),
         "unit": "ms"},
    ]
    return rows


async def differing_buckets(pool: asyncpg.Pool, label: str) -> dict:
    """After a benchmark's writes: buckets where the summary differs from a scan (0 expected)."""
    return {"name": f"{label}: summary buckets differing from a scan after the run",
            "value": len(await summary_differences(pool)), "unit": "buckets"}
