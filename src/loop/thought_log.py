"""thought_log: one row per cognitive cycle (plan §3.4), the operator's view of the mind."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg


async def record_cycle(db: asyncpg.Pool | asyncpg.Connection, *, session_id: str, cycle: int,
                       source_tag: str, attention_focus: str, candidates: Sequence[Mapping[str, Any]],
                       winner: Mapping[str, Any], context_summary: Mapping[str, Any], output: str | None,
                       actions: Sequence[Mapping[str, Any]], confidence: float | None, escalated: bool,
                       duration_ms: float, cycle_started: datetime) -> None:
    """Write the cycle; tokens and cost are this session's llm_calls since the cycle began."""
    await db.execute(
        """INSERT INTO thought_log (session_id, cycle, source_tag, attention_focus, candidates, winner,
                                    context_summary, output, actions, confidence, escalated,
                                    tokens_in, tokens_out, cost_usd, duration_ms)
           SELECT $1, $2, $3, $4, $5::jsonb, $6::jsonb, $7::jsonb, $8, $9::jsonb, $10, $11,
                  COALESCE(sum(c.tokens_in), 0), COALESCE(sum(c.tokens_out), 0),
                  COALESCE(sum(c.cost_usd), 0), $12
             FROM llm_calls c WHERE c.session_id = $1 AND c.at >= $13""",
        session_id, cycle, source_tag, attention_focus[:2000], json.dumps(list(candidates)),
        json.dumps(dict(winner)), json.dumps(dict(context_summary), default=str), output,
        json.dumps(list(actions)), confidence, escalated, duration_ms, cycle_started)
