"""The one unit-vector helper and its zero-vector rule (src/vectors.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from src.vectors import closest, has_direction, unit, unit_rows


def test_unit_scales_to_length_one_and_keeps_a_zero_vector_zero():
    assert unit([3.0, 4.0]).tolist() == [0.6, 0.8]
    assert unit(np.zeros(3, dtype=np.float32)).tolist() == [0.0, 0.0, 0.0]
    assert unit(np.array([[0.0, 2.0]])).tolist() == [0.0, 1.0]     # flattened


def test_unit_rows_treats_each_row_alone():
    rows = unit_rows([np.array([0.0, 5.0]), np.array([0.0, 0.0]), np.array([-2.0, 0.0])])
    assert rows.tolist() == [[0.0, 1.0], [0.0, 0.0], [-1.0, 0.0]]
    # the cosine with a directionless vector is 0: similar to nothing, never NaN
    assert (rows @ unit([0.0, 0.0])).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(("vector", "expected"), [
    ([1.0, 0.0], True), ([0.0, 0.0], False), ([np.nan, 1.0], False), ([np.inf, 0.0], False),
])
def test_has_direction(vector, expected):
    assert has_direction(vector) is expected


def test_unit_is_exact_for_tiny_and_huge_components():
    assert np.linalg.norm(unit([5.2e-162, 3e-162])) == pytest.approx(1.0)      # squares underflow
    assert unit([5.2e-162, 0.0]).tolist() == [1.0, 0.0]
    assert np.linalg.norm(unit([1e300, 1e300])) == pytest.approx(1.0)          # squares overflow
    assert unit_rows(np.zeros((0, 3))).shape == (0, 3)


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=16))
def test_unit_is_length_one_or_all_zero(values):
    v = unit(values)
    norm = float(np.linalg.norm(v))
    assert norm == pytest.approx(1.0) or not np.any(v)


def test_closest_gives_the_index_and_cosine_of_the_most_similar_candidate():
    query = np.array([1.0, 1.0, 0.0])
    found = closest(query, [np.array([0.0, 0.0, 5.0]), np.array([2.0, 0.0, 0.0]), np.array([3.0, 3.0, 0.0])])
    assert found[0] == 2 and found[1] == pytest.approx(1.0)
    assert closest(query, [np.zeros(3), np.array([0.0, -1.0, 0.0])]) == (0, 0.0)   # zero: cosine 0, not NaN
    assert closest(query, []) is None and closest(query, iter([])) is None
    assert closest(query, (v for v in [np.array([1.0, 0.0, 0.0])]))[1] == pytest.approx(2 ** -0.5)
