"""Q-value utility of a memory (plan §4.3: "Q-value utility tracking for promotion"; §5.3).

Rewards come from outside recall (issue 25; src/recall/outcomes.py says what counts):
  - each scored recall of the memory: r = -1 when it was said to be wrong (/bad, a
    correction, a contradicting user line) within the outcome window; else r = +1 when
    the answer of that cycle drew on it or the user confirmed it; else r =
    `unused_reward` (-0.25): recalled and left alone. Recall returns five memories and
    an answer seldom draws on more than one or two, so being left alone is weak evidence:
    a memory drawn on in one of five recalls breaks even (0.2·1 + 0.8·(-0.25) = 0); one
    never drawn on sinks toward -0.25, below promotion's Two-Gate margin (0);
  - each piece of explicit feedback about it (`memory_uses` of kind good, bad, confirmed,
    corrected), once: r = its valence (+1 / -1). The guardian's `/good 42` reaches a
    memory that was never recalled.
Re-access is no reward: recall records its own accesses.

Update, per reward: Q <- Q + eta (r - Q), eta = `utility.learning_rate` (0.1), so Q
stays in [-1, 1] and weights recent outcomes most (an exponential moving average of
rewards, i.e. a one-state Q-value).

A pass folds a memory's k new rewards in one set-based statement as
Q <- Q + (1 - (1 - eta)^k) (mean(r) - Q). That is exact when the k rewards are
equal and otherwise differs only in the order of the k rewards, which the
window has already blurred. Promotion reads Q as the Two-Gate validation margin, and
demotion its negative (src/consolidation/evolution/forgetting.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import asyncpg

from src.consolidation.evolution import memories_repository as repo
from src.consolidation.evolution.settings import UtilitySettings

# The explicit feedback not yet folded, marked folded in the same statement.
_TAKE_FEEDBACK = """
UPDATE memory_uses SET folded = true
 WHERE id IN (SELECT id FROM memory_uses WHERE NOT folded AND valence <> 0
               ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING memory_id, valence
"""


def fold_rewards(rewards: list[float], eta: float) -> tuple[float, float]:
    """(step, mean reward) that applies k rewards at once: Q += step * (mean - Q)."""
    if not rewards:
        raise ValueError("fold_rewards needs at least one reward")
    if not 0.0 < eta <= 1.0:
        raise ValueError(f"eta must be in (0, 1], got {eta!r}")
    return 1.0 - (1.0 - eta) ** len(rewards), sum(rewards) / len(rewards)


def reward(used: bool, wrong: bool, unused_reward: float) -> float:
    """One scored recall's reward (module docstring)."""
    return -1.0 if wrong else 1.0 if used else unused_reward


async def apply_outcomes(conn: asyncpg.Connection, scored: Iterable[asyncpg.Record], settings: UtilitySettings,
                         max_feedback: int = 20000) -> int:
    """Update utility_score from the scored recall outcomes and the explicit feedback not
    folded yet (at most `max_feedback` rows a pass); returns how many memories."""
    eta = settings.learning_rate
    rewards: dict[int, list[float]] = defaultdict(list)
    for row in scored:
        rewards[row["memory_id"]].append(reward(row["used"], row["wrong"], settings.unused_reward))
    for row in await conn.fetch(_TAKE_FEEDBACK, max_feedback):
        rewards[row["memory_id"]].append(float(row["valence"]))
    if not rewards:
        return 0
    ids = sorted(rewards)
    folded = [fold_rewards(rewards[i], eta) for i in ids]
    await repo.update_utility(conn, ids, [f[0] for f in folded], [f[1] for f in folded])
    return len(ids)
