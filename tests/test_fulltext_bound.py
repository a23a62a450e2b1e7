"""The full-text arm is bounded (issue 24): a question that shares a common word with much
of the store scores the rows of its rare lexemes and at most a capped sample of the rest."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from src.recall.search import HYBRID_SQL, hybrid_arguments

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


async def _store(pool, common: int, rare: int) -> None:
    await pool.execute(
        """INSERT INTO memories (content, embed_model)
           SELECT CASE WHEN g <= $2 THEN 'the weather was cold and Miso the cat slept ' || g
                       ELSE 'the weather was cold on day ' || g END, 'x'
             FROM generate_series(1, $1) g""", common + rare, rare)
    await pool.execute("ANALYZE memories")


def _args(question: str, df_cap: int, common_cap: int) -> tuple:
    args = list(hybrid_arguments(question, None, embed_model="x", now=NOW, limit=20, candidates=50))
    args[10], args[11] = df_cap, common_cap      # the caps, small enough for a test store
    return tuple(args)


def _node_rows(plan: dict, cte: str) -> int | None:
    if plan.get("Subplan Name") == f"CTE {cte}":
        return plan["Actual Rows"]
    for child in plan.get("Plans", []):
        found = _node_rows(child, cte)
        if found is not None:
            return found
    return None


async def test_a_common_word_question_scores_a_bounded_pool(pool):
    await _store(pool, common=600, rare=3)
    [plan] = json.loads(await pool.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + HYBRID_SQL,
                                            *_args("was the weather cold?", 100, 40)))
    assert _node_rows(plan["Plan"], "pool") == 40                # no rare lexeme: the capped sample only
    [plan] = json.loads(await pool.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + HYBRID_SQL,
                                            *_args("was the weather cold when Miso slept?", 100, 40)))
    assert _node_rows(plan["Plan"], "pool") <= 3 + 40            # Miso's rows, plus the capped sample


async def test_the_rare_word_still_decides_the_ranking(pool):
    await _store(pool, common=600, rare=3)
    rows = await pool.fetch(HYBRID_SQL, *_args("was the weather cold when Miso slept?", 100, 40))
    assert [r["content"].endswith(("slept 1", "slept 2", "slept 3")) for r in rows[:3]] == [True] * 3
    assert all(r["fts_rank"] is not None for r in rows)


async def test_a_small_store_is_searched_whole(pool):
    """Under the df cap every lexeme is rare: every matching row is scored, as before."""
    await _store(pool, common=60, rare=3)
    [plan] = json.loads(await pool.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + HYBRID_SQL,
                                            *_args("was the weather cold?", 100, 10)))
    assert _node_rows(plan["Plan"], "pool") == 63
