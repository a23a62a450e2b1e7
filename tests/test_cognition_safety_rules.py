from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from src.weights.safety_rules import (
    EntropyMonitor,
    PatternBreaker,
    RuleResult,
    action_coherence,
    cba_coherence,
    coherence_dropped,
    epistemic_coherence,
    goal_budget,
    hard_ceiling,
    rate_limit,
    shannon_entropy,
    two_gate,
    value_coherence,
)
from src.weights.stochastic import StochasticWeight, center_after


@pytest.mark.parametrize(
    ("center", "immutable", "cap", "expected"),
    [
        (0.962, False, 0.95, (False, "center 0.962 would exceed the 0.95 ceiling")),
        (0.95, False, 0.95, (True, "center 0.950 is within the 0.95 ceiling")),
        (0.2, False, 0.95, (True, "center 0.200 is within the 0.95 ceiling")),
        (0.98, True, 0.95, (True, "immutable memory is exempt from the 0.95 ceiling")),
        (0.91, False, 0.9, (False, "center 0.910 would exceed the 0.9 ceiling")),
    ],
)
def test_hard_ceiling_table(
    center: float, immutable: bool, cap: float, expected: tuple[bool, str]
) -> None:
    assert hard_ceiling(center, immutable, cap) == expected


def test_hard_ceiling_on_a_real_update() -> None:
    # Beta(19, 1) reinforced by 1: center 20/21 = 0.952
    passed, reason = hard_ceiling(center_after(19, 1, 1, 0), immutable=False)
    assert (passed, reason) == (False, "center 0.952 would exceed the 0.95 ceiling")
    # bootstrap boundaries start at Beta(50, 1) and are immutable
    assert hard_ceiling(center_after(50, 1, 0, 0), immutable=True).passed


@pytest.mark.parametrize(
    ("share", "expected"),
    [
        (0.45, (False, "goal would hold 45.0% of the goal-weight budget, above the 40% cap")),
        (0.40, (True, "goal holds 40.0% of the goal-weight budget, within the 40% cap")),
        (0.125, (True, "goal holds 12.5% of the goal-weight budget, within the 40% cap")),
    ],
)
def test_goal_budget_table(share: float, expected: tuple[bool, str]) -> None:
    assert goal_budget(share) == expected


def test_goal_budget_rejects_share_outside_unit_interval() -> None:
    with pytest.raises(ValueError, match=r"share_after must be in \[0, 1\], got 1.5"):
        goal_budget(1.5)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (
            0.2,
            1 / 3,
            (
                False,
                "center would move by 0.133 (0.200 -> 0.333), more than the 0.1 allowed per consolidation cycle",
            ),
        ),
        (
            0.5,
            0.38,
            (
                False,
                "center would move by 0.120 (0.500 -> 0.380), more than the 0.1 allowed per consolidation cycle",
            ),
        ),
        (0.3, 0.4, (True, "center moves by 0.100, within the 0.1 allowed per consolidation cycle")),
        (
            0.5,
            0.45,
            (True, "center moves by 0.050, within the 0.1 allowed per consolidation cycle"),
        ),
        (0.5, 0.5, (True, "center moves by 0.000, within the 0.1 allowed per consolidation cycle")),
    ],
)
def test_rate_limit_table(before: float, after: float, expected: tuple[bool, str]) -> None:
    assert rate_limit(before, after) == expected


@pytest.mark.parametrize(
    ("margin", "min_margin", "used", "cap", "expected"),
    [
        (
            0.05,
            0.02,
            0.5,
            0.8,
            (True, "validation margin 0.050 >= 0.020 and capacity 0.500 <= 0.800"),
        ),
        (0.01, 0.02, 0.5, 0.8, (False, "validation margin 0.010 is below the required 0.020")),
        (0.05, 0.02, 0.9, 0.8, (False, "capacity used 0.900 exceeds the cap 0.800")),
        (
            -0.1,
            0.02,
            0.9,
            0.8,
            (
                False,
                "validation margin -0.100 is below the required 0.020; capacity used 0.900 exceeds the cap 0.800",
            ),
        ),
        (
            0.02,
            0.02,
            0.8,
            0.8,
            (True, "validation margin 0.020 >= 0.020 and capacity 0.800 <= 0.800"),
        ),
    ],
)
def test_two_gate_table(
    margin: float, min_margin: float, used: float, cap: float, expected: tuple[bool, str]
) -> None:
    assert two_gate(margin, min_margin, used, cap) == expected


def test_rule_results_unpack_as_pairs() -> None:
    passed, reason = two_gate(1, 0, 0, 1)
    assert isinstance(two_gate(1, 0, 0, 1), RuleResult)
    assert passed is True and reason.startswith("validation margin")


@pytest.mark.parametrize(
    ("weights", "bits"),
    [
        ([1, 1, 1, 1], 2.0),
        ([1, 1, 2], 1.5),
        ([5], 0.0),
        ([], 0.0),
        ([0, 0], 0.0),
        ([1, 0, 1], 1.0),
        ([0.2] * 8, 3.0),
    ],
)
def test_shannon_entropy_table(weights: list[float], bits: float) -> None:
    assert shannon_entropy(weights) == pytest.approx(bits)


def test_shannon_entropy_rejects_negative_weights() -> None:
    with pytest.raises(ValueError, match="weights must be finite and >= 0"):
        shannon_entropy([0.5, -0.1])


# weights are 0 or at least 1e-6: scaling a subnormal can round it to 0
@given(
    st.lists(st.just(0.0) | st.floats(1e-6, 1e6), min_size=1, max_size=50),
    st.floats(1e-3, 1e3),
)
def test_entropy_is_scale_free_and_at_most_log2_n(weights: list[float], scale: float) -> None:
    h = shannon_entropy(weights)
    assert 0.0 <= h <= math.log2(len(weights)) + 1e-9
    assert shannon_entropy([w * scale for w in weights]) == pytest.approx(h, abs=1e-6)


def test_entropy_monitor_adopts_a_level_that_persists() -> None:
    monitor = EntropyMonitor(window=4, drop_fraction=0.2, min_samples=2)
    readings = [3.0, 3.0, 3.0, 3.0, 2.0, 2.0, 2.0, 2.0]
    assert [monitor.observe(h).passed for h in readings] == [True] * 4 + [False, False, True, True]


def test_entropy_monitor_on_a_constructed_sequence() -> None:
    monitor = EntropyMonitor(window=10, drop_fraction=0.2, min_samples=3)
    assert monitor.observe(3.0) == (True, "entropy 3.000 bits recorded; no baseline yet")
    assert monitor.observe(3.0).passed and monitor.observe(3.0).passed
    assert monitor.baseline == 3.0
    assert monitor.observe(2.5) == (True, "entropy 2.500 bits vs baseline 3.000 bits")  # 17% drop
    # baseline (3 + 3 + 3 + 2.5) / 4 = 2.875; 1.8 is 37% below it
    assert monitor.observe(1.8) == (
        False,
        "entropy 1.800 bits is 37% below the rolling baseline 2.875 bits (limit 20%); broaden sampling",
    )


def centers_entropy(weights: list[StochasticWeight]) -> float:
    return shannon_entropy([w.center for w in weights])


def test_entropy_monitor_trips_on_runaway_reinforcement() -> None:
    # Winner-take-all: each cycle the highest sampled weight is reinforced and
    # the others are suppressed, so weight concentrates on one memory.
    rng = random.Random(5)
    memories = [StochasticWeight(2, 2) for _ in range(20)]
    monitor = EntropyMonitor()
    results = []
    for _ in range(40):
        winner = max(memories, key=lambda w: w.observe(rng))
        for w in memories:
            w.reinforce(3.0) if w is winner else w.contradict(1.0)
        results.append(monitor.observe(centers_entropy(memories)))
    # a slide of about 1% a cycle: caught after ~20 cycles, well before half
    # the store's weight sits on one memory
    first = next(i for i, r in enumerate(results) if not r.passed)
    assert 10 <= first <= 30
    assert "% below the rolling baseline" in results[first].reason


def test_entropy_monitor_stays_quiet_on_healthy_use() -> None:
    # Retrieval spread over the whole store: each cycle a random handful of
    # memories is reinforced, a few near-misses mildly suppressed.
    rng = random.Random(5)
    memories = [StochasticWeight(1, 4) for _ in range(20)]
    monitor = EntropyMonitor()
    for _ in range(200):
        for w in rng.sample(memories, 5):
            w.reinforce(0.1)
        for w in rng.sample(memories, 3):
            w.contradict(0.05)
        assert monitor.observe(centers_entropy(memories)).passed


def test_entropy_monitor_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match=r"drop_fraction must be in \(0, 1\), got 1.5"):
        EntropyMonitor(drop_fraction=1.5)
    with pytest.raises(
        ValueError, match="need window >= 1 and 1 <= min_samples <= window, got 3, 5"
    ):
        EntropyMonitor(window=3, min_samples=5)


def test_circuit_breaker_trips_after_n_cycles_without_new_evidence() -> None:
    breaker = PatternBreaker(max_cycles=5)
    results = [breaker.observe("user-likes-praise", {"msg-1"}) for _ in range(6)]
    assert [r.passed for r in results] == [True, True, True, True, False, False]
    assert results[4].reason == (
        "pattern 'user-likes-praise' reinforced 5 cycles in a row with no new evidence "
        "(limit 5); pausing its reinforcement"
    )
    assert breaker.tripped


def test_circuit_breaker_is_not_fooled_by_recycled_evidence() -> None:
    breaker = PatternBreaker(max_cycles=4)
    results = [breaker.observe("p", {f"e{i % 2}"}) for i in range(6)]
    # e0 (new), e1 (new), then e0, e1, e0, e1 again: 2, 3, 4 -> trips
    assert [r.passed for r in results] == [True, True, True, True, False, False]


def test_circuit_breaker_stays_quiet_on_healthy_sequences() -> None:
    breaker = PatternBreaker(max_cycles=3)
    fresh = [breaker.observe("p", {f"e{i}"}) for i in range(20)]
    alternating = [breaker.observe("p" if i % 2 else "q", {"same"}) for i in range(20)]
    idle = [breaker.observe("p" if i % 2 else None) for i in range(20)]
    assert all(r.passed for r in fresh + alternating + idle)
    assert fresh[-1].reason == "pattern 'p' reinforced on new evidence"
    assert idle[0].reason == "no pattern reinforced this cycle"


@pytest.mark.parametrize(
    ("reset", "reason"),
    [
        (("p", {"e-new"}), "pattern 'p' reinforced on new evidence"),
        (("q", set()), "pattern 'q' reinforced; new pattern"),
        ((None, set()), "no pattern reinforced this cycle"),
    ],
)
def test_circuit_breaker_resets(reset: tuple, reason: str) -> None:
    breaker = PatternBreaker(max_cycles=2)
    breaker.observe("p", {"e"})
    assert not breaker.observe("p", {"e"}).passed
    assert breaker.observe(*reset) == (True, reason)
    assert not breaker.tripped


def test_epistemic_coherence() -> None:
    beliefs = [
        StochasticWeight(30, 25),  # contested
        StochasticWeight(10, 2),
        StochasticWeight(8, 1),
        StochasticWeight(1, 1),  # uninformed: left out
    ]
    assert epistemic_coherence(beliefs) == pytest.approx(2 / 3)
    assert epistemic_coherence([StochasticWeight(1, 1)]) == 1.0
    assert epistemic_coherence([StochasticWeight(6, 6), StochasticWeight(9, 7)]) == 0.0


@pytest.mark.parametrize(
    ("consistent", "total", "expected"), [(3, 4, 0.75), (0, 0, 1.0), (0, 5, 0.0)]
)
def test_action_coherence(consistent: int, total: int, expected: float) -> None:
    assert action_coherence(consistent, total) == expected


def test_action_coherence_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="need 0 <= consistent_actions <= total_actions, got 5, 4"):
        action_coherence(5, 4)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([StochasticWeight(1, 1)], 0.0),  # knows nothing
        ([StochasticWeight(50, 2)], 1 - math.sqrt(100 / (52**2 * 53)) * math.sqrt(12)),  # 0.9085
        # mean of the two standard deviations, over 1/sqrt(12)
        (
            [StochasticWeight(1, 1), StochasticWeight(50, 2)],
            1 - (1 / math.sqrt(12) + math.sqrt(100 / (52**2 * 53))) / 2 * math.sqrt(12),
        ),
        ([], 1.0),
    ],
)
def test_value_coherence(values: list[StochasticWeight], expected: float) -> None:
    assert value_coherence(values) == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize(
    ("axes", "expected"),
    [
        ((1, 1, 1), 1.0),
        ((0.8, 0.8, 0.8), 0.8),
        ((0.5, 1, 1), 0.5 ** (1 / 3)),
        ((0, 1, 1), 0.0),
        ((0.9, 0.6, 0.5), 0.27 ** (1 / 3)),
    ],
)
def test_cba_coherence_is_the_geometric_mean(
    axes: tuple[float, float, float], expected: float
) -> None:
    assert cba_coherence(*axes) == pytest.approx(expected)


def test_cba_coherence_rejects_axis_outside_unit_interval() -> None:
    with pytest.raises(ValueError, match=r"action coherence must be in \[0, 1\], got 1.2"):
        cba_coherence(0.5, 1.2, 0.5)


def test_coherence_drops_when_beliefs_become_contested() -> None:
    settled = [StochasticWeight(12, 2), StochasticWeight(20, 3), StochasticWeight(9, 1)]
    before = cba_coherence(
        epistemic_coherence(settled), action_coherence(9, 10), value_coherence(settled)
    )
    # identity upheaval: the same beliefs now carry much evidence against them
    for w in settled:
        w.contradict(10)
    after = cba_coherence(
        epistemic_coherence(settled), action_coherence(6, 10), value_coherence(settled)
    )
    # epistemic 1.0 (nothing contested), action 0.9, value 1 - 0.0832 * sqrt(12) = 0.712
    assert before == pytest.approx((1.0 * 0.9 * 0.7117) ** (1 / 3), abs=1e-3)
    assert after == 0.0  # every informed belief is contested
    passed, reason = coherence_dropped(before, after, tolerance=0.1)
    assert not passed
    assert reason.startswith(f"coherence fell from {before:.3f} to 0.000")


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        (0.8, 0.65, (False, "coherence fell from 0.800 to 0.650, a drop of 0.150 (tolerance 0.1)")),
        (0.8, 0.75, (True, "coherence 0.750 (was 0.800)")),
        (0.5, 0.9, (True, "coherence 0.900 (was 0.500)")),
    ],
)
def test_coherence_dropped_table(
    previous: float, current: float, expected: tuple[bool, str]
) -> None:
    assert coherence_dropped(previous, current) == expected
