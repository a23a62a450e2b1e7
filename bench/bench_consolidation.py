"""Consolidation at 100k memories (issue 13's benchmark).

    python -m bench consolidation

- One light tick with every operation due (decay, co-access upkeep, contradiction scan,
  pattern detection, monitors), p50 / max over 5 ticks, and each operation alone; a tick
  of the default schedule, where the Phase C monitors are due every tick.
- The center summary (sql/080): monitors and overview queries against the pre-080 scans,
  the triggers' cost on the choke point, check and rebuild (bench/center_summary_costs.py).
- One deep pass with an instant fake model (answers at once from what it is sent):
  time, LLM calls, tokens, what it wrote. 100 new memories, a fifth of them near-duplicates.
- The loop's cycle time p50 / p95 idle vs while deep passes and light ticks run back to back.

Own database on the embedded test server, dropped at the end.
"""

from __future__ import annotations

import asyncio
import random
import re
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta

from bench import center_summary_costs
from bench.bench_loop import InstantLLM, _mind
from bench.bench_memory_store import TextMaker, _load, synthetic_store
from bench.common import build_hnsw
from src.consolidation.deep.deep_pass import ConsolidationParts, run_deep_pass
from src.consolidation.light.ticker import LightTicker
from src.consolidation.settings import ConsolidationSettings
from src.providers.protocols import LLMResult, Structured
from src.recall.store import MemoryStore, NewMemory
from src.tokens import count_tokens
from src.weights.safety import Safety

N = 100_000
_ID = re.compile(r"\[(\d+)\]")


class InstantConsolidationLLM:
    """Answers every consolidation schema at once, citing only ids it was shown."""

    provider, model, configured = "bench", "instant-1", True

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    async def meta_call_structured(self, question, schema, *, purpose, max_tokens=None, caller=None):
        ids = [int(x) for x in _ID.findall(question)]
        name = schema.__name__
        if name == "Questions":
            value = schema(questions=["What does the agent keep coming back to?", "What changed lately?",
                                      "What does the agent avoid?"])
        elif name == "Insights":
            value = schema(insights=[{"insight": f"Insight {k} about recurring themes.", "cited_ids": ids[k:k + 3]}
                                     for k in range(0, min(len(ids), 15), 3)])
        elif name == "MergeAnswer":
            clusters = re.findall(r"Cluster (\d+):((?:\n  \[\d+\].*)+)", question)
            value = schema(insights=[{"cluster": int(n), "insight": f"Merged theme {n}.",
                                      "cited_ids": [int(x) for x in _ID.findall(body)]} for n, body in clusters])
        elif name == "Narratives":
            value = schema(narratives=[{"insight_id": int(i), "narrative": "I came to value this because of it."}
                                       for i in re.findall(r"Insight \[(\d+)\]", question)])
        elif name == "Recompressed":
            value = schema(items=[{"id": int(i), "compressed": "a more general line"}
                                  for i in re.findall(r"Memory \[(\d+)\]", question)])
        elif name == "TensionAnswer":
            value = schema(contradicts=False, contradicting_ids=[], aligned_ids=[], explanation="")
        elif name == "ContextBatch":        # contextual retrieval (issue 14)
            value = schema(contexts=[{"id": int(i), "context": "said by the user during a session about work"}
                                     for i in re.findall(r'<memory id="(\d+)"', question)])
        elif name == "ConflictAnswer":      # conflict-aware reconsolidation (issue 14)
            value = schema(verdict="no_conflict", explanation="they agree")
        elif name == "ReevaluationAnswer":
            value = schema(verdict="keep", explanation="the sources still support it")
        else:
            value = schema(contradicts=False, summary_a=question[:40])
        text = value.model_dump_json()
        self.calls.append((count_tokens(question), count_tokens(text)))
        return Structured(value, LLMResult(text, self.model, self.provider, count_tokens(question),
                                           count_tokens(text), 0.0), False)


def _p(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(round(0.95 * (len(ordered) - 1)))]


async def _age(pool) -> None:
    """Spread creation over 60 days, 10% retrieved in the last day, 200k idle co-access pairs."""
    now = datetime.now(UTC)
    await pool.execute("UPDATE memories SET created_at = $1::timestamptz - (id % 60) * interval '1 day'", now)
    await pool.execute("UPDATE memories SET last_accessed = $1::timestamptz - interval '2 hours' WHERE id % 10 = 0", now)
    await pool.execute(
        """INSERT INTO memory_co_access (memory_id_a, memory_id_b, co_access_count, last_co_accessed)
           SELECT a, a + 1 + (a * 7919) % 500, 1 + (a % 5), $1::timestamptz - ((a % 20) || ' days')::interval
             FROM generate_series(1, 200000) a WHERE a + 1 + (a * 7919) % 500 <= $2
           ON CONFLICT DO NOTHING""", now, N)
    await pool.execute("VACUUM ANALYZE memories")
    await pool.execute("VACUUM ANALYZE memory_co_access")


async def _light(pool, embedder) -> list[dict]:
    settings = ConsolidationSettings(light={"decay_interval_s": 0, "co_access_interval_s": 0,
                                           "contradiction_interval_s": 0, "pattern_interval_s": 0,
                                           "monitors_interval_s": 0})
    ticker = LightTicker(pool, embedder=embedder, llm=None, safety=Safety(), settings=settings, rng=random.Random(1))
    await ticker.contradiction_scan(datetime.now(UTC))          # learns the negation direction once
    ticks, per_op = [], {name: [] for name in ticker._ops}
    for i in range(5):
        now = datetime.now(UTC) + timedelta(days=i + 1)          # a new decay period every tick
        t0 = time.perf_counter()
        await ticker.tick(now)
        ticks.append((time.perf_counter() - t0) * 1000)
        for name, (op, _) in ticker._ops.items():
            t1 = time.perf_counter()
            await op(now + timedelta(hours=12))
            per_op[name].append((time.perf_counter() - t1) * 1000)
    # the default schedule: the tick after one that ran everything has only the monitors due
    plain = LightTicker(pool, embedder=embedder, llm=None, safety=Safety(), settings=ConsolidationSettings(),
                        rng=random.Random(1))
    start = datetime.now(UTC) + timedelta(days=30)
    await plain.tick(start)
    monitor_ticks = []
    for i in range(1, 11):
        t0 = time.perf_counter()
        did = await plain.tick(start + timedelta(seconds=5 * i))   # before any other interval
        monitor_ticks.append((time.perf_counter() - t0) * 1000)
        assert did == {"monitors": 1}, did
    rows = [{"name": "100k: light tick, all operations due, p50", "value": _p(ticks)[0], "unit": "ms"},
            {"name": "100k: light tick, all operations due, max", "value": max(ticks), "unit": "ms"},
            {"name": "100k: light tick, default schedule (monitors due every tick) p50",
             "value": _p(monitor_ticks)[0], "unit": "ms"},
            {"name": "100k: light tick, default schedule (monitors due every tick) max",
             "value": max(monitor_ticks), "unit": "ms"}]
    rows += [{"name": f"100k: light op {k} p50", "value": _p(v)[0], "unit": "ms"} for k, v in per_op.items()]
    decayed = await pool.fetchval("SELECT count(*) FROM consolidation_log WHERE actor = 'light_consolidation'")
    rows.append({"name": "100k: decay changes written in 10 decay runs", "value": int(decayed), "unit": "rows"})
    return rows


async def _new_memories(store: MemoryStore, maker: TextMaker, seed: int) -> None:
    texts = maker.texts(80)
    rng = random.Random(seed)
    base = maker.texts(5)
    dupes = [f"{b} {rng.choice(['again', 'once more', 'today'])}" for b in base for _ in range(4)]
    await store.store_many([NewMemory(t, compressed=t[:60]) for t in texts + dupes])


async def _deep(pool, embedder, store, maker) -> list[dict]:
    await _new_memories(store, maker, 1)
    llm = InstantConsolidationLLM()
    t0 = time.perf_counter()
    report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=llm, safety=Safety(),
                                                    settings=ConsolidationSettings()),
                                 trigger="manual")
    seconds = time.perf_counter() - t0
    written = {f"{p}:{k}": v for p, r in report.phases.items() for k, v in r["counts"].items()}
    return [{"name": "100k: deep pass, instant model, time", "value": seconds, "unit": "s"},
            {"name": "100k: deep pass LLM calls (budget 15)", "value": report.calls, "unit": "calls"},
            {"name": "100k: deep pass tokens in", "value": sum(c[0] for c in llm.calls), "unit": "tokens"},
            {"name": "100k: deep pass tokens out", "value": sum(c[1] for c in llm.calls), "unit": "tokens"},
            *({"name": f"100k: deep pass wrote {k}", "value": v, "unit": "rows"} for k, v in written.items())]


async def _cycles(pool, embedder, store, maker, tmp) -> list[dict]:
    mind = await _mind(pool, embedder, InstantLLM(), tmp, "bench-consolidation")

    async def cycles(n: int) -> list[float]:
        out = []
        for _ in range(n):
            await mind.loop.submit("user", maker.question(0, 3_000))
            t = time.perf_counter()
            await mind.loop.cycle()
            out.append((time.perf_counter() - t) * 1000)
        return out

    await cycles(10)
    idle = await cycles(40)
    stop = asyncio.Event()
    passes = 0

    async def background() -> None:
        nonlocal passes
        settings = ConsolidationSettings(light={"decay_interval_s": 0, "co_access_interval_s": 0,
                                               "contradiction_interval_s": 0, "pattern_interval_s": 0})
        ticker = LightTicker(pool, embedder=embedder, llm=None, safety=Safety(), settings=settings)
        k = 0
        while not stop.is_set():
            k += 1
            await _new_memories(store, maker, 100 + k)
            await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=InstantConsolidationLLM(),
                                                   safety=Safety(), settings=settings),
                                trigger="manual")
            passes += 1
            await ticker.tick(datetime.now(UTC) + timedelta(days=k))

    task = asyncio.create_task(background())
    busy = await cycles(40)
    stop.set()
    await task
    await mind.close()
    (i50, i95), (b50, b95) = _p(idle), _p(busy)
    return [{"name": "100k: loop cycle idle p50", "value": i50, "unit": "ms"},
            {"name": "100k: loop cycle idle p95", "value": i95, "unit": "ms"},
            {"name": "100k: loop cycle during deep passes + light ticks p50", "value": b50, "unit": "ms"},
            {"name": "100k: loop cycle during deep passes + light ticks p95", "value": b95, "unit": "ms"},
            {"name": "100k: deep passes completed during those 40 cycles", "value": passes, "unit": "passes"}]


async def run() -> list[dict]:
    rows: list[dict] = []
    async with synthetic_store("bench_consolidation", max_size=8) as (pool, maker, store):
        embedder = store.embedder
        await pool.execute("DROP INDEX IF EXISTS idx_memories_embedding")   # bulk load, then build
        await _load(store, maker, N)
        await _age(pool)            # before the HNSW build: 100k non-HOT updates would re-insert into it
        await build_hnsw(pool)
        rows += await _light(pool, embedder)
        rows.append(await center_summary_costs.differing_buckets(pool, "100k"))
        rows += await center_summary_costs.measure(pool, "100k")
        rows += await _deep(pool, embedder, store, maker)
        with tempfile.TemporaryDirectory() as tmp:
            rows += await _cycles(pool, embedder, store, maker, tmp)
    return rows
