"""Fixture rows for the consolidation part 2 tests: memories with crafted histories."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
from pgvector import HalfVector

from src.consolidation.deep.phase import CallBudget, DeepPassContext
from src.consolidation.evolution.settings import EvolutionSettings
from src.consolidation.settings import ConsolidationSettings
from src.weights.safety import Safety

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def days_ago(d: float) -> datetime:
    return NOW - timedelta(days=d)


def spread(n: int, over_days: float, *, end_days_ago: float = 1.0) -> list[datetime]:
    """n sightings evenly from `end_days_ago + over_days` to `end_days_ago` days before NOW."""
    if n == 1:
        return [days_ago(end_days_ago)]
    return [days_ago(end_days_ago + over_days * (1 - i / (n - 1))) for i in range(n)]


async def add_memory(pool, content: str = "a memory", *, alpha: float = 1.0, beta: float = 4.0,
                     accesses: Sequence[datetime] = (), created: datetime | None = None,
                     memory_type: str = "episodic", vector: np.ndarray | None = None,
                     embed_model: str | None = None, access_count: int | None = None,
                     last_accessed: datetime | None = None, utility: float = 0.0,
                     source_tag: str = "external_user", metadata: dict | None = None,
                     immutable: bool = False) -> int:
    accesses = sorted(accesses)
    return await pool.fetchval(
        """INSERT INTO memories (content, memory_type, depth_weight_alpha, depth_weight_beta, access_timestamps,
                                 access_count, last_accessed, created_at, embedding, embed_model, utility_score,
                                 source_tag, metadata, immutable)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::jsonb, $14) RETURNING id""",
        content, memory_type, alpha, beta, list(accesses),
        len(accesses) if access_count is None else access_count,
        last_accessed if last_accessed is not None else (accesses[-1] if accesses else None),
        created or days_ago(60), None if vector is None else HalfVector(vector), embed_model, utility,
        source_tag, json.dumps(metadata or {}), immutable)


async def weight(pool, memory_id: int) -> tuple[float, float]:
    row = await pool.fetchrow("SELECT depth_weight_alpha, depth_weight_beta FROM memories WHERE id = $1", memory_id)
    return row[0], row[1]


def step_context(pool, embedder, llm, settings: EvolutionSettings, *, phase: str, now: datetime = NOW,
                 budget: CallBudget | None = None) -> DeepPassContext:
    """A deep pass's context for calling one of its steps alone: `settings` as the pass's
    `evolution` section, `phase` naming its model calls (`consolidation:<phase>`); what the
    step skips is in `skipped_steps`."""
    return DeepPassContext(pool=pool, embedder=embedder, llm=llm, safety=Safety(),
                           settings=ConsolidationSettings(evolution=settings), now=now, rng=random.Random(0),
                           pass_id=0, budget=budget if budget is not None else CallBudget(5), phase=phase)
