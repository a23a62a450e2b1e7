from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from src.recall.activation import (
    TAU,
    ActivationResult,
    ActRParameters,
    activation,
    base_level,
    base_levels,
    logistic_noise,
    logistic_noise_many,
    partial_matching,
    spreading,
    spreading_many,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
E1, E2, E3 = np.eye(3)


@pytest.mark.parametrize(
    ("ages", "d", "expected"),
    [
        # t^-0.5: 100 -> 0.1, 25 -> 0.2, 4 -> 0.5; ln(0.8)
        ([100, 25, 4], 0.5, math.log(0.8)),
        # a single presentation: B = -d ln t
        ([10_000], 0.5, -0.5 * math.log(10_000)),
        # d = 1: 1/10 + 1/2
        ([10, 2], 1.0, math.log(0.6)),
        # just now and in the future (clock skew) are clamped to 1 s: each adds 1
        ([0], 0.5, 0.0),
        ([0, -30], 0.5, math.log(2.0)),
    ],
)
def test_base_level_matches_hand_computation(ages: list[float], d: float, expected: float) -> None:
    now = 1_000_000.0
    assert base_level([now - a for a in ages], now, d) == pytest.approx(expected)
    assert base_level([NOW - timedelta(seconds=a) for a in ages], NOW, d) == pytest.approx(expected)


def test_base_level_follows_power_law_of_practice_and_forgetting() -> None:
    once_recent = base_level([NOW - timedelta(hours=1)], NOW)
    once_old = base_level([NOW - timedelta(days=30)], NOW)
    thrice_old = base_level([NOW - timedelta(days=30)] * 3, NOW)
    assert once_recent > once_old
    # 720x older: activation falls by d * ln(720)
    assert once_recent - once_old == pytest.approx(0.5 * math.log(720))
    # three presentations of the same age: + ln 3
    assert thrice_old - once_old == pytest.approx(math.log(3))


def test_naive_datetime_is_rejected() -> None:
    with pytest.raises(ValueError, match="naive datetime 2025-06-01T11:00:00: pass timezone-aware"):
        base_level([datetime(2025, 6, 1, 11, 0)], NOW)


def test_empty_history_is_rejected() -> None:
    with pytest.raises(
        ValueError, match="memory at index 1 has no presentations; include its event_time"
    ):
        base_levels([[1.0], []], 10.0)


def test_base_levels_accepts_floats_datetimes_and_datetime64() -> None:
    floats = np.array([NOW.timestamp() - 100, NOW.timestamp() - 4])
    aware = [NOW - timedelta(seconds=100), NOW - timedelta(seconds=4)]
    dt64 = np.array(["2025-06-01T11:58:20", "2025-06-01T11:59:56"], dtype="datetime64[s]")
    result = base_levels([floats, aware, dt64], NOW)
    np.testing.assert_allclose(result, [math.log(0.6)] * 3)
    assert base_levels([], NOW).shape == (0,)


@settings(deadline=None)
@given(
    st.lists(
        st.lists(st.floats(min_value=0, max_value=1e8), min_size=1, max_size=30),
        min_size=1,
        max_size=50,
    )
)
def test_vectorised_base_levels_equal_the_scalar_version(histories: list[list[float]]) -> None:
    now = 1e8
    expected = [base_level(h, now) for h in histories]
    np.testing.assert_allclose(base_levels(histories, now), expected, rtol=1e-12)


@given(st.lists(st.floats(min_value=0, max_value=1e8), min_size=1, max_size=20), st.floats(0, 1e8))
def test_another_presentation_never_lowers_base_level(history: list[float], extra: float) -> None:
    now = 1e8
    assert base_level([*history, extra], now) > base_level(history, now)


@pytest.mark.parametrize(
    ("memory", "context", "layers", "expected"),
    [
        (E1, [E1], [], 1.0),
        (E1, [E2], [], 0.0),
        (E1, [-E1], [], 0.0),  # opposed: no association, not negative
        (E1, [E1, E2], [], 0.5),  # source activation split evenly
        (E1, [E1 + E2], [], 1 / math.sqrt(2)),
        (E1, [], [(E1, 3.0), (E2, 1.0)], 0.75),  # weighted by depth weight
        (E1, [E1], [(E2, 1.0)], 0.5),  # half context, half layers
        (E1, [], [], 0.0),
        (np.zeros(3), [E1], [(E1, 1.0)], 0.0),  # zero vector: no direction
        (E1, [E1], [(E1, 0.0)], 1.0),  # all-zero layer weights: layers absent
    ],
)
def test_spreading_table(memory, context, layers, expected: float) -> None:
    assert spreading(memory, context, layers) == pytest.approx(expected)


def test_spreading_context_share() -> None:
    assert spreading(E1, [E1], [(E2, 1.0)], context_share=0.8) == pytest.approx(0.8)
    with pytest.raises(ValueError, match="context_share must be in"):
        spreading(E1, [E1], [], context_share=1.5)


@given(st.integers(0, 2**32 - 1))
def test_spreading_many_equals_rowwise_and_stays_in_unit_interval(seed: int) -> None:
    rng = np.random.default_rng(seed)
    memories, context, layer_vecs = (
        rng.normal(size=(20, 8)),
        rng.normal(size=(3, 8)),
        rng.normal(size=(4, 8)),
    )
    layers = list(zip(layer_vecs, rng.random(4), strict=True))
    many = spreading_many(memories, context, layers)
    assert np.all((many >= 0) & (many <= 1))
    np.testing.assert_allclose(many, [spreading(m, context, layers) for m in memories])


@pytest.mark.parametrize(
    ("mismatches", "P", "expected"),
    [(0, -1.0, 0.0), (2, -1.0, -2.0), ([0.5, 0.25], -1.0, -0.75), ([], -1.0, 0.0), (2, -0.5, -1.0)],
)
def test_partial_matching_table(mismatches, P: float, expected: float) -> None:
    assert partial_matching(mismatches, P) == expected


def test_partial_matching_rejects_bonus_and_bad_degrees() -> None:
    with pytest.raises(ValueError, match="mismatch penalty P must be <= 0, got 1.0"):
        partial_matching(1, P=1.0)
    with pytest.raises(ValueError, match=r"mismatch degrees must be in \[0, 1\], got \[1.5\]"):
        partial_matching([1.5])


def test_logistic_noise_has_logistic_spread() -> None:
    rng = random.Random(20250601)
    x = np.array([logistic_noise(rng, 0.4) for _ in range(20_000)])
    expected_var = math.pi**2 * 0.4**2 / 3  # 0.5264
    assert abs(x.mean()) < 0.02
    assert x.var(ddof=1) == pytest.approx(expected_var, rel=0.05)
    # logistic CDF: P(|x| > s ln 3) = 0.5
    assert np.mean(np.abs(x) > 0.4 * math.log(3)) == pytest.approx(0.5, abs=0.015)


def test_logistic_noise_many_has_logistic_spread() -> None:
    x = logistic_noise_many(np.random.default_rng(11), 20_000, 0.4)
    assert x.shape == (20_000,)
    assert x.var(ddof=1) == pytest.approx(math.pi**2 * 0.16 / 3, rel=0.05)


class ScriptedUniform:
    """A generator whose random() returns the scripted values in turn."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


@pytest.mark.parametrize(
    ("uniforms", "expected"),
    [
        ((0.5,), 0.0),
        ((0.75,), 0.4 * math.log(3)),
        ((0.25,), -0.4 * math.log(3)),
        ((0.0, 0.75), 0.4 * math.log(3)),
    ],
)
def test_logistic_noise_is_the_inverse_cdf(uniforms: tuple[float, ...], expected: float) -> None:
    assert logistic_noise(ScriptedUniform(*uniforms), 0.4) == pytest.approx(expected)  # type: ignore[arg-type]


def test_activation_sums_the_four_terms() -> None:
    presentations = [NOW - timedelta(seconds=s) for s in (100, 25, 4)]
    result = activation(
        presentations,
        NOW,
        ScriptedUniform(0.75),  # type: ignore[arg-type]
        memory_vec=E1,
        context_vecs=[E1, E2],
        mismatches=1,
    )
    noise = 0.4 * math.log(3)
    assert result == ActivationResult(
        B=pytest.approx(math.log(0.8)),
        S=pytest.approx(0.5),
        P=-1.0,
        noise=pytest.approx(noise),
        total=pytest.approx(math.log(0.8) + 0.5 - 1.0 + noise),
    )
    assert result.above_threshold() is False  # -0.283 < tau = 0
    assert result.above_threshold(-1.0) is True
    assert TAU == 0.0


def test_activation_without_embedding_or_noise() -> None:
    result = activation([NOW], NOW, random.Random(1), params=ActRParameters(s=0.0))
    assert (result.B, result.S, result.P, result.noise, result.total) == (0.0, 0.0, 0.0, 0.0, 0.0)
    assert result.above_threshold() is True
