"""The gate parameters consolidation tunes (plan §4.5), and the gates' records it learns from.

The gates read the tuned values (`gate_tuning`) at start and at most once a minute
(src/gates/memory_gate.py `Gates.load_tuning`, through `tuned_gate_values` and
`tuned_settings`: new settings, swapped whole). Consolidation's tuning step
(src/consolidation/evolution/gate_tuning.py) decides the moves; it reads the evidence —
the gates' own decisions (`gate_decisions`) and what became of them — and writes each
proposal to `gate_tuning_log` and the applied values to `gate_tuning` through this
module, so the state the gates read lives with the gates and they never import
consolidation.

Every statement is set-based with bound parameters; times are the caller's `now`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
from pgvector import HalfVector

from src.db.sql import Executor, json_param
from src.gates.settings import GateSettings


async def dropped_decisions(db: Executor, now: datetime, window_days: float, limit: int) -> list[asyncpg.Record]:
    """Entry skips and exit drops of the window, newest first."""
    return await db.fetch(
        """SELECT id, at, gate, rule, content_preview FROM gate_decisions
            WHERE action IN ('skip', 'drop') AND at > $1::timestamptz - make_interval(secs => $2::float8) AND at <= $1
            ORDER BY at DESC, id DESC LIMIT $3""", now, window_days * 86400.0, limit)


async def needed_later(db: Executor, decision_ids: Sequence[int], ats: Sequence[datetime],
                       vectors: Sequence[np.ndarray], embed_model: str, similarity: float) -> list[int]:
    """Of these dropped items, those whose later near-duplicate memory was retrieved."""
    rows = await db.fetch(
        """SELECT d.id FROM unnest($1::bigint[], $2::timestamptz[], $3::halfvec[]) AS d(id, at, vec)
            CROSS JOIN LATERAL (
                SELECT m.access_count, 1 - (m.embedding <=> d.vec) AS sim FROM memories m
                 WHERE m.embed_model = $4 AND m.created_at > d.at
                 ORDER BY m.embedding <=> d.vec LIMIT 1) AS near
            WHERE near.sim >= $5 AND near.access_count > 0""",
        list(decision_ids), list(ats), [HalfVector(v) for v in vectors], embed_model, similarity)
    return [r["id"] for r in rows]


async def persisted_usage(db: Executor, now: datetime, window_days: float, min_age_days: float,
                          limit: int) -> list[tuple[int, bool]]:
    """Exit-gate persists old enough to judge, newest first: (decision id, never retrieved since)."""
    rows = await db.fetch(
        """SELECT d.id, m.access_count = 0 AS never
             FROM gate_decisions d JOIN memories m ON m.id = d.memory_id
            WHERE d.gate = 'exit' AND d.action IN ('persist', 'persist_flag')
              AND d.at > $1::timestamptz - make_interval(secs => $2::float8) AND d.at <= $1::timestamptz - make_interval(secs => $3::float8)
            ORDER BY d.at DESC, d.id DESC LIMIT $4""",
        now, window_days * 86400.0, min_age_days * 86400.0, limit)
    return [(r["id"], r["never"]) for r in rows]


async def gate_values_in_force(db: Executor) -> dict[str, float]:
    """The values the gates last used, read from their own records (absent: never used).

    Entry and exit decisions carry the rate they drew against (`noise_rate`); a scratch
    row's lifetime is its TTL. This is how consolidation knows runtime.yaml's values
    without being handed the gates' settings.
    """
    row = await db.fetchrow(
        """SELECT (SELECT noise_rate FROM gate_decisions WHERE gate = 'exit' AND noise_rate IS NOT NULL
                    ORDER BY id DESC LIMIT 1) AS noise_floor,
                  (SELECT noise_rate FROM gate_decisions WHERE gate = 'entry' AND rule = 'short'
                      AND noise_rate IS NOT NULL ORDER BY id DESC LIMIT 1) AS short_skip_rate,
                  (SELECT noise_rate FROM gate_decisions WHERE gate = 'entry' AND rule = 'mechanical'
                      AND noise_rate IS NOT NULL ORDER BY id DESC LIMIT 1) AS mechanical_skip_rate,
                  (SELECT extract(epoch FROM expires_at - created_at) / 3600.0 FROM scratch_buffer
                    ORDER BY id DESC LIMIT 1)::float8 AS scratch_ttl_hours""")
    return {k: float(v) for k, v in row.items() if v is not None}


async def tuned_gate_values(db: Executor) -> dict[str, float]:
    return {r["param"]: r["value"] for r in await db.fetch("SELECT param, value FROM gate_tuning")}


async def write_gate_tuning(conn: asyncpg.Connection, now: datetime, entries: Sequence[Mapping[str, Any]]) -> None:
    """Log every proposal and store the applied values, in the caller's transaction."""
    if not entries:
        return
    await conn.execute(
        """INSERT INTO gate_tuning_log (at, param, before, proposed, applied, direction, reason, evidence)
           SELECT $1, * FROM unnest($2::text[], $3::float8[], $4::float8[], $5::bool[], $6::text[],
                                    $7::text[], $8::jsonb[])""",
        now, [e["param"] for e in entries], [e["before"] for e in entries], [e["proposed"] for e in entries],
        [e["applied"] for e in entries], [e["direction"] for e in entries], [e["reason"] for e in entries],
        [json_param(e["evidence"]) for e in entries])
    applied = [e for e in entries if e["applied"]]
    if applied:
        await conn.execute(
            """INSERT INTO gate_tuning (param, value, updated_at)
               SELECT p, v, $1 FROM unnest($2::text[], $3::float8[]) AS t(p, v)
               ON CONFLICT (param) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at""",
            now, [e["param"] for e in applied], [e["proposed"] for e in applied])


def current_values(gates: GateSettings) -> dict[str, float]:
    """The live values of the tuned parameters."""
    return {"noise_floor": gates.exit.noise_floor, "short_skip_rate": gates.entry.short_skip_rate,
            "mechanical_skip_rate": gates.entry.mechanical_skip_rate, "scratch_ttl_hours": gates.scratch.ttl_hours}


#: Each tuned parameter: the settings section and field that hold it, and the values it may take.
_TUNED = {"noise_floor": ("exit", "noise_floor", lambda v: 0.0 <= v <= 1.0),
          "short_skip_rate": ("entry", "short_skip_rate", lambda v: 0.0 <= v <= 1.0),
          "mechanical_skip_rate": ("entry", "mechanical_skip_rate", lambda v: 0.0 <= v <= 1.0),
          "scratch_ttl_hours": ("scratch", "ttl_hours", lambda v: v > 0)}


def tuned_settings(gates: GateSettings, values: Mapping[str, float]) -> tuple[GateSettings, dict[str, float]]:
    """New gate settings with the tuned `values` in (the given ones are left as they are: the
    gates swap the whole value), and the values used; values outside a field's range, and
    names that are not tuned, are ignored."""
    used = {name: value for name, value in values.items() if name in _TUNED and _TUNED[name][2](value)}
    sections = {section: getattr(gates, section).model_copy(
        update={_TUNED[name][1]: value for name, value in used.items() if _TUNED[name][0] == section})
        for section in {s for s, _, _ in _TUNED.values()}}
    return gates.model_copy(update=sections), used
