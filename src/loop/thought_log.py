"""thought_log: one row per cognitive cycle (plan §3.4), the operator's view of the mind."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg

from src.context.assembly import AssembledContext
from src.gates.modes import unkept_text
from src.loop.attention_queue import Allocation, Candidate
from src.metacognition.calls import FOK_PURPOSE
from src.recall.retrieval import Retrieval

if TYPE_CHECKING:
    from src.loop.acting import Action
    from src.loop.attending import Attended
    from src.loop.thinking import Thought

T = TypeVar("T")

# The calls a cycle makes itself. Background work of the same session (the scratch flush's
# contradiction check, consolidation, DMN) runs concurrently and is costed under its own
# purpose, not in the cycle's row (issue 11 item 10).
CYCLE_PURPOSES = ("system1_answer", "system1_retry", "system2_escalation", FOK_PURPOSE)
#: The keys of a thought_log action that carry text (a tool call's argument, its error).
_ACTION_TEXTS = frozenset({"argument", "error"})


@dataclass(frozen=True)
class ThoughtRow:
    """One thought_log row as written (tokens and cost are summed from llm_calls)."""

    session_id: str
    cycle: int
    source_tag: str
    attention_focus: str
    candidates: Sequence[Mapping[str, Any]]
    winner: Mapping[str, Any]
    context_summary: Mapping[str, Any]
    output: str | None
    actions: Sequence[Mapping[str, Any]]
    confidence: float | None
    escalated: bool
    duration_ms: float
    cycle_started: datetime


async def record_cycle(db: asyncpg.Pool | asyncpg.Connection, row: ThoughtRow) -> None:
    """Write the cycle; tokens and cost are this session's llm_calls of the cycle's own
    purposes (CYCLE_PURPOSES) since the cycle began."""
    await db.execute(
        """INSERT INTO thought_log (session_id, cycle, source_tag, attention_focus, candidates, winner,
                                    context_summary, output, actions, confidence, escalated,
                                    tokens_in, tokens_out, cost_usd, duration_ms)
           SELECT $1, $2, $3, $4, $5::jsonb, $6::jsonb, $7::jsonb, $8, $9::jsonb, $10, $11,
                  COALESCE(sum(c.tokens_in), 0), COALESCE(sum(c.tokens_out), 0),
                  COALESCE(sum(c.cost_usd), 0), $12
             FROM llm_calls c
            WHERE c.session_id = $1 AND c.at >= $13 AND c.purpose = ANY($14::text[])""",
        row.session_id, row.cycle, row.source_tag, row.attention_focus[:2000], json.dumps(list(row.candidates)),
        json.dumps(dict(row.winner)), json.dumps(dict(row.context_summary), default=str), row.output,
        json.dumps(list(row.actions)), row.confidence, row.escalated, row.duration_ms, row.cycle_started,
        list(CYCLE_PURPOSES))


@dataclass
class CycleRecord:
    """What one cycle did; also the thought_log row."""

    cycle: int
    winner: Candidate
    output: str | None
    delivered: bool
    actions: list[dict]
    confidence: float | None
    escalated: bool
    path: str
    retrieval: Retrieval | None
    duration_ms: float
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def logged_output(self) -> str | None:
        """The output as the logs keep it: a placeholder for an off-mode turn (the answer
        restates what was said)."""
        return unkept_text(self.output) if self.winner.unkept and self.output else self.output

    @property
    def logged_actions(self) -> list[dict]:
        """The actions as the logs keep them: an off-mode turn's tool arguments and errors
        as placeholders (they are made of what was said)."""
        if not self.winner.unkept:
            return self.actions
        return [{k: unkept_text(v) if k in _ACTION_TEXTS and isinstance(v, str) else v for k, v in a.items()}
                for a in self.actions]

    @classmethod
    def of(cls, attended: Attended, thought: Thought, action: Action, retrieval: Retrieval | None,
           clock: CycleClock) -> CycleRecord:
        """The record of a delivered cycle; its duration ends here (the writes after delivery
        are not the cycle's latency)."""
        return cls(attended.cycle, attended.winner, action.answer, action.delivered, action.actions,
                   thought.confidence, thought.escalated, thought.path, retrieval, clock.elapsed_ms(),
                   clock.timings_ms)


class CycleClock:
    """When a cycle began (its wall time is the cycle's `now`) and how long each stage took."""

    def __init__(self, now: datetime | None = None):
        self.started = time.perf_counter()
        self.now = now or datetime.now(UTC)
        self.timings_ms: dict[str, float] = {}

    async def timed(self, stage: str, work: Awaitable[T]) -> T:
        """Await `work`, keeping its duration under `stage` (thought_log's `timings_ms`)."""
        t = time.perf_counter()
        result = await work
        self.timings_ms[stage] = (time.perf_counter() - t) * 1000.0
        return result

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000.0


async def log_cycle(db: asyncpg.Pool | asyncpg.Connection, session_id: str, record: CycleRecord,
                    allocation: Allocation, assembled: AssembledContext, since: datetime) -> None:
    """The cycle's thought_log row: candidates, winner and why, context summary with recall's
    ids and the per-stage timings, output, actions, confidence."""
    winner = record.winner
    summary = assembled.summary()
    if record.retrieval is not None:
        summary |= {"recalled": record.retrieval.ids, "rerank_skipped": record.retrieval.rerank_skipped_reason,
                    "degraded": record.retrieval.degraded,
                    # what was just said and matched (scratch rows, not memories: src/recall/working.py)
                    "working_scratch_ids": [w.scratch_id for w in record.retrieval.working]}
    summary["timings_ms"] = {k: round(v, 2) for k, v in record.timings_ms.items()}
    await record_cycle(db, ThoughtRow(
        session_id=session_id, cycle=record.cycle, source_tag=winner.source_tag,
        attention_focus=winner.record_text, candidates=allocation.candidates_json(),
        winner={"source": winner.source, "source_tag": winner.source_tag, "reason": allocation.reason,
                "path": record.path},
        context_summary=summary, output=record.logged_output, actions=record.logged_actions,
        confidence=record.confidence, escalated=record.escalated, duration_ms=record.duration_ms,
        cycle_started=since))


async def log_answered_cycle(pool: asyncpg.Pool, mark_answered: Callable[..., Awaitable[None]] | None,
                             session_id: str, record: CycleRecord, allocation: Allocation,
                             assembled: AssembledContext, since: datetime,
                             also: Sequence[Callable[[asyncpg.Connection], Awaitable[object]]] = ()) -> None:
    """The cycle's row and the input journal's "answered" mark for its messages, in one
    transaction: a SIGKILL between two separate writes left messages answered in the
    journal with no cycle that covers them (or the reverse). `also`: more writes of the
    cycle for the same transaction (the gut delta), each called with the connection."""
    async with pool.acquire() as conn, conn.transaction():
        if mark_answered is not None:
            await mark_answered(conn=conn)
        await log_cycle(conn, session_id, record, allocation, assembled, since=since)
        for write in also:
            await write(conn)
