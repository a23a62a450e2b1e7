from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from src.recall.rrf import recency_score, rrf_fuse

DAY = 86_400.0


def test_rrf_hand_computed_example() -> None:
    fused = rrf_fuse({"vector": ["a", "b", "c"], "keyword": ["c", "a", "d"]}, k=60)
    assert fused == pytest.approx(
        {"a": 1 / 61 + 1 / 62, "b": 1 / 62, "c": 1 / 63 + 1 / 61, "d": 1 / 63}
    )
    assert list(fused) == ["a", "c", "b", "d"]


def test_rrf_weights_per_arm() -> None:
    fused = rrf_fuse(
        {"vector": [1, 2], "keyword": [2, 3]}, k=60, weights={"vector": 0.3, "keyword": 0.7}
    )
    assert fused == pytest.approx({2: 0.3 / 62 + 0.7 / 61, 3: 0.7 / 62, 1: 0.3 / 61})
    assert list(fused) == [2, 3, 1]


def test_rrf_k_zero_gives_reciprocal_rank() -> None:
    assert rrf_fuse({"only": ["x", "y", "z"]}, k=0) == pytest.approx(
        {"x": 1.0, "y": 0.5, "z": 1 / 3}
    )


def test_rrf_counts_a_repeated_id_once_at_its_best_rank() -> None:
    assert rrf_fuse({"v": ["a", "a", "b"]}, k=60) == pytest.approx({"a": 1 / 61, "b": 1 / 62})


def test_rrf_ties_keep_first_appearance() -> None:
    assert list(rrf_fuse({"v": ["a", "b"], "k": ["b", "a"]})) == ["a", "b"]


def test_rrf_empty() -> None:
    assert rrf_fuse({}) == {}
    assert rrf_fuse({"vector": [], "keyword": []}) == {}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"weights": {"vector": 1.0}}, "no weight given for arm(s) keyword"),
        (
            {"weights": {"vector": 1.0, "keyword": -0.5}},
            "arm weights must be >= 0; got negative for keyword",
        ),
        ({"k": -1}, "RRF k must be a finite number >= 0, got -1"),
    ],
)
def test_rrf_rejects_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        rrf_fuse({"vector": [1], "keyword": [2]}, **kwargs)
    assert str(exc.value) == message


ranked = st.lists(st.integers(0, 30), unique=True, max_size=20)


@given(vector=ranked, keyword=ranked, k=st.integers(0, 100))
def test_rrf_scores_are_bounded_and_single_arm_ids_score_w_over_k_plus_rank(
    vector: list[int], keyword: list[int], k: int
) -> None:
    fused = rrf_fuse({"vector": vector, "keyword": keyword}, k=k)
    assert set(fused) == set(vector) | set(keyword)
    for item, score in fused.items():
        assert 0 < score <= 2 / (k + 1)
        if item not in keyword:
            assert score == pytest.approx(1 / (k + vector.index(item) + 1))
    scores = list(fused.values())
    assert scores == sorted(scores, reverse=True)


@given(ranked)
def test_rrf_of_one_list_keeps_its_order(ids: list[int]) -> None:
    assert list(rrf_fuse({"vector": ids})) == ids


@pytest.mark.parametrize(
    ("age_seconds", "expected", "tolerance"),
    [
        (0.0, 1.0, 0.0),
        (7 * DAY, 0.5, 1e-3),  # the half-life; 0.693 is ln 2 to three places
        (14 * DAY, 0.25, 1e-3),
        (365 * DAY, math.exp(-0.693 * 365 / 7), 1e-20),  # 2.0e-16: a year is forgotten
        (-3600.0, 1.0, 0.0),  # future timestamps count as now
    ],
)
def test_recency_score_table(age_seconds: float, expected: float, tolerance: float) -> None:
    assert recency_score(age_seconds) == pytest.approx(expected, abs=tolerance)


def test_recency_score_uses_the_plans_constant_like_the_sql() -> None:
    # exp(-0.693), not 0.5: the SQL's EXP(-0.693 * age / 604800.0) at one week
    assert recency_score(7 * DAY) == pytest.approx(0.5000735956957677, rel=1e-12)


def test_recency_score_vectorised() -> None:
    scores = recency_score(np.array([0.0, 7 * DAY, 14 * DAY]))
    assert isinstance(scores, np.ndarray)
    np.testing.assert_allclose(scores, [1.0, math.exp(-0.693), math.exp(-1.386)])


@given(st.floats(0, 1e9), st.floats(0, 1e9))
def test_recency_is_monotone_and_in_unit_interval(a: float, b: float) -> None:
    young, old = sorted((a, b))
    assert 0.0 <= recency_score(old) <= recency_score(young) <= 1.0
