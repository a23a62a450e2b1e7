"""Bootstrap readiness achievements (plan §5.2), read from what the mind has done.

Each achievement is an EXISTS over the tables the mind writes anyway, evaluated in
one statement, so `/readiness` can never claim a milestone the data does not show.
Milestones whose machinery is not built yet (deep consolidation, promotion, DMN)
simply read "not yet" until those parts write their rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

# (key, title, SQL returning the first time it happened, or NULL)
ACHIEVEMENTS: tuple[tuple[str, str, str], ...] = (
    ("memory_formation", "First memory formation (entry → scratch → exit → persist)",
     "SELECT min(m.created_at) FROM memories m WHERE m.metadata ? 'scratch_id'"),
    ("retrieval_success", "First retrieval success (hybrid search recalled a memory)",
     "SELECT min(at) FROM consolidation_log WHERE actor = 'retrieval' AND operation = 'reinforce'"),
    ("consolidation_cycle", "First consolidation cycle (merge + insight + narrative)",
     "SELECT min(created_at) FROM memory_supersedes"),
    ("goal_promotion", "First goal-weight promotion (experience → goal-equivalent weight)",
     "SELECT min(at) FROM consolidation_log WHERE actor = 'promotion' "
     "AND alpha_after / (alpha_after + beta_after) >= 0.6"),
    ("dmn_acted_upon", "First DMN self-prompt acted upon",
     "SELECT min(at) FROM thought_log WHERE source_tag = 'internal_dmn' AND output IS NOT NULL"),
    ("identity_promotion", "First identity-weight promotion (goal → identity-equivalent weight)",
     "SELECT min(at) FROM consolidation_log WHERE actor = 'promotion' "
     "AND alpha_after / (alpha_after + beta_after) >= 0.8"),
    ("conflict_resolution", "First conflict resolution (reconsolidation)",
     "SELECT min(created_at) FROM memories WHERE memory_type = 'tension' "
     "AND metadata->>'resolved' = 'true'"),
    ("creative_association", "First creative association (DMN channel 2)",
     "SELECT min(created_at) FROM memories WHERE source_tag = 'internal_dmn' "
     "AND metadata->>'channel' = 'creative'"),
    ("goal_achieved", "First goal achieved and reflected upon",
     "SELECT min(created_at) FROM memories WHERE metadata->>'kind' = 'goal' "
     "AND metadata->>'achieved' = 'true'"),
    ("aligned_decision", "First autonomous decision aligned with self-formed values",
     "SELECT min(at) FROM thought_log WHERE source_tag LIKE 'internal_%' "
     "AND actions @> '[{\"aligned_with_values\": true}]'"),
)


@dataclass(frozen=True)
class Achievement:
    key: str
    title: str
    reached_at: datetime | None


async def readiness(db: asyncpg.Pool | asyncpg.Connection) -> list[Achievement]:
    """All ten milestones in one round trip."""
    select = ",\n".join(f"({sql}) AS {key}" for key, _, sql in ACHIEVEMENTS)
    row = await db.fetchrow(f"SELECT {select}")  # fixed SQL from the table above, no input
    return [Achievement(key, title, row[key]) for key, title, _ in ACHIEVEMENTS]


def format_readiness(achievements: list[Achievement]) -> str:
    done = sum(a.reached_at is not None for a in achievements)
    lines = [f"Readiness: {done}/{len(achievements)} achievements"]
    for i, a in enumerate(achievements, 1):
        when = a.reached_at.strftime("%Y-%m-%d %H:%M") if a.reached_at else "not yet"
        mark = "x" if a.reached_at else " "
        lines.append(f" [{mark}] {i:2d}. {a.title} — {when}")
    return "\n".join(lines)
