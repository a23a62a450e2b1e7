"""Retrieval-induced mutation (plan §3.8), one transaction.

Retrieved rows get reinforce(0.1) and an access (count, last_accessed, ACT-R
presentation); near-misses (ranks keep+1 … limit) get contradict(0.05); co-access is
recorded for the retrieved set. Weight changes go through the safety choke point.
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


async def mutate_after_retrieval(pool: asyncpg.Pool, retrieved: Sequence[int], near_misses: Sequence[int],
                                 *, safety: Safety, at: datetime, query: str = "",
                                 settings: RetrievalSettings | None = None,
                                 contributions: Sequence[Sequence[float]] | None = None) -> None:
    """Plan §3.8 in one transaction: strengthen the retrieved, suppress near-misses, co-access.

    `contributions` (per retrieved memory, the relevance components times the blend) are
    recorded in `recall_outcomes` for utility and Dirichlet evolution (§4.5).
    """
    cfg = settings or RetrievalSettings()
    evidence = {"query": query[:200]}
    changes = [WeightChange(mid, "reinforce", cfg.reinforce_retrieved, "retrieval", "retrieved", evidence)
               for mid in retrieved]
    changes += [WeightChange(mid, "contradict", cfg.contradict_near_miss, "retrieval", "near miss", evidence,
                             forgetting="near_miss")
                for mid in near_misses]
    async with pool.acquire() as conn, conn.transaction():
        await apply_weight_changes(conn, changes, safety=safety, touch=AccessTouch(list(retrieved), at))
        await record_co_access(conn, retrieved, at)
        if contributions is not None:
            await insert_recall_outcomes(conn, at, retrieved, contributions)
