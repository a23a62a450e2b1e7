"""Autonomous decisions aligned with self-formed values (plan §5.2 milestone 10).

What counts, exactly: a cycle whose input was internal (DMN, gut, consolidation or
scheduled — nobody asked) in which the model answered (System 1/2, not reflex) and the
action check decided on its actions, and whose answer has cosine >= `aligned_similarity`
with a *self-formed value*: a memory that is not immutable, not a bootstrap seed, and
that the mind's own consolidation promoted to identity weight — an applied weight change
of actor 'promotion' of the identity tier, or any applied promotion of a memory whose
center is now at identity level (>= 0.8). Not one the operator wrote (seeds, the L0 file).
"""

from __future__ import annotations

import numpy as np

from src.vectors import closest

IDENTITY_CENTER = 0.8

# From the promotion rows to their memories (the (actor, memory_id, at) index of sql/140),
# never from every memory to its log: this runs on internal cycles until milestone 10.
_SELF_FORMED = """
SELECT m.id, m.content, m.embedding
  FROM (SELECT l.memory_id,
               bool_or(l.reason LIKE 'identity%' OR l.evidence->>'tier' = 'identity') AS identity_tier
          FROM consolidation_log l
         WHERE l.actor = 'promotion' AND l.applied_delta > 0 AND l.memory_id IS NOT NULL
         GROUP BY l.memory_id) p
  JOIN memories m ON m.id = p.memory_id
 WHERE NOT m.immutable AND m.source_tag <> 'bootstrap_seed'
   AND m.embedding IS NOT NULL AND m.embed_model = $1
   AND (p.identity_tier OR m.depth_weight_alpha / (m.depth_weight_alpha + m.depth_weight_beta) >= $2)
"""


async def self_formed_values(db, embed_model: str) -> list[tuple[int, str, np.ndarray]]:
    rows = await db.fetch(_SELF_FORMED, embed_model, IDENTITY_CENTER)
    return [(r["id"], r["content"], r["embedding"].to_numpy()) for r in rows]


def best_aligned(answer_vec: np.ndarray, values: list[tuple[int, str, np.ndarray]],
                 threshold: float) -> tuple[int, str, float] | None:
    """(value id, text, cosine) of the closest self-formed value at or above `threshold`."""
    found = closest(answer_vec, [vec for _, _, vec in values])
    if found is None or found[1] < threshold:
        return None
    vid, text, _ = values[found[0]]
    return vid, text, found[1]
