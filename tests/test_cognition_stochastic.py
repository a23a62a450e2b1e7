from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from src.weights.stochastic import (
    StochasticWeight,
    center_after,
    diminished_gain,
    observe_many,
)

shapes = st.floats(min_value=0.05, max_value=500.0, allow_nan=False)


def draws(alpha: float, beta: float, seed: int, n: int = 100) -> np.ndarray:
    w = StochasticWeight(alpha, beta)
    rng = random.Random(seed)
    return np.array([w.observe(rng) for _ in range(n)])


@pytest.mark.parametrize("seed", range(5))
def test_new_memory_beta_1_4_is_low_and_wide(seed: int) -> None:
    x = draws(1, 4, seed)
    assert 0.15 < x.mean() < 0.25
    assert x.min() >= 0.0
    assert np.quantile(x, 0.95) < 0.65
    assert np.mean(x < 0.7) >= 0.97


@pytest.mark.parametrize("seed", range(5))
def test_identity_belief_beta_50_2_is_high_and_tight(seed: int) -> None:
    x = draws(50, 2, seed)
    assert 0.95 < x.mean() < 0.975
    assert x.min() > 0.8
    assert x.max() <= 1.0
    assert np.mean(x > 0.85) >= 0.97


@pytest.mark.parametrize("seed", range(5))
def test_contested_belief_beta_30_25_is_centred_and_wide(seed: int) -> None:
    x = draws(30, 25, seed)
    tight = draws(50, 2, seed)
    assert abs(x.mean() - 30 / 55) < 0.025
    assert x.std() > 0.045
    assert x.max() - x.min() > 0.2
    assert x.std() > 1.5 * tight.std()  # population ratio 2.5


@pytest.mark.parametrize(
    ("alpha", "beta", "center", "variance", "contested", "uninformed"),
    [
        (1, 4, 0.2, 4 / (25 * 6), False, False),  # beta 4 is not < 2
        (10, 2, 10 / 12, 20 / (144 * 13), False, False),
        (50, 2, 50 / 52, 100 / (52**2 * 53), False, False),
        (30, 25, 30 / 55, 750 / (55**2 * 56), True, False),
        (1, 1, 0.5, 1 / 12, False, True),
        (5, 6, 5 / 11, 30 / (121 * 12), False, False),  # alpha must exceed 5
    ],
)
def test_shape_table(
    alpha: float, beta: float, center: float, variance: float, contested: bool, uninformed: bool
) -> None:
    w = StochasticWeight(alpha, beta)
    assert w.center == pytest.approx(center)
    assert w.depth_weight == w.center
    assert w.variance == pytest.approx(variance)
    assert w.total_evidence == alpha + beta
    assert w.is_contested is contested
    assert w.is_uninformed is uninformed


def test_defaults_are_the_blank_slate() -> None:
    w = StochasticWeight()
    assert (w.alpha, w.beta) == (1.0, 4.0)


@pytest.mark.parametrize(
    ("alpha", "beta", "message"),
    [
        (0, 4, "alpha must be a finite number > 0, got 0"),
        (1, -1, "beta must be a finite number > 0, got -1"),
        (math.nan, 1, "alpha must be a finite number > 0, got nan"),
        (1, math.inf, "beta must be a finite number > 0, got inf"),
    ],
)
def test_invalid_shape_is_rejected(alpha: float, beta: float, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        StochasticWeight(alpha, beta)
    assert str(exc.value) == message


def test_reinforce_and_contradict_move_alpha_and_beta() -> None:
    w = StochasticWeight(1, 4)
    w.reinforce()
    w.contradict()
    w.reinforce(0.1)
    w.contradict(0.05)
    assert (w.alpha, w.beta) == pytest.approx((2.1, 4.55))


def test_negative_amount_is_rejected() -> None:
    with pytest.raises(ValueError, match="reinforce amount must be a finite number >= 0, got -1"):
        StochasticWeight().reinforce(-1)
    with pytest.raises(ValueError, match="contradict amount must be a finite number >= 0"):
        StochasticWeight().contradict(-0.5)


def test_observe_is_reproducible_with_a_seed_and_accepts_numpy() -> None:
    w = StochasticWeight(3, 7)
    a = [w.observe(random.Random(42)) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    assert w.observe(g1) == w.observe(g2)
    assert isinstance(w.observe(g1), float)


def test_observe_without_generator_is_an_error() -> None:
    with pytest.raises(TypeError):
        StochasticWeight().observe()  # type: ignore[call-arg]


def test_observe_many_draws_one_per_row() -> None:
    rng = np.random.default_rng(3)
    alpha = np.array([1.0, 50.0, 30.0] * 2000)
    beta = np.array([4.0, 2.0, 25.0] * 2000)
    x = observe_many(alpha, beta, rng).reshape(-1, 3)
    assert x.shape == (2000, 3)
    np.testing.assert_allclose(x.mean(axis=0), [0.2, 50 / 52, 30 / 55], atol=0.01)
    with pytest.raises(ValueError, match="alpha has shape"):
        observe_many(np.ones(2), np.ones(3), rng)


def test_twenty_reinforcement_cycles_show_diminishing_returns() -> None:
    w = StochasticWeight(1, 4)
    alpha_gains, center_gains = [], []
    for _ in range(20):
        before = w.center
        gain = diminished_gain(1.0, w.total_evidence)
        w.reinforce(gain)
        alpha_gains.append(gain)
        center_gains.append(w.center - before)
    assert all(b < a for a, b in zip(alpha_gains, alpha_gains[1:], strict=False))
    assert all(b < a for a, b in zip(center_gains, center_gains[1:], strict=False))
    assert alpha_gains[0] == pytest.approx(1 / math.log2(6))
    assert w.center < 0.95


@pytest.mark.parametrize(
    ("gain", "evidence", "expected"),
    [
        (1.0, 0, 1.0),  # log2(1) = 0 would divide by zero
        (1.0, 0.5, 1.0),  # log2(1.5) < 1 would amplify
        (1.0, 1, 1.0),
        (1.0, 3, 0.5),
        (1.0, 7, 1 / 3),
        (0.1, 15, 0.025),
        (-0.4, 3, -0.2),
    ],
)
def test_diminished_gain_table(gain: float, evidence: float, expected: float) -> None:
    assert diminished_gain(gain, evidence) == pytest.approx(expected)


def test_diminished_gain_rejects_negative_evidence() -> None:
    with pytest.raises(ValueError, match="evidence_count must be a finite number >= 0, got -1"):
        diminished_gain(1.0, -1)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((1, 4, 1, 0), 2 / 6),
        ((1, 4, 0, 0.5), 1 / 5.5),
        ((50, 1, 0, 0), 50 / 51),
        ((2, 2, -1, 0), 1 / 3),
    ],
)
def test_center_after_table(args: tuple[float, float, float, float], expected: float) -> None:
    assert center_after(*args) == pytest.approx(expected)


def test_center_after_rejects_update_that_empties_alpha() -> None:
    with pytest.raises(ValueError, match=r"update would leave alpha=0, beta=4; both must stay > 0"):
        center_after(1, 4, -1, 0)


@given(alpha=shapes, beta=shapes, seed=st.integers(0, 2**32 - 1))
def test_observation_lies_in_unit_interval(alpha: float, beta: float, seed: int) -> None:
    x = StochasticWeight(alpha, beta).observe(random.Random(seed))
    assert 0.0 <= x <= 1.0


@given(alpha=shapes, beta=shapes, amount=st.floats(min_value=0.01, max_value=100))
def test_reinforce_raises_and_contradict_lowers_center(
    alpha: float, beta: float, amount: float
) -> None:
    w = StochasticWeight(alpha, beta)
    before = w.center
    w.reinforce(amount)
    assert w.center > before
    assert w.center == pytest.approx(center_after(alpha, beta, amount, 0))
    up = w.center
    w.contradict(amount)
    assert w.center < up


@given(
    gain=st.floats(min_value=0, max_value=10),
    evidence=st.floats(min_value=0, max_value=1e6),
    more=st.floats(min_value=0, max_value=1e6),
)
def test_diminished_gain_never_amplifies_and_shrinks_with_evidence(
    gain: float, evidence: float, more: float
) -> None:
    assert diminished_gain(gain, evidence) <= gain
    assert diminished_gain(gain, evidence + more) <= diminished_gain(gain, evidence)
