"""SQL of consolidation part 2 (plan §4.3–§4.6): one place for its statements.

Every statement is set-based with bound parameters. Times written here are the
caller's `now` (tests fix it); rows the weight choke point writes carry `now` in
their evidence (`evidence->>'at'`), which is what the "already done since …" rules
below compare against, so a test with a fixed clock sees its own history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
from pgvector import HalfVector

Executor = asyncpg.Pool | asyncpg.Connection


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)


# --------------------------------------------------------------------------- promotion
_SIGHTINGS = """
WITH sightings AS (
    SELECT m.id AS memory_id, t AS at
      FROM memories m, unnest(m.access_timestamps) AS t
     WHERE cardinality(m.access_timestamps) > 0
    UNION ALL
    SELECT l.memory_id, l.at
      FROM consolidation_log l
     WHERE l.actor = 'exit_gate' AND l.operation = 'reinforce' AND l.memory_id IS NOT NULL
    UNION ALL
    SELECT s.insight_id, t
      FROM memory_supersedes s JOIN memories src ON src.id = s.source_id, unnest(src.access_timestamps) AS t
),
counted AS (
    SELECT memory_id, count(*) AS n, min(at) AS first_at, max(at) AS last_at
      FROM sightings WHERE at <= $1
     GROUP BY memory_id HAVING count(*) >= $2
)
SELECT c.memory_id, c.n, c.first_at, c.last_at, m.depth_weight_alpha AS alpha,
       m.depth_weight_beta AS beta, m.utility_score,
       EXISTS (SELECT 1 FROM promotions p WHERE p.memory_id = c.memory_id AND p.tier = 'goal'
                          AND p.status IN ('applied', 'pending_approval', 'rejected')) AS has_goal,
       EXISTS (SELECT 1 FROM promotions p WHERE p.memory_id = c.memory_id AND p.tier = 'identity'
                          AND p.status IN ('applied', 'pending_approval', 'rejected'))
           AS has_identity
  FROM counted c JOIN memories m ON m.id = c.memory_id
 WHERE NOT m.immutable
 ORDER BY c.n DESC, c.memory_id
 LIMIT $3
"""


async def promotion_candidates(db: Executor, now: datetime, min_sightings: int, limit: int) -> list[asyncpg.Record]:
    """Memories with at least `min_sightings` sightings up to `now` (see promotion.py)."""
    return await db.fetch(_SIGHTINGS, now, min_sightings, limit)


async def promotions_owed(db: Executor, limit: int) -> list[asyncpg.Record]:
    """Applied promotions whose reinforcement has not fully arrived yet (rate limit)."""
    return await db.fetch(
        """SELECT p.memory_id, p.tier, p.remaining, m.depth_weight_alpha AS alpha,
                  m.depth_weight_beta AS beta, m.utility_score
             FROM promotions p JOIN memories m ON m.id = p.memory_id
            WHERE p.status = 'applied' AND p.remaining > 0 AND NOT m.immutable
            ORDER BY p.at LIMIT $1""", limit)


async def tier_occupancy(db: Executor, goal_center: float, identity_center: float) -> tuple[int, int]:
    """How many memories sit at or above the goal and the identity center (one scan)."""
    row = await db.fetchrow(
        """SELECT count(*) FILTER (WHERE c >= $1) AS goal, count(*) FILTER (WHERE c >= $2) AS identity
             FROM (SELECT depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS c
                     FROM memories) AS w""", goal_center, identity_center)
    return int(row["goal"]), int(row["identity"])


async def coherence_counts(db: Executor, now: datetime, goal_center: float, identity_center: float,
                           action_days: float = 7.0) -> asyncpg.Record:
    """Inputs of the three CBA axes (plan §3.9) over the promoted ranges, one statement.

    epistemic: informed and contested memories among those at or above the goal center;
    value: the summed standard deviation of the identity-range weights and their number;
    action: the mind's own recent output, and the tension memories of that window.
    """
    return await db.fetchrow(
        """WITH w AS (SELECT depth_weight_alpha AS a, depth_weight_beta AS b
                        FROM memories
                       WHERE depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) >= $1)
           SELECT (SELECT count(*) FROM w WHERE NOT (a < 2 AND b < 2)) AS informed,
                  (SELECT count(*) FROM w WHERE a > 5 AND b > 5) AS contested,
                  (SELECT COALESCE(sum(sqrt(a * b / ((a + b) ^ 2 * (a + b + 1)))), 0)
                     FROM w WHERE a / (a + b) >= $2) AS value_std_sum,
                  (SELECT count(*) FROM w WHERE a / (a + b) >= $2) AS values_n,
                  (SELECT count(*) FROM memories WHERE source_tag = 'internal_self'
                      AND created_at > $3::timestamptz - make_interval(secs => $4::float8) AND created_at <= $3) AS actions,
                  (SELECT count(*) FROM memories WHERE memory_type = 'tension'
                      AND created_at > $3::timestamptz - make_interval(secs => $4::float8) AND created_at <= $3
                      AND COALESCE(metadata->>'resolved', 'false') <> 'true') AS tensions""",
        goal_center, identity_center, now, action_days * 86400.0)


async def record_promotion(conn: asyncpg.Connection, memory_id: int, tier: str, status: str, at: datetime,
                           reason: str, *, remaining: float = 0.0, approval_id: int | None = None,
                           evidence: Mapping[str, Any] | None = None) -> None:
    """Insert or update the (memory, tier) promotion row."""
    await conn.execute(
        """INSERT INTO promotions (memory_id, tier, status, at, approval_id, reason, remaining, evidence)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)
           ON CONFLICT (memory_id, tier) DO UPDATE
              SET status = EXCLUDED.status, at = EXCLUDED.at,
                  approval_id = COALESCE(EXCLUDED.approval_id, promotions.approval_id),
                  reason = EXCLUDED.reason, remaining = EXCLUDED.remaining,
                  evidence = promotions.evidence || EXCLUDED.evidence""",
        memory_id, tier, status, at, approval_id, reason, remaining, _json(dict(evidence or {})))


# --------------------------------------------------------------------------- approvals
async def insert_approval(conn: Executor, kind: str, payload: Mapping[str, Any], reason: str,
                          now: datetime) -> int:
    return await conn.fetchval(
        "INSERT INTO approvals (kind, payload, reason, created_at) VALUES ($1, $2::jsonb, $3, $4) RETURNING id",
        kind, _json(dict(payload)), reason, now)


async def pending_approvals(db: Executor, limit: int = 50) -> list[asyncpg.Record]:
    return await db.fetch(
        """SELECT id, kind, payload, reason, created_at FROM approvals
            WHERE status = 'pending' ORDER BY created_at, id LIMIT $1""", limit)


async def lock_approval(conn: asyncpg.Connection, approval_id: int) -> asyncpg.Record | None:
    # NO KEY: the apply function writes rows that reference this one (FOR KEY SHARE)
    # from another connection while this lock is held.
    return await conn.fetchrow(
        "SELECT id, kind, payload, reason, status, decision FROM approvals WHERE id = $1 FOR NO KEY UPDATE",
        approval_id)


async def decide_approval(conn: asyncpg.Connection, approval_id: int, status: str, decision: str,
                          now: datetime) -> None:
    await conn.execute(
        "UPDATE approvals SET status = $2, decision = $3, decided_at = $4 WHERE id = $1",
        approval_id, status, decision, now)


# --------------------------------------------------------------------------- decay, demotion
async def decay_candidates(db: Executor, now: datetime, idle_days: float, max_access_count: int,
                           limit: int) -> list[asyncpg.Record]:
    """§4.4: not accessed for `idle_days`, fewer than `max_access_count` accesses, not yet
    decayed since its last access."""
    return await db.fetch(
        """SELECT m.id, m.depth_weight_alpha AS alpha, m.depth_weight_beta AS beta,
                  COALESCE(m.last_accessed, m.event_time, m.created_at) AS last_seen, m.access_count
             FROM memories m
            WHERE NOT m.immutable AND m.access_count < $3
              AND COALESCE(m.last_accessed, m.event_time, m.created_at) < $1::timestamptz - make_interval(secs => $2::float8)
              AND NOT EXISTS (SELECT 1 FROM consolidation_log l
                               WHERE l.memory_id = m.id AND l.actor = 'decay' AND l.evidence ? 'at'
                                 AND (l.evidence->>'at')::timestamptz
                                     >= COALESCE(m.last_accessed, m.event_time, m.created_at))
            ORDER BY m.id LIMIT $4""",
        now, idle_days * 86400.0, max_access_count, limit)


async def demotion_candidates(db: Executor, now: datetime, *, min_center: float, goal_center: float,
                              idle_days: float, every_days: float, limit: int) -> list[asyncpg.Record]:
    """§4.3 demotion: promoted or goal-range memories no longer reinforced.

    Last reinforcement = the latest of their last access, their promotion and any
    reinforcement in the audit log; demoted at most once per `every_days`.
    """
    return await db.fetch(
        """WITH w AS (
               SELECT m.id, m.depth_weight_alpha AS alpha, m.depth_weight_beta AS beta,
                      GREATEST(COALESCE(m.last_accessed, m.created_at), m.created_at,
                               (SELECT max(p.at) FROM promotions p
                                 WHERE p.memory_id = m.id AND p.status = 'applied'),
                               (SELECT max((l.evidence->>'at')::timestamptz) FROM consolidation_log l
                                 WHERE l.memory_id = m.id AND l.operation = 'reinforce'
                                   AND l.evidence ? 'at')) AS last_reinforced
                 FROM memories m
                WHERE NOT m.immutable
                  AND m.depth_weight_alpha / (m.depth_weight_alpha + m.depth_weight_beta) > $2
                  AND (m.depth_weight_alpha / (m.depth_weight_alpha + m.depth_weight_beta) >= $3
                       OR EXISTS (SELECT 1 FROM promotions p WHERE p.memory_id = m.id AND p.status = 'applied')))
           SELECT w.* FROM w
            WHERE w.last_reinforced < $1::timestamptz - make_interval(secs => $4::float8)
              AND NOT EXISTS (SELECT 1 FROM consolidation_log l
                               WHERE l.memory_id = w.id AND l.actor = 'demotion' AND l.evidence ? 'at'
                                 AND (l.evidence->>'at')::timestamptz > $1::timestamptz - make_interval(secs => $5::float8))
            ORDER BY w.id LIMIT $6""",
        now, min_center, goal_center, idle_days * 86400.0, every_days * 86400.0, limit)


# --------------------------------------------------------------------------- reconsolidation
async def previous_pass_start(db: Executor, pass_id: int) -> datetime | None:
    """When the last finished deep pass before `pass_id` began (None: there is none)."""
    return await db.fetchval(
        "SELECT max(started_at) FROM consolidation_passes WHERE id < $1 AND status = 'done'", pass_id)


async def conflicting_insights(db: Executor, now: datetime, *, lookback_days: float, similarity: float,
                               embed_model: str, max_new: int, limit: int,
                               since: datetime | None = None) -> list[asyncpg.Record]:
    """Recent non-insight memories and the most similar live insight above `similarity`.

    An insight is a `reflection` that supersedes sources; a pair already judged a
    productive contradiction, or an insight already superseded, is not offered again.
    """
    return await db.fetch(
        """WITH fresh AS (
               SELECT m.id, m.content, m.embedding FROM memories m
                WHERE m.created_at > GREATEST($1::timestamptz - make_interval(secs => $2::float8), $7::timestamptz)
                  AND m.created_at <= $1
                  AND m.embedding IS NOT NULL AND m.embed_model = $4 AND m.memory_type <> 'reflection'
                ORDER BY m.created_at DESC LIMIT $5)
           SELECT f.id AS memory_id, f.content AS memory_content, f.embedding AS memory_embedding,
                  i.id AS insight_id, i.content AS insight_content, i.embedding AS insight_embedding,
                  i.similarity
             FROM fresh f
             CROSS JOIN LATERAL (
                 SELECT ins.id, ins.content, ins.embedding, 1 - (ins.embedding <=> f.embedding) AS similarity
                   FROM memories ins
                  WHERE ins.memory_type = 'reflection' AND ins.embed_model = $4 AND ins.id <> f.id
                    AND NOT (ins.metadata ? 'superseded_by')
                    AND EXISTS (SELECT 1 FROM memory_supersedes s WHERE s.insight_id = ins.id)
                    AND NOT EXISTS (SELECT 1 FROM memory_supersedes s
                                     WHERE s.insight_id = ins.id AND s.source_id = f.id)
                  ORDER BY ins.embedding <=> f.embedding LIMIT 1) AS i
            WHERE i.similarity >= $3
              AND NOT EXISTS (SELECT 1 FROM productive_contradictions p
                               WHERE p.insight_id = i.id AND p.memory_id = f.id)
            ORDER BY i.similarity DESC LIMIT $6""",
        now, lookback_days * 86400.0, similarity, embed_model, max_new, limit, since)


#: Weight changes that mean a source changed: faded, demoted, superseded or promoted. Not
#: retrieval, the gate, the light ticker's small decay, nor the give-way of sources when an
#: insight is formed (actor 'consolidation'): those are the insight's normal life.
SOURCE_CHANGE_ACTORS = ("decay", "demotion", "reconsolidation", "promotion")


async def insights_with_changed_sources(db: Executor, limit: int) -> list[asyncpg.Record]:
    """Live insights a source of which changed since the insight was last evaluated.

    A source changed when one of SOURCE_CHANGE_ACTORS wrote a weight change for it, or
    it was itself superseded (by another insight than this one) since the evaluation.
    """
    return await db.fetch(
        """SELECT i.id, i.content,
                  array_agg(src.id ORDER BY src.id) AS source_ids,
                  array_agg(left(src.content, 400) ORDER BY src.id) AS source_contents,
                  array_agg(src.depth_weight_alpha / (src.depth_weight_alpha + src.depth_weight_beta)
                            ORDER BY src.id) AS source_centers
             FROM memories i
             JOIN memory_supersedes s ON s.insight_id = i.id
             JOIN memories src ON src.id = s.source_id
            WHERE i.memory_type = 'reflection' AND NOT (i.metadata ? 'superseded_by')
            GROUP BY i.id
           HAVING bool_or((src.metadata ? 'superseded_by'
                           AND (src.metadata->>'superseded_by')::bigint <> i.id
                           AND (src.metadata->>'superseded_at')::timestamptz
                               > COALESCE((i.metadata->>'evaluated_at')::timestamptz, i.created_at))
                          OR EXISTS (SELECT 1 FROM consolidation_log l
                                      WHERE l.memory_id = src.id
                                        AND l.actor = ANY($2::text[])
                                        AND COALESCE((l.evidence->>'at')::timestamptz, l.at)
                                            > COALESCE((i.metadata->>'evaluated_at')::timestamptz,
                                                       i.created_at)))
            ORDER BY i.id LIMIT $1""", limit, list(SOURCE_CHANGE_ACTORS))


async def insert_insight(conn: asyncpg.Connection, content: str, embedding: np.ndarray | None,
                         embed_model: str | None, at: datetime, metadata: Mapping[str, Any],
                         source_ids: Sequence[int]) -> int:
    """A reconsolidated insight (type reflection) and its supersedes links, in the caller's transaction."""
    new_id = await conn.fetchval(
        """INSERT INTO memories (content, memory_type, embedding, embed_model, source_tag, created_at, metadata)
           VALUES ($1, 'reflection', $2, $3, 'consolidation', $4, $5::jsonb) RETURNING id""",
        content, None if embedding is None else HalfVector(embedding), embed_model, at, _json(dict(metadata)))
    await conn.execute(
        """INSERT INTO memory_supersedes (insight_id, source_id, created_at)
           SELECT $1, s, $3 FROM unnest($2::bigint[]) AS s WHERE s <> $1 ON CONFLICT DO NOTHING""",
        new_id, list(source_ids), at)
    return new_id


async def mark_metadata(conn: Executor, memory_ids: Sequence[int], patch: Mapping[str, Any]) -> None:
    """Merge `patch` into the metadata of these memories (not a weight column)."""
    await conn.execute("UPDATE memories SET metadata = metadata || $2::jsonb WHERE id = ANY($1::bigint[])",
                       list(memory_ids), _json(dict(patch)))


async def superseded_ids(db: Executor, ids: Sequence[int]) -> list[int]:
    rows = await db.fetch("SELECT id FROM memories WHERE id = ANY($1::bigint[]) AND metadata ? 'superseded_by'",
                          list(ids))
    return [r["id"] for r in rows]


async def record_productive_contradiction(conn: Executor, insight_id: int, memory_id: int, at: datetime,
                                          explanation: str) -> None:
    await conn.execute(
        """INSERT INTO productive_contradictions (insight_id, memory_id, at, explanation)
           VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING""", insight_id, memory_id, at, explanation)


# --------------------------------------------------------------------------- temporal replay
async def replay_temporal_chain(db: Executor, now: datetime, lookback_days: float, max_gap_minutes: float,
                                limit: int) -> int:
    """Strengthen co-access links between consecutive episodic memories, flagged temporal.

    A pair is replayed once per lookback window: a link already replayed inside it is
    left alone, so hourly passes over a two-day window do not count a pair 48 times.
    """
    status = await db.execute(
        """WITH ep AS (
               SELECT id, COALESCE(event_time, created_at) AS ts,
                      lag(id) OVER w AS prev_id, lag(COALESCE(event_time, created_at)) OVER w AS prev_ts
                 FROM memories
                WHERE memory_type = 'episodic'
                  AND COALESCE(event_time, created_at) > $1::timestamptz - make_interval(secs => $2::float8)
                  AND COALESCE(event_time, created_at) <= $1
               WINDOW w AS (ORDER BY COALESCE(event_time, created_at), id)),
                pairs AS (
               SELECT LEAST(prev_id, id) AS a, GREATEST(prev_id, id) AS b FROM ep
                WHERE prev_id IS NOT NULL AND ts - prev_ts <= make_interval(secs => $3::float8)
                LIMIT $4)
           INSERT INTO memory_co_access AS c (memory_id_a, memory_id_b, co_access_count, last_co_accessed, temporal)
           SELECT a, b, 1, $1, true FROM pairs
           ON CONFLICT (memory_id_a, memory_id_b) DO UPDATE
              SET co_access_count = c.co_access_count + 1,
                  last_co_accessed = GREATEST(c.last_co_accessed, EXCLUDED.last_co_accessed),
                  temporal = true
            WHERE NOT c.temporal OR c.last_co_accessed <= $1::timestamptz - make_interval(secs => $2::float8)""",
        now, lookback_days * 86400.0, max_gap_minutes * 60.0, limit)
    return int(status.split()[-1])


# --------------------------------------------------------------------------- gate tuning
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
        [_json(e["evidence"]) for e in entries])
    applied = [e for e in entries if e["applied"]]
    if applied:
        await conn.execute(
            """INSERT INTO gate_tuning (param, value, updated_at)
               SELECT p, v, $1 FROM unnest($2::text[], $3::float8[]) AS t(p, v)
               ON CONFLICT (param) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at""",
            now, [e["param"] for e in applied], [e["proposed"] for e in applied])


# --------------------------------------------------------------------------- outcomes, utility, Dirichlet
async def insert_recall_outcomes(conn: Executor, at: datetime, memory_ids: Sequence[int],
                                 contributions: Sequence[Sequence[float]]) -> None:
    """What recall returned (rank = position) and each component's contribution."""
    if not memory_ids:
        return
    await conn.execute(
        """INSERT INTO recall_outcomes (at, memory_id, rank, contributions)
           SELECT $1, m, r, string_to_array(c, ',')::float8[]
             FROM unnest($2::bigint[], $3::int[], $4::text[]) AS t(m, r, c)""",
        at, list(memory_ids), list(range(1, len(memory_ids) + 1)),
        [",".join(repr(float(x)) for x in c) for c in contributions])


async def score_outcomes(conn: asyncpg.Connection, now: datetime, window_days: float,
                         limit: int) -> list[asyncpg.Record]:
    """Score recall outcomes whose window has passed: used = accessed again within it."""
    return await conn.fetch(
        """WITH due AS (
               SELECT id FROM recall_outcomes
                WHERE scored_at IS NULL AND at <= $1::timestamptz - make_interval(secs => $2::float8)
                ORDER BY at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
           UPDATE recall_outcomes o
              SET scored_at = $1,
                  used = EXISTS (SELECT 1 FROM memories m, unnest(m.access_timestamps) AS t
                                  WHERE m.id = o.memory_id AND t > o.at
                                    AND t <= o.at + make_interval(secs => $2::float8))
             FROM due WHERE o.id = due.id
           RETURNING o.memory_id, o.used, o.contributions""",
        now, window_days * 86400.0, limit)


async def prune_outcomes(conn: Executor, now: datetime, keep_days: float) -> int:
    """Scored outcomes older than `keep_days` have done their work: delete them."""
    status = await conn.execute(
        "DELETE FROM recall_outcomes WHERE scored_at IS NOT NULL AND at < $1::timestamptz - make_interval(secs => $2::float8)",
        now, keep_days * 86400.0)
    return int(status.split()[-1])


async def update_utility(conn: Executor, memory_ids: Sequence[int], steps: Sequence[float],
                         mean_rewards: Sequence[float]) -> None:
    """Q <- Q + step * (mean_reward - Q) per memory, one statement (see utility.py)."""
    if not memory_ids:
        return
    await conn.execute(
        """UPDATE memories m SET utility_score = m.utility_score + u.step * (u.r - m.utility_score)
             FROM unnest($1::bigint[], $2::float8[], $3::float8[]) AS u(id, step, r)
            WHERE m.id = u.id""", list(memory_ids), list(steps), list(mean_rewards))


async def dirichlet_factors(db: Executor) -> dict[str, float]:
    """The evolved factor per relevance component (missing = 1.0)."""
    return {r["component"]: r["factor"] for r in await db.fetch("SELECT component, factor FROM dirichlet_alphas")}


async def write_dirichlet(conn: asyncpg.Connection, now: datetime, before: Mapping[str, float],
                          after: Mapping[str, float], evidence: Mapping[str, Any]) -> None:
    await conn.execute(
        """INSERT INTO dirichlet_alphas (component, factor, updated_at)
           SELECT c, f, $1 FROM unnest($2::text[], $3::float8[]) AS t(c, f)
           ON CONFLICT (component) DO UPDATE SET factor = EXCLUDED.factor, updated_at = EXCLUDED.updated_at""",
        now, list(after), [float(v) for v in after.values()])
    await conn.execute(
        "INSERT INTO dirichlet_history (at, before, after, evidence) VALUES ($1, $2::jsonb, $3::jsonb, $4::jsonb)",
        now, _json(dict(before)), _json(dict(after)), _json(dict(evidence)))


async def pathological_weights(db: Executor, limit_evidence: float, limit: int = 20) -> tuple[int, list[asyncpg.Record]]:
    """Memories whose alpha or beta exploded past `limit_evidence`: count and the worst few."""
    rows = await db.fetch(
        """SELECT id, depth_weight_alpha AS alpha, depth_weight_beta AS beta, count(*) OVER () AS total
             FROM memories WHERE depth_weight_alpha > $1 OR depth_weight_beta > $1
            ORDER BY depth_weight_alpha + depth_weight_beta DESC LIMIT $2""", limit_evidence, limit)
    return (int(rows[0]["total"]) if rows else 0), rows


async def weight_history(db: Executor, memory_id: int, limit: int = 50) -> list[asyncpg.Record]:
    """A memory's weight changes, newest first, for introspection (plan §4.5)."""
    return await db.fetch(
        """SELECT at, operation, actor, reason, applied_delta, alpha_after, beta_after, evidence
             FROM consolidation_log WHERE memory_id = $1 ORDER BY at DESC, id DESC LIMIT $2""",
        memory_id, limit)


# --------------------------------------------------------------------------- contextual retrieval
async def lacking_context(db: Executor, limit: int, neighbours: int, chars: int) -> list[asyncpg.Record]:
    """Newest memories without `content_contextualized`, with the memories just before them."""
    return await db.fetch(
        """SELECT m.id, m.content, m.memory_type, m.source_tag, m.created_at,
                  COALESCE((SELECT array_agg(left(p.content, $3) ORDER BY p.created_at)
                              FROM (SELECT content, created_at FROM memories q
                                     WHERE q.created_at < m.created_at
                                     ORDER BY q.created_at DESC LIMIT $2) AS p), '{}') AS before
             FROM memories m
            WHERE m.content_contextualized IS NULL AND NOT m.immutable
            ORDER BY m.created_at DESC, m.id DESC LIMIT $1""", limit, neighbours, chars)


async def write_contextualized(conn: Executor, ids: Sequence[int], texts: Sequence[str],
                               vectors: Sequence[np.ndarray] | None, embed_model: str | None) -> int:
    """Store contextualised text (content_tsv follows) and, when given, the new vectors."""
    if not ids:
        return 0
    if vectors is None:
        status = await conn.execute(
            """UPDATE memories m SET content_contextualized = u.t
                 FROM unnest($1::bigint[], $2::text[]) AS u(id, t)
                WHERE m.id = u.id AND m.content_contextualized IS NULL""", list(ids), list(texts))
    else:
        status = await conn.execute(
            """UPDATE memories m SET content_contextualized = u.t, embedding = u.v, embed_model = $4
                 FROM unnest($1::bigint[], $2::text[], $3::halfvec[]) AS u(id, t, v)
                WHERE m.id = u.id AND m.content_contextualized IS NULL""",
            list(ids), list(texts), [HalfVector(v) for v in vectors], embed_model)
    return int(status.split()[-1])
