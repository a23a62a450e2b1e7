"""No full scan on the hot paths (issue 24): EXPLAIN of every per-cycle and per-minute
statement on a store of 60,000 memories and a ledger of 60,000 calls.

Each plan is checked twice: as the planner builds it for the values given (custom) and
as a cached prepared statement may run it (generic); neither may read a big table whole.
A Seq Scan on a small table, or under a LIMIT the executor stops early, is not what
this guards against — a Seq Scan node on a big table anywhere in the plan fails.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from src.consolidation.light.decay_marks_repository import DECAY_PAGE
from src.consolidation.light.findings_repository import RECENTLY_USED
from src.context.assembly import _TOP_BY_CENTER
from src.dmn.repository import _BOUNDS, _POOL_SAMPLED
from src.metacognition.threshold import IDENTITY_SQL
from src.outcomes.alignment import _SELF_FORMED
from src.providers.costs import _TOTALS
from src.recall.co_access import UPKEEP_SQL
from src.recall.mutation import _CLAIM as NEAR_MISS_CLAIM

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
MEMORIES = 60_000
BIG = {"memories", "memory_standing", "llm_calls", "consolidation_log", "thought_log", "gate_decisions",
       "memory_co_access", "near_miss_pending"}

# (name, statement, arguments): every statement that runs per cycle or per minute.
HOT = [
    ("identity top-N (context assembly)", _TOP_BY_CENTER, (20, 0.6)),
    ("escalation threshold density", IDENTITY_SQL, (0.7,)),
    ("cost line and /cost", _TOTALS, ("session-1", NOW - timedelta(hours=24))),
    ("light decay walk", DECAY_PAGE, (NOW - timedelta(days=7), NOW - timedelta(hours=24), None, 0, 20_000)),
    ("light decay walk, resumed", DECAY_PAGE,
     (NOW - timedelta(days=7), NOW - timedelta(hours=24), NOW - timedelta(days=20), 1234, 20_000)),
    ("contradiction scan: recently used", RECENTLY_USED, (NOW - timedelta(hours=24), "hash", 500)),
    ("DMN bounds", _BOUNDS, (200,)),
    ("DMN sampled pool", _POOL_SAMPLED, (list(range(1, 60_000, 300)), NOW, "hash")),
    ("self-formed values (milestone 10)", _SELF_FORMED, ("hash", 0.8)),
    ("queued near misses (every light tick)", NEAR_MISS_CLAIM, (500,)),
    ("co-access upkeep (every 5 minutes)", UPKEEP_SQL, (NOW - timedelta(days=7), 1, 20_000, NOW, (400, 0), (2_400, 0))),
]


@pytest.fixture
async def big_store(pool):
    """60k memories (a fortnight of creation times, a tenth retrieved lately), a ledger of
    60k calls over 60 days, 60k audit rows of which a few are promotions; analyzed."""
    await pool.execute(
        """INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta, created_at, last_accessed,
                                 embed_model, immutable)
           SELECT 'memory ' || g || ' about topic ' || (g % 97), 1 + (g % 13), 4 + (g % 7),
                  $1::timestamptz - make_interval(mins => g % 20000),
                  CASE WHEN g % 10 = 0 THEN $1::timestamptz - make_interval(mins => g % 3000) END,
                  'hash', g <= 10
             FROM generate_series(1, $2) g""", NOW, MEMORIES)
    await pool.execute(
        """INSERT INTO llm_calls (at, session_id, provider, model, purpose, tokens_in, tokens_out, cost_usd, ok)
           SELECT $1::timestamptz - make_interval(mins => g), 'session-' || (g / 5000), 'gemini', 'flash',
                  'system1', 100, 10, 0.001, true
             FROM generate_series(1, $2) g""", NOW, MEMORIES * 1.44)
    await pool.execute(
        """INSERT INTO consolidation_log (memory_id, operation, actor, reason, requested_delta, applied_delta)
           SELECT g, 'reinforce', CASE WHEN g % 1000 = 0 THEN 'promotion' ELSE 'retrieval' END,
                  CASE WHEN g % 2000 = 0 THEN 'identity' ELSE 'goal' END, 0.1, 0.1
             FROM generate_series(11, $1) g""", MEMORIES)
    await pool.execute(
        """INSERT INTO memory_co_access (memory_id_a, memory_id_b, co_access_count, last_co_accessed)
           SELECT g, g + 1 + (g % 7), 1 + (g % 5), $1::timestamptz - make_interval(hours => g % 400)
             FROM generate_series(1, $2) g""", NOW, MEMORIES - 10)
    await pool.execute(          # a backlog of queued near misses: a ticker that was away for hours
        """INSERT INTO near_miss_pending (at, memory_ids, amount)
           SELECT $1::timestamptz - make_interval(secs => g), ARRAY[g % 50000 + 11, g % 40000 + 11], 0.05
             FROM generate_series(1, $2) g""", NOW, MEMORIES)
    await pool.execute("ANALYZE")
    return pool


def _seq_scans(plan: dict) -> list[str]:
    found = []
    if plan.get("Node Type") == "Seq Scan" and plan.get("Relation Name") in BIG:
        found.append(plan["Relation Name"])
    for child in plan.get("Plans", []):
        found += _seq_scans(child)
    return found


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
async def test_no_hot_statement_reads_a_big_table_whole(big_store, mode):
    problems = {}
    async with big_store.acquire() as conn:
        await conn.execute(f"SET plan_cache_mode = {mode}")
        for name, sql, args in HOT:
            [plan] = json.loads(await conn.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args))
            scans = _seq_scans(plan["Plan"])
            if scans:
                problems[name] = scans
    assert problems == {}


async def test_the_statements_still_answer(big_store):
    """The plans are of statements that work: each returns what it should on this store."""
    top = await big_store.fetch(_TOP_BY_CENTER, 5, 0.6)
    assert len(top) == 5 and all(r["center"] >= 0.6 for r in top)
    assert [r["center"] for r in top] == sorted((r["center"] for r in top), reverse=True)
    reading = await big_store.fetchrow(IDENTITY_SQL, 0.7)
    assert reading["total"] == MEMORIES
    exact = await big_store.fetchval(
        "SELECT avg(depth_weight_alpha / (depth_weight_alpha + depth_weight_beta)) FROM memories "
        "WHERE depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) > 0.7")
    assert reading["density"] == pytest.approx(exact)
    page = await big_store.fetch(DECAY_PAGE, NOW - timedelta(days=7), NOW - timedelta(hours=24), None, 0, 100)
    assert len(page) == 100 and all(r["due"] for r in page)
    recent = await big_store.fetch(RECENTLY_USED, NOW - timedelta(hours=24), "hash", 500)
    assert len(recent) == 500
    assert len(await big_store.fetch(_SELF_FORMED, "hash", 0.8)) == 0          # no embeddings in this store
