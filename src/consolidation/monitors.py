"""Phase B and C safety monitors, once per consolidation cycle (plan §3.9, §4.1).

Phase B's rate limit rides on every consolidation weight change
(`cycle_baseline_center`, see derived.py and light.py). Phase C runs here: the circuit
breaker (what pattern consolidation reinforced this cycle: light and deep part 1
reinforce nothing, so `None`; promotion reports its own), the entropy of all memory
centers, and CBA coherence from three axes read in one statement:

    epistemic = 1 − contested / informed, over all memories (StochasticWeight's rules:
                contested alpha > 5 and beta > 5, uninformed alpha < 2 and beta < 2)
    action    = 1 − open tensions / value-or-goal memories (a tension is behaviour that
                contradicts a value, plan §4.2)
    value     = value_coherence of the value/goal memories' Beta weights

Whether a failing monitor blocks anything follows runtime.yaml `safety.phase_c`
(shadow: logged to safety_events only).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import asyncpg

from src.weights import safety_rules as rules
from src.weights.safety import Safety, weight_entropy
from src.weights.stochastic import StochasticWeight

log = logging.getLogger(__name__)

_AXES = """
SELECT count(*) FILTER (WHERE NOT (depth_weight_alpha < 2 AND depth_weight_beta < 2)) AS informed,
       count(*) FILTER (WHERE depth_weight_alpha > 5 AND depth_weight_beta > 5)        AS contested,
       count(*) FILTER (WHERE memory_type = 'tension'
                          AND COALESCE(metadata->>'resolved', 'false') <> 'true')       AS open_tensions,
       array_agg(depth_weight_alpha) FILTER (WHERE metadata->>'kind' IN ('value', 'goal')) AS v_alpha,
       array_agg(depth_weight_beta)  FILTER (WHERE metadata->>'kind' IN ('value', 'goal')) AS v_beta
  FROM memories"""


@dataclass(frozen=True)
class MonitorReport:
    entropy_bits: float
    memories: int
    coherence: float
    passed: dict[str, bool]
    events: int


async def run_monitors(pool: asyncpg.Pool, safety: Safety, actor: str) -> MonitorReport:
    """Observe the pattern, entropy and coherence for this cycle; write the events."""
    passed: dict[str, bool] = {}
    passed["circuit_breaker"], _ = safety.observe_pattern(actor, None)
    entropy, n = await weight_entropy(pool)
    passed["entropy"], _ = safety.observe_entropy(entropy, memories=n)
    row = await pool.fetchrow(_AXES)
    informed, contested = int(row["informed"]), int(row["contested"])
    epistemic = 1.0 if informed == 0 else 1.0 - contested / informed
    values = [StochasticWeight(a, b) for a, b in zip(row["v_alpha"] or [], row["v_beta"] or [], strict=True)]
    action = 1.0 if not values else max(0.0, 1.0 - int(row["open_tensions"]) / len(values))
    c, passed["coherence"], _ = safety.observe_coherence(epistemic, action, rules.value_coherence(values))
    events = await safety.write_events(pool)
    return MonitorReport(entropy, n, c, passed, events)
