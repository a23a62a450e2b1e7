"""Merges are trustworthy (issue 22): the lexical guard, the extractive merge, the name and
number check of a model's insight, and `why` on a merge. Real PostgreSQL; the offline
embedder (wordllama) where its thresholds are the point."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime

import numpy as np
import pytest

from src.consolidation.clustering import content_words, leader_clusters, word_overlap, words
from src.consolidation.deep import merge
from src.consolidation.deep.deep_pass import DEEP_PHASES, ConsolidationParts, run_deep_pass
from src.consolidation.deep.structured import Rejected
from src.consolidation.deep.why import format_chain, why_do_i_believe
from src.consolidation.settings import WORDLLAMA, ConsolidationSettings
from src.providers.embed_wordllama import WordLlamaEmbedder
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, ids_in, language_model
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
MERGE_ONLY = [p for p in DEEP_PHASES if p.name == "merge"]
MARA_LEEDS = "My sister Mara moved to Leeds in May for a nursing job."
BREAD = "Every Sunday I bake sourdough bread with rye flour from the mill in Hebden Bridge."


@pytest.fixture(scope="module")
def wordllama() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


async def merge_pass(pool, embedder, llm=None):
    report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=llm, safety=Safety(),
                                                    settings=ConsolidationSettings()),
                                 trigger="manual", now=NOW, rng=random.Random(7), phases=MERGE_ONLY)
    assert report.status == "done", report.error
    return report


def _insight(text: str):
    """A scripted merge reply: `text` for cluster 1, citing every id the prompt shows."""
    return lambda request: json.dumps({"insights": [{"cluster": 1, "insight": text,
                                                     "cited_ids": ids_in(request.messages[0].content)}]})


async def merges(pool) -> list[tuple[str, list[str]]]:
    """(merged text, its sources' texts) of every merge, oldest first."""
    rows = await pool.fetch(
        """SELECT i.content, array_agg(m.content ORDER BY m.id) AS sources
             FROM memories i JOIN memory_supersedes s ON s.insight_id = i.id AND s.via = 'merge'
             JOIN memories m ON m.id = s.source_id GROUP BY i.id, i.content ORDER BY i.id""")
    return [(r["content"], list(r["sources"])) for r in rows]


def test_content_words_keep_negations_and_what_orders_events():
    assert content_words("I'm NOT moving to Leeds") == {"not", "moving", "leeds"}
    assert content_words("Mara didn’t move") == {"mara", "not", "move"}          # curly apostrophe
    assert content_words("call before lunch") != content_words("call after lunch")
    # a text of stop words only keeps them all: these two questions are not the same
    assert content_words("What about you?") != content_words("How about you?")
    assert word_overlap(frozenset(), frozenset()) == 1.0


def test_the_lexical_guard_splits_what_cosine_alone_joins():
    same = np.ones((3, 4), dtype=np.float32)               # cosine 1.0 between all three
    texts = [MARA_LEEDS, MARA_LEEDS.replace("May", "June"), MARA_LEEDS + "!"]
    assert leader_clusters(same, 0.85) == [[0, 1, 2]]
    guarded = leader_clusters(same, 0.85, content=[content_words(t) for t in texts], min_overlap=0.8)
    assert guarded == [[0, 2]]                             # May vs June: 6 of 8 content words shared


def test_the_extractive_merge_states_every_members_content_words():
    texts = [BREAD, BREAD.replace(".", ", two loaves."), BREAD.replace("the mill", "the old mill")]
    got = merge.extractive_merge(texts, central=0)
    assert got.text == (f"{BREAD} Also: two loaves; Every Sunday I bake sourdough bread with rye flour "
                        "from the old mill in Hebden Bridge.")
    assert got.held == [0, 1, 2] and got.cited == [0, 1, 2]
    assert all(content_words(t) <= set(words(got.text)) for t in texts)
    # a member with nothing new is held (superseded) but adds nothing and is not cited
    again = merge.extractive_merge([BREAD, BREAD.upper()], central=0)
    assert (again.text, again.held, again.cited) == (BREAD, [0, 1], [0])


def test_a_member_whose_new_clauses_do_not_fit_is_left_out():
    long_tail = ", ".join(f"stop {n}" for n in range(merge.MERGE_ADDED_CHARS // 6))
    texts = [BREAD, f"{BREAD[:-1]}, {long_tail}.", BREAD.replace(".", ", two loaves.")]
    got = merge.extractive_merge(texts, central=0)
    assert got.held == [0, 2] and got.text == f"{BREAD} Also: two loaves."


def test_a_models_insight_that_drops_a_name_or_number_is_rejected():
    c = merge.Cluster(1, [10, 11], [MARA_LEEDS, MARA_LEEDS + " She starts on the 3rd."], "fp", MARA_LEEDS, [10])
    assert merge.names_and_numbers(c.texts) == {"mara", "leeds", "may", "3"}   # "My", "She": sentence starts

    def answer(text: str) -> merge.MergeAnswer:
        return merge.MergeAnswer(insights=[merge.MergedInsight(cluster=1, insight=text, cited_ids=[10, 11])])

    with pytest.raises(Rejected, match="cluster 1's insight drops names or numbers its memories state: 3, leeds"):
        merge.validate_merge([c], answer("Mara moved in May for nursing."))
    merge.validate_merge([c], answer("Mara's move to Leeds in May for nursing; she starts on the 3rd."))


async def test_distinct_turns_sharing_many_words_are_not_merged_true_duplicates_are(pool, wordllama):
    assert ConsolidationSettings().thresholds_for(wordllama.model_name).merge_overlap == 0.8
    assert wordllama.model_name == WORDLLAMA
    store = MemoryStore(pool, wordllama)
    distinct = [MARA_LEEDS, "My sister Mara moved to Bristol in June for a teaching job.",
                MARA_LEEDS.replace("May", "June"),                   # cosine 0.93, 6 of 8 content words
                "I love my dog Rex", "I love my cat Tom",
                "Any favorite looks for you Kate?", "Any favorite moments for you Kate?"]   # cosine 0.90
    twins = ["I love baking sourdough bread on Sundays.", "I love baking sourdough bread on Sundays!"]
    await store.store_many([*map(NewMemory, distinct), *map(NewMemory, twins)])

    report = await merge_pass(pool, wordllama)

    assert report.phases["merge"]["counts"] == {"clusters": 1, "insights": 1, "superseded": 2}
    assert await merges(pool) == [("I love baking sourdough bread on Sundays.", twins)]


async def test_an_offline_merge_keeps_each_sources_facts_and_why_shows_its_sources(pool, wordllama):
    store = MemoryStore(pool, wordllama)
    sources = [BREAD, BREAD.replace(".", ", two loaves."), BREAD.replace("the mill", "the old mill"),
               BREAD.replace("Sunday", "Sunday\x1b[31m")]       # a control character, shown escaped
    ids = await store.store_many([NewMemory(t) for t in sources])

    await merge_pass(pool, wordllama)

    [(merged, got_sources)] = await merges(pool)
    assert got_sources == sources
    assert "two loaves" in merged and "old mill" in merged
    assert all(content_words(s) <= set(words(merged)) for s in sources)
    row = await pool.fetchrow("SELECT id, metadata FROM memories WHERE metadata->>'via' = 'merge'")
    meta = json.loads(row["metadata"])
    assert meta["sources"] == ids and meta["extractive"] is True and meta["cluster_size"] == 4

    text = format_chain(row["id"], await why_do_i_believe(pool, row["id"]))
    lines = text.splitlines()
    assert lines[0].startswith(f"#{row['id']} [reflection] ")
    assert len(lines) == 1 + len(sources)
    for mid, source, line in zip(ids, sources, lines[1:], strict=True):
        assert line.startswith(f"  #{mid} [episodic <- merge] ")
        assert line.endswith(source.replace("\x1b", "\\x1b"))
    assert "\x1b" not in text


async def test_a_model_insight_losing_a_name_leaves_the_cluster_for_the_next_pass(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory(MARA_LEEDS), NewMemory(MARA_LEEDS)])
    backend = ConsolidationModel().push("merge", _insight("A sibling moved for work."))
    report = await merge_pass(pool, embedder, language_model(backend, pool))
    assert report.phases["merge"]["counts"] == {"clusters": 1}
    failure = await pool.fetchval("SELECT error FROM consolidation_failures")
    assert failure.endswith("drops names or numbers its memories state: leeds, mara, may")
    assert await merges(pool) == []

    backend.push("merge", _insight("Mara moved to Leeds in May, for nursing."))
    await merge_pass(pool, embedder, language_model(backend, pool))
    assert await merges(pool) == [("Mara moved to Leeds in May, for nursing.", [MARA_LEEDS, MARA_LEEDS])]


async def test_a_pass_stopped_between_merge_batches_keeps_the_answers_it_paid_for(pool):
    """Issue 26: the merge asked every batch before writing any, so a pass killed mid-way asked
    (and paid for) the finished batches again; insights save theirs, and now merges do too."""
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many(
        [NewMemory(f"I deploy my small projects with one simple shell script instead of kubernetes, note {i}")
         for i in range(3)]
        + [NewMemory(f"Every week we bake sourdough bread with rye flour from the old mill, loaf {i}")
           for i in range(3)])
    settings = ConsolidationSettings(deep={"merge_batch": 1})           # one cluster per call
    reached = asyncio.Event()

    class StopsAtTheSecondCall(ConsolidationModel):
        async def complete(self, request):
            if self.requests:                     # the first batch's answer is paid for
                reached.set()
                await asyncio.sleep(3600)         # the pass is stopped while the model thinks
            return await super().complete(request)

    first = StopsAtTheSecondCall()
    task = asyncio.create_task(run_deep_pass(
        ConsolidationParts(pool, embedder=embedder, llm=language_model(first, pool), safety=Safety(),
                           settings=settings),
        trigger="manual", now=NOW, rng=random.Random(7), phases=MERGE_ONLY))
    await asyncio.wait_for(reached.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert first.kinds() == ["merge"] and await merges(pool) == []

    backend = ConsolidationModel()
    report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=language_model(backend, pool),
                                                    safety=Safety(), settings=settings),
                                 trigger="manual", now=NOW, rng=random.Random(7), phases=MERGE_ONLY)
    assert report.resumed and report.status == "done"
    assert backend.kinds() == ["merge"]                                   # only the batch never answered
    assert sorted(len(sources) for _, sources in await merges(pool)) == [3, 3]     # both clusters merged
    assert await pool.fetchval("SELECT llm_calls FROM consolidation_passes") == 2
