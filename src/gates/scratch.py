"""The scratch buffer (plan §2.9): its SQL, and its lifecycle around the exit gate.

Lifecycle. Everything the entry gate keeps is a `scratch_buffer` row first. The
rows go through the exit gate together:

- every `flush_every` exchanges (default 5), in the background;
- at graceful shutdown;
- at start-up, for rows a crash left unflushed (crash recovery);
- when the context window prunes messages (rate-limited, src/gates/rate_limit.py).

A flush evaluates first and writes afterwards, in one transaction that re-claims
the rows (`FOR UPDATE SKIP LOCKED`, still unflushed), writes the memories and the
decisions, and sets `flushed_at`. A crash before the commit leaves every row
unflushed, to be evaluated again; after it, nothing is evaluated twice. Flushed
rows stay until `expires_at` (TTL, 24 h) so an operator can still read what was
said, then `clean_expired` deletes them; the decision row keeps a preview.

An unflushed row is never deleted, even past its TTL: expiry must not drop an item
the exit gate has not seen (dropping is permanent). The exit gate instead treats
an expired item in the "buffer" cell as undecidable for too long and persists it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

import asyncpg
import numpy as np

from src.db.pool import DB_ERRORS
from src.db.sql import Executor
from src.gates.settings import ScratchSettings
from src.recall.conversation import CONTEXT_TURNS, SESSION_GAP, SaidTurn, context_text
from src.recall.speakers import SAID_TAG, speaker_of

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class EntryRecord:
    """One entry-gate decision, as written to scratch_buffer and gate_decisions."""

    content: str
    source_tag: str
    source_confidence: float
    tags: list[str]
    metadata: dict[str, Any]
    rule: str
    reason: str
    draw: float | None
    skip_rate: float | None
    preview: str
    mechanical: str | None = None
    focus: np.ndarray | None = None     # the attention focus it is said under (the mind's answer)

    def details(self) -> str:
        return json.dumps({"tags": self.tags, "mechanical": self.mechanical})


_BUFFER = """
WITH kept AS (
    INSERT INTO scratch_buffer (content, source_tag, source_confidence, tags, metadata, expires_at, focus)
    VALUES ($1, $2, $3, $4, $5::jsonb, now() + $6::interval, $13::real[])
    RETURNING id
)
INSERT INTO gate_decisions (gate, scratch_id, source_tag, content_preview, rule, action,
                            random_draw, noise_rate, reason, details)
SELECT 'entry', kept.id, $2, $7, $8, 'buffer', $9, $10, $11, $12::jsonb FROM kept
RETURNING scratch_id
"""

_SKIP = """
INSERT INTO gate_decisions (gate, source_tag, content_preview, rule, action, random_draw,
                            noise_rate, reason, details)
VALUES ('entry', $1, $2, $3, 'skip', $4, $5, $6, $7::jsonb)
"""


async def buffer(pool: Executor, record: EntryRecord, ttl: timedelta) -> int:
    """Write a kept item and its entry decision in one statement; return the scratch id."""
    return await pool.fetchval(
        _BUFFER, record.content, record.source_tag, float(record.source_confidence),
        record.tags, json.dumps(record.metadata, ensure_ascii=False), ttl, record.preview,
        record.rule, record.draw, record.skip_rate, record.reason, record.details(),
        focus_rows(record.focus),
    )


def focus_rows(focus: np.ndarray | None) -> list[list[float]] | None:
    """A focus (rows of vectors) as the two-dimensional `real[]` the row keeps; None stays None."""
    return None if focus is None else np.atleast_2d(np.asarray(focus, np.float32)).tolist()


async def note_focus(pool: Executor, ids: Sequence[int], focus: np.ndarray | None) -> None:
    """These rows were said under `focus` (the loop, when attention takes them into a turn):
    the exit gate judges their relevance by it."""
    if ids and focus is not None:
        await pool.execute("UPDATE scratch_buffer SET focus = $2::real[] WHERE id = ANY($1::bigint[])",
                           list(ids), focus_rows(focus))


_BUFFER_PRUNED = """
WITH kept AS (
    INSERT INTO scratch_buffer (content, source_tag, tags, expires_at)
    SELECT content, $2, ARRAY['pruned'], now() + $3::interval
      FROM unnest($1::text[]) WITH ORDINALITY AS s(content, ord) ORDER BY ord
    RETURNING id, content
)
INSERT INTO gate_decisions (gate, scratch_id, source_tag, content_preview, rule, action, reason)
SELECT 'entry', kept.id, $2, left(kept.content, $4), 'pruned', 'buffer',
       'pruned from the context window: buffered for the exit gate'
  FROM kept
RETURNING scratch_id
"""


#: What a conversation's turns are tagged: the user's lines and what the mind said to the user.
TURN_TAGS = ("external_user", SAID_TAG)

_TURNS_BEFORE = """
SELECT i.id, p.source_tag, p.metadata, p.content
FROM unnest($1::bigint[]) AS i(id)
JOIN scratch_buffer me ON me.id = i.id
CROSS JOIN LATERAL (
    SELECT s.id, s.source_tag, s.metadata, s.content FROM scratch_buffer s
     WHERE s.id < i.id AND s.source_tag = ANY($2::text[])
       AND s.created_at >= me.created_at - $3::interval
       AND NOT 'pruned' = ANY(s.tags)
       AND s.metadata->>'memory_mode' IS DISTINCT FROM 'off'
     ORDER BY s.id DESC
     LIMIT $4::int) p
ORDER BY i.id, p.id
"""


async def turn_contexts(db: Executor, ids: Sequence[int], turns: int = CONTEXT_TURNS,
                        gap: timedelta = SESSION_GAP) -> dict[int, str]:
    """Scratch id → the conversation context of that row (src/recall/conversation.py): the
    `turns` conversation turns buffered before it, within `gap` of it (the user's line gets
    the mind's reply it answers, a reply the user's line). One statement for all ids; rows
    that are no turn of a conversation get none (ask only for TURN_TAGS rows)."""
    if not ids or turns <= 0:
        return {}
    before: dict[int, list[SaidTurn]] = {}
    for r in await db.fetch(_TURNS_BEFORE, list(ids), list(TURN_TAGS), gap, turns):
        speaker = speaker_of(r["source_tag"], r["metadata"])
        before.setdefault(r["id"], []).append(SaidTurn(speaker.label if speaker else None, r["content"]))
    return {i: text for i, t in before.items() if (text := context_text(t)) is not None}


async def buffer_pruned(pool: Executor, contents: Sequence[str], source_tag: str,
                        ttl: timedelta, preview_chars: int) -> list[int]:
    """Buffer messages pruned from the context window (no entry filter), in one statement."""
    rows = await pool.fetch(_BUFFER_PRUNED, list(contents), source_tag, ttl, preview_chars)
    return sorted(r["scratch_id"] for r in rows)


async def record_skip(pool: Executor, record: EntryRecord) -> None:
    """Record an entry decision that kept nothing."""
    await pool.execute(_SKIP, record.source_tag, record.preview, record.rule, record.draw,
                       record.skip_rate, record.reason, record.details())


@dataclass(frozen=True)
class BufferedItem:
    """An unflushed scratch row, as the exit gate sees it."""

    id: int
    content: str
    source_tag: str
    source_confidence: float
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    created_at: datetime
    expires_at: datetime
    focus: np.ndarray | None = None      # the attention focus it was said under (rows), if known

    @property
    def rounds(self) -> int:
        """Flushes this item has already stayed in the buffer cell through."""
        return int(self.metadata.get("gate_rounds", 0))


_PENDING = """
SELECT id, content, source_tag, source_confidence, tags, metadata, created_at, expires_at, focus
  FROM scratch_buffer
 WHERE flushed_at IS NULL
   AND ($1::bigint[] IS NULL OR id = ANY($1))
   AND ($2::timestamptz IS NULL OR created_at < $2)
   AND id > $3
   AND metadata->>'memory_mode' IS DISTINCT FROM 'off'
   AND NOT EXISTS (SELECT 1 FROM held_memories h WHERE h.scratch_id = scratch_buffer.id)
 ORDER BY id
 LIMIT $4
"""


async def pending(pool: Executor, *, limit: int, after_id: int = 0,
                  ids: Sequence[int] | None = None,
                  created_before: datetime | None = None) -> list[BufferedItem]:
    """Unflushed rows in id order (optionally only `ids`, or created before a time).

    Never rows admitted while the memory mode was off (src/gates/modes.py), nor rows
    held for the guardian's confirmation (`held_memories`, src/gates/copilot.py) —
    whatever the mode now: only the guardian decides those.
    """
    rows = await pool.fetch(_PENDING, None if ids is None else list(ids), created_before,
                            after_id, limit)
    return [BufferedItem(r["id"], r["content"], r["source_tag"], r["source_confidence"],
                         tuple(r["tags"]), json.loads(r["metadata"]), r["created_at"],
                         r["expires_at"], None if r["focus"] is None else np.asarray(r["focus"], np.float32))
            for r in rows]


async def claim(conn: asyncpg.Connection, ids: Sequence[int]) -> set[int]:
    """Lock the rows of `ids` that are still unflushed; skip rows another flush holds.

    Must run inside the transaction that then writes the memories and marks the rows.
    """
    rows = await conn.fetch(
        "SELECT id FROM scratch_buffer WHERE id = ANY($1) AND flushed_at IS NULL "
        "FOR UPDATE SKIP LOCKED", list(ids))
    return {r["id"] for r in rows}


async def mark_flushed(conn: asyncpg.Connection, ids: Sequence[int]) -> None:
    """The exit gate has decided these rows for good."""
    if ids:
        await conn.execute("UPDATE scratch_buffer SET flushed_at = now() WHERE id = ANY($1)",
                           list(ids))


async def keep_buffered(conn: asyncpg.Connection, ids: Sequence[int]) -> None:
    """These rows stay for the next flush; count the round they just went through."""
    if ids:
        await conn.execute(
            """UPDATE scratch_buffer
                  SET metadata = jsonb_set(metadata, '{gate_rounds}',
                                           to_jsonb(COALESCE((metadata->>'gate_rounds')::int, 0) + 1))
                WHERE id = ANY($1)""", list(ids))


async def clean_expired(pool: Executor) -> int:
    """Delete flushed rows past their TTL; return how many. Unflushed rows are kept —
    except rows admitted while the memory mode was off: nothing of those outlives its TTL."""
    status = await pool.execute(
        """DELETE FROM scratch_buffer WHERE expires_at < now()
              AND (flushed_at IS NOT NULL OR metadata->>'memory_mode' = 'off')""")
    return int(status.split()[-1])


async def count_unflushed(pool: Executor) -> int:
    return await pool.fetchval("SELECT count(*) FROM scratch_buffer WHERE flushed_at IS NULL")


@dataclass
class FlushReport:
    """What one flush did, by action; `claimed_elsewhere` rows were taken by another flush."""

    evaluated: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    claimed_elsewhere: int = 0
    cleaned: int = 0
    llm_calls: int = 0
    deferred: int = 0          # rows left unflushed because they could not be embedded

    def add(self, other: FlushReport) -> None:
        self.evaluated += other.evaluated
        self.claimed_elsewhere += other.claimed_elsewhere
        self.cleaned += other.cleaned
        self.llm_calls += other.llm_calls
        self.deferred += other.deferred
        for action, n in other.actions.items():
            self.actions[action] = self.actions.get(action, 0) + n

    def summary(self) -> str:
        parts = ", ".join(f"{n} {a}" for a, n in sorted(self.actions.items())) or "nothing"
        return f"{self.evaluated} evaluated: {parts}"


class Flusher(Protocol):
    """What the lifecycle needs from the exit gate."""

    async def flush(self, *, reason: str, ids: Sequence[int] | None = None,
                    created_before: datetime | None = None) -> FlushReport: ...


class ScratchLifecycle:
    """When the scratch buffer is flushed: every N exchanges, at start-up, at shutdown."""

    def __init__(self, pool: asyncpg.Pool, gate: Flusher, settings: ScratchSettings):
        self.pool = pool
        self.gate = gate
        self.settings = settings
        self.exchanges = 0
        self._flushed_at = 0            # `exchanges` when the last flush began
        self._task: asyncio.Task | None = None
        self._again = False

    async def recover(self, started_at: datetime | None = None) -> FlushReport:
        """Crash recovery: evaluate every row a previous run left unflushed, then clean."""
        report = await self.gate.flush(reason="recovery", created_before=started_at)
        report.cleaned += await clean_expired(self.pool)
        if report.evaluated:
            log.info("scratch recovery: %s", report.summary())
        return report

    def note_exchange(self) -> None:
        """Count one exchange (a user message passed the entry gate, counted as it arrives)."""
        self.exchanges += 1

    def flush_if_due(self) -> asyncio.Task | None:
        """The store step (the loop's cycle asks after each turn): when `flush_every` exchanges
        arrived since the last flush began, start one in the background (returned; the
        lifecycle owns it). Counted as messages arrive, decided as turns are stored: in a
        burst of input the flush starts after the first answer, while the later turns are
        answered, so later questions find those messages as memories."""
        if self.exchanges - self._flushed_at < self.settings.flush_every:
            return None
        self._flushed_at = self.exchanges
        if self._task is not None and not self._task.done():
            self._again = True          # the running flush may have missed the newest rows
            return self._task
        self._task = asyncio.create_task(self._flush_in_background(), name="scratch-flush")
        return self._task

    async def _flush_in_background(self) -> None:
        while True:
            self._again = False
            try:
                report = await self.gate.flush(reason=f"every {self.settings.flush_every} exchanges")
                report.cleaned += await clean_expired(self.pool)
                log.info("scratch flush: %s", report.summary())
            except DB_ERRORS as exc:
                # an outage is expected: one line, no traceback; the rows stay unflushed
                log.warning("scratch flush failed (%s: %s); the items stay buffered for the next flush",
                            type(exc).__name__, exc)
            except Exception:  # a bug: the rows stay unflushed; the next flush or start-up retries
                log.exception("scratch flush failed; the items stay buffered")
            if not self._again:
                return

    async def shutdown(self) -> FlushReport:
        """Graceful shutdown: wait for a running flush, then flush what is left."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        report = await self.gate.flush(reason="shutdown")
        report.cleaned += await clean_expired(self.pool)
        log.info("scratch flush at shutdown: %s", report.summary())
        return report
