"""Hebbian co-access (plan §3.1): memories retrieved or injected together.

One row per unordered pair (a < b). Spreading activation reads partners from
either side, top-k per seed, in one batched statement per hop.

The table is recall's: consolidation keeps it through the functions here — the light
ticker halves idle pairs and prunes weak ones (§4.1), temporal replay links episodes that
followed each other (§4.4, flagged `temporal`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from src.db.sql import Executor

# A pair seen n times is associated with strength n / (n + 2): 1 → 0.33, 2 → 0.5,
# 8 → 0.8. Saturating, so one chance co-retrieval is weak and habits approach 1.
CO_ACCESS_HALF = 2.0


async def record_co_access(db: Executor, memory_ids: Sequence[int], at: datetime) -> int:
    """Strengthen every pair among `memory_ids`; return how many pairs were touched.

    Pairs are inserted in (a, b) order so concurrent writers lock them in the same
    order and cannot deadlock.
    """
    ids = sorted(set(memory_ids))
    if len(ids) < 2:
        return 0
    await db.execute(
        """INSERT INTO memory_co_access AS c (memory_id_a, memory_id_b, co_access_count, last_co_accessed)
           SELECT a, b, 1, $2 FROM unnest($1::bigint[]) a CROSS JOIN unnest($1::bigint[]) b
            WHERE a < b ORDER BY a, b
           ON CONFLICT (memory_id_a, memory_id_b) DO UPDATE
              SET co_access_count = c.co_access_count + 1,
                  last_co_accessed = GREATEST(c.last_co_accessed, EXCLUDED.last_co_accessed)""",
        ids, at,
    )
    return co_access_pairs(ids)


def co_access_pairs(memory_ids: Sequence[int]) -> int:
    """How many pairs `record_co_access` touches for these ids."""
    n = len(set(memory_ids))
    return n * (n - 1) // 2


def _top_partners(seed: str) -> str:
    """The lateral subquery of one seed's top-$2 partners: each side of its pairs read in the
    order of the count indexes of sql/143, at most k rows each; ties to the lower id."""
    return f"""CROSS JOIN LATERAL (
       SELECT partner, n FROM (
           (SELECT c.memory_id_b AS partner, c.co_access_count AS n
              FROM memory_co_access c
             WHERE c.memory_id_a = {seed} AND c.memory_id_b <> ALL($3::bigint[])
             ORDER BY c.co_access_count DESC, c.memory_id_b LIMIT $2)
           UNION ALL
           (SELECT c.memory_id_a, c.co_access_count
              FROM memory_co_access c
             WHERE c.memory_id_b = {seed} AND c.memory_id_a <> ALL($3::bigint[])
             ORDER BY c.co_access_count DESC, c.memory_id_a LIMIT $2)) AS both_sides
        ORDER BY n DESC, partner LIMIT $2) p"""


# fetch_partners: ($1 seeds, $2 k, $3 excluded partners, $4 the strength's half point)
PARTNERS_SQL = f"""
SELECT s.seed, p.partner, p.n::float8 / (p.n + $4::float8) AS strength
  FROM (SELECT DISTINCT unnest($1::bigint[]) AS seed) s
 {_top_partners("s.seed")}
 ORDER BY s.seed, p.n DESC, p.partner"""

# fetch_two_hops: the seeds' partners (hop 0) and, from every partner that is no seed, its
# own (hop 1): normal recall's spreading in one statement instead of two.
TWO_HOPS_SQL = f"""
WITH h0 AS (
    SELECT s.seed, p.partner, p.n
      FROM (SELECT DISTINCT unnest($1::bigint[]) AS seed) s
     {_top_partners("s.seed")}),
h1 AS (
    SELECT s.seed, p.partner, p.n
      FROM (SELECT DISTINCT partner AS seed FROM h0 WHERE partner <> ALL($1::bigint[])) s
     {_top_partners("s.seed")})
SELECT 0 AS hop, seed, partner, n::float8 / (n + $4::float8) AS strength FROM h0
 UNION ALL
SELECT 1, seed, partner, n::float8 / (n + $4::float8) FROM h1
 ORDER BY hop, seed, strength DESC, partner"""


async def fetch_partners(db: Executor, seed_ids: Sequence[int], top_k: int = 3,
                         exclude: Sequence[int] = ()) -> list[tuple[int, int, float]]:
    """(seed, partner, strength in [0, 1]) for the top-k partners of every seed, one query.

    A hub memory with thousands of partners costs what any other does (`_top_partners`)."""
    if not seed_ids:
        return []
    rows = await db.fetch(PARTNERS_SQL, list(seed_ids), top_k, list(exclude), CO_ACCESS_HALF)
    return [(r["seed"], r["partner"], r["strength"]) for r in rows]


async def fetch_two_hops(db: Executor, seed_ids: Sequence[int], top_k: int = 3
                         ) -> tuple[list[tuple[int, int, float]], list[tuple[int, int, float]]]:
    """`fetch_partners` of the seeds, and of their partners that are no seed, in one query:
    (hop 0 edges, hop 1 edges), each as fetch_partners returns them."""
    if not seed_ids:
        return [], []
    rows = await db.fetch(TWO_HOPS_SQL, list(seed_ids), top_k, [], CO_ACCESS_HALF)
    edges: tuple[list, list] = ([], [])
    for r in rows:
        edges[r["hop"]].append((r["seed"], r["partner"], r["strength"]))
    return edges


class Upkeep(NamedTuple):
    """One upkeep round: pairs halved and pruned, and the heap page the next round starts at."""

    halved: int
    pruned: int
    next_page: int


# co_access_upkeep: ($1 idle before, $2 prune below, $3 limit, $4 now, $5 first tid, $6 tid past the window)
UPKEEP_SQL = """
WITH idle AS (
    SELECT ctid AS at, co_access_count / 2 AS halved
      FROM memory_co_access
     WHERE ctid >= $5::tid AND ctid < $6::tid
       AND GREATEST(last_co_accessed, COALESCE(decayed_at, last_co_accessed)) < $1
     LIMIT $3 FOR UPDATE SKIP LOCKED),
pruned AS (
    DELETE FROM memory_co_access
     WHERE ctid = ANY ((SELECT array_agg(at) FROM idle WHERE halved < $2)::tid[])
    RETURNING 1),
halved AS (
    UPDATE memory_co_access c SET co_access_count = i.halved, decayed_at = $4
      FROM idle i
     WHERE c.ctid = ANY ((SELECT array_agg(at) FROM idle WHERE halved >= $2)::tid[]) AND c.ctid = i.at
    RETURNING 1)
SELECT (SELECT count(*) FROM halved) AS halved, (SELECT count(*) FROM pruned) AS pruned,
       (SELECT count(*) FROM idle) AS found, (SELECT max((at::text::point)[0]) FROM idle)::bigint AS last_page,
       pg_relation_size('memory_co_access') / current_setting('block_size')::bigint AS table_pages"""


async def co_access_upkeep(conn: Executor, idle_before: datetime, prune_below: int, limit: int,
                           now: datetime, *, start_page: int = 0, pages: int = 2_000) -> Upkeep:
    """Halve the count of pairs idle since `idle_before` (once per idle period) and delete
    those that fall below `prune_below`, at most `limit`, among the pairs stored in the
    heap pages [`start_page`, `start_page` + `pages`): one statement, and a bounded read
    (a scan for idle pairs from the table's start read past every pair not idle, more of
    them as the front filled with pairs just halved). The
    next round starts where this one stopped; past the last page, at 0 again. The rows are
    changed by the addresses they were locked at, a TID scan whatever the table's size (a
    join by key hashed the whole table when the planner thought it small)."""
    row = await conn.fetchrow(UPKEEP_SQL, idle_before, prune_below, limit, now, (start_page, 0),
                              (start_page + pages, 0))
    if row["found"] >= limit and row["last_page"] is not None:
        next_page = int(row["last_page"])           # the window's rest waits for the next round
    else:
        next_page = start_page + pages
    return Upkeep(int(row["halved"]), int(row["pruned"]), next_page if next_page < row["table_pages"] else 0)


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
