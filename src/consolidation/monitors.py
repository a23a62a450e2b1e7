"""Phase C safety monitors, once per consolidation cycle (plan §3.9, §4.1).

Phase B's rate limit rides on every consolidation weight change
(`cycle_baseline_center`, see deep/derived.py and light/ticker.py). Phase C runs here, one
run being one consolidation cycle (the light ticker's and the deep pass's):

    circuit breaker  the cycle closes: every pattern (actor, memory) the weight choke point
                     saw reinforced this cycle feeds its breaker (src/weights/patterns.py)
    entropy          Shannon entropy of the evidence for (alpha) of the top
                     `safety.entropy_top_k` memories by center, immutable ones left out
    coherence        CBA coherence from three axes:
        epistemic = 1 − contested / informed, over all memories (StochasticWeight's rules:
                    contested alpha > 5 and beta > 5, uninformed alpha < 2 and beta < 2)
        action    = 1 − open tensions / value-or-goal memories (a tension is behaviour that
                    contradicts a value, plan §4.2)
        value     = value_coherence of the value/goal memories' Beta weights

Why the top-K and alpha: a runaway is a handful of memories climbing to the ceiling. Over
every memory the entropy of the center shares is ≈ log2 N and a handful moves it by
nothing; within the top-K by center the centers are all alike (capped at 0.95), while the
evidence a runaway keeps adding is not capped — so alpha's shares there are what
concentrates (measured in notes.md "Phase C").

Nothing here scans `memories`: the top-K walks memory_standing's center index (sql/141),
the epistemic counts come from the center summary the triggers of sql/080 keep
(src/weights/center_summary.py, folded here), the tensions and value/goal weights through
the partial indexes of sql/081. A pass keeps its events in its own list and writes them
in its own statement, never another task's (the shared `Safety.pending`).

What a failing check does is `Safety`'s (src/weights/safety.py): enforced, it pauses the
pattern, broadens sampling or pauses promotion; in shadow mode it is logged with what
would have happened (runtime.yaml `safety.phase_c`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import asyncpg

from src.weights import safety_rules as rules
from src.weights.center_summary import fold_summary
from src.weights.safety import Safety, SafetyEvent, insert_safety_events
from src.weights.stochastic import StochasticWeight

log = logging.getLogger(__name__)

#: The actor name the deep pass's monitors hook runs under (deep/deep_pass.py `monitors_hook`).
DEEP_PASS = "consolidation"

# Only the tension and value/goal rows (sql/081's partial indexes; a BitmapOr of the two).
_VALUE_AXES = """
SELECT count(*) FILTER (WHERE memory_type = 'tension'
                          AND COALESCE(metadata->>'resolved', 'false') <> 'true')       AS open_tensions,
       array_agg(depth_weight_alpha) FILTER (WHERE metadata->>'kind' IN ('value', 'goal')) AS v_alpha,
       array_agg(depth_weight_beta)  FILTER (WHERE metadata->>'kind' IN ('value', 'goal')) AS v_beta
  FROM memories
 WHERE memory_type = 'tension' OR metadata->>'kind' IN ('value', 'goal')"""

# The top-K by center: a walk of memory_standing's center index, then K rows by id.
_TOP_ALPHA = """
SELECT m.depth_weight_alpha AS alpha
  FROM (SELECT id FROM memory_standing WHERE NOT immutable ORDER BY center DESC, id LIMIT $1) AS top
  JOIN memories m ON m.id = top.id"""


@dataclass(frozen=True)
class MonitorReport:
    entropy_bits: float            # over every memory's center share (the overview's; not monitored)
    memories: int
    top_entropy_bits: float        # what the entropy monitor judges (see the module docstring)
    coherence: float
    passed: dict[str, bool]
    events: int
    tripped: tuple[str, ...] = ()  # the breakers' reasons, one per tripped pattern


async def top_alpha_entropy(db: asyncpg.Pool | asyncpg.Connection, k: int) -> tuple[float, int]:
    """(entropy in bits of the alpha shares of the top `k` memories by center, how many there were)."""
    alphas = [r["alpha"] for r in await db.fetch(_TOP_ALPHA, k)]
    return rules.shannon_entropy(alphas), len(alphas)


async def run_monitors(pool: asyncpg.Pool, safety: Safety, actor: str) -> MonitorReport:
    """Close this consolidation cycle and run the monitors on it; write this pass's events.

    `actor`: whose cycle this is; DEEP_PASS (the deep pass's after-pass hook) also closes
    the cycle of the actors inside the pass (promotion)."""
    passed: dict[str, bool] = {}
    events: list[SafetyEvent] = []
    tripped = safety.close_cycle(deep_pass=actor == DEEP_PASS, events=events)
    passed["circuit_breaker"] = not tripped or not safety.circuit.enabled
    summary = await fold_summary(pool)
    top_bits, top_n = await top_alpha_entropy(pool, safety.settings.entropy_top_k)
    passed["entropy"], _ = safety.observe_entropy(
        top_bits, memories=summary.memories, events=events,
        detail={"top_k": top_n, "all_centers_bits": round(summary.entropy_bits(), 6), "cycle_of": actor})
    row = await pool.fetchrow(_VALUE_AXES)
    informed, contested = summary.informed, summary.contested
    epistemic = 1.0 if informed == 0 else 1.0 - contested / informed
    values = [StochasticWeight(a, b) for a, b in zip(row["v_alpha"] or [], row["v_beta"] or [], strict=True)]
    action = 1.0 if not values else max(0.0, 1.0 - int(row["open_tensions"]) / len(values))
    c, passed["coherence"], _ = safety.observe_coherence(epistemic, action, rules.value_coherence(values),
                                                         events=events)
    if events:
        await insert_safety_events(pool, events)
    return MonitorReport(summary.entropy_bits(), summary.memories, top_bits, c, passed, len(events),
                         tuple(tripped))
