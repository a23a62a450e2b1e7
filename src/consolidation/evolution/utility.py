"""Q-value utility of a memory (plan §4.3: "Q-value utility tracking for promotion").

Outcome of one recall of a memory: reward r = +1 when the memory was used again
within the outcome window after being recalled (accessed again: the plan's §15.4
"memory re-access" signal), r = -1 when it was recalled and then left alone.
Update, per outcome: Q <- Q + eta (r - Q), eta = `utility.learning_rate` (0.1),
so Q stays in [-1, 1] and weights recent outcomes most (an exponential moving
average of rewards, i.e. a one-state Q-value).

A pass folds a memory's k new outcomes in one set-based statement as
Q <- Q + (1 - (1 - eta)^k) (mean(r) - Q). That is exact when the k rewards are
equal and otherwise differs only in the order of the k rewards, which the
window has already blurred. Promotion reads Q as the Two-Gate validation margin.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import asyncpg

from src.consolidation.evolution import memories_repository as repo


def fold_rewards(rewards: list[float], eta: float) -> tuple[float, float]:
    """(step, mean reward) that applies k rewards at once: Q += step * (mean - Q)."""
    if not rewards:
        raise ValueError("fold_rewards needs at least one reward")
    if not 0.0 < eta <= 1.0:
        raise ValueError(f"eta must be in (0, 1], got {eta!r}")
    return 1.0 - (1.0 - eta) ** len(rewards), sum(rewards) / len(rewards)


async def apply_outcomes(conn: asyncpg.Connection, scored: Iterable[asyncpg.Record], eta: float) -> int:
    """Update utility_score of every memory with scored outcomes; returns how many memories."""
    rewards: dict[int, list[float]] = defaultdict(list)
    for row in scored:
        rewards[row["memory_id"]].append(1.0 if row["used"] else -1.0)
    if not rewards:
        return 0
    ids = sorted(rewards)
    folded = [fold_rewards(rewards[i], eta) for i in ids]
    await repo.update_utility(conn, ids, [f[0] for f in folded], [f[1] for f in folded])
    return len(ids)
