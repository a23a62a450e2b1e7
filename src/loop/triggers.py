"""The always-escalate triggers only the loop can know (plan §3.6), from what the cycle has.

    contradiction      a recalled memory the gates flagged as contradicting another
                       (metadata `flag: contradiction` or a `contradicts` key)
    irreversibility    a verb of external effect is offered for this focus (the answer
                       could change the world outside; each verb declares its kind,
                       `ToolVerb.kind`, and one that does not is an external effect)
    identity_touched   a recalled identity memory — immutable, or of the identity tier
                       (center ≥ `identity_center`, the track-2 candidates of plan §3.2) —
                       that the input is close to (similarity ≥ `touch_similarity`)
    goal_modification  a recalled goal memory (metadata kind 'goal'), or a goal of the
                       goals layer, that the input is close to (same similarity floor)

"Close to" is the cosine between the input and the memory: recall alone is not enough,
because the immutable boundaries and the strongest identity memories come back for
almost anything in a small store, and each trigger here sends the turn to System 2.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from src.metacognition.escalation import EscalationTriggers
from src.recall.retrieval import Retrieval
from src.vectors import unit


def cycle_triggers(retrieval: Retrieval | None, *, offered_kinds: Iterable[str],
                   focus_vec: np.ndarray | None, goal_vecs: Sequence[np.ndarray],
                   touch_similarity: float, identity_center: float) -> EscalationTriggers:
    """The loop's four triggers for one turn (see the module doc)."""
    hits = [r.hit for r in retrieval.memories] if retrieval is not None else []
    close = [h for h in hits if h.similarity is not None and h.similarity >= touch_similarity]
    contradiction = any(h.metadata.get("flag") == "contradiction" or "contradicts" in h.metadata for h in hits)
    identity = any(h.immutable or h.alpha / (h.alpha + h.beta) >= identity_center for h in close)
    goal = any(h.metadata.get("kind") == "goal" for h in close)
    if not goal and focus_vec is not None and len(goal_vecs):
        focus = unit(focus_vec)
        goal = max(float(focus @ unit(g)) for g in goal_vecs) >= touch_similarity
    irreversible = any(kind == "external_effect" for kind in offered_kinds)
    return EscalationTriggers(contradiction=contradiction, irreversibility=irreversible,
                              identity_touched=identity, goal_modification=goal)

