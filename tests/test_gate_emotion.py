"""Emotional charge v0.1 (plan §2.8): |gut - 0.5| * 2, 0.0 on an empty store, and the store
centroid it is measured against. The plan's "+0.15 bonus when > 0.3" goes to the item's
relevance, not the charge (tests/test_gate_uses_charge_and_activation.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pgvector import HalfVector

from src.gates.emotion import StoreCentroid, emotional_charge, gut_signal


def _at_cos(c: float) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors with cosine c."""
    return np.array([1.0, 0.0]), np.array([c, math.sqrt(1 - c * c)])


@pytest.mark.parametrize(("cos", "gut", "charge"), [
    (1.0, 0.0, 1.0),             # the mind's own territory: full charge
    (0.0, 0.5, 0.0),             # unrelated: neutral
    (0.25, 0.375, 0.25),
    (0.3, 0.35, 0.3),            # exactly 0.3 stays 0.3 (the bonus line is "above 0.3")
    (0.4, 0.3, 0.4),
    (-0.5, 0.75, 0.5),           # opposed to the centroid charges too
])
def test_charge_from_the_gut_signal(cos, gut, charge):
    v, c = _at_cos(cos)
    assert gut_signal(v, c) == pytest.approx(gut)
    assert emotional_charge(v, c) == pytest.approx(charge)


def test_empty_store_and_zero_vectors():
    assert emotional_charge(np.ones(3), None) == 0.0
    assert gut_signal(np.zeros(3), np.ones(3)) == 0.5
    assert emotional_charge(np.zeros(3), np.ones(3)) == 0.0


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


async def test_the_centroid_is_read_refreshed_and_folded(pool):
    clock = Clock()
    centroid = StoreCentroid(refresh_s=60.0, clock=clock)
    assert await centroid.get(pool, "m") is None
    e = np.eye(768, dtype=np.float32)
    await pool.executemany("INSERT INTO memories (content, embedding, embed_model) VALUES ($1, $2, $3)",
                           [("a", HalfVector(e[0]), "m"), ("b", HalfVector(e[1]), "m"),
                            ("c", HalfVector(e[2]), "other")])
    assert await centroid.get(pool, "m") is None            # cached until the refresh is due
    clock.now = 60.0
    assert (await centroid.get(pool, "m"))[:3].tolist() == [0.5, 0.5, 0.0]
    centroid.absorb("m", np.stack([e[2], e[2]]))
    assert (await centroid.get(pool, "m"))[:3].tolist() == [0.25, 0.25, 0.5]
    centroid.absorb("other", np.stack([e[5]]))             # another model's vectors are not mixed in
    assert (await centroid.get(pool, "m"))[5] == 0.0
    assert (await centroid.get(pool, "other"))[:3].tolist() == [0.0, 0.0, 1.0]
