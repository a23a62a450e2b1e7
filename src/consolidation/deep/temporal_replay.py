"""Temporal chain replay (plan §4.4, after CMA): what happened one after another stays linked.

Decision: the links live in the Hebbian co-access network (`memory_co_access`) with
the `temporal` flag, not in a table of their own, so spreading activation (§3.1)
follows a chain of episodes exactly as it follows co-retrieval: recalling one
episode pre-activates the one before and after it. Consecutive = adjacent in
event time (falling back to created_at) among episodic memories of the last
`lookback_days`, at most `max_gap_minutes` apart. Each replay adds one co-access
count; a pair is replayed once per lookback window (see src/recall/co_access.py), so the
link's strength n / (n + 2) grows with how often the chain is lived again, not with
how often the pass runs. One statement.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.evolution.settings import EvolutionSettings, evolution_of
from src.recall import co_access


async def run_replay(pool: asyncpg.Pool, settings: EvolutionSettings, now: datetime,
                     counts: dict[str, int]) -> int:
    """Strengthen links between consecutive episodic memories; returns the pairs touched."""
    cfg = settings.replay
    n = await co_access.replay_temporal_chain(pool, now, cfg.lookback_days, cfg.max_gap_minutes, cfg.max_pairs)
    counts["temporal_links"] = counts.get("temporal_links", 0) + n
    return n


async def run(ctx: DeepPassContext) -> PhaseResult:
    """Deep-pass phase: temporal chain replay (§4.4)."""
    result = PhaseResult()
    await run_replay(ctx.pool, evolution_of(ctx), ctx.now, result.counts)
    return result
