"""`python -m src.memory calibrate` (issue 41 item 6): thresholds for a new embed model by
quantile matching against a reference model, on a sample of a real PostgreSQL store; the new
model is a fake server's (tests/providers/model_server.py), the reference a hashing fake."""

from __future__ import annotations

import random

import numpy as np
import pytest
import yaml

from src.memory import calibrate
from src.memory.calibration import Distribution, matched, perturbed, propose
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder
from tests.memory_cli_helpers import cli
from tests.providers.model_server import ModelServer
from tests.test_endpoint_model_switch import endpoint_providers

SUBJECTS = ["my sister Mara", "the dog Biscuit", "our neighbour", "the new manager", "my old teacher",
            "a friend from Lisbon", "the landlord", "my cousin"]
DOINGS = ["moved to Leeds last spring", "loves long walks by the river", "is allergic to peanuts",
          "plays the cello every evening", "works night shifts as a paramedic"]


def test_a_perturbed_copy_drops_one_word_in_five_and_is_reproducible():
    text = "My sister Mara moved to Leeds last spring with her two cats."
    copy = perturbed(text, random.Random(3))
    assert copy == perturbed(text, random.Random(3)) and copy != text
    assert len(copy.split()) == len(text.split()) - 2 and not copy.endswith(".") and copy[0] == "m"
    assert perturbed("Hi there.", random.Random(0)) == "hi there"


def test_quantile_matching_keeps_a_threshold_on_the_same_scale_and_is_monotone():
    rng = np.random.default_rng(0)
    ref = Distribution(rng.uniform(0.7, 1.0, 50), rng.uniform(0.0, 0.8, 500))
    assert propose({"t": 0.6}, ref, ref)["t"] == 0.6
    squeezed = Distribution(0.5 + ref.near / 2, 0.5 + ref.other / 2)   # a model whose cosines run higher
    values = propose({"novel": 0.6, "contradicting": 0.7, "confirming": 0.85}, ref, squeezed)
    # the affine map x -> 0.5 + x/2, to the two decimals proposed
    assert values == pytest.approx({"novel": 0.8, "contradicting": 0.85, "confirming": 0.925}, abs=0.006)
    assert matched(2.0, ref.pooled, squeezed.pooled) == squeezed.pooled.max()


async def test_calibrate_proposes_every_model_keyed_threshold_for_the_endpoint_model(pool, db_dsn, monkeypatch):
    items = [NewMemory(f"{who} {what}.", "episodic" if i % 2 else "semantic")
             for i, (who, what) in enumerate((w, d) for w in SUBJECTS for d in DOINGS)]
    await MemoryStore(pool, HashEmbedder(model_name="minilm-l6-v2-int8")).store_many(items)
    await pool.execute("INSERT INTO memories (content, memory_type) VALUES ('ok', 'episodic')")  # too short
    monkeypatch.setattr(calibrate, "reference_embedder", lambda name, s: HashEmbedder(model_name="minilm-l6-v2-int8"))
    async with ModelServer(dims=1024) as server:
        providers = endpoint_providers(server, "mxbai-embed-large")
        try:
            result = await cli(db_dsn, "calibrate", "--sample", "30", embedder=providers.embedder)
        finally:
            await providers.aclose()
    assert result.code == 0, result.err
    sent = [t for s in server.sent("/v1/embeddings") for t in s.body["input"]]
    assert len(sent) == 60 and "ok" not in {t.split(": ", 1)[1] for t in sent}
    assert "calibrated on 30 memories (435 pairs of different memories)" in result.err
    assert "mxbai-embed-large: near-duplicates p10" in result.err
    data = yaml.safe_load(result.out)
    gate = data["gates"]["exit"]["thresholds"]["mxbai-embed-large"]
    assert set(gate) == {"confirming", "novel", "contradicting"}
    assert gate["novel"] <= gate["contradicting"] <= gate["confirming"] <= 1.0
    merges = data["consolidation"]["thresholds"]
    assert merges["mxbai-embed-large"]["merge_overlap"] == 0.8
    assert merges["mxbai-embed-large"]["theme"] <= merges["mxbai-embed-large"]["merge"]
    assert merges["minilm-l6-v2-int8"]["theme"] == 0.65          # the shipped entries are kept
    assert set(data["metacognition"]["escalation"]["reflection"]["min_similarity"]) == {
        "default", "minilm-l6-v2-int8", "mxbai-embed-large"}
    assert "mxbai-embed-large" in data["bootstrap"]["relevant_similarity"]


async def test_calibrate_refuses_the_reference_itself_and_a_tiny_store(pool, db_dsn, monkeypatch):
    monkeypatch.setattr(calibrate, "reference_embedder", lambda name, s: HashEmbedder(model_name="ref"))
    same = await cli(db_dsn, "calibrate", embedder=HashEmbedder(model_name="ref"))
    assert same.code == 2 and "is the reference (ref)" in same.err
    tiny = await cli(db_dsn, "calibrate", embedder=HashEmbedder(model_name="new"))
    assert tiny.code == 1 and "0 memories of at least 20 characters; 10 are needed" in tiny.err
