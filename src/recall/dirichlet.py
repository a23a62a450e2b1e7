"""The evolved Dirichlet factors recall's relevance blend is drawn with (plan §3.1, §4.5).

Recall samples the blend of its five relevance components from
Dirichlet(blend_alpha(maturity)[c] * factor[c]): the maturity schedule is the baseline and
the factors, which consolidation evolves from recall outcomes, lie on top of it. The
factors live in `dirichlet_alphas` (every step also in `dirichlet_history`, with its
evidence). They are kept here, with their reader: recall reads them through a cache
(`DirichletFactors`), and consolidation's evolution step
(src/consolidation/evolution/dirichlet_evolution.py) reads and writes them through
`read_factors` and `write_factors`, so recall never imports consolidation.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg

from src.db.sql import Executor, json_param
from src.recall.relevance import COMPONENTS


def evolved_alpha(alpha: Mapping[str, float], factors: Mapping[str, float]) -> dict[str, float]:
    """The maturity-schedule alphas times the evolved factors (missing factor = 1)."""
    return {c: alpha[c] * float(factors.get(c, 1.0)) for c in COMPONENTS}


async def read_factors(db: Executor) -> dict[str, float]:
    """The evolved factor per relevance component (missing = 1.0)."""
    return {r["component"]: r["factor"] for r in await db.fetch("SELECT component, factor FROM dirichlet_alphas")}


async def write_factors(conn: asyncpg.Connection, now: datetime, before: Mapping[str, float],
                        after: Mapping[str, float], evidence: Mapping[str, Any]) -> None:
    """Store the new factors and log the step with its evidence, in the caller's transaction."""
    await conn.execute(
        """INSERT INTO dirichlet_alphas (component, factor, updated_at)
           SELECT c, f, $1 FROM unnest($2::text[], $3::float8[]) AS t(c, f)
           ON CONFLICT (component) DO UPDATE SET factor = EXCLUDED.factor, updated_at = EXCLUDED.updated_at""",
        now, list(after), [float(v) for v in after.values()])
    await conn.execute(
        "INSERT INTO dirichlet_history (at, before, after, evidence) VALUES ($1, $2::jsonb, $3::jsonb, $4::jsonb)",
        now, json_param(dict(before)), json_param(dict(after)), json_param(dict(evidence)))


class DirichletFactors:
    """Recall's cached read of `dirichlet_alphas`, refreshed every `refresh_s` seconds."""

    def __init__(self, refresh_s: float = 60.0):
        self.refresh_s = refresh_s
        self._factors: dict[str, float] = {}
        self._read_at: float | None = None

    async def get(self, db: Executor) -> dict[str, float]:
        now = time.monotonic()
        if self._read_at is None or now - self._read_at >= self.refresh_s:
            self._factors = await read_factors(db)
            self._read_at = now
        return self._factors
