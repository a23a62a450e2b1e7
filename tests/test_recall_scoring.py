"""Recall's cognitive layers re-rank, they do not bury (issue 35 items 3 and 4,
src/recall/scoring.py): ACT-R orders equal matches by practice, co-activation comes from
what bears on the question, boundaries take no slot unasked, full text's decisive first
stays in the top 5, and a question about the user puts the user's own words first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from src.recall.retrieval import Cue, Retriever
from src.recall.scoring import about_user, asks_of_user
from src.recall.settings import ArmWeights, RetrievalSettings
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
FILLER = ["the office printer jams every morning", "the river flooded the lower fields",
          "the bakery on Elm Street closed", "her violin lessons start in May", "we planted tulips by the gate",
          "the tram fare went up again", "chess openings: the sicilian defence", "jazz records from the sixties"]


async def _store(pool, items: list[NewMemory], embedder=None) -> list[int]:
    ids = await MemoryStore(pool, embedder or HashEmbedder()).store_many(items)
    await pool.execute("UPDATE memories SET created_at = $1", NOW - timedelta(days=2))
    await pool.execute("ANALYZE memories")
    return ids


def _retriever(pool, embedder=None, **settings) -> Retriever:
    return Retriever(pool, embedder or HashEmbedder(), None, Safety(), RetrievalSettings(**settings))


async def _firsts(retriever: Retriever, question: str, seeds: int = 30, **kwargs) -> list[int]:
    out = []
    for seed in range(seeds):
        r = await retriever.retrieve(Cue(question, **kwargs), rng=np.random.default_rng(seed), now=NOW, mutate=False)
        out.append(r.ids[0])
    return out


async def test_act_r_puts_the_practised_of_two_equal_matches_first(pool):
    """Fails when the ACT-R term is removed from the score: the two match the question alike
    (same words), and only the second, recalled often in the last hour, differs."""
    fresh, practised = (await _store(pool, [NewMemory("my locker code is 7419"),
                                            NewMemory("my locker code is 7419 !"), *map(NewMemory, FILLER)]))[:2]
    recalls = [NOW - timedelta(seconds=s) for s in range(20, 620, 20)]     # 30 in the last ten minutes
    await pool.execute("UPDATE memories SET access_timestamps = $2, access_count = 30 WHERE id = $1",
                       practised, recalls)          # last_accessed stays NULL: search's recency is equal
    # a context (nothing spreads from it): no cold seed of the two gets the co-activation a cue gives
    context = {"active_ids": [await pool.fetchval("SELECT max(id) FROM memories")]}
    with_act_r = await _firsts(_retriever(pool), "locker code", **context)
    without = await _firsts(_retriever(pool, activation_share=0.0), "locker code", **context)
    assert with_act_r.count(practised) >= 27
    assert without.count(practised) <= 20           # the control: nothing else orders them


async def test_practice_does_not_lift_a_worse_match_over_the_best_one(pool):
    """A hub recalled again and again all session, matching one word of the question, stays
    below the memory that matches it (but for the odd draw of ACT-R's noise)."""
    fact, hub = (await _store(pool, [NewMemory("my favourite book is Middlemarch by George Eliot"),
                                     NewMemory("what a great book club tonight"), *map(NewMemory, FILLER)]))[:2]
    recalls = [NOW - timedelta(seconds=s) for s in range(30, 3000, 60)]
    await pool.execute("UPDATE memories SET access_timestamps = $2, access_count = $3 WHERE id = $1",
                       hub, recalls, len(recalls))
    firsts = await _firsts(_retriever(pool), "what is my favourite book by George Eliot")
    assert firsts.count(fact) >= 27


async def test_a_memory_in_context_spreads_only_as_much_as_it_bears_on_the_question(pool):
    bicycle, dentist = (await _store(pool, [NewMemory("the blue bicycle lives in the garage"),
                                            NewMemory("the dentist appointment is on friday"),
                                            NewMemory("I drink earl grey tea every morning"),
                                            *map(NewMemory, FILLER)]))[:2]
    a, b = sorted((bicycle, dentist))
    await pool.execute("INSERT INTO memory_co_access (memory_id_a, memory_id_b, co_access_count) VALUES ($1, $2, 20)",
                       a, b)
    retriever = _retriever(pool, spread_join=5)

    async def spread_to_dentist(question: str) -> float:
        r = await retriever.retrieve(Cue(question, active_ids=[bicycle]), rng=np.random.default_rng(1), now=NOW,
                                     mutate=False)
        return next((m.spread for m in r.memories + r.near_misses if m.id == dentist), 0.0)

    assert await spread_to_dentist("where is the blue bicycle") > 0.3     # the bicycle bears on it
    assert await spread_to_dentist("earl grey tea") < 0.05                # a hub of the context does not


async def test_boundaries_take_no_recall_slot_unless_the_question_matches_them(pool):
    boundary = (await MemoryStore(pool, HashEmbedder()).store_many([NewMemory(
        "When unsure whether something could cause harm, I stop and ask.", "semantic",
        source_tag="bootstrap_seed", immutable=True, alpha=50, beta=1)]))[0]
    await _store(pool, [NewMemory("our cat is called Miso"), *map(NewMemory, FILLER)])
    await pool.execute("UPDATE memories SET access_timestamps = $1 WHERE id = $2",
                       [NOW - timedelta(minutes=m) for m in range(1, 40)], boundary)   # in every context so far
    retriever = _retriever(pool, keep=5)
    unrelated = await retriever.retrieve("what is my cat called", rng=np.random.default_rng(1), now=NOW, mutate=False)
    asked = await retriever.retrieve("could this cause harm", rng=np.random.default_rng(1), now=NOW, mutate=False)
    assert boundary not in unrelated.ids + [m.id for m in unrelated.near_misses]
    assert boundary in asked.ids


async def test_full_texts_decisive_first_stays_in_the_top_5_whatever_the_layers_say(pool):
    """Hubs that match a common word of the question in both arms, recalled all session and
    co-active with each other, against the one memory holding the question's rare word."""
    embedder = HashEmbedder(ignore=frozenset({"middlemarch"}))
    hubs = [NewMemory(f"what a great book club night number {i}") for i in range(8)]
    ids = await _store(pool, [NewMemory("Middlemarch is the one I reread every winter"), *hubs,
                              *map(NewMemory, FILLER)], embedder)
    fact, hub_ids = ids[0], ids[1:9]
    recalls = [NOW - timedelta(seconds=s) for s in range(30, 3000, 60)]
    await pool.execute("UPDATE memories SET access_timestamps = $2 WHERE id = ANY($1::bigint[])", hub_ids, recalls)
    for a in hub_ids:
        for b in hub_ids:
            if a < b:
                await pool.execute("INSERT INTO memory_co_access (memory_id_a, memory_id_b, co_access_count) "
                                   "VALUES ($1, $2, 30)", a, b)
    retriever = _retriever(pool, embedder)
    kept = 0
    for seed in range(30):
        r = await retriever.retrieve(Cue("which book is Middlemarch", active_ids=hub_ids[:3]),
                                     rng=np.random.default_rng(seed), now=NOW, mutate=False)
        kept += fact in r.ids
    assert kept == 30


async def test_a_question_about_the_user_puts_what_the_user_stated_first(pool):
    """The same words said by the user and, in an imported chat, by Emi, and by the mind:
    asked about the user, the user's line comes first."""
    items = [NewMemory("my favourite tea is smoky lapsang souchong", source_tag="external_user",
                       metadata={"speaker": "Emi"}),
             NewMemory("my favourite tea is smoky lapsang souchong", source_tag="internal_self"),
             NewMemory("my favourite tea is smoky lapsang souchong", source_tag="external_user"),
             *map(NewMemory, FILLER)]
    emi, mind, user = (await _store(pool, items))[:3]
    firsts = await _firsts(_retriever(pool), "which tea is my favourite")
    assert firsts.count(user) >= 22                 # ACT-R's noise (the plan's s = 0.4) still plays
    control = await _firsts(_retriever(pool, user_word=0.0), "which tea is my favourite")
    assert control.count(user) <= 15


def test_about_user_reads_the_first_person():
    assert about_user("What is my job?") and about_user("do I have a dog") and about_user("Where’s our car?")
    assert about_user("I'm wondering about lunch")
    assert not about_user("When did Fahim go for a run?") and not about_user("Any idea?")


def test_the_own_arm_asks_of_the_user_unless_the_question_names_someone_else():
    assert asks_of_user("What is my job?") and asks_of_user("Any pets?") and asks_of_user("When's washing day?")
    assert asks_of_user("Which friend recently became a mum?") and asks_of_user("Headache triggers?")
    assert not asks_of_user("What are Kate's hobbies?") and not asks_of_user("Where is Lisbon?")
    assert not asks_of_user("What does she do for work?") and not asks_of_user("When is someone coming round?")
    assert not asks_of_user("What's your name?")


async def test_a_question_naming_nobody_searches_the_users_own_lines(pool):
    """'Any pets at home?' speaks neither of the user nor of anyone else: the user's own
    statement joins through the own arm; asked of Kate, the arm does not run."""
    items = [NewMemory("Pepper the greyhound sleeps on the sofa all day", source_tag="external_user"),
             *(NewMemory(text, source_tag="external_user", metadata={"speaker": "Emi"}) for text in FILLER)]
    user = (await _store(pool, items))[0]
    retriever = _retriever(pool, arms={HashEmbedder().model_name: ArmWeights(w_own=1.0)})

    async def own_ranks(question: str) -> dict[int, int | None]:
        r = await retriever.retrieve(Cue(question), rng=np.random.default_rng(1), now=NOW, mutate=False)
        return {m.hit.id: m.hit.own_rank for m in [*r.memories, *r.near_misses]}

    asked = await own_ranks("Any pets at home?")
    assert asked.get(user) == 1
    named = await own_ranks("Does Kate keep pets at home?")
    assert all(rank is None for rank in named.values())
