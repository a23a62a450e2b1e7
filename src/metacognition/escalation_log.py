"""The `escalations` table (sql/005): one row per confidence decision of the loop.

Every call of `loop_before_escalate` that has a store writes one row, whatever
the path (accepted, retried, escalated, fell back), so both rates plan §3.5 and
/status need are one query each (the retry success rate decides whether System 1's retry
is asked: src/metacognition/threshold.py `RetryRule`):

* retry success rate = retries that lifted confidence over the threshold / retries;
* escalation rate    = rows that escalated / rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from src.db.sql import Executor

_INSERT = """
INSERT INTO escalations (at, attention_focus, source_tag, threshold, confidence_before,
                         confidence_after_retry, retried, retry_succeeded, escalated, triggers,
                         system2_ok, path, correction_id, reason, details)
VALUES (COALESCE($1::timestamptz, now()), $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12, $13,
        $14, $15::jsonb)
RETURNING id
"""

_STATS = """
SELECT count(*)                                        AS decisions,
       count(*) FILTER (WHERE retried)                 AS retries,
       count(*) FILTER (WHERE retried AND retry_succeeded) AS retry_successes,
       count(*) FILTER (WHERE escalated)               AS escalations,
       count(*) FILTER (WHERE escalated AND system2_ok) AS system2_answers
FROM (SELECT retried, retry_succeeded, escalated, system2_ok FROM escalations
       WHERE $1::timestamptz IS NULL OR at >= $1::timestamptz
       ORDER BY id DESC LIMIT $2::bigint) newest
"""


@dataclass(frozen=True)
class EscalationRow:
    attention_focus: str
    source_tag: str | None
    threshold: float
    confidence_before: float
    confidence_after_retry: float | None
    retried: bool
    retry_succeeded: bool | None
    escalated: bool
    triggers: list[str]
    system2_ok: bool | None
    path: str
    correction_id: int | None
    reason: str
    details: dict[str, Any]


@dataclass(frozen=True)
class EscalationStats:
    decisions: int
    retries: int
    retry_successes: int
    escalations: int
    system2_answers: int

    @property
    def retry_success_rate(self) -> float | None:
        return self.retry_successes / self.retries if self.retries else None

    @property
    def escalation_rate(self) -> float | None:
        return self.escalations / self.decisions if self.decisions else None


async def record_escalation(executor: Executor, row: EscalationRow, *, at: datetime | None = None) -> int:
    """Insert one decision; `at` defaults to the database clock."""
    return await executor.fetchval(
        _INSERT, at, row.attention_focus[:500], row.source_tag, row.threshold, row.confidence_before,
        row.confidence_after_retry, row.retried, row.retry_succeeded, row.escalated,
        json.dumps(row.triggers), row.system2_ok, row.path, row.correction_id, row.reason[:2000],
        json.dumps(row.details, default=str))


async def escalation_stats(executor: Executor, *, since: datetime | None = None,
                           newest: int | None = None) -> EscalationStats:
    """Counts of decisions, retries, successful retries, escalations, System 2 answers;
    over the `newest` decisions only when given (the retry rule's window,
    src/metacognition/threshold.py: what the retry did lately, not in the mind's first week)."""
    r = await executor.fetchrow(_STATS, since, newest)
    return EscalationStats(r["decisions"], r["retries"], r["retry_successes"], r["escalations"],
                           r["system2_answers"])


async def retry_success_rate(executor: Executor, *, since: datetime | None = None,
                             newest: int | None = None) -> tuple[float | None, int]:
    """(successful retries / retries, retries); the rate is None before the first retry."""
    stats = await escalation_stats(executor, since=since, newest=newest)
    return stats.retry_success_rate, stats.retries


__all__ = ["EscalationRow", "EscalationStats", "escalation_stats", "record_escalation", "retry_success_rate"]
