"""Recall's layers keep what hybrid search found (issue 12), on real PostgreSQL.

The fixture: a question whose evidence only the full-text arm finds (the embedder
does not know its key word), among memories the vector arm likes better.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from src.recall import relevance as rel
from src.recall.retrieval import RetrievalSettings, Retriever
from src.recall.search import search_hybrid
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
QUESTION = "when is the zorblax parade"
EVIDENCE = "the zorblax happens every spring near the harbour"
DISTRACTORS = ["the bakery is open when the sun is up", "the library is quiet when it rains",
               "my bike is in the shed when it snows", "the market is busy when it is sunny",
               "the tram is late when the snow is deep", "the cat is asleep when the house is warm",
               "the river is loud when the ice melts", "the office is empty when the holidays start",
               "the garden is green when the rain is steady", "the kettle is hot when the guests arrive",
               "the stadium is full when the derby is on", "the beach is calm when the wind drops"]


@pytest.fixture
async def fixture_ids(pool):
    embedder = HashEmbedder(ignore=frozenset({"zorblax"}))
    ids = await MemoryStore(pool, embedder).store_many([NewMemory(t) for t in [EVIDENCE, *DISTRACTORS]])
    await pool.execute("UPDATE memories SET created_at = $1", NOW - timedelta(days=3))
    return embedder, ids


async def test_search_finds_the_evidence_by_full_text_only(pool, fixture_ids):
    embedder, ids = fixture_ids
    vec = (await embedder.embed([QUESTION], "RETRIEVAL_QUERY"))[0]
    hits = await search_hybrid(pool, QUESTION, vec, embed_model=embedder.model_name, now=NOW)
    evidence = next(h for h in hits if h.id == ids[0])
    assert evidence.fts_rank == 1 and evidence.vec_rank >= 10     # the vector arm ranks it low
    assert hits[0].id == ids[0]                                     # fusion puts it first


@pytest.mark.parametrize(("signal", "at_least"), [("blend", 49), ("fused", 49)])
async def test_the_pipeline_keeps_full_text_evidence_in_its_top_5(pool, fixture_ids, signal, at_least):
    embedder, ids = fixture_ids
    retriever = Retriever(pool, embedder, None, Safety(), RetrievalSettings(semantic_signal=signal))
    kept = 0
    for seed in range(50):
        result = await retriever.retrieve(QUESTION, rng=np.random.default_rng(seed), now=NOW, mutate=False)
        kept += ids[0] in result.ids
    assert kept >= at_least


async def test_cosine_alone_would_lose_it(pool, fixture_ids):
    """The plan's literal reading (semantic = cosine) drops what search found: the reason for the
    change. Only the decisive full-text rule (src/recall/scoring.keep_decisive, issue 35) holds
    it then, at the last kept rank: the layers alone ranked it below the top 5."""
    embedder, ids = fixture_ids
    retriever = Retriever(pool, embedder, None, Safety(), RetrievalSettings(semantic_signal="cosine"))
    last_kept = 0
    for seed in range(50):
        result = await retriever.retrieve(QUESTION, rng=np.random.default_rng(seed), now=NOW, mutate=False)
        last_kept += result.ids.index(ids[0]) == len(result.ids) - 1
    assert last_kept >= 48


@pytest.mark.parametrize(("kind", "expected"), [
    ("cosine", [0.8, 0.2, 0.0, 0.5]),
    ("fused", [0.5, 1.0, 0.3, 0.5]),
    # means 0.65, 0.6, 0.15, 0.5 → min-max over the candidates
    ("blend", [1.0, 0.9, 0.0, 0.7]),
])
def test_semantic_signal_table(kind, expected):
    # cosine NaN: no comparable vector, the fused score stands in; negative cosine clips to 0
    got = rel.semantic_signal(kind, [0.8, 0.2, -0.4, np.nan], [0.5, 1.0, 0.3, 0.5])
    assert got == pytest.approx(expected)


def test_semantic_signal_edges():
    assert rel.semantic_signal("blend", [0.4], [0.7]).tolist() == [1.0]       # one candidate: 1
    assert rel.semantic_signal("blend", [0.4, 0.4], [0.7, 0.7]).tolist() == [1.0, 1.0]
    assert rel.semantic_signal("blend", [], []).tolist() == []
    with pytest.raises(ValueError, match="unknown semantic signal 'max'; expected one of: cosine, fused, blend"):
        rel.semantic_signal("max", [0.1], [0.1])
