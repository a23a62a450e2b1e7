"""Consolidation part 2 (issue 14's benchmark): a deep pass over 100k memories.

    python -m bench evolution

100,000 synthetic memories (bench_memory_store's texts and embedder) with crafted
histories, set-based: creation times over a year, 10% retrieved 1–12 times over the
last 60 days, 500 insights of 3 sources (20 of them denied by a new memory), 2,000
recall outcomes due, 4,000 gate decisions, 500 recent episodes. Then one real deep pass (run_deep_pass: advisory lock,
checkpoints, shared call budget) of part 2's phases with an instant fake model (it
answers every structured call at once; model latency is excluded): time per phase,
LLM calls, rows changed. Part 1's phases are issue 13's benchmark.

Own database on the embedded test server, dropped at the end.
"""

from __future__ import annotations

import random
import re
import time
from datetime import UTC, datetime

from bench.bench_memory_store import TextMaker, WordVectorEmbedder, _load
from bench.common import bench_pool, build_hnsw
from src.consolidation.deep.deep_pass import DEEP_PHASES, ConsolidationParts, run_deep_pass
from src.consolidation.deep.phase import Phase, PhaseResult
from src.consolidation.settings import ConsolidationSettings
from src.providers.protocols import LLMResult, Structured
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety

N = 100_000
PART2 = ("reconsolidation", "promotion", "decay", "temporal_replay", "outcomes", "gate_tuning", "contextual")


class InstantModel:
    """Answers part 2's structured meta calls at once; counts calls per purpose."""

    provider, model, configured = "bench", "instant-1", True

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    async def meta_call_structured(self, question, schema, *, purpose, max_tokens=None, caller=None):
        self.calls[purpose] = self.calls.get(purpose, 0) + 1
        name = schema.__name__
        if name == "ContextBatch":
            ids = [int(x) for x in re.findall(r'<memory id="(\d+)"', question)]
            value = schema(contexts=[{"id": i, "context": f"Said in a chat about item {i}."} for i in ids])
        elif name == "ConflictAnswer":
            value = schema(verdict="productive_contradiction", explanation="both hold")
        else:
            value = schema(verdict="keep", explanation="still holds")
        return Structured(value, LLMResult(value.model_dump_json(), self.model, self.provider, 200, 40, 0.0), False)


_HISTORIES = [
    # creation times over the past year
    """UPDATE memories SET created_at = $1::timestamptz - make_interval(secs => random() * 365 * 86400)""",
    # 10% were retrieved 1-12 times in the last 60 days
    """UPDATE memories m SET access_timestamps = a.ts, access_count = cardinality(a.ts), last_accessed = a.ts[cardinality(a.ts)]
         FROM (SELECT id, ARRAY(SELECT $1::timestamptz - make_interval(secs => (60 - g * 5 + random()) * 86400)
                                  FROM generate_series(1, 1 + (id % 12)::int) AS g) AS ts
                 FROM memories WHERE id % 10 = 0) AS a
        WHERE m.id = a.id""",
    # 500 insights over 3 sources each
    """UPDATE memories SET memory_type = 'reflection' WHERE id % 200 = 7""",
    """INSERT INTO memory_supersedes (insight_id, source_id)
       SELECT i.id, i.id + k FROM memories i, generate_series(1, 3) AS k WHERE i.id % 200 = 7""",
    # 500 episodes of the last two days, a few minutes apart
    """UPDATE memories SET created_at = $1::timestamptz - make_interval(secs => (id % 500) * 300)
        WHERE id % 200 = 3""",
    # recall outcomes due for scoring
    """INSERT INTO recall_outcomes (at, memory_id, rank, contributions)
       SELECT $1::timestamptz - interval '5 days', id, 1,
              ARRAY[random() * 0.6, random() * 0.2, random() * 0.05, random() * 0.1, random() * 0.3]
         FROM memories WHERE id % 50 = 1""",
    # gate decisions: drops and persists of the last month
    """INSERT INTO gate_decisions (at, gate, source_tag, content_preview, action, reason, noise_rate, memory_id)
       SELECT $1::timestamptz - make_interval(secs => (5 + random() * 20) * 86400), 'exit', 'external_user',
              left(content, 200), CASE WHEN id % 2 = 0 THEN 'drop' ELSE 'persist' END, 'bench', 0.05,
              CASE WHEN id % 2 = 0 THEN NULL ELSE id END
         FROM memories WHERE id % 25 = 0""",
]


def _timed(phase: Phase, seconds: dict[str, float]) -> Phase:
    async def run(ctx) -> PhaseResult:
        started = time.perf_counter()
        try:
            return await phase.run(ctx)
        finally:
            seconds[phase.name] = time.perf_counter() - started
    return Phase(phase.name, run, phase.needs_llm)


async def run(n: int = N) -> list[dict]:
    rows: list[dict] = []
    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    async with bench_pool("bench_evolution", max_size=6) as pool:
        maker = TextMaker()
        embedder = WordVectorEmbedder(maker.words)
        await pool.execute("DROP INDEX idx_memories_embedding")
        await _load(MemoryStore(pool, embedder), maker, n)
        for sql in _HISTORIES:
            await pool.execute(sql, *([now] if "$1" in sql else []))
        # 20 new memories that deny an insight: reconsolidation's conflicts
        denials = [f"I no longer believe that {r['content']}" for r in await pool.fetch(
            "SELECT content FROM memories WHERE memory_type = 'reflection' ORDER BY id LIMIT 20")]
        ids = await MemoryStore(pool, embedder).store_many([NewMemory(t) for t in denials])
        await pool.execute("UPDATE memories SET created_at = $2::timestamptz - interval '1 hour' "
                           "WHERE id = ANY($1::bigint[])", ids, now)
        await build_hnsw(pool)
        rows.append({"name": "memories", "value": await pool.fetchval("SELECT count(*) FROM memories"),
                     "unit": "rows"})
        seconds: dict[str, float] = {}
        phases = [_timed(p, seconds) for p in DEEP_PHASES if p.name in PART2]
        model = InstantModel()
        before = await pool.fetchval("SELECT count(*) FROM consolidation_log")
        started = time.perf_counter()
        report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=model, safety=Safety(),
                                                        settings=ConsolidationSettings()),
                                     trigger="bench", now=now, rng=random.Random(1), phases=phases)
        total = time.perf_counter() - started
        for name in PART2:
            phase = report.phases[name]
            changed = sum(v for v in phase["counts"].values())
            rows.append({"name": f"{name}: time", "value": seconds[name] * 1000, "unit": "ms"})
            rows.append({"name": f"{name}: LLM calls", "value": model.calls.get(f"consolidation:{name}", 0),
                         "unit": "calls"})
            rows.append({"name": f"{name}: rows changed ({', '.join(f'{k} {v}' for k, v in phase['counts'].items())})",
                         "value": changed, "unit": "rows"})
        rows.append({"name": "whole pass (part 2 phases, lock, checkpoints)", "value": total * 1000, "unit": "ms"})
        rows.append({"name": "weight changes written (consolidation_log)",
                     "value": await pool.fetchval("SELECT count(*) FROM consolidation_log") - before, "unit": "rows"})
        rows.append({"name": f"LLM calls of the pass (budget {report.budget})", "value": report.calls,
                     "unit": "calls"})
    return rows
