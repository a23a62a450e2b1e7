"""The distribution of memory centers without scanning memories (sql/080).

Triggers on `memories` insert one contribution row per changed center bucket into
`memory_center_summary` for every statement that adds, removes or re-weighs memories
(the weight choke point, the gate's COPY, the bulk import, deletions, TRUNCATE). This
module reads the sums, folds the rows into one per bucket, and checks or rebuilds them
against `memories`.

What the sums give (each exactly what a scan of every row gives):

    histogram    memories per bucket, buckets of width 1/CENTER_BINS of center = a/(a+b)
    entropy      Shannon entropy (bits) of the memories' shares c_i / S of the total
                 center S: H = log2(S) − T / (S·ln 2), T = Σ c_i·ln(c_i)
    uninformed   alpha < 2 and beta < 2; contested: alpha > 5 and beta > 5

Fold and rebuild take one advisory lock, so they never interleave: a rebuild's scan and
its DELETE see one snapshot, and no fold can have moved rows in between.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from decimal import Decimal

import asyncpg

from src.db.sql import locked_transaction

log = logging.getLogger(__name__)

#: Buckets of the summary: the web overview's bins (sql/080 has the same 20).
CENTER_BINS = 20
# pg_advisory_xact_lock key for fold and rebuild ("mcsummry" in ASCII).
SUMMARY_LOCK_KEY = 0x6D6373756D6D7279

_COLUMNS = "bucket, memories, sum_center, sum_c_ln_c, uninformed, contested"

_READ = """
SELECT bucket, sum(memories) AS memories, sum(sum_center) AS sum_center, sum(sum_c_ln_c) AS sum_c_ln_c,
       sum(uninformed) AS uninformed, sum(contested) AS contested
  FROM memory_center_summary GROUP BY bucket ORDER BY bucket"""

# One statement, one snapshot: the rows it deletes are exactly the rows it sums.
_FOLD = f"""
WITH gone AS (DELETE FROM memory_center_summary RETURNING {_COLUMNS}),
     kept AS (INSERT INTO memory_center_summary ({_COLUMNS})
              SELECT bucket, sum(memories), sum(sum_center), sum(sum_c_ln_c), sum(uninformed), sum(contested)
                FROM gone GROUP BY bucket
              HAVING sum(memories) <> 0 OR sum(sum_center) <> 0 OR sum(sum_c_ln_c) <> 0
                  OR sum(uninformed) <> 0 OR sum(contested) <> 0
              RETURNING {_COLUMNS})
SELECT {_COLUMNS} FROM kept ORDER BY bucket"""

_FRESH = """
SELECT memory_center_bucket(depth_weight_alpha, depth_weight_beta) AS bucket, count(*) AS memories,
       sum((depth_weight_alpha / (depth_weight_alpha + depth_weight_beta))::numeric) AS sum_center,
       sum(memory_center_c_ln_c(depth_weight_alpha, depth_weight_beta)) AS sum_c_ln_c,
       count(*) FILTER (WHERE depth_weight_alpha < 2 AND depth_weight_beta < 2) AS uninformed,
       count(*) FILTER (WHERE depth_weight_alpha > 5 AND depth_weight_beta > 5) AS contested
  FROM memories GROUP BY 1"""

# The DELETE runs although nothing reads it (a data-modifying WITH always does), in the
# scan's snapshot: a writer that has not committed yet keeps its rows and is not scanned.
_REBUILD = f"""
WITH gone AS (DELETE FROM memory_center_summary),
     fresh AS ({_FRESH})
INSERT INTO memory_center_summary ({_COLUMNS})
SELECT {_COLUMNS} FROM fresh"""

# Both sides in one statement (one snapshot), bucket by bucket.
_COMPARE = f"""
WITH kept AS ({_READ}), fresh AS ({_FRESH})
SELECT COALESCE(k.bucket, f.bucket) AS bucket,
       k.memories AS kept_memories, f.memories AS fresh_memories
  FROM kept k FULL JOIN fresh f ON f.bucket = k.bucket
 WHERE (k.memories, k.sum_center, k.sum_c_ln_c, k.uninformed, k.contested)
       IS DISTINCT FROM (f.memories, f.sum_center, f.sum_c_ln_c, f.uninformed, f.contested)
   AND NOT (f.bucket IS NULL AND k.memories = 0 AND k.sum_center = 0 AND k.sum_c_ln_c = 0
            AND k.uninformed = 0 AND k.contested = 0)
 ORDER BY 1"""


@dataclass(frozen=True)
class CenterSummary:
    """The center distribution of all memories, as the summary table holds it."""

    counts: tuple[int, ...]            # memories per bucket, CENTER_BINS of them
    sum_center: Decimal
    sum_c_ln_c: Decimal
    uninformed: int
    contested: int

    @property
    def memories(self) -> int:
        return sum(self.counts)

    @property
    def informed(self) -> int:
        """Memories that are not uninformed (StochasticWeight's rule)."""
        return self.memories - self.uninformed

    def entropy_bits(self) -> float:
        """Shannon entropy (bits) of the shares c_i / S; 0.0 with no weight at all."""
        return share_entropy_bits(self.sum_center, self.sum_c_ln_c)


def share_entropy_bits(sum_center: Decimal | float, sum_c_ln_c: Decimal | float) -> float:
    """H = −Σ (c/S)·log2(c/S) = log2(S) − (Σ c·ln c) / (S·ln 2), from the two sums."""
    s = float(sum_center)
    if s <= 0:
        return 0.0
    # never below 0: for a single memory the two terms cancel up to rounding
    return max(0.0, math.log2(s) - float(sum_c_ln_c) / (s * math.log(2)))


def _summary(rows: list[asyncpg.Record]) -> CenterSummary:
    counts = [0] * CENTER_BINS
    total_c, total_t, uninformed, contested = Decimal(0), Decimal(0), 0, 0
    for r in rows:
        counts[int(r["bucket"]) - 1] += int(r["memories"])
        total_c += r["sum_center"]
        total_t += r["sum_c_ln_c"]
        uninformed += int(r["uninformed"])
        contested += int(r["contested"])
    return CenterSummary(tuple(counts), total_c, total_t, uninformed, contested)


async def read_summary(conn: asyncpg.Connection | asyncpg.Pool) -> CenterSummary:
    """The current distribution (sums of the rows; read-only, no lock)."""
    return _summary(await conn.fetch(_READ))


async def fold_summary(db: asyncpg.Connection | asyncpg.Pool) -> CenterSummary:
    """Fold the contribution rows into one per bucket and return the distribution.

    The monitors call this each light tick, so the table stays at ~CENTER_BINS rows
    plus what the writes since the last tick added."""
    async with locked_transaction(db, SUMMARY_LOCK_KEY) as conn:
        return _summary(await conn.fetch(_FOLD))


async def summary_differences(conn: asyncpg.Connection | asyncpg.Pool) -> list[dict]:
    """Buckets where the kept sums differ from a fresh scan of memories (a full scan)."""
    return [dict(r) for r in await conn.fetch(_COMPARE)]


async def rebuild_summary(db: asyncpg.Connection | asyncpg.Pool) -> None:
    """Recompute the summary from memories (a full scan), replacing every row."""
    async with locked_transaction(db, SUMMARY_LOCK_KEY) as conn:
        await conn.execute(_REBUILD)


async def verify_summary(db: asyncpg.Connection | asyncpg.Pool, *, repair: bool = True) -> list[dict]:
    """Compare the summary with memories; rebuild it when they differ. The differences found.

    Run by the deep pass: a write path that bypassed the triggers (triggers disabled,
    `session_replication_role = replica`, a restore) is repaired within a pass."""
    diffs = await summary_differences(db)
    if diffs and repair:
        log.warning("memory center summary differed from memories in %d bucket(s) (%s); rebuilt it",
                    len(diffs), ", ".join(f"bucket {d['bucket']}: {d['kept_memories']} kept vs "
                                          f"{d['fresh_memories']} stored" for d in diffs[:5]))
        await rebuild_summary(db)
    return diffs
