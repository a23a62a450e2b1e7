"""Goals achieved and reflected upon (plan §5.2 milestone 9, §5.3 outcomes).

What counts, exactly:
    1. in some cycle the model declares a goal achieved with the protocol verb
       `GOAL_ACHIEVED: <goal>` (src/loop/tool_protocol.py, like READ_DOC; offered only when
       the focus shares a word with a held goal);
    2. the declared text matches one of the mind's goals — an L1 goal (goals file) or a
       memory with metadata kind 'goal' — at cosine >= `goal_match` (embedding of the
       declared text vs the goal's), else the declaration is refused and logged;
    3. that records a `goal_achieved` outcome (+1), linked back to the decisions before it,
       and queues a reflection prompt for the loop (as DMN input: the mind's own thought;
       its words: src/outcomes/prompts.py);
       the model is told so and answers on;
    4. a later cycle takes that reflection prompt as its input and the model answers it
       (System 1/2, not reflex). Then milestone 9 is recorded with the goal, the outcome id,
       both cycles and the reflection's first words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from src.vectors import closest

_GOAL_MEMORIES = """
SELECT id, content, embedding FROM memories
 WHERE metadata->>'kind' = 'goal' AND embedding IS NOT NULL AND embed_model = $1
"""


@dataclass(frozen=True)
class GoalMatch:
    text: str                   # the goal as the mind holds it
    similarity: float
    memory_id: int | None       # None: an L1 goal from the goals file


def match_goal(declared_vec: np.ndarray, l1: Sequence[tuple[str, np.ndarray]],
               memories: Sequence[tuple[int, str, np.ndarray]], threshold: float) -> GoalMatch | None:
    """The held goal closest to the declared one, if at least `threshold` cosine."""
    held = [(None, t, g) for t, g in l1] + list(memories)
    found = closest(declared_vec, [vec for _, _, vec in held])
    if found is None or found[1] < threshold:
        return None
    mid, text, _ = held[found[0]]
    return GoalMatch(text, found[1], mid)


async def goal_memories(db, embed_model: str) -> list[tuple[int, str, np.ndarray]]:
    rows = await db.fetch(_GOAL_MEMORIES, embed_model)
    return [(r["id"], r["content"], r["embedding"].to_numpy()) for r in rows]
