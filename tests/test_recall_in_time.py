"""Questions with a time (issue 37 item 2, src/recall/in_time.py): the period a question names
brings its memories into recall and ranks them above others."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from src.recall.retrieval import Cue, Retriever
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 28, 16, 0, tzinfo=UTC)          # a Saturday
LAST_WEEK = [("I went hiking in the Peak District with Tom.", 10),      # Wed 18 Nov
             ("I finally fixed the leaking tap in the bathroom.", 8),    # Fri 20 Nov
             ("I had dinner at the new Korean place on Oak Street.", 12)]  # Mon 16 Nov
# other events of the user at other times; none shares a word with the question but "I" (the
# fake embedder matches words only: a shared "did" would be a match no real embedder makes)
OTHER_TIMES = [("I went to the cinema to see a film.", 2), ("I bought groceries at the market.", 3),
               ("I went swimming at the leisure centre.", 40), ("I spent a morning gardening.", 60),
               ("I went running along the river.", 25), ("I finished my tax return.", 100)]


async def _dated_store(pool) -> None:
    store = MemoryStore(pool, HashEmbedder())
    # other people's chat, the bulk of the store
    ids = await store.store_many([NewMemory(f"Kim said the {w} was nice on day {i}", "episodic", source_tag="import",
                                            metadata={"speaker": "Kim"})
                                  for i, w in enumerate(["weather", "party", "show", "trip"] * 150)])
    await pool.execute("UPDATE memories SET created_at = $2, event_time = $2 WHERE id = ANY($1::bigint[])",
                       ids, NOW - timedelta(days=300))
    for text, days in LAST_WEEK + OTHER_TIMES:
        mid = await store.store(NewMemory(text, "episodic", source_tag="external_user"))
        await pool.execute("UPDATE memories SET created_at = $2, event_time = $2 WHERE id = $1",
                           mid, NOW - timedelta(days=days))


async def _ranked(pool, question: str) -> list[str]:
    found = await Retriever(pool, HashEmbedder(), None, Safety()).retrieve(
        Cue(question), rng=np.random.default_rng(3), now=NOW, mutate=False)
    return [m.hit.content for m in found.memories]


async def test_what_did_i_do_last_week_ranks_the_weeks_events_first(pool):
    await _dated_store(pool)
    ranked = await _ranked(pool, "What did I do last week?")
    assert set(ranked[:3]) == {text for text, _ in LAST_WEEK}, ranked


async def test_what_did_i_do_last_summer_ranks_the_summers_events_first(pool):
    await _dated_store(pool)
    store = MemoryStore(pool, HashEmbedder())
    for text, days in (("I sailed round the Isle of Wight with Priya.", 120),     # 31 July
                       ("I camped by the lake for three nights.", 150)):          # 1 July
        mid = await store.store(NewMemory(text, "episodic", source_tag="external_user"))
        await pool.execute("UPDATE memories SET created_at = $2, event_time = $2 WHERE id = $1",
                           mid, NOW - timedelta(days=days))
    ranked = await _ranked(pool, "What did I do last summer?")
    # the tax return (100 days ago, 20 August) is the store's other summer event
    assert set(ranked[:3]) == {"I sailed round the Isle of Wight with Priya.", "I camped by the lake for three nights.",
                               "I finished my tax return."}, ranked


async def test_a_question_without_a_time_is_not_narrowed(pool):
    await _dated_store(pool)
    ranked = await _ranked(pool, "What did I do?")
    assert set(ranked[:3]) != {text for text, _ in LAST_WEEK}, ranked


async def test_a_when_question_favours_the_memory_whose_words_name_the_time(pool):
    await _dated_store(pool)
    store = MemoryStore(pool, HashEmbedder())
    for text in ("I moved to Leeds with my partner.", "I moved to Leeds with my partner on 3 March."):
        mid = await store.store(NewMemory(text, "episodic", source_tag="external_user"))
        await pool.execute("UPDATE memories SET created_at = $2, event_time = $2 WHERE id = $1",
                           mid, NOW - timedelta(days=200))
    ranked = await _ranked(pool, "When did I move to Leeds with my partner?")
    assert ranked[0] == "I moved to Leeds with my partner on 3 March.", ranked
    plain = await _ranked(pool, "Did I move to Leeds with my partner?")      # no "when": no favour
    assert plain[0] == "I moved to Leeds with my partner.", plain
