"""Embedding task types as plan §2.1 says: storage RETRIEVAL_DOCUMENT (title = type),
queries RETRIEVAL_QUERY, novelty SEMANTIC_SIMILARITY, clustering CLUSTERING.

The fake embedder records every call; one below also answers differently per task
type, so a test can tell which vector the novelty lookup used."""

from __future__ import annotations

import random

import numpy as np

from src.gates.memory_gate import Gates
from src.providers.embedding import embed_for_clustering, embed_for_novelty
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, gate_settings

STORED = "The corner bakery sells sourdough bread"


class SimilarityLooksAtBread(HashEmbedder):
    """SEMANTIC_SIMILARITY vectors all point at the stored bakery memory; other tasks as usual."""

    async def embed(self, texts, task_type, titles=None):
        vecs = await super().embed(texts, task_type, titles)
        if task_type == "SEMANTIC_SIMILARITY":
            bread = await HashEmbedder().embed(["Personal experience memory: " + STORED], "RETRIEVAL_DOCUMENT",
                                               ["episodic"])
            vecs = np.repeat(bread, len(texts), axis=0)
        return vecs


async def test_novelty_and_clustering_helpers_send_their_task_types():
    embedder = HashEmbedder()
    await embed_for_novelty(embedder, ["a kitten", "tax forms"], ["episodic", "semantic"])
    await embed_for_clustering(embedder, ["a kitten", "tax forms"])
    assert [(c.task_type, c.texts, c.titles) for c in embedder.calls] == [
        ("SEMANTIC_SIMILARITY", ["Personal experience memory: a kitten", "Factual knowledge: tax forms"], None),
        ("CLUSTERING", ["a kitten", "tax forms"], None),
    ]


async def test_exit_gate_looks_up_novelty_with_semantic_similarity_vectors(pool):
    embedder = SimilarityLooksAtBread()
    await MemoryStore(pool, embedder).store_many([NewMemory(STORED)])
    gates = Gates.build(pool, embedder, ScriptedMetaLLM(verdict=lambda a, b: False),
                        gate_settings(noise_floor=0.0, bootstrap_floor=0.0), Safety(), rng=random.Random(3))
    texts = ["My neighbour adopted a grey kitten", "Quarterly tax forms are due in April"]
    for text in texts:
        await gates.admit(text, exchange=False)
    embedder.calls.clear()
    await gates.exit.flush(reason="test")
    prefixed = [f"Personal experience memory: {t}" for t in texts]
    assert [(c.task_type, c.texts, c.titles) for c in embedder.calls[:2]] == [
        ("RETRIEVAL_DOCUMENT", prefixed, ["episodic", "episodic"]),
        ("SEMANTIC_SIMILARITY", prefixed, None),
    ]
    # the nearest memory was found with the SEMANTIC_SIMILARITY vectors: the bakery, at 1.0
    rows = await pool.fetch("SELECT novelty_similarity FROM gate_decisions WHERE gate = 'exit' ORDER BY id")
    assert [round(r["novelty_similarity"], 3) for r in rows] == [1.0, 1.0]
