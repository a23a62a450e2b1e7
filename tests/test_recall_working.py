"""Working memory in recall (issue 22): what was just said is found before the exit gate
has judged it, marked as not consolidated, and questions and chatter stay out."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import aiohttp
import numpy as np

from src.context.assembly import ContextAssembler
from src.gates.exit import ExitSetup
from src.gates.memory_gate import Gates
from src.gates.modes import MemoryMode
from src.recall.explain import retrieval_json
from src.recall.retrieval import Cue, Retriever
from src.recall.settings import ArmWeights, RetrievalSettings
from src.recall.store import MemoryStore, NewMemory
from src.recall.working import NOT_CONSOLIDATED, WorkingHit, fused, recall_working
from src.web.app import WebServer
from src.web.settings import WebSettings
from src.web.view import View
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, gate_settings


async def _gates(pool, mode: MemoryMode | None = None) -> Gates:
    return Gates.build(pool, HashEmbedder(), ScriptedMetaLLM(configured=False), gate_settings(noise_floor=0.0),
                       Safety(), rng=random.Random(1), setup=ExitSetup(mode=mode))


async def test_the_parrot_said_one_message_ago_is_recalled_before_any_flush(pool):
    await MemoryStore(pool, HashEmbedder()).store_many(
        [NewMemory(f"Someone else's pet story number {i}") for i in range(30)])
    gates = await _gates(pool)
    said = await gates.admit("my neighbour's parrot is called Captain Biscuit", exchange=False)
    asked = await gates.admit("what is my neighbour's parrot called?", exchange=False)
    assert await pool.fetchval("SELECT count(*) FROM scratch_buffer WHERE flushed_at IS NULL") == 2

    retriever = Retriever(pool, HashEmbedder(), None, Safety(), RetrievalSettings())
    result = await retriever.retrieve(Cue("what is my neighbour's parrot called?", exclude_scratch=[asked.scratch_id]),
                                      rng=np.random.default_rng(0), mutate=False)
    assert [(w.scratch_id, w.content) for w in result.working] == [
        (said.scratch_id, "my neighbour's parrot is called Captain Biscuit")]
    assert result.working[0].fts_score > 0
    # not a memory: no row was written, and every surface says it is not consolidated
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE content LIKE '%Biscuit%'") == 0
    [shown] = retrieval_json(result)["working"]
    assert (shown["consolidated"], shown["note"], shown["scratch_id"]) == (False, NOT_CONSOLIDATED, said.scratch_id)

    # the model's context carries it at the head of the situational track, marked
    assembled = await ContextAssembler(pool).assemble(result, rng=np.random.default_rng(0), now=result.working[0].created_at)
    lines = assembled.situational.text.splitlines()
    said_at = result.working[0].created_at
    assert lines[1] == (f"- [{NOT_CONSOLIDATED}] The user said: my neighbour's parrot is called Captain Biscuit "
                        f"(today, {said_at:%H:%M})")                # when it was said (issue 37)


async def test_questions_chatter_the_input_itself_and_decided_rows_are_not_working_memory(pool):
    gates = await _gates(pool)
    fact = await gates.admit("I keep bees in the garden", exchange=False)
    question = await gates.admit("what do I keep in the garden?", exchange=False)
    await gates.admit("ok thanks", exchange=False)
    hits = await recall_working(pool, "what do I keep in the garden?", limit=5)
    # the question typed earlier is not offered as an answer; the input itself (same text) neither
    assert [h.scratch_id for h in hits] == [fact.scratch_id]
    assert await recall_working(pool, "garden", limit=5, exclude=[fact.scratch_id]) == []
    assert question.scratch_id is not None

    # once the exit gate has decided the row for good, the memory store answers instead
    await gates.exit.flush(reason="test")
    assert await recall_working(pool, "what do I keep in the garden?", limit=5) == []
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE content = 'I keep bees in the garden'") == 1


async def test_memory_mode_off_rows_are_never_recalled(pool):
    mode = MemoryMode("off")
    gates = await _gates(pool, mode)
    await gates.admit("my locker code is 4471", exchange=False)
    assert await recall_working(pool, "what is my locker code", limit=5) == []
    mode.set("autopilot")
    await gates.admit("my bike lock code is 9120", exchange=False)
    assert [h.content for h in await recall_working(pool, "what is my lock code", limit=5)] == [
        "my bike lock code is 9120"]


async def test_buffered_rows_stay_recallable_until_decided(pool):
    """A row in the buffer cell stays in working memory across flushes until decided."""
    gates = await _gates(pool)
    row = await gates.admit("Remember that the spare key is under the blue flowerpot", exchange=False)
    await pool.execute("UPDATE scratch_buffer SET metadata = jsonb_set(metadata, '{gate_rounds}', '1') "
                       "WHERE id = $1", row.scratch_id)
    hits = await recall_working(pool, "where is the spare key?", limit=3)
    assert [h.scratch_id for h in hits] == [row.scratch_id]


async def test_the_web_view_shows_what_was_just_said_as_not_consolidated(pool):
    gates = await _gates(pool)
    said = await gates.admit("my neighbour's parrot is called Captain Biscuit", exchange=False)
    retriever = Retriever(pool, HashEmbedder(), None, Safety(), RetrievalSettings())
    server = WebServer(View(pool=pool, settings=WebSettings(port=0), mode="test", retriever=retriever))
    url = await server.start()
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(url + "memories?q=what+is+the+parrot+called&format=json") as r:
                data = await r.json()
            async with s.get(url + "memories?q=what+is+the+parrot+called") as r:
                html = await r.text()
    finally:
        await server.stop()
    assert [(w["scratch_id"], w["consolidated"]) for w in data["working"]] == [(said.scratch_id, False)]
    assert "just said, not yet consolidated" in html and "Captain Biscuit" in html


async def test_a_line_flushed_while_recall_runs_comes_back_once(pool, monkeypatch):
    """Asked right after saying it, the question's own flush may commit the line while recall
    reads: working memory is read first, so the search after it finds the new memory, and the
    line comes back once (as the memory), not twice and not lost (a user's try, issue 35)."""
    from src.recall import search
    gates = await _gates(pool)
    await MemoryStore(pool, HashEmbedder()).store_many([NewMemory(f"Someone else's pet story number {i}")
                                                        for i in range(10)])
    said = await gates.admit("my neighbour's parrot is called Captain Biscuit", exchange=False)
    asked = await gates.admit("what is my neighbour's parrot called?", exchange=False)
    real_search = search.search_hybrid

    async def flush_then_search(*args, **kwargs):
        await gates.exit.flush(reason="the question's own flush, racing recall")
        return await real_search(*args, **kwargs)

    monkeypatch.setattr(search, "search_hybrid", flush_then_search)
    retriever = Retriever(pool, HashEmbedder(), None, Safety(), RetrievalSettings())
    result = await retriever.retrieve(Cue("what is my neighbour's parrot called?", exclude_scratch=[asked.scratch_id]),
                                      rng=np.random.default_rng(0), mutate=False)
    found = [m.hit.content for m in result.memories] + [w.content for w in result.working]
    assert found.count("my neighbour's parrot is called Captain Biscuit") == 1
    assert said.scratch_id not in [w.scratch_id for w in result.working]     # it is a memory now


#: A fake that knows three paraphrases: the question and the fact share no word.
KNOWS = {"medicine": "drug", "penicillin": "drug", "avoid": "allergic", "learning": "study",
         "studying": "study"}


def _floor_of(embedder: HashEmbedder, floor: float | None) -> RetrievalSettings:
    return RetrievalSettings(arms={embedder.model_name: ArmWeights(working_floor=floor)})


async def test_a_fact_just_said_is_found_by_a_question_in_other_words(pool):
    """The local model's script typed ten facts and asked about them in other words before
    any flush: full text alone could not reach "I'm allergic to penicillin" from "Which
    medicine must I avoid?". The user's unflushed lines are compared by vector as well."""
    gates = await _gates(pool)
    fact = await gates.admit("I'm allergic to penicillin.", exchange=False)
    other = await gates.admit("I drive a red Fiat Panda.", exchange=False)
    mine = await gates.admit("Aspirin should be avoided by you.", source_tag="internal_self", exchange=False)
    asked = await gates.admit("Which medicine must I avoid?", exchange=False)
    embedder = HashEmbedder(alias=KNOWS)
    retriever = Retriever(pool, embedder, None, Safety(), _floor_of(embedder, 0.3))
    cue = Cue("Which medicine must I avoid?", exclude_scratch=[asked.scratch_id])

    result = await retriever.retrieve(cue, rng=np.random.default_rng(0), mutate=False)
    by_id = {w.scratch_id: w for w in result.working}
    assert fact.scratch_id in by_id and by_id[fact.scratch_id].cosine >= 0.3
    assert by_id[fact.scratch_id].fts_score == 0                 # no word of the question in it
    assert other.scratch_id not in by_id                         # the unrelated fact stays below the floor
    # the mind's reply is not compared by vector: only its words can bring it back ("avoided")
    assert by_id[mine.scratch_id].cosine is None and by_id[mine.scratch_id].fts_score > 0
    # each line is embedded once, as memories are; the question's own row never
    rows_sent = [t for c in embedder.calls if c.task_type == "RETRIEVAL_DOCUMENT" for t in c.texts]
    assert sorted(rows_sent) == sorted(["I'm allergic to penicillin.", "I drive a red Fiat Panda."])
    await retriever.retrieve(cue, rng=np.random.default_rng(0), mutate=False)
    assert [t for c in embedder.calls if c.task_type == "RETRIEVAL_DOCUMENT" for t in c.texts] == rows_sent

    # by words only, as before: the fact is not found
    words_only = Retriever(pool, HashEmbedder(alias=KNOWS), None, Safety(), _floor_of(embedder, None))
    result = await words_only.retrieve(cue, rng=np.random.default_rng(0), mutate=False)
    assert fact.scratch_id not in [w.scratch_id for w in result.working]


async def test_working_memory_falls_back_to_words_when_the_embedder_fails(pool):
    gates = await _gates(pool)
    fact = await gates.admit("I'm allergic to penicillin, the doctor said avoid it.", exchange=False)

    class Failing(HashEmbedder):
        async def embed(self, texts, task_type, titles=None):
            if task_type == "RETRIEVAL_DOCUMENT":
                raise TimeoutError("embedder down")
            return await super().embed(texts, task_type, titles)

    embedder = Failing(alias=KNOWS)
    result = await Retriever(pool, embedder, None, Safety(), _floor_of(embedder, 0.3)).retrieve(
        Cue("Which medicine must I avoid?"), rng=np.random.default_rng(0), mutate=False)
    assert [(w.scratch_id, w.cosine) for w in result.working] == [(fact.scratch_id, None)]   # by "avoid"
    assert any("working memory by words only" in d for d in result.degraded)


def _hit(i: int, fts: float, cosine: float | None) -> WorkingHit:
    return WorkingHit(i, f"line {i}", "external_user", datetime(2026, 11, 29, tzinfo=UTC), fts, None, cosine)


def test_words_and_vectors_are_fused_by_rank():
    hits = [_hit(1, 0.0, 0.62), _hit(2, 0.3, 0.1), _hit(3, 0.1, 0.5), _hit(4, 0.0, 0.2), _hit(5, 0.0, None)]
    # 3 is in both lists; 1 is the best by vector, 2 by words (a tie: the newer row first);
    # 4 is under the floor, 5 unmatched
    assert [h.scratch_id for h in fused(hits, 0.25)] == [3, 2, 1]
    assert [h.scratch_id for h in fused(hits, None)] == [2, 3]           # words only
