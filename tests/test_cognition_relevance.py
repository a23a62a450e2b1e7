from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from src.recall.relevance import (
    COLD_START_ALPHA,
    COMPONENTS,
    TARGET_ALPHA,
    blend_alpha,
    escalation_threshold,
    hybrid_relevance,
    memory_maturity,
    relevance_components,
    sample_blend,
    spread_hop,
    spread_step,
)


def test_alpha_constants_are_the_plans() -> None:
    assert COMPONENTS == ("semantic", "coactivation", "noise", "emotional", "recency")
    assert COLD_START_ALPHA == {
        "semantic": 12.0,
        "coactivation": 1.0,
        "noise": 0.5,
        "emotional": 0.5,
        "recency": 3.0,
    }
    assert TARGET_ALPHA == {
        "semantic": 8.0,
        "coactivation": 5.0,
        "noise": 0.5,
        "emotional": 3.0,
        "recency": 2.0,
    }
    with pytest.raises(TypeError):
        COLD_START_ALPHA["semantic"] = 1.0  # type: ignore[index]


@pytest.mark.parametrize(
    ("maturity", "expected"),
    [
        (0.0, COLD_START_ALPHA),
        (1.0, TARGET_ALPHA),
        (
            0.5,
            {
                "semantic": 10.0,
                "coactivation": 3.0,
                "noise": 0.5,
                "emotional": 1.75,
                "recency": 2.5,
            },
        ),
        (
            0.25,
            {
                "semantic": 11.0,
                "coactivation": 2.0,
                "noise": 0.5,
                "emotional": 1.125,
                "recency": 2.75,
            },
        ),
    ],
)
def test_blend_alpha_interpolates(maturity: float, expected: dict[str, float]) -> None:
    assert blend_alpha(maturity) == pytest.approx(dict(expected))


@pytest.mark.parametrize("maturity", [-0.1, 1.01, float("nan")])
def test_blend_alpha_rejects_maturity_outside_unit_interval(maturity: float) -> None:
    with pytest.raises(ValueError, match=r"maturity must be in \[0, 1\]"):
        blend_alpha(maturity)


@pytest.mark.parametrize(
    ("count", "expected"), [(0, 0.0), (100, 0.1), (999, 0.999), (1000, 1.0), (50_000, 1.0)]
)
def test_memory_maturity_saturates_at_1000(count: int, expected: float) -> None:
    assert memory_maturity(count) == expected


@given(seed=st.integers(0, 2**32 - 1), maturity=st.floats(0, 1))
def test_blend_weights_are_a_distribution(seed: int, maturity: float) -> None:
    w = sample_blend(np.random.default_rng(seed), blend_alpha(maturity))
    assert w.shape == (5,)
    assert np.all(w >= 0)
    assert w.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("alpha", [COLD_START_ALPHA, TARGET_ALPHA])
def test_blend_weights_average_to_normalised_alpha(alpha) -> None:
    rng = np.random.default_rng(2024)
    samples = np.array([sample_blend(rng, alpha) for _ in range(20_000)])
    a = np.array([alpha[c] for c in COMPONENTS])
    np.testing.assert_allclose(samples.mean(axis=0), a / a.sum(), atol=0.005)


def test_sample_blend_rejects_bad_alpha() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="alpha must have exactly the components"):
        sample_blend(rng, {"semantic": 1.0})
    with pytest.raises(ValueError, match="every Dirichlet alpha must be finite and > 0"):
        sample_blend(rng, {**TARGET_ALPHA, "noise": 0.0})


def test_hybrid_relevance_hand_computed() -> None:
    components = np.array([[1.0, 0.0, 0.5, 0.5, 1.0], [0.2, 1.0, 0.0, 0.5, 0.0]])
    weights = np.array([0.5, 0.2, 0.1, 0.1, 0.1])
    np.testing.assert_allclose(
        hybrid_relevance(components, weights), [0.5 + 0.05 + 0.05 + 0.1, 0.1 + 0.2 + 0.05]
    )


@pytest.mark.parametrize(
    ("components", "weights", "message"),
    [
        (np.ones((2, 4)), np.full(5, 0.2), r"components must have shape \(n, 5\), got \(2, 4\)"),
        (np.ones((2, 5)), np.full(4, 0.25), r"weights must have shape \(5,\), got \(4,\)"),
        (np.ones((2, 5)), np.full(5, 0.3), "weights must be >= 0 and sum to 1"),
        (np.array([[0.1, 0.2, 1.2, 0.0, 0.0]]), np.full(5, 0.2), "component noise of row 0 is 1.2"),
        (
            np.array([[-0.3, 0.2, 0.2, 0.0, 0.0]]),
            np.full(5, 0.2),
            "component semantic of row 0 is -0.3",
        ),
    ],
)
def test_hybrid_relevance_rejects_bad_input(components, weights, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        hybrid_relevance(components, weights)


def test_relevance_components_clips_cosine_and_fills_defaults() -> None:
    m = relevance_components(np.random.default_rng(1), semantic=[0.9, -0.4], recency=[1.0, 0.25])
    np.testing.assert_allclose(m[:, 0], [0.9, 0.0])
    np.testing.assert_allclose(m[:, 1], [0.0, 0.0])
    assert np.all((m[:, 2] >= 0) & (m[:, 2] < 1))
    np.testing.assert_allclose(m[:, 3], [0.5, 0.5])
    np.testing.assert_allclose(m[:, 4], [1.0, 0.25])
    with pytest.raises(ValueError, match=r"component has shape \(3,\), expected \(2,\)"):
        relevance_components(np.random.default_rng(1), [0.1, 0.2], coactivation=[0, 0, 0])


@pytest.mark.parametrize("seed", range(3))
def test_repeated_retrieval_varies_but_converges_on_the_relevant_memory(seed: int) -> None:
    """Plan §3.1: repeated retrievals of one query vary, favour the relevant
    memory, and now and then let noise surface a weakly related one."""
    rng = np.random.default_rng(seed)
    # Ten hybrid-search candidates; memory 0 is the relevant one.
    semantic = np.array([0.8, 0.62, 0.6, 0.58, 0.56, 0.5, 0.48, 0.46, 0.45, 0.44])
    winners, top3, surfaced = 0, set(), 0
    for _ in range(300):
        components = relevance_components(rng, semantic, recency=np.full(10, 0.5))
        order = np.argsort(-hybrid_relevance(components, sample_blend(rng, TARGET_ALPHA)))
        winners += order[0] == 0
        top3.add(frozenset(order[:3].tolist()))
        surfaced += bool(set(order[:3].tolist()) & {5, 6, 7, 8, 9})
    assert winners >= 0.95 * 300
    assert len(top3) >= 8
    assert 1 <= surfaced <= 0.1 * 300


def spread_activation(seeds, edges_by_hop, hops):
    """The fold Retriever._spread runs, over edges fetched in advance."""
    frontier, activated = {s: 1.0 for s in seeds}, {}
    for hop in range(hops + 1):
        frontier = spread_hop(frontier, edges_by_hop[hop], hop, activated, exclude=set(seeds))
    return activated


# A hand-made co-access graph. Seed 1 is active.
HOP0 = [(1, 2, 0.8), (1, 3, 0.5), (1, 4, 0.2), (1, 5, 0.1)]  # 5 falls outside the top 3
HOP1 = [(2, 6, 1.0), (3, 6, 0.5), (2, 7, 0.5), (4, 8, 1.0), (9, 10, 1.0)]  # 9 is not reached
HOP2 = [(6, 11, 1.0), (7, 11, 0.5), (8, 2, 1.0)]


@pytest.mark.parametrize(
    ("hops", "expected"),
    [
        (0, {2: 0.8, 3: 0.5, 4: 0.2}),
        # 6: best path 1-2-6 = 0.3 * 0.8 * 1.0 (1-3-6 gives 0.3 * 0.5 * 0.5 = 0.075)
        (1, {2: 0.8, 3: 0.5, 4: 0.2, 6: 0.24, 7: 0.12, 8: 0.06}),
        # 11: 0.1 * 0.8 * 1.0 * 1.0 via 6; 2 is reached again via 8 at 0.02 but keeps 0.8
        (2, {2: 0.8, 3: 0.5, 4: 0.2, 6: 0.24, 7: 0.12, 8: 0.06, 11: 0.08}),
    ],
)
def test_spread_activation_on_hand_made_graph(hops: int, expected: dict[int, float]) -> None:
    assert spread_activation([1], [HOP0, HOP1, HOP2][: hops + 1], hops=hops) == pytest.approx(
        expected
    )


def test_spread_activation_with_full_strength_edges_gives_the_plans_decay() -> None:
    edges = [[("s", "a", 1.0)], [("a", "b", 1.0)], [("b", "c", 1.0)]]
    assert spread_activation(["s"], edges, hops=2) == {"a": 1.0, "b": 0.3, "c": 0.1}


def test_spread_step_keeps_top_k_partners_per_source() -> None:
    edges = [("s", p, score) for p, score in zip("abcde", [0.1, 0.9, 0.5, 0.7, 0.3], strict=True)]
    assert spread_step({"s": 0.5}, edges, top_k=2) == pytest.approx({"b": 0.45, "d": 0.35})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"edges": HOP2, "hop": 3}, r"hops must be in \[0, 2\], got 3"),
        ({"edges": HOP0, "hop": 0, "top_k": 0}, r"top_k must be >= 1, got 0"),
        ({"edges": [(1, 2, 1.5)], "hop": 0}, r"co-access score 1.5 of edge 1->2 is not in \[0, 1\]"),
    ],
)
def test_spread_hop_rejects_bad_input(kwargs: dict, message: str) -> None:
    activated: dict = {}
    with pytest.raises(ValueError, match=message):
        spread_hop({1: 1.0}, activated=activated, **kwargs)
    assert activated == {}


@given(
    st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8), st.floats(0, 1)), max_size=30),
    st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8), st.floats(0, 1)), max_size=30),
)
def test_spread_activation_is_bounded_and_indirect_never_beats_its_path(hop0, hop1) -> None:
    direct = spread_activation([0], [hop0], hops=0)
    both = spread_activation([0], [hop0, hop1], hops=1)
    assert all(0.0 <= v <= 1.0 for v in both.values())
    for memory_id, value in direct.items():
        assert both[memory_id] >= value  # a second hop never lowers a direct hit
    for memory_id in set(both) - set(direct):
        assert both[memory_id] <= 0.3 * max(direct.values())


@pytest.mark.parametrize(
    ("total", "density", "expected"),
    [
        (0, 0.0, 0.3),  # newborn: escalate often
        (1000, 1.0, 0.8),  # mature: System 1 autonomy
        (500, 0.5, 0.55),
        (5000, 0.0, 0.55),  # many memories, identity in upheaval
        (100, 0.8, 0.3 + 0.5 * (0.1 + 0.8) / 2),
    ],
)
def test_escalation_threshold_table(total: int, density: float, expected: float) -> None:
    assert escalation_threshold(total, density) == pytest.approx(expected)


def test_escalation_threshold_rejects_bad_density() -> None:
    with pytest.raises(ValueError, match=r"identity_density must be in \[0, 1\], got 1.2"):
        escalation_threshold(10, 1.2)
