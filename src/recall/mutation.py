"""Retrieval-induced mutation (plan §3.8), one transaction.

Retrieved rows get reinforce(0.1) and an access (count, last_accessed, ACT-R
presentation); co-access is recorded for the retrieved set. Weight changes go through
the safety choke point.

Near-misses (ranks keep+1 … limit) get contradict(0.05), by default not in the cycle:
the retrieval's transaction queues them as one `near_miss_pending` row (sql/144), and the
light ticker applies what is queued every tick (`apply_near_misses`), summed per memory,
in one choke-point batch. In the cycle they were most of a retrieval's weight changes
(notes.md, "Near misses"); batched, a memory
near-missed by several questions in a tick gets one row version and one audit row (its
evidence says how many times). The suppression lands within a tick (10 s by default) instead of at once: nothing
reads it sooner that could tell (notes.md, "Near misses"). With the light ticker off
(`consolidation.light.enabled: false`) the mind applies them at retrieval, as before
(src/mind.py sets `near_miss_deferred` off).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from src.recall.co_access import record_co_access
from src.recall.outcomes import insert_recall_outcomes
from src.recall.settings import RetrievalSettings
from src.weights.apply import AccessTouch, WeightChange, apply_weight_changes
from src.weights.safety import Safety

ACTOR = "retrieval"
NEAR_MISS = "near miss"


async def mutate_after_retrieval(pool: asyncpg.Pool, retrieved: Sequence[int], near_misses: Sequence[int],
                                 *, safety: Safety, at: datetime, query: str = "",
                                 settings: RetrievalSettings | None = None,
                                 contributions: Sequence[Sequence[float]] | None = None) -> None:
    """Plan §3.8 in one transaction: strengthen the retrieved, suppress near-misses (or
    queue their suppression, `settings.near_miss_deferred`), co-access.

    `contributions` (per retrieved memory, the relevance components times the blend) are
    recorded in `recall_outcomes` for utility and Dirichlet evolution (§4.5).
    """
    cfg = settings or RetrievalSettings()
    evidence = {"query": query[:200]}
    changes = [WeightChange(mid, "reinforce", cfg.reinforce_retrieved, ACTOR, "retrieved", evidence)
               for mid in retrieved]
    deferred = list(near_misses) if cfg.near_miss_deferred else []
    if not deferred:
        changes += [near_miss_change(mid, cfg.contradict_near_miss, evidence) for mid in near_misses]
    async with pool.acquire() as conn, conn.transaction():
        await apply_weight_changes(conn, changes, safety=safety, touch=AccessTouch(list(retrieved), at))
        await record_co_access(conn, retrieved, at)
        if contributions is not None:
            await insert_recall_outcomes(conn, at, retrieved, contributions)
        if deferred and cfg.contradict_near_miss > 0:
            await conn.execute("INSERT INTO near_miss_pending (at, memory_ids, amount, query) VALUES ($1, $2, $3, $4)",
                               at, deferred, cfg.contradict_near_miss, query[:200])


def near_miss_change(memory_id: int, amount: float, evidence: dict) -> WeightChange:
    """A near miss's suppression: forgetting, so a protected memory skips it (and says so)."""
    return WeightChange(memory_id, "contradict", amount, ACTOR, NEAR_MISS, evidence, forgetting="near_miss")


# The oldest queued retrievals, claimed and deleted in the transaction that applies them:
# applied once, also when two tickers (an in-process and a separate consolidation process) run.
# By an id array: with `id IN (subquery)` the planner hashed the claim and read a backlog
# whole (tests/test_hot_path_plans.py).
_CLAIM = """
DELETE FROM near_miss_pending
 WHERE id = ANY(ARRAY(SELECT id FROM near_miss_pending ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED))
RETURNING id, memory_ids, amount, query"""


async def apply_near_misses(pool: asyncpg.Pool, safety: Safety, *, limit: int) -> int:
    """Apply the suppression of up to `limit` queued retrievals' near misses, oldest first:
    one contradict change per memory (the amounts summed; its evidence the last query, and
    `times` when it was near-missed more than once), in one transaction with their removal.
    Returns how many memories were suppressed."""
    async with pool.acquire() as conn, conn.transaction():
        claimed = sorted(await conn.fetch(_CLAIM, limit), key=lambda r: r["id"])
        totals: dict[int, tuple[float, int, str]] = {}
        for row in claimed:
            for mid in dict.fromkeys(row["memory_ids"]):
                amount, times, _ = totals.get(mid, (0.0, 0, ""))
                totals[mid] = (amount + row["amount"], times + 1, row["query"])
        changes = [near_miss_change(mid, amount, {"query": query} | ({"times": times} if times > 1 else {}))
                   for mid, (amount, times, query) in totals.items()]
        outcomes = await apply_weight_changes(conn, changes, safety=safety)
    return sum(1 for o in outcomes if o.applied > 0)
