"""Phase B and C safety monitors, once per consolidation cycle (plan §3.9, §4.1).

Phase B's rate limit rides on every consolidation weight change
(`cycle_baseline_center`, see deep/derived.py and light/ticker.py). Phase C runs here: the circuit
breaker (what pattern consolidation reinforced this cycle: light and deep part 1
reinforce nothing, so `None`; promotion reports its own), the entropy of all memory
centers, and CBA coherence from three axes:

    epistemic = 1 − contested / informed, over all memories (StochasticWeight's rules:
                contested alpha > 5 and beta > 5, uninformed alpha < 2 and beta < 2)
    action    = 1 − open tensions / value-or-goal memories (a tension is behaviour that
                contradicts a value, plan §4.2)
    value     = value_coherence of the value/goal memories' Beta weights

Nothing here scans `memories`: the entropy and the epistemic counts come from the
center summary the triggers of sql/080 keep (src/weights/center_summary.py, folded
here), the tensions and value/goal weights through the partial indexes of sql/081.
A pass keeps its events in its own list and writes them in its own statement, never
another task's (the shared `Safety.pending`).

Whether a failing monitor blocks anything follows runtime.yaml `safety.phase_c`
(shadow: logged to safety_events only).
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

# Only the tension and value/goal rows (sql/081's partial indexes; a BitmapOr of the two).
_VALUE_AXES = """
SELECT count(*) FILTER (WHERE memory_type = 'tension'
                          AND COALESCE(metadata->>'resolved', 'false') <> 'true')       AS open_tensions,
       array_agg(depth_weight_alpha) FILTER (WHERE metadata->>'kind' IN ('value', 'goal')) AS v_alpha,
       array_agg(depth_weight_beta)  FILTER (WHERE metadata->>'kind' IN ('value', 'goal')) AS v_beta
  FROM memories
 WHERE memory_type = 'tension' OR metadata->>'kind' IN ('value', 'goal')"""


@dataclass(frozen=True)
class MonitorReport:
    entropy_bits: float
    memories: int
    coherence: float
    passed: dict[str, bool]
    events: int


async def run_monitors(pool: asyncpg.Pool, safety: Safety, actor: str) -> MonitorReport:
    """Observe the pattern, entropy and coherence for this cycle; write this pass's events."""
    passed: dict[str, bool] = {}
    events: list[SafetyEvent] = []
    passed["circuit_breaker"], _ = safety.observe_pattern(actor, None, events=events)
    summary = await fold_summary(pool)
    entropy, n = summary.entropy_bits(), summary.memories
    passed["entropy"], _ = safety.observe_entropy(entropy, memories=n, events=events)
    row = await pool.fetchrow(_VALUE_AXES)
    informed, contested = summary.informed, summary.contested
    epistemic = 1.0 if informed == 0 else 1.0 - contested / informed
    values = [StochasticWeight(a, b) for a, b in zip(row["v_alpha"] or [], row["v_beta"] or [], strict=True)]
    action = 1.0 if not values else max(0.0, 1.0 - int(row["open_tensions"]) / len(values))
    c, passed["coherence"], _ = safety.observe_coherence(epistemic, action, rules.value_coherence(values),
                                                         events=events)
    if events:
        await insert_safety_events(pool, events)
    return MonitorReport(entropy, n, c, passed, len(events))
