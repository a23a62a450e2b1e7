"""Pure rules of the safety ceilings (plan §3.9).

The database choke point that every weight change passes through calls these;
it owns enabling, shadow mode and the audit log. Each rule returns a
``RuleResult(passed, reason)`` whose reason a human can read in that log, for
passes as well as failures, so a shadow-mode entry says what was checked.

Phase A: ``hard_ceiling``, ``goal_budget`` (and ``diminished_gain`` in
``stochastic``). Phase B: ``rate_limit``, ``two_gate``. Phase C:
``EntropyMonitor``, ``PatternBreaker``, ``cba_coherence`` with
``coherence_dropped``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Iterable
from typing import NamedTuple

from src.weights.settings import CENTER_CEILING, GOAL_BUDGET_SHARE, MAX_CENTER_CHANGE
from src.weights.stochastic import StochasticWeight

#: Standard deviation of Beta(1, 1), the "knows nothing" distribution.
UNIFORM_STD = 1.0 / math.sqrt(12.0)


class RuleResult(NamedTuple):
    """Outcome of a rule; unpacks as ``passed, reason``."""

    passed: bool
    reason: str


def hard_ceiling(center_after: float, immutable: bool, cap: float = CENTER_CEILING) -> RuleResult:
    """No memory's center may exceed ``cap`` (0.95), except immutable ones."""
    if immutable:
        return RuleResult(True, f"immutable memory is exempt from the {cap:g} ceiling")
    if center_after > cap:
        return RuleResult(False, f"center {center_after:.3f} would exceed the {cap:g} ceiling")
    return RuleResult(True, f"center {center_after:.3f} is within the {cap:g} ceiling")


def goal_budget(share_after: float, cap: float = GOAL_BUDGET_SHARE) -> RuleResult:
    """No goal may hold more than ``cap`` (40%) of the total goal-weight budget.

    ``share_after`` is the goal's center divided by the sum of the centers of
    all goals, after the change.
    """
    if not 0.0 <= share_after <= 1.0:
        raise ValueError(f"share_after must be in [0, 1], got {share_after!r}")
    if share_after > cap:
        return RuleResult(
            False,
            f"goal would hold {share_after:.1%} of the goal-weight budget, above the {cap:.0%} cap",
        )
    return RuleResult(
        True, f"goal holds {share_after:.1%} of the goal-weight budget, within the {cap:.0%} cap"
    )


def rate_limit(
    center_before: float, center_after: float, max_change: float = MAX_CENTER_CHANGE
) -> RuleResult:
    """A center may move by at most ``max_change`` per consolidation cycle.

    The limit is absolute, in center units: a relative 10% would freeze new
    memories (a 0.2 center could move 0.02 a cycle) while letting strong ones
    swing widely. ``center_before`` is the center at the start of the cycle,
    so many small updates within one cycle cannot add up past the limit.
    """
    change = center_after - center_before
    if abs(change) > max_change + 1e-12:
        return RuleResult(
            False,
            f"center would move by {abs(change):.3f} ({center_before:.3f} -> {center_after:.3f}), "
            f"more than the {max_change:g} allowed per consolidation cycle",
        )
    return RuleResult(
        True,
        f"center moves by {abs(change):.3f}, within the {max_change:g} allowed per consolidation cycle",
    )


def two_gate(
    validation_margin: float, min_margin: float, capacity_used: float, capacity_cap: float
) -> RuleResult:
    """Two-Gate guardrail: a parameter change needs both gates open.

    Gate 1 (validation): the change improves the outcome measure on held-out
    cases by at least ``min_margin``. Gate 2 (capacity): after the change the
    parameter uses at most ``capacity_cap`` of its allowed range or budget.
    """
    failures = []
    if not validation_margin >= min_margin:
        failures.append(
            f"validation margin {validation_margin:.3f} is below the required {min_margin:.3f}"
        )
    if not capacity_used <= capacity_cap:
        failures.append(f"capacity used {capacity_used:.3f} exceeds the cap {capacity_cap:.3f}")
    if failures:
        return RuleResult(False, "; ".join(failures))
    return RuleResult(
        True,
        f"validation margin {validation_margin:.3f} >= {min_margin:.3f} and "
        f"capacity {capacity_used:.3f} <= {capacity_cap:.3f}",
    )


def shannon_entropy(weights: Iterable[float]) -> float:
    """Entropy in bits of the weights normalised to a distribution.

    Zero weights contribute nothing; no weights (or all zero) give 0.0.
    """
    values = [float(w) for w in weights]
    if any(not math.isfinite(w) or w < 0 for w in values):
        raise ValueError("weights must be finite and >= 0")
    largest = max(values, default=0.0)
    if largest == 0:
        return 0.0
    # Scale by the largest first so the sum of huge weights cannot overflow.
    scaled = [w / largest for w in values]
    total = sum(scaled)
    probabilities = (w / total for w in scaled)
    # p > 0, not w > 0: a subnormal weight divided by the total underflows to 0.
    return -sum(p * math.log2(p) for p in probabilities if p > 0)


class EntropyMonitor:
    """Alarm when the entropy of the weight distribution drops.

    A runaway self-reinforcing loop concentrates weight on a few memories, so
    the entropy falls. Each ``observe`` compares the new entropy with the mean
    of the previous ``window`` observations (the rolling baseline) and fails
    when it is more than ``drop_fraction`` below it. Until ``min_samples``
    observations exist there is no baseline and it passes.

    The window is long on purpose: a runaway is often a slow slide, not a
    fall. Sliding by d per cycle leaves the current value about
    d * window / 2 below the window's mean, so with the defaults a slide of
    1% a cycle alarms after about 20 cycles, while the cycle-to-cycle jitter
    of healthy retrieval (far smaller) never does.

    A low reading still joins the window: the monitor reports drops, and a new
    level that persists becomes the baseline instead of alarming forever (a
    deep consolidation that merges memories legitimately changes the level).
    """

    def __init__(self, window: int = 50, drop_fraction: float = 0.10, min_samples: int = 5) -> None:
        if window < 1 or not 1 <= min_samples <= window:
            raise ValueError(
                f"need window >= 1 and 1 <= min_samples <= window, got {window}, {min_samples}"
            )
        if not 0.0 < drop_fraction < 1.0:
            raise ValueError(f"drop_fraction must be in (0, 1), got {drop_fraction!r}")
        self.drop_fraction = drop_fraction
        self.min_samples = min_samples
        self._history: deque[float] = deque(maxlen=window)

    @property
    def baseline(self) -> float | None:
        """Mean entropy of the window, or None before ``min_samples`` observations."""
        if len(self._history) < self.min_samples:
            return None
        return sum(self._history) / len(self._history)

    def observe(self, entropy: float) -> RuleResult:
        """Record one cycle's entropy (bits) and say whether it dropped."""
        if not math.isfinite(entropy) or entropy < 0:
            raise ValueError(f"entropy must be finite and >= 0, got {entropy!r}")
        baseline = self.baseline
        self._history.append(entropy)
        if baseline is None:
            return RuleResult(True, f"entropy {entropy:.3f} bits recorded; no baseline yet")
        drop = (baseline - entropy) / baseline if baseline > 0 else 0.0
        if drop > self.drop_fraction:
            return RuleResult(
                False,
                f"entropy {entropy:.3f} bits is {drop:.0%} below the rolling baseline "
                f"{baseline:.3f} bits (limit {self.drop_fraction:.0%}); broaden sampling",
            )
        return RuleResult(True, f"entropy {entropy:.3f} bits vs baseline {baseline:.3f} bits")


class PatternBreaker:
    """Trip when one pattern is reinforced ``max_cycles`` cycles in a row on no new evidence.

    Each cycle the caller reports the pattern it reinforced (None when it
    reinforced nothing) and the ids of the evidence behind it. Evidence is new
    when it includes an id not seen for this pattern before (cycling through
    the same old evidence is not new); new evidence restarts the count at 1,
    as does a different pattern, and a cycle that reinforced nothing sets it
    to 0. While tripped, the choke point pauses reinforcement of that pattern.
    """

    def __init__(self, max_cycles: int = 5, max_evidence: int = 1000) -> None:
        if max_cycles < 1:
            raise ValueError(f"max_cycles must be >= 1, got {max_cycles!r}")
        self.max_cycles = max_cycles
        self.max_evidence = max_evidence
        self._pattern: Hashable | None = None
        # evidence seen for the pattern, oldest first; beyond max_evidence the oldest is
        # forgotten (a pattern fed new evidence every cycle for days must not grow without end)
        self._evidence: dict[Hashable, None] = {}
        self._streak = 0

    @property
    def tripped(self) -> bool:
        return self._streak >= self.max_cycles

    def knows(self, evidence: Iterable[Hashable]) -> bool:
        """True when every id in `evidence` has been seen for the current pattern."""
        return all(e in self._evidence for e in evidence)

    def _remember(self, evidence: Iterable[Hashable], *, fresh: bool = False) -> None:
        if fresh:
            self._evidence = {}
        for e in evidence:
            self._evidence.pop(e, None)
            self._evidence[e] = None
        while len(self._evidence) > self.max_evidence:
            del self._evidence[next(iter(self._evidence))]

    def observe(
        self, pattern_key: Hashable | None, evidence: Iterable[Hashable] = ()
    ) -> RuleResult:
        """Record one cycle; fails while the breaker is tripped."""
        evidence = list(dict.fromkeys(evidence))
        if pattern_key is None:
            self._pattern, self._streak = None, 0
            self._remember((), fresh=True)
            return RuleResult(True, "no pattern reinforced this cycle")
        if pattern_key != self._pattern:
            self._pattern, self._streak = pattern_key, 1
            self._remember(evidence, fresh=True)
            return RuleResult(True, f"pattern {pattern_key!r} reinforced; new pattern")
        if not self.knows(evidence):
            self._remember(evidence)
            self._streak = 1
            return RuleResult(True, f"pattern {pattern_key!r} reinforced on new evidence")
        self._remember(evidence)
        self._streak += 1
        if self.tripped:
            return RuleResult(
                False,
                f"pattern {pattern_key!r} reinforced {self._streak} cycles in a row with no new "
                f"evidence (limit {self.max_cycles}); pausing its reinforcement",
            )
        return RuleResult(
            True, f"pattern {pattern_key!r} reinforced {self._streak} cycles without new evidence"
        )


def epistemic_coherence(beliefs: Iterable[StochasticWeight]) -> float:
    """1 - fraction of contested beliefs among those that carry evidence.

    Uninformed beliefs (alpha < 2 and beta < 2) are left out: they are unknown,
    not in conflict. With nothing informed there is nothing to conflict: 1.0.
    """
    informed = [b for b in beliefs if not b.is_uninformed]
    if not informed:
        return 1.0
    return 1.0 - sum(b.is_contested for b in informed) / len(informed)


def action_coherence(consistent_actions: int, total_actions: int) -> float:
    """Fraction of recent actions consistent with the high-weight values (1.0 if none)."""
    if total_actions < 0 or not 0 <= consistent_actions <= total_actions:
        raise ValueError(
            f"need 0 <= consistent_actions <= total_actions, got {consistent_actions}, {total_actions}"
        )
    return 1.0 if total_actions == 0 else consistent_actions / total_actions


def value_coherence(values: Iterable[StochasticWeight]) -> float:
    """1 - normalised dispersion of the value weights.

    Dispersion is the mean standard deviation of the values' Beta weights,
    normalised by that of Beta(1, 1) and capped at 1: 1.0 when every value is
    settled, 0.0 when they are as unsettled as knowing nothing. No values: 1.0.
    """
    stds = [math.sqrt(v.variance) for v in values]
    if not stds:
        return 1.0
    return 1.0 - min(1.0, (sum(stds) / len(stds)) / UNIFORM_STD)


def cba_coherence(epistemic: float, action: float, value: float) -> float:
    """C in [0, 1]: geometric mean of the epistemic, action and value axes.

    Geometric, not arithmetic: incoherence on one axis is not bought back by
    the others; if any axis is 0, C is 0.
    """
    for name, axis in (("epistemic", epistemic), ("action", action), ("value", value)):
        if not 0.0 <= axis <= 1.0:
            raise ValueError(f"{name} coherence must be in [0, 1], got {axis!r}")
    return (epistemic * action * value) ** (1.0 / 3.0)


def coherence_dropped(previous: float, current: float, tolerance: float = 0.1) -> RuleResult:
    """Fails when C fell by more than ``tolerance`` (absolute) since the last check."""
    drop = previous - current
    if drop > tolerance:
        return RuleResult(
            False,
            f"coherence fell from {previous:.3f} to {current:.3f}, "
            f"a drop of {drop:.3f} (tolerance {tolerance:g})",
        )
    return RuleResult(True, f"coherence {current:.3f} (was {previous:.3f})")
