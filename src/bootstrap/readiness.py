"""Bootstrap readiness achievements (plan §5.2): what `/readiness` shows.

Each milestone is an event the mind recorded when it did the thing (see
`src/bootstrap/milestones.py` for the call sites), so `/readiness` can show when each
was reached and by what: the ids in the event are the memories, cycles and outcomes
involved, to be looked up with SQL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from src.bootstrap.milestones import TITLES, reached
from src.text import cut

KEYS: tuple[str, ...] = (
    "memory_formation", "retrieval_success", "consolidation_cycle", "goal_promotion", "dmn_acted_upon",
    "identity_promotion", "conflict_resolution", "creative_association", "goal_achieved", "aligned_decision",
)


@dataclass(frozen=True)
class Achievement:
    key: str
    title: str
    reached_at: datetime | None
    event: dict = field(default_factory=dict)


async def readiness(db: asyncpg.Pool | asyncpg.Connection) -> list[Achievement]:
    """All ten milestones in one round trip."""
    done = await reached(db)
    return [Achievement(key, title, *(done.get(i, (None, {}))))
            for i, (key, title) in enumerate(zip(KEYS, TITLES, strict=True), 1)]


def _event_text(event: dict, limit: int = 90) -> str:
    text = json.dumps(event, ensure_ascii=True, sort_keys=True, default=str)   # control chars escaped
    return cut(text, limit)


def format_readiness(achievements: list[Achievement]) -> str:
    done = sum(a.reached_at is not None for a in achievements)
    lines = [f"Readiness: {done}/{len(achievements)} achievements"]
    for i, a in enumerate(achievements, 1):
        when = a.reached_at.strftime("%Y-%m-%d %H:%M") if a.reached_at else "not yet"
        mark = "x" if a.reached_at else " "
        lines.append(f" [{mark}] {i:2d}. {a.title} — {when}")
        if a.reached_at:
            lines.append(f"        by {_event_text(a.event)}")
    return "\n".join(lines)
