"""Outcome tracking (plan §5.3): outcomes linked back to the decisions before them.

Gate decisions (`gate_decisions.id`), gut deltas (`gut_deltas.id`) and promotions
(`consolidation_log.id` of actor 'promotion') are forward-linkable: their ids exist when
they are made, and when an outcome becomes apparent — a correction from System 2, a
user's explicit feedback, a goal achieved, a tension resolved — `record_outcome` writes
it and links it, in one transaction, to the decisions of the `lookback` before it (at
most `max_links` of each kind, newest first), plus any subjects named explicitly. PCA
in the deep pass reads the valence of these links (hope vs fear axes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from src.bootstrap.milestones import record_milestone
from src.outcomes.settings import OutcomeSettings

#: Valence of each kind when the caller does not know better (−1 bad … +1 good).
DEFAULT_VALENCE: Mapping[str, float] = {
    "correction": -0.5, "goal_achieved": 1.0, "tension_resolved": 0.5,
}

_INSERT = """
INSERT INTO outcomes (at, kind, valence, description, evidence)
VALUES ($1, $2, $3, $4, $5::jsonb) RETURNING id
"""
# One statement links the outcome to the recent decisions of every forward-linkable kind.
_LINK_WINDOW = """
INSERT INTO outcome_links (outcome_id, subject_kind, subject_id)
SELECT $1::bigint, 'gate_decision', id FROM (SELECT id FROM gate_decisions WHERE at BETWEEN $2::timestamptz AND $3::timestamptz
                                      ORDER BY id DESC LIMIT $4) g
UNION ALL
SELECT $1::bigint, 'gut_delta', id FROM (SELECT id FROM gut_deltas WHERE at BETWEEN $2::timestamptz AND $3::timestamptz
                                  ORDER BY id DESC LIMIT $4) d
UNION ALL
SELECT $1::bigint, 'promotion', id FROM (SELECT id FROM consolidation_log
                                  WHERE actor = 'promotion' AND at BETWEEN $2::timestamptz AND $3::timestamptz
                                  ORDER BY id DESC LIMIT $4) p
ON CONFLICT DO NOTHING
"""
_LINK_EXPLICIT = """
INSERT INTO outcome_links (outcome_id, subject_kind, subject_id)
SELECT $1, k, i FROM unnest($2::text[], $3::bigint[]) AS t(k, i)
ON CONFLICT DO NOTHING
"""


async def record_outcome(pool: asyncpg.Pool, *, kind: str, description: str, at: datetime,
                         valence: float | None = None, evidence: Mapping[str, Any] | None = None,
                         subjects: Sequence[tuple[str, int]] = (), links: OutcomeSettings | None = None) -> int:
    """Write one outcome and link it back; returns the outcome id. `links`: how far back
    (`lookback_s`) and to how many decisions of each kind (`max_links`) it is linked; the
    `outcomes:` defaults without it."""
    links = links or OutcomeSettings()
    v = DEFAULT_VALENCE.get(kind, 0.0) if valence is None else valence
    async with pool.acquire() as conn, conn.transaction():
        oid = await conn.fetchval(_INSERT, at, kind, float(v), description,
                                  json.dumps(dict(evidence or {}), default=str))
        await conn.execute(_LINK_WINDOW, oid, at - timedelta(seconds=links.lookback_s), at, links.max_links)
        if subjects:
            await conn.execute(_LINK_EXPLICIT, oid, [k for k, _ in subjects], [i for _, i in subjects])
    return oid


_POSITIVE = re.compile(r"\b(thanks|thank you|good job|well done|that'?s right|exactly right|"
                       r"perfect|great answer|spot on|you'?re right)\b", re.IGNORECASE)
_NEGATIVE = re.compile(r"\b(that'?s wrong|that is wrong|incorrect|not what i asked|bad answer|"
                       r"you'?re wrong|you are wrong|wrong answer|that'?s not right)\b", re.IGNORECASE)


def explicit_feedback(text: str) -> float | None:
    """Valence of a user's explicit feedback on the last answer: +1, −1, or None (none given).

    Only plain, explicit phrases count; a message with both kinds is ambiguous (None).
    """
    pos, neg = bool(_POSITIVE.search(text)), bool(_NEGATIVE.search(text))
    if pos == neg:
        return None
    return 1.0 if pos else -1.0


async def conflict_resolved(pool: asyncpg.Pool, *, how: str, memory_ids: Sequence[int], at: datetime,
                            evidence: Mapping[str, Any] | None = None) -> int:
    """A conflict was resolved (a tension by aligned behaviour, an insight reconsolidated):
    a `tension_resolved` outcome linked back, and readiness milestone 7 (plan §5.2)."""
    oid = await record_outcome(pool, kind="tension_resolved", description=how, at=at,
                               evidence=evidence, subjects=[("memory", i) for i in memory_ids])
    await record_milestone(pool, 7, {"how": how, "memory_ids": list(memory_ids), "outcome_id": oid,
                                     **dict(evidence or {})}, at=at)
    return oid
