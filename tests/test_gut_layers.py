"""The gut's layer weights evolve (issue 25 item 5, plan §5.1: "layer weights are starting
points — consolidation evolves them"): toward the layer whose pull preceded good outcomes,
bounded, significant only, logged in gut_layer_weights and kept across a restart."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import numpy as np
import pytest

from src.gut import repository as repo
from src.gut.deep_pass import gut_deep_pass
from src.gut.gut import Gut
from src.gut.layers import bounded, evolve, layer_evidence
from src.gut.settings import GutSettings, LayerEvolution

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
CFG = LayerEvolution()
START = (0.5, 0.25, 0.25)


def e(i: int) -> np.ndarray:
    v = np.zeros(768)
    v[i] = 1.0
    return v


def _deltas(n: int, sign: float, rng: np.random.Generator) -> tuple[np.ndarray, list[float | None]]:
    """n deltas whose pull toward L0 (axis 0) goes with the outcome's valence (sign +1) or
    against it (−1); noise only on axes no layer uses, so L1 and L2 say nothing."""
    valence = rng.choice([-1.0, 1.0], size=n)
    deltas = np.zeros((n, 768))
    deltas[:, 0] = sign * valence * 0.3 + rng.normal(0, 0.05, n)
    deltas[:, 10:20] = rng.normal(0, 0.3, (n, 10))
    return deltas, [float(v) for v in valence]


LAYERS = (e(0), e(1), e(2))


def test_the_layer_whose_pull_preceded_good_outcomes_gains_at_most_one_step():
    deltas, valences = _deltas(40, +1.0, np.random.default_rng(1))
    evidence = layer_evidence(deltas, valences, LAYERS, CFG)
    assert [(x.layer, x.significant) for x in evidence] == [("l0", True), ("l1", False), ("l2", False)]
    assert evidence[0].r > 0.9 and evidence[0].n == 40 and evidence[1].r is None     # no signal on L1 at all
    after = evolve(START, START, evidence, CFG)
    assert after == pytest.approx((0.55, 0.225, 0.225))      # the target (0.61, ...) is a bigger move: clipped
    # pass after pass it climbs to the cap, the others to no less than the floor
    w = START
    for _ in range(30):
        w = evolve(w, START, evidence, CFG)
    assert w == pytest.approx((0.7, 0.15, 0.15)) and sum(w) == pytest.approx(1.0)


def test_a_pull_that_preceded_bad_outcomes_loses_down_to_the_floor():
    deltas, valences = _deltas(40, -1.0, np.random.default_rng(2))
    evidence = layer_evidence(deltas, valences, LAYERS, CFG)
    assert evidence[0].r < -0.9
    w = START
    for _ in range(30):
        w = evolve(w, START, evidence, CFG)
    assert w[0] == pytest.approx(0.1) and w[1] == pytest.approx(w[2]) and sum(w) == pytest.approx(1.0)
    assert all(0.1 - 1e-9 <= x <= 0.7 + 1e-9 for x in w)


def test_too_few_outcomes_chance_or_a_missing_layer_move_nothing():
    rng = np.random.default_rng(3)
    deltas, valences = _deltas(10, +1.0, rng)                  # 10 linked < min_outcomes 20
    assert evolve(START, START, layer_evidence(deltas, valences, LAYERS, CFG), CFG) == START
    noise = rng.normal(0, 0.3, (60, 768))                      # no relation to the outcomes
    chance = layer_evidence(noise, [float(v) for v in rng.choice([-1.0, 1.0], 60)], LAYERS, CFG)
    assert not any(x.significant for x in chance)
    assert evolve(START, START, chance, CFG) == START
    deltas, valences = _deltas(40, +1.0, rng)
    unlinked = [None] * 40                                     # deltas with no outcome linked
    assert evolve(START, START, layer_evidence(deltas, unlinked, LAYERS, CFG), CFG) == START
    no_values = layer_evidence(deltas, valences, (None, e(1), e(2)), CFG)   # birth: no L0 yet
    assert no_values[0].r is None and evolve(START, START, no_values, CFG) == START


def test_bounds_hold_and_include_a_start_outside_them():
    w = bounded(np.array([0.9, 0.05, 0.05]), np.full(3, 0.1), np.full(3, 0.7))
    assert w == pytest.approx([0.7, 0.15, 0.15])
    deltas, valences = _deltas(40, +1.0, np.random.default_rng(4))
    evidence = layer_evidence(deltas, valences, LAYERS, CFG)
    high = (0.8, 0.1, 0.1)              # a start outside [floor, cap] is its own bound: never beyond it
    assert evolve(high, high, evidence, CFG) == pytest.approx(high)
    against = layer_evidence(*_deltas(40, -1.0, np.random.default_rng(4)), LAYERS, CFG)
    assert evolve(high, high, against, CFG) == pytest.approx((0.75, 0.125, 0.125))


async def _logged_deltas(pool, deltas: np.ndarray, valences: list[float]) -> None:
    for i, (d, v) in enumerate(zip(deltas, valences, strict=True)):
        oid = await pool.fetchval("INSERT INTO outcomes (at, kind, valence, description) "
                                  "VALUES ($1, 'feedback', $2, 'test') RETURNING id", NOW, v)
        await repo.write_delta(pool, repo.DeltaRow("s", i, d, float(np.linalg.norm(d)), "focus", [], "external_user",
                                                   NOW, [oid]))


async def test_the_deep_pass_evolves_logs_and_a_restart_keeps_them(pool, caplog):
    deltas, valences = _deltas(40, +1.0, np.random.default_rng(5))
    await _logged_deltas(pool, deltas, valences)
    gut = Gut(GutSettings())
    gut.set_layers([(e(0), 1.0)], [(e(1), 1.0)])
    before = gut.subconscious().copy()
    with caplog.at_level(logging.INFO, logger="src.gut.deep_pass"):
        await gut_deep_pass(pool, gut, "fake-hash-768", now=NOW)
    assert gut.layer_weights == pytest.approx((0.55, 0.225, 0.225))
    assert "gut layer weights evolved 0.500/0.250/0.250 -> 0.550/0.225/0.225 (l0 r=+0.9" in caplog.text
    row = await pool.fetchrow("SELECT at, l0, l1, l2, before, evidence FROM gut_layer_weights")
    assert (row["at"], row["l0"]) == (NOW, pytest.approx(0.55))
    assert json.loads(row["before"]) == {"l0": 0.5, "l1": 0.25, "l2": 0.25}
    evidence = json.loads(row["evidence"])
    assert evidence["deltas"] == 40 and evidence["layers"]["l0"]["significant"] is True
    assert evidence["layers"]["l1"]["r"] is None
    # the subconscious moved toward L0 (no L2 here: the two layers renormalised)
    assert gut.subconscious()[0] == pytest.approx(0.55 / 0.775) and before[0] == pytest.approx(0.5 / 0.75)
    # a restart (a new Gut) reads the evolved weights where it rebuilds L2
    restarted = Gut(GutSettings())
    await restarted.recompute_l2(pool, "fake-hash-768")
    assert restarted.layer_weights == pytest.approx((0.55, 0.225, 0.225))
    # switched off: the weights stay what they are and nothing is written
    fixed = Gut(GutSettings(layer_evolution=LayerEvolution(enabled=False)))
    fixed.set_layers([(e(0), 1.0)], [(e(1), 1.0)])
    await gut_deep_pass(pool, fixed, "fake-hash-768", now=NOW)
    assert await pool.fetchval("SELECT count(*) FROM gut_layer_weights") == 1
