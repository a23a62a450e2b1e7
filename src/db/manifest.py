"""agent_manifest: the agent's continuity across restarts (plan §4.9)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg


@dataclass(frozen=True)
class Manifest:
    created_at: datetime
    times_restarted: int
    uptime_total_hours: float
    last_started_at: datetime | None
    age_days: float


async def record_start(pool: asyncpg.Pool, session_id: str, embed_model: str | None) -> Manifest:
    """Create the manifest on first birth; otherwise count a restart. One statement."""
    row = await pool.fetchrow(
        """INSERT INTO agent_manifest AS m (id, last_started_at, current_session_id, embed_model)
           VALUES (1, now(), $1, $2)
           ON CONFLICT (id) DO UPDATE
              SET times_restarted = m.times_restarted + 1,
                  last_started_at = now(),
                  current_session_id = EXCLUDED.current_session_id,
                  embed_model = COALESCE(EXCLUDED.embed_model, m.embed_model)
           RETURNING created_at, times_restarted, uptime_total_hours, last_started_at,
                     EXTRACT(EPOCH FROM now() - created_at) / 86400.0 AS age_days""",
        session_id, embed_model,
    )
    return Manifest(row["created_at"], row["times_restarted"], row["uptime_total_hours"],
                    row["last_started_at"], float(row["age_days"]))


async def record_shutdown(pool: asyncpg.Pool, session_id: str) -> float:
    """Add this session's uptime; return the new lifetime total in hours."""
    return await pool.fetchval(
        """UPDATE agent_manifest
              SET uptime_total_hours = uptime_total_hours
                      + EXTRACT(EPOCH FROM now() - last_started_at) / 3600.0,
                  last_shutdown_at = now()
            WHERE id = 1 AND current_session_id = $1
        RETURNING uptime_total_hours""",
        session_id,
    )


STATUS_SQL = """
SELECT (SELECT count(*) FROM memories) AS memories,
       (SELECT count(*) FROM scratch_buffer WHERE flushed_at IS NULL) AS buffered,
       (SELECT count(*) FROM memories WHERE protected) AS protected,
       (SELECT count(*) FROM skills WHERE removed_at IS NULL) AS skills,
       m.times_restarted, m.uptime_total_hours,
       EXTRACT(EPOCH FROM now() - m.created_at) / 86400.0 AS age_days
  FROM agent_manifest m WHERE m.id = 1"""


async def status_counts(pool: asyncpg.Pool) -> asyncpg.Record:
    """What `/status` reports of the store and the mind's life: memories, buffered, protected,
    skills, restarts, uptime before this session, age in days. One statement."""
    return await pool.fetchrow(STATUS_SQL)
