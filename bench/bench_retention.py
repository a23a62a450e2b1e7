"""Bounded history (issue 24): 45 simulated days over a 100k store, table sizes per day.

    python -m bench retention          # ~15 min

A store of 100,000 memories (SQL-generated text, no vectors: the history tables are what
is measured) lives 45 days on an injected clock. Each simulated day writes a busy day's
history — 300 turns' worth of thought_log, llm_calls (2.3 a turn), gate_decisions (4 a
turn), gut_deltas (a 768-d halfvec each), recall_outcomes (20 a turn), dmn_items (100),
safety_events and escalations (20 each) — then runs the light ticker's decay (every
memory unused for 7 days is nudged once a day: summary audit rows) and retention with
the shipped windows. Rows and MB per table are reported at days 1, 7, 8, 14, 30, 31, 38,
45: each table stops growing once its window (30 days for most, 7 for gut_deltas) is full.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from datetime import UTC, datetime, timedelta

from bench.common import bench_pool
from src.consolidation.light.decay_marks_repository import DecayWalk
from src.consolidation.light.retention import enforce, table_sizes
from src.consolidation.light.ticker import LightTicker
from src.consolidation.settings import ConsolidationSettings
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
MEMORIES = 100_000
TURNS = 300
REPORT_DAYS = (1, 7, 8, 14, 30, 31, 38, 45)
DAYS = 45

_DAY_OF_HISTORY = [
    """INSERT INTO thought_log (at, session_id, cycle, source_tag, attention_focus, output, tokens_in, tokens_out)
       SELECT $1::timestamptz + make_interval(secs => g * 200), 's', g, 'external_user',
              'what did we say about topic ' || g, 'an answer of a few sentences about topic ' || g, 1500, 40
         FROM generate_series(1, $2) g""",
    """INSERT INTO llm_calls (at, session_id, provider, model, purpose, tokens_in, tokens_out, cost_usd, ok, status)
       SELECT $1::timestamptz + make_interval(secs => g * 80), 's', 'gemini', 'flash',
              CASE WHEN g % 3 = 0 THEN 'metacognition_fok' ELSE 'system1_answer' END, 1500, 40, 0.0002, true, 'ok'
         FROM generate_series(1, ($2 * 23) / 10) g""",
    """INSERT INTO gate_decisions (at, gate, source_tag, content_preview, action, reason)
       SELECT $1::timestamptz + make_interval(secs => g * 50), CASE WHEN g % 2 = 0 THEN 'entry' ELSE 'exit' END,
              'external_user', 'a line the user typed about topic ' || g, 'persist', 'bench'
         FROM generate_series(1, $2 * 4) g""",
    """INSERT INTO gut_deltas (at, session_id, cycle, delta, magnitude, context)
       SELECT $1::timestamptz + make_interval(secs => g * 200), 's', g,
              array_fill(0.01::real, ARRAY[768])::vector::halfvec, 0.1, 'the focus of cycle ' || g
         FROM generate_series(1, $2) g""",
    """INSERT INTO recall_outcomes (at, memory_id, rank, contributions)
       SELECT $1::timestamptz + make_interval(secs => g * 10), 1 + (g * 7919) % $3, 1 + g % 20,
              ARRAY[0.2, 0.2, 0.2, 0.2, 0.2]
         FROM generate_series(1, $2 * 20) g""",
    """INSERT INTO dmn_items (at, channel, text)
       SELECT $1::timestamptz + make_interval(secs => g * 600), 'self_prompt', 'this comes back to me ' || g
         FROM generate_series(1, 100) g""",
    """INSERT INTO safety_events (at, ceiling, reason, enforced)
       SELECT $1::timestamptz + make_interval(secs => g * 3000), 'rate_limit', 'bench', true
         FROM generate_series(1, 20) g""",
    """INSERT INTO escalations (at, attention_focus, threshold, confidence_before, retried, retry_succeeded,
                               escalated, path, reason)
       SELECT $1::timestamptz + make_interval(secs => g * 3000), 'a hard question ' || g, 0.6, 0.4, true, false,
              false, 'system1_fallback', 'bench'
         FROM generate_series(1, 20) g""",
]


async def _write_day(pool, day_start: datetime) -> None:
    for sql in _DAY_OF_HISTORY:
        args = (day_start, TURNS, MEMORIES)[:1 + ("$2" in sql) + ("$3" in sql)]
        await pool.execute(sql, *args)


async def run() -> list[dict]:
    rows: list[dict] = []
    async with bench_pool("retention") as pool:
        await pool.execute(
            """INSERT INTO memories (content, created_at)
               SELECT 'memory ' || g || ' about topic ' || (g % 997), $1::timestamptz FROM generate_series(1, $2) g""",
            START, MEMORIES)
        settings = ConsolidationSettings(light={"contradiction_samples": 0})
        clock = [START]
        ticker = LightTicker(pool, embedder=HashEmbedder(), llm=None, safety=Safety(), settings=settings,
                             rng=random.Random(1), clock=lambda: clock[0])
        for day in range(1, DAYS + 1):
            started = time.perf_counter()
            day_start = START + timedelta(days=day - 1)
            await _write_day(pool, day_start)
            clock[0] = day_start + timedelta(hours=23)
            while True:                                    # a day of ticks: every due memory nudged once
                nudged = await ticker.decay(clock[0])
                if not nudged and ticker._decay_walk == DecayWalk():    # the walk came round: done
                    break
            await enforce(pool, settings.light.retention, clock[0])
            if day in REPORT_DAYS:
                await pool.execute("VACUUM ANALYZE")
                sizes = await table_sizes(pool)
                for table in sorted(sizes):
                    n, size = sizes[table]
                    rows.append({"name": f"day {day:2d} {table}: rows", "value": n, "unit": "rows"})
                    rows.append({"name": f"day {day:2d} {table}: size", "value": round(size / 2**20, 2), "unit": "MB"})
            print(f"day {day}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return rows


if __name__ == "__main__":
    for row in asyncio.run(run()):
        print(row)
