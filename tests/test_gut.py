"""The two-centroid gut (plan §5.1): centroids and delta on hand-made vectors, the exit gate
and recall reading it, the delta log, PCA finding a planted axis, and the deep pass."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from pgvector import HalfVector

from src.gates.emotion import emotional_charge
from src.gates.exit import ExitSetup
from src.gates.memory_gate import Gates
from src.gates.persist_hooks import PersistHooks
from src.gut import centroids as c
from src.gut.deep_pass import gut_deep_pass
from src.gut.gut import Gut
from src.gut.pca import gut_axes
from src.gut.settings import GutSettings, LayerWeights
from src.outcomes.settings import OutcomeSettings
from src.outcomes.tracking import record_outcome
from src.providers.embedding import embed_memories
from src.recall.retrieval import Cue, Retriever
from src.recall.settings import RetrievalSettings
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, gate_settings

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def e(i: int, dim: int = 768) -> np.ndarray:
    v = np.zeros(dim)
    v[i] = 1.0
    return v


def test_subconscious_is_the_plans_layer_blend_of_unit_means():
    l0 = c.weighted_mean([(e(0), 1.0), (2 * e(1), 1.0)])        # norms do not matter, directions do
    assert np.allclose(l0[:2], [0.5, 0.5])
    sub = c.subconscious_centroid(e(0), e(1), e(2))
    assert np.allclose(sub[:3], [0.5, 0.25, 0.25])
    # bootstrap: no values, no goals -> L2 alone; one layer missing -> renormalised
    assert np.allclose(c.subconscious_centroid(None, None, e(2))[:3], [0, 0, 1])
    assert np.allclose(c.subconscious_centroid(e(0), None, e(2))[:3], [2 / 3, 0, 1 / 3])
    assert c.subconscious_centroid(None, None, None) is None


def test_attention_centroid_weighs_recent_focus_more_and_delta_has_magnitude_and_direction():
    att = c.attention_centroid([e(0), e(1), e(2)], decay=0.5)   # weights 1, 0.5, 0.25
    assert np.allclose(att[:3], np.array([1, 0.5, 0.25]) / 1.75)
    reading = c.read_gut(e(0), 0.5 * e(1), magnitude_scale=1.0)
    assert np.allclose(reading.delta[:2], [1.0, -0.5])
    assert reading.magnitude == pytest.approx(np.sqrt(1.25))
    assert reading.intensity == 1.0                                    # capped
    assert np.allclose(reading.direction[:2], np.array([1.0, -0.5]) / np.sqrt(1.25))
    assert c.read_gut(None, e(1)) is None
    assert c.read_gut(e(1), e(1), 2.0).direction is None              # no delta, no direction


def test_the_gut_uses_the_one_unit_rule_and_reads_no_direction_as_nothing_felt():
    assert np.allclose(c.direction(np.array([3.0, 4.0])), [0.6, 0.8])
    assert c.direction(np.zeros(3)) is None and c.direction(np.array([np.nan, 1.0])) is None
    assert c.weighted_mean([(np.zeros(3), 1.0), (np.array([0.0, 2.0, 0.0]), 1.0)]).tolist() == [0, 1, 0]
    assert c.charge(np.zeros(768), c.read_gut(e(0), e(1))) == 0.0       # a zero embedding stirs nothing


def test_charge_and_alignment_on_hand_made_vectors():
    reading = c.read_gut(e(0), e(1), magnitude_scale=2.0)             # delta e0 - e1, |.| √2
    inten = np.sqrt(2) / 2
    assert reading.intensity == pytest.approx(inten)
    # familiar (along the subconscious): |cos| = 1
    assert c.charge(e(1), reading) == pytest.approx(1.0)
    # along the gut's pull but not the self: intensity·|cos(e0, d)| = 0.707·0.707
    assert c.charge(e(0), reading) == pytest.approx(inten * np.sqrt(0.5))
    # unrelated to both: no charge
    assert c.charge(e(5), reading) == 0.0
    assert c.charge(e(5), None) == 0.0
    align = c.alignment(np.stack([e(0), e(1), e(5)]), reading)
    assert np.allclose(align, [0.5 + 0.5 * inten * np.sqrt(0.5), 0.5 - 0.5 * inten * np.sqrt(0.5), 0.5])
    assert np.allclose(c.alignment(np.stack([e(0)]), None), [0.5])


async def test_incremental_l2_matches_the_deep_pass_recompute(pool):
    store = MemoryStore(pool, HashEmbedder())
    texts = [f"memory number {i} about tea and rain {i % 3}" for i in range(30)]
    await store.store_many([NewMemory(t, alpha=1 + (i % 4), beta=4) for i, t in enumerate(texts)])
    gut = Gut(GutSettings(importance_buckets=1000))
    assert await gut.recompute_l2(pool, "fake-hash-768") == 30
    rows = await pool.fetch("SELECT embedding, depth_weight_alpha a, depth_weight_beta b FROM memories")
    vecs = np.stack([r["embedding"].to_numpy().astype(float) for r in rows])
    w = np.array([r["a"] / (r["a"] + r["b"]) for r in rows])
    exact = (vecs * w[:, None]).sum(0) / w.sum()
    assert np.allclose(gut.subconscious(), exact, atol=1e-3)
    # fold in five new vectors between passes: same as a recompute that saw them
    new = await HashEmbedder().embed([f"new thought {i}" for i in range(5)], "RETRIEVAL_DOCUMENT")
    gut.absorb("fake-hash-768", new, 0.2)
    both = np.vstack([vecs, new])
    wb = np.concatenate([w, np.full(5, 0.2)])
    assert np.allclose(gut.subconscious(), (both * wb[:, None]).sum(0) / wb.sum(), atol=1e-3)
    gut.absorb("another-model", new, 0.2)                              # other models never mix
    assert np.allclose(gut.subconscious(), (both * wb[:, None]).sum(0) / wb.sum(), atol=1e-3)


async def test_layer_weights_are_settings_and_values_pull_the_subconscious(pool):
    gut = Gut(GutSettings(layer_weights=LayerWeights(l0=0.8, l1=0.1, l2=0.1)))
    gut.set_layers([(e(3), 1.0)], [(e(4), 1.0)])
    assert np.allclose(gut.subconscious()[3:5], [0.8 / 0.9, 0.1 / 0.9])   # no L2 yet: renormalised
    with pytest.raises(ValueError, match="gut.layer_weights must sum to 1, they sum to 1.1"):
        LayerWeights(l0=0.6, l1=0.25, l2=0.25)


async def test_exit_gate_uses_the_gut_charge_instead_of_v01(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    await store.store_many([NewMemory(t) for t in ["quiet rain on the roof", "warm tea in the morning",
                                                    "the garden needs water"]])
    gut = Gut()
    await gut.recompute_l2(pool, embedder.model_name)
    # a value (L0) near the item moves the subconscious off the store's mean, where v0.1
    # measures from: the two charges part
    [value] = await embedder.embed(["a storm broke the greenhouse glass"], "RETRIEVAL_DOCUMENT")
    gut.set_layers([(value, 1.0)], [])
    text = "a sudden storm broke the greenhouse glass"
    [item_vec] = await embedder.embed([text], "RETRIEVAL_QUERY")
    gut.read([item_vec])                        # attention sits on the storm: a strong delta
    persisted: list[list[int]] = []

    async def seen(ids):
        persisted.append(ids)
    gates = Gates.build(pool, embedder, ScriptedMetaLLM(verdict=lambda a, b: False),
                        gate_settings(noise_floor=0.0, bootstrap_floor=0.0), Safety(), rng=random.Random(1),
                        setup=ExitSetup(hooks=PersistHooks(gut=gut, on_persisted=seen)))
    await gates.admit(text, exchange=False)
    await gates.exit.flush(reason="test")
    row = await pool.fetchrow("SELECT emotional_charge, memory_id, action FROM gate_decisions WHERE gate = 'exit'")
    [vec] = await embed_memories(embedder, [text], ["episodic"])      # the vector the gate judged
    assert row["emotional_charge"] == pytest.approx(gut.charge(vec), abs=1e-6)
    store_mean = (await pool.fetchval("SELECT avg(embedding) FROM memories WHERE id <> $1",
                                      row["memory_id"])).to_numpy()
    assert abs(row["emotional_charge"] - emotional_charge(vec, store_mean)) > 0.1   # not the v0.1 charge
    assert row["action"] == "persist" and persisted == [[row["memory_id"]]]
    # the gate folded the new memory into the gut's L2 (no rescan needed)
    assert gut._l2_weight == pytest.approx(3 * 0.2 + 0.2)


async def test_recall_emotional_component_comes_from_the_gut(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory(t) for t in [
        "storm clouds over the harbour", "storm damage to the old harbour wall", "tea with lemon"]])
    retriever = Retriever(pool, embedder, None, Safety(), RetrievalSettings())
    neutral = await retriever.retrieve("storm harbour", rng=np.random.default_rng(1), mutate=False)
    assert {m.components[3] for m in neutral.memories} == {0.5}
    gut = Gut()
    await gut.recompute_l2(pool, embedder.model_name)
    [focus] = await embedder.embed(["storm harbour wall damage"], "RETRIEVAL_QUERY")
    gut.read([focus])
    felt = await Retriever(pool, embedder, None, Safety(), RetrievalSettings()).retrieve(
        Cue("storm harbour", emotional=gut.alignment), rng=np.random.default_rng(1), mutate=False)
    for m in felt.memories:
        assert m.components[3] == pytest.approx(float(gut.alignment(m.hit.embedding[None, :])[0]))
    assert len({round(m.components[3], 6) for m in felt.memories} - {0.5}) == len(felt.memories) == 3


def _planted(n: int = 200, seed: int = 4):
    rng = np.random.default_rng(seed)
    axis = rng.standard_normal(768)
    axis /= np.linalg.norm(axis)
    s = rng.standard_normal(n)
    deltas = 0.05 * rng.standard_normal((n, 768)) / np.sqrt(768) * 10 + np.outer(s, axis)
    return axis, s, deltas


def test_pca_finds_a_planted_axis_and_orients_it_toward_good_outcomes():
    axis, s, deltas = _planted()
    valences = [1.0 if x > 0 else -1.0 for x in s[:60]] + [None] * 140   # outcomes for 60 deltas
    axes = gut_axes(deltas, valences, k=12, min_outcomes=5, min_correlation=0.3)
    assert len(axes) == 12 and [a.rank for a in axes] == list(range(1, 13))
    top = axes[0]
    assert float(top.component @ axis) > 0.99                 # found, and its + end is the good end
    assert top.explained_variance > 0.5
    assert top.correlation > 0.7 and top.outcomes_seen == 60 and top.meaningful
    assert not any(a.meaningful for a in axes[1:])            # noise axes carry no meaning
    flipped = gut_axes(deltas, [None if v is None else -v for v in valences], k=3)
    assert float(flipped[0].component @ axis) < -0.99         # bad outcomes: orientation flips


async def test_deep_pass_stores_named_axes_and_the_summary_uses_them(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory("the storm broke the greenhouse"),
                                                  NewMemory("a calm evening with friends")])
    axis, s, deltas = _planted(60)
    gut = Gut(GutSettings(pca_min_samples=20, name_min_outcomes=5))
    ids = []
    for i, d in enumerate(deltas):
        ids.append(await pool.fetchval(
            "INSERT INTO gut_deltas (delta, magnitude, context, at) VALUES ($1, $2, 'ctx', $3) RETURNING id",
            HalfVector(d.astype(np.float32)), float(np.linalg.norm(d)),
            T0 + timedelta(seconds=i)))
    for i in range(20):   # outcomes become apparent for 20 deltas: good when s > 0
        await record_outcome(pool, kind="feedback", valence=1.0 if s[i] > 0 else -1.0, description="fb",
                             at=T0 + timedelta(seconds=i, milliseconds=500), subjects=[("gut_delta", ids[i])],
                             links=OutcomeSettings(lookback_s=0.001))
    report = await gut_deep_pass(pool, gut, embedder.model_name, now=T0 + timedelta(hours=1))
    assert (report.l2_rows, report.deltas, report.axes, report.named) == (2, 60, 12, 1)
    rows = await pool.fetch("SELECT rank, name, outcomes_seen, samples FROM gut_axes ORDER BY rank")
    assert len(rows) == 12 and rows[0]["samples"] == 60 and rows[0]["outcomes_seen"] == 20
    assert rows[0]["name"].startswith("hope: '") and "/ fear: '" in rows[0]["name"]
    assert all(r["name"] is None for r in rows[1:])
    gut.read([axis * 3 + gut.subconscious()])
    assert gut.summary().startswith("[GUT] an intense pull (intensity 1.00); leaning toward hope on axis 1 (hope: '")
