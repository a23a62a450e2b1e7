"""Hybrid search (plan §2.5) against a real PostgreSQL: arms, RRF, recency, hostile questions."""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from src.gates.novelty import check_novelty
from src.recall.rrf import recency_score, rrf_fuse
from src.recall.search import (
    HYBRID_SQL,
    QUESTION_TSQUERY,
    hybrid_arguments,
    query_vector,
    search_hybrid,
)
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
MODEL = "fake-hash-768"


async def _query_vec(embedder, text):
    return (await embedder.embed([text], "RETRIEVAL_QUERY"))[0]


async def _set_times(pool, memory_id, *, created=None, event=None, accessed=None):
    await pool.execute(
        "UPDATE memories SET created_at = COALESCE($2, created_at), event_time = $3, "
        "last_accessed = $4 WHERE id = $1", memory_id, created, event, accessed)


# --- the plan's test: a keyword the embedding misses ----------------------------------------

DISTRACTORS = [
    "the meeting was moved to when everyone is free",
    "when the rain stopped the walk was lovely",
    "the report was late when the printer broke",
    "I booked a table at the restaurant when it was raining",
    "the cat was asleep when the mail came",
    "when was the last time the oil was changed",
    "the garden was full of bees",
    "the train was crowded when we left",
    "lunch was pasta with the usual sauce",
    "the password was reset when the account locked",
    "the movie was better than the novel when it came out",
    "the dentist appointment was on Tuesday",
    "when the alarm rang the kettle was already on",
    "the weather was cold and windy",
    "the bike was repaired when the shop opened",
    "when tired the dog was quiet",
    "the coffee was too strong",
    "the plants were watered when the sun set",
    "the new desk was delivered",
]
TARGET = "Ferry tickets to Zanzibar booked for March"


async def test_hybrid_finds_a_keyword_the_embedding_misses(pool):
    embedder = HashEmbedder(ignore=frozenset({"zanzibar"}))
    store = MemoryStore(pool, embedder)
    ids = await store.store_many([NewMemory(t) for t in DISTRACTORS])
    target = await store.store(NewMemory(TARGET))
    assert len(ids) + 1 == 20
    question = "When was the Zanzibar booking?"
    qvec = await _query_vec(embedder, question)

    vector_only = await search_hybrid(pool, question, qvec, embed_model=MODEL, w_fulltext=0.0,
                                      limit=5, now=NOW)
    assert target not in [h.id for h in vector_only]  # the embedding alone misses it

    hits = await search_hybrid(pool, question, qvec, embed_model=MODEL, now=NOW)
    assert len(hits) == 20
    by_id = {h.id: h for h in hits}
    assert (by_id[target].vec_rank, by_id[target].fts_rank) == (20, 1)  # last by vector
    # both keyword matches ("zanzibar" + "book", then "booked") now lead every vector-only hit
    assert [(h.content, h.fts_rank) for h in hits[:2]] == [
        ("I booked a table at the restaurant when it was raining", 2), (TARGET, 1)]
    assert all(h.fts_rank is None for h in hits[2:])


# --- RRF: SQL against the Python reference --------------------------------------------------

async def test_a_rare_name_outranks_common_words_in_the_full_text_arm(pool):
    """idf, not term counts: the one memory naming Miso beats every chat about old cats."""
    embedder = HashEmbedder()
    chatter = [f"my old cat number {i} is old and the cat sleeps" for i in range(40)]
    ids = await MemoryStore(pool, embedder).store_many(
        [NewMemory(t) for t in [*chatter, "Our cat Miso is fourteen years old."]])
    await pool.execute("ANALYZE memories")
    hits = await search_hybrid(pool, "How old is our cat Miso?", None, embed_model=MODEL, limit=5, now=NOW)
    assert hits[0].id == ids[-1] and hits[0].fts_rank == 1
    # every chat matches two of the three lexemes; idf(miso) alone outweighs both
    assert hits[0].fts_score > 2 * hits[1].fts_score



COMETS = [
    "comet comet comet orbit over the observatory",
    "a comet near the orbit of mars",
    "the comet tail",
    "orbit insertion burn complete",
    "bright comet seen at dawn, comet again at dusk",
    "the telescope mirror needs cleaning",
    "grocery list: eggs, milk, bread",
    "orbit orbit orbit",
]


@pytest.mark.parametrize(("k", "w_vector", "w_fulltext", "confidence"),
                         [(60, 1.0, 1.0, 0.0), (60, 0.7, 1.3, 0.0), (10, 2.0, 0.5, 0.0), (30, 0.5, 1.0, 0.75)])
async def test_rrf_in_sql_equals_the_python_reference(pool, k, w_vector, w_fulltext, confidence):
    embedder = HashEmbedder()
    ids = await MemoryStore(pool, embedder).store_many([NewMemory(t) for t in COMETS])
    question = "comet orbit"
    qvec = await _query_vec(embedder, question)
    hits = await search_hybrid(pool, question, qvec, embed_model=MODEL, limit=100, k=k,
                               w_vector=w_vector, w_fulltext=w_fulltext, now=NOW)
    assert sorted(h.id for h in hits) == sorted(ids)

    # the vector arm's order, computed here from the stored halfvecs
    rows = await pool.fetch("SELECT id, embedding FROM memories")
    stored = {r["id"]: r["embedding"].to_numpy().astype(np.float64) for r in rows}
    q = qvec.astype(np.float16).astype(np.float64)
    distance = {i: 1 - v @ q / (np.linalg.norm(v) * np.linalg.norm(q)) for i, v in stored.items()}
    vector_ids = sorted(distance, key=lambda i: (distance[i], i))
    assert sorted((h.vec_rank, h.id) for h in hits) == [(r + 1, i) for r, i in enumerate(vector_ids)]

    # the full-text arm's order, computed here: the sum of each matched lexeme's BM25 idf
    # over N rows (the planner's estimate: ANALYZE made it exact), ties by id
    await pool.execute("ANALYZE memories")
    has = {w: [i for i, t in zip(ids, COMETS, strict=True) if w in t] for w in ("comet", "orbit")}
    idf = {w: math.log(1 + (len(COMETS) - len(rows) + 0.5) / (len(rows) + 0.5)) for w, rows in has.items()}
    score = {i: sum(idf[w] for w in has if i in has[w]) for i in set(has["comet"]) | set(has["orbit"])}
    keyword_ids = sorted(score, key=lambda i: (-score[i], i))
    hits = await search_hybrid(pool, question, qvec, embed_model=MODEL, limit=100, k=k,
                               w_vector=w_vector, w_fulltext=w_fulltext, now=NOW, fts_confidence=confidence)
    assert [h.id for h in sorted((h for h in hits if h.fts_rank), key=lambda h: h.fts_rank)] == keyword_ids
    assert [h.fts_score for h in sorted((h for h in hits if h.fts_rank), key=lambda h: h.fts_rank)] == \
        pytest.approx([score[i] for i in keyword_ids], rel=1e-6)
    assert len(keyword_ids) == 6

    # full text's evidence: a row's score against `confidence` times a unique word's idf
    unique = math.log(1 + len(COMETS))
    evidence = {i: min(1.0, score[i] / (confidence * unique)) for i in score} if confidence else {}
    expected = rrf_fuse({"vector": vector_ids, "keyword": keyword_ids}, k=k,
                        weights={"vector": w_vector, "keyword": w_fulltext}, evidence={"keyword": evidence})
    if confidence:
        assert min(evidence.values()) < 1.0          # the case tests something
        assert {h.id: h.rrf for h in hits} == pytest.approx(expected, rel=1e-6)   # fts_score is a real
    else:
        assert {h.id: h.rrf for h in hits} == expected  # exact, not approximate
    rrf_max = (w_vector + w_fulltext) / (k + 1)
    for h in hits:
        assert h.score == pytest.approx(h.rrf / rrf_max + 0.1 * h.recency, rel=1e-12)


async def test_rrf_hand_computed_values(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    both = await store.store(NewMemory("walrus walrus walrus"))
    vector_only = await store.store(NewMemory("giraffe"))
    qvec = await _query_vec(embedder, "walrus")
    hits = await search_hybrid(pool, "walrus", qvec, embed_model=MODEL, now=NOW, w_recency=0.0)
    assert [(h.id, h.vec_rank, h.fts_rank) for h in hits] == [(both, 1, 1), (vector_only, 2, None)]
    assert hits[0].rrf == 1 / 61 + 1 / 61
    assert hits[1].rrf == 1 / 62
    assert hits[0].score == 1.0
    assert hits[1].score == pytest.approx((1 / 62) / (2 / 61), rel=1e-12)


# --- recency -----------------------------------------------------------------------------------

async def test_recency_values_and_which_timestamp_counts(pool):
    store = MemoryStore(pool, HashEmbedder())
    day = timedelta(days=1)
    cases = {  # name: (created, event, last accessed, age that counts)
        "fresh": (NOW, None, None, 0 * day),
        "week": (NOW - 7 * day, None, None, 7 * day),
        "event": (NOW - 30 * day, NOW - 14 * day, None, 14 * day),
        "accessed": (NOW - 365 * day, NOW - 365 * day, NOW - day, day),
        "future": (NOW - 2 * day, NOW + 3 * day, None, 0 * day),
        "year": (NOW - 365 * day, None, None, 365 * day),
    }
    ids = {}
    for name, (created, event, accessed, _) in cases.items():
        ids[name] = await store.store(NewMemory(f"lantern {name}"))
        await _set_times(pool, ids[name], created=created, event=event, accessed=accessed)
    hits = await search_hybrid(pool, "lantern", None, embed_model=MODEL, now=NOW)
    recency = {h.id: h.recency for h in hits}
    for name, (*_, age) in cases.items():
        assert recency[ids[name]] == pytest.approx(recency_score(age.total_seconds()), rel=1e-12)
    assert recency[ids["fresh"]] == 1.0 and recency[ids["future"]] == 1.0
    assert recency[ids["week"]] == pytest.approx(0.50007, abs=1e-5)  # exp(-0.693)
    assert recency[ids["year"]] == pytest.approx(2.03e-16, rel=1e-2)  # exp(-36.1)


async def test_year_old_strong_match_outranks_a_fresh_weak_match(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    old = await store.store(NewMemory("marine biology lab budget review"))
    # month-old memories that match part of the question rank between the two
    middling = await store.store_many([NewMemory(t) for t in [
        "marine biology lab budget", "marine biology lab review", "biology lab budget review",
        "marine lab budget review", "marine biology budget review", "marine biology lab",
        "biology lab budget", "lab budget review", "marine biology review", "marine budget review",
    ]])
    fresh = await store.store(NewMemory("the lab coffee machine is broken again"))
    year_ago, month_ago = NOW - timedelta(days=365), NOW - timedelta(days=30)
    await _set_times(pool, old, created=year_ago, event=year_ago)
    for memory_id in middling:
        await _set_times(pool, memory_id, created=month_ago)
    await _set_times(pool, fresh, created=NOW - timedelta(minutes=5))
    question = "marine biology lab budget review"
    hits = await search_hybrid(pool, question, await _query_vec(embedder, question),
                               embed_model=MODEL, now=NOW)
    first, weak = hits[0], next(h for h in hits if h.id == fresh)
    assert (first.id, first.vec_rank, first.fts_rank) == (old, 1, 1)
    assert first.recency < 1e-15 and first.score == 1.0
    assert weak.recency == pytest.approx(1.0, abs=1e-3)
    assert weak.vec_rank > 10 and weak.fts_rank == 12
    assert weak.score < first.score
    # the same recency as a multiplier would have buried the old memory
    assert first.rrf * first.recency < weak.rrf * weak.recency


async def test_recency_breaks_a_near_tie_in_favour_of_the_fresh_memory(pool):
    """Second in both arms and fresh beats first in both arms and a year old: by design."""
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    old = await store.store(NewMemory("marine biology lab budget review"))
    fresh = await store.store(NewMemory("marine biology lab budget"))
    year_ago = NOW - timedelta(days=365)
    await _set_times(pool, old, created=year_ago, event=year_ago)
    question = "marine biology lab budget review"
    hits = await search_hybrid(pool, question, await _query_vec(embedder, question),
                               embed_model=MODEL, now=NOW)
    assert [(h.id, h.vec_rank, h.fts_rank) for h in hits] == [(fresh, 2, 2), (old, 1, 1)]
    assert hits[0].score == pytest.approx(61 / 62 + 0.1 * hits[0].recency, rel=1e-12)
    assert hits[1].score == pytest.approx(1.0, abs=1e-12)


# --- embed models ----------------------------------------------------------------------------

async def test_rows_of_another_embed_model_are_only_in_the_keyword_arm(pool):
    current = HashEmbedder()
    old_model = HashEmbedder(model_name="old-model-768")
    old_same_words = await MemoryStore(pool, old_model).store(NewMemory("violet telescope"))
    old_keyword = await MemoryStore(pool, old_model).store(NewMemory("the platypus exhibit"))
    fresh = await MemoryStore(pool, current).store_many(
        [NewMemory(t) for t in ["violet flowers", "a telescope", "the platypus swims"]])
    qvec = await _query_vec(current, "violet telescope")

    vector_only = await search_hybrid(pool, "", qvec, embed_model=MODEL, now=NOW)
    assert sorted(h.id for h in vector_only) == sorted(fresh)  # the identical old text is absent
    assert all(h.fts_rank is None and h.vec_rank for h in vector_only)

    hits = await search_hybrid(pool, "violet telescope platypus", qvec, embed_model=MODEL, now=NOW)
    by_id = {h.id: h for h in hits}
    for memory_id in (old_same_words, old_keyword):
        h = by_id[memory_id]
        assert (h.vec_rank, h.similarity, h.embed_model) == (None, None, "old-model-768")
        assert h.fts_rank is not None
    assert all(by_id[i].vec_rank is not None and by_id[i].similarity is not None for i in fresh)


async def test_without_a_query_vector_only_full_text_runs(pool):
    store = MemoryStore(pool, HashEmbedder())
    a = await store.store(NewMemory("narwhal narwhal tusk"))
    b = await store.store(NewMemory("a narwhal"))
    await store.store(NewMemory("unrelated"))
    hits = await search_hybrid(pool, "narwhal", None, embed_model=MODEL, now=NOW, w_recency=0.0)
    assert [(h.id, h.vec_rank, h.fts_rank, h.similarity) for h in hits] == [
        (a, None, 1, None), (b, None, 2, None)]
    assert hits[0].score == 1.0  # rrf_max counts the full-text arm only


# --- what the downstream stages get ------------------------------------------------------------

async def test_hits_carry_every_field_downstream_needs(pool):
    embedder = HashEmbedder()
    when = datetime(2025, 5, 5, tzinfo=UTC)
    memory_id = await MemoryStore(pool, embedder).store(NewMemory(
        "okapi sighting at the zoo", "episodic", source_tag="external_user", source_confidence=0.8,
        event_time=when, compressed="okapi at zoo", alpha=2.0, beta=3.0, metadata={"place": "zoo"}))
    await pool.execute("UPDATE memories SET access_count = 2, access_timestamps = $2 WHERE id = $1",
                       memory_id, [when, when + timedelta(days=1)])
    qvec = await _query_vec(embedder, "okapi")
    [h] = await search_hybrid(pool, "okapi", qvec, embed_model=MODEL, now=NOW)
    assert (h.id, h.content, h.compressed, h.memory_type, h.alpha, h.beta, h.immutable,
            h.source_tag, h.source_confidence, h.access_count, h.event_time, h.metadata,
            h.embed_model) == (memory_id, "okapi sighting at the zoo", "okapi at zoo", "episodic",
                               2.0, 3.0, False, "external_user", 0.8, 2, when, {"place": "zoo"}, MODEL)
    assert h.access_timestamps == [when, when + timedelta(days=1)]
    assert h.created_at is not None and h.last_accessed is None
    assert h.embedding.dtype == np.float32 and h.embedding.shape == (768,)
    stored = await pool.fetchval("SELECT embedding FROM memories WHERE id = $1", memory_id)
    np.testing.assert_array_equal(h.embedding, stored.to_numpy().astype(np.float32))
    assert h.similarity == pytest.approx(float(h.embedding @ qvec / np.linalg.norm(h.embedding)),
                                         abs=1e-3)


# --- hostile questions -------------------------------------------------------------------------

HOSTILE = [
    "zan\x00zibar",
    b"zanzibar \xff\xfe",
    "it's \"quoted\" \\ back\\\\slash: a:b & c | !d (e) <-> f:* 'zanzibar' zanzibar:*A",
    "zanzibar'); DROP TABLE memories; --",
    "zanzibar \u202eRTL \u200b e\u0301 \ufdfd 😀 \ud800",
]


@pytest.mark.parametrize("question", HOSTILE)
async def test_hostile_questions_run_and_still_find_the_keyword(pool, question):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    target = await store.store(NewMemory(TARGET))
    await store.store_many([NewMemory(t) for t in DISTRACTORS[:5]])
    hits = await search_hybrid(pool, question, None, embed_model=MODEL, now=NOW)
    assert (hits[0].id, hits[0].fts_rank) == (target, 1)
    assert all(h.fts_rank is not None and h.vec_rank is None for h in hits)
    assert await pool.fetchval("SELECT count(*) FROM memories") == 6


async def test_odd_unicode_memories_are_found_by_their_own_words(pool):
    store = MemoryStore(pool, HashEmbedder())
    target = await store.store(NewMemory("日本語のメモ Ünïcödé ﬁle"))
    await store.store(NewMemory("plain ascii text"))
    hits = await search_hybrid(pool, "Ünïcödé 😀", None, embed_model=MODEL, now=NOW)
    assert [h.id for h in hits] == [target]
    hits = await search_hybrid(pool, "日本語のメモ", None, embed_model=MODEL, now=NOW)
    assert [h.id for h in hits] == [target]


async def test_stop_word_and_empty_questions_give_no_error_and_no_notice(pool):
    embedder = HashEmbedder()
    ids = await MemoryStore(pool, embedder).store_many(
        [NewMemory(t) for t in ["the and of", "an owl", "a heron"]])
    qvec = await _query_vec(embedder, "owl")
    notices = []

    def listener(_conn, message):
        notices.append(message)

    async with pool.acquire() as conn:
        conn.add_log_listener(listener)
        assert await search_hybrid(conn, "the and of was", None, embed_model=MODEL, now=NOW) == []
        assert await search_hybrid(conn, "", None, embed_model=MODEL) == []
        assert await search_hybrid(conn, "   ", None, embed_model=MODEL) == []
        hits = await search_hybrid(conn, "the and of was", qvec, embed_model=MODEL, now=NOW)
        assert sorted(h.id for h in hits) == sorted(ids)
        assert all(h.fts_rank is None for h in hits)
        assert hits[0].content == "an owl"
        hits = await search_hybrid(conn, "", qvec, embed_model=MODEL, now=NOW)
        assert hits[0].content == "an owl" and hits[0].score == pytest.approx(
            1.0 + 0.1 * hits[0].recency, rel=1e-12)
        conn.remove_log_listener(listener)
    assert notices == []


async def test_megabyte_question_runs(pool):
    store = MemoryStore(pool, HashEmbedder())
    target = await store.store(NewMemory("zanzibar ferry"))
    question = ("zanzibar " + " ".join(f"w{i}" for i in range(200_000)))[:1_000_000]
    hits = await search_hybrid(pool, question, None, embed_model=MODEL, now=NOW)
    assert [h.id for h in hits] == [target]


async def test_the_question_tsquery_is_exactly_the_questions_lexemes(pool):
    """Fuzz: whatever the question, the tsquery ORs exactly to_tsvector's lexemes."""
    rng = random.Random(20260115)
    alphabet = list("abcxyz019 '\"\\:&|!()<>*-_./@#%$,;?=+~`^[]{}") + ["é", "ß", "日", "😀", "\u200b"]
    words = ["it's", "o'brien", "c:\\temp\\x", "http://x.org/a'b?c=d", "a:b:c", "x*y", "'''", "\\\\"]
    questions = words + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
                         for _ in range(300)]
    sql = f"SELECT tsvector_to_array(to_tsvector('english', $1)) AS lexemes, {QUESTION_TSQUERY} AS q"
    async with pool.acquire() as conn:
        for question in questions:
            row = await conn.fetchrow(sql, question)
            lexemes, query = row["lexemes"], row["q"]
            if not lexemes:
                assert query is None, question
                continue
            assert await conn.fetchval("SELECT numnode($1::tsquery)", query) == 2 * len(lexemes) - 1
            matched = await conn.fetchval(
                "SELECT array_agg(l) FROM unnest($1::text[]) l WHERE array_to_tsvector(ARRAY[l]) @@ $2::tsquery",
                lexemes, query)
            assert sorted(matched) == sorted(lexemes), question


# --- the plan uses the indexes --------------------------------------------------------------

async def test_explain_uses_the_hnsw_and_gin_indexes(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many(
        [NewMemory(f"note {i} about {DISTRACTORS[i % len(DISTRACTORS)]}") for i in range(300)])
    await pool.execute("ANALYZE memories")
    args = hybrid_arguments("when the garden was full", await _query_vec(embedder, "garden"),
                            embed_model=MODEL)
    async with pool.acquire() as conn:
        # a fresh statement with custom plans: a cached generic plan could ignore the SETs
        await conn.execute("SET enable_seqscan = off")
        await conn.execute("SET plan_cache_mode = force_custom_plan")
        try:
            plan = json.loads(await conn.fetchval("EXPLAIN (FORMAT JSON) " + HYBRID_SQL, *args))
        finally:
            await conn.execute("RESET enable_seqscan")
            await conn.execute("RESET plan_cache_mode")
    text = json.dumps(plan)
    assert '"Index Name": "idx_memories_embedding"' in text
    assert '"Index Name": "idx_memories_fts"' in text


async def test_the_vector_arm_compares_the_newest_memories_exactly(pool):
    """The HNSW index can miss a row stored after it was built (a fact just typed): the
    newest NEWEST_EXACT rows are compared exactly beside it. Here the index is held to one
    candidate (ef_search 1, no iterative scan): the arm still ranks the exact five nearest."""
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many(
        [NewMemory(f"note {i} about {DISTRACTORS[i % len(DISTRACTORS)]}") for i in range(60)])
    await pool.execute("ANALYZE memories")
    vec = await _query_vec(embedder, "garden")
    args = hybrid_arguments("garden", vec, embed_model=MODEL, candidates=5, limit=60, w_fulltext=0.0)
    async with pool.acquire() as conn:
        for setting in ("enable_seqscan = off", "plan_cache_mode = force_custom_plan",
                        "hnsw.ef_search = 1", "hnsw.iterative_scan = off"):
            await conn.execute(f"SET {setting}")
        try:
            index_only = await conn.fetch(
                "SELECT id FROM memories WHERE embed_model = $2 ORDER BY embedding <=> $1::halfvec LIMIT 5",
                args[1], MODEL)
            rows = await conn.fetch(HYBRID_SQL, *args)
        finally:
            await conn.execute("RESET ALL")
    exact = [r["id"] for r in await pool.fetch(
        "SELECT id FROM memories ORDER BY embedding <=> $1::halfvec, id LIMIT 5", args[1])]
    assert len(index_only) == 1                          # the index alone: one candidate
    ranked = sorted((r for r in rows if r["vec_rank"] is not None), key=lambda r: r["vec_rank"])
    assert [r["id"] for r in ranked] == exact


async def test_the_novelty_lookup_compares_the_newest_memories_exactly(pool):
    """The exit gate's neighbours: as in the vector arm, a memory the index cannot reach is
    still met when it is among the newest (a fact said again one flush later)."""
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many(
        [NewMemory(f"note {i} about {DISTRACTORS[i % len(DISTRACTORS)]}") for i in range(60)])
    await pool.execute("ANALYZE memories")
    vec = await _query_vec(embedder, "garden")
    async with pool.acquire() as conn:
        for setting in ("enable_seqscan = off", "hnsw.ef_search = 1", "hnsw.iterative_scan = off"):
            await conn.execute(f"SET {setting}")
        try:
            near = await check_novelty(conn, vec, MODEL, k=5)
        finally:
            await conn.execute("RESET ALL")
    exact = [r["id"] for r in await pool.fetch(
        "SELECT id FROM memories ORDER BY embedding <=> $1::halfvec, id LIMIT 5", query_vector(vec))]
    assert [m.id for m in near] == exact


# --- arguments ------------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "message"), [
    ({"query_vec": np.ones(256)}, "query vector must be 768 finite floats, not all zero; got shape (256,)"),
    ({"query_vec": np.zeros(768)}, "query vector must be 768 finite floats, not all zero; got shape (768,)"),
    ({"w_vector": -1.0}, "w_vector must be a finite number >= 0, got -1.0"),
    ({"k": float("inf")}, "k must be a finite number >= 0, got inf"),
    ({"limit": 0}, "limit and candidates must be >= 1, got 0 and 50"),
    ({"query_vec": None, "w_fulltext": 0.0},
     "no active search arm has a positive weight (w_vector=1.0, w_fulltext=0.0, query vector absent)"),
])
async def test_bad_arguments_are_refused_before_any_sql(pool, kwargs, message):
    kwargs = {"query_vec": np.ones(768), **kwargs}
    with pytest.raises(ValueError) as info:
        await search_hybrid(pool, "anything", embed_model=MODEL, **kwargs)
    assert str(info.value) == message


# --- novelty -------------------------------------------------------------------------------------

async def test_check_novelty_returns_the_nearest_memories_of_the_same_model(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    texts = ["red kite over the hill", "red kite", "blue whale song", "green tea", "kite string"]
    ids = await store.store_many([NewMemory(t) for t in texts])
    await MemoryStore(pool, HashEmbedder(model_name="old-model-768")).store(
        NewMemory("red kite over the hill"))
    [vec] = await embedder.embed(["Personal experience memory: red kite over the hill"],
                                 "RETRIEVAL_DOCUMENT", ["episodic"])
    near = await check_novelty(pool, vec, MODEL, k=3)
    assert [m.id for m in near][0] == ids[0]
    assert near[0].similarity == pytest.approx(1.0, abs=1e-3)
    assert near[0].content == "red kite over the hill"
    assert len(near) == 3
    assert near[0].similarity >= near[1].similarity >= near[2].similarity
    assert set(m.id for m in near) <= set(ids)  # the old model's identical text is never compared
    assert await check_novelty(pool, vec, "no-such-model") == []


# --- the own arm: the user's statements, for a question about the user (issue 35) -----------

async def test_the_own_arm_ranks_the_users_statements_apart_from_other_speakers(pool):
    """Other people's imported lines and the mind's own crowd the vector arm's candidates;
    the own arm ranks the user's statements among themselves (speaker_of's rule: a
    `metadata.speaker` string names the speaker, "user" in any case is the user, else the
    source tag), and its rank enters the fusion at `w_own`, and rrf_max with it."""
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    await store.store_many([NewMemory(f"garden bees garden bees note {i}", metadata={"speaker": "Sam"})
                            for i in range(12)])
    said = await store.store(NewMemory("garden bees garden bees I told you", source_tag="internal_self"))
    fact = await store.store(NewMemory("my garden has bees and a pond"))
    labelled = await store.store(NewMemory("the bees swarmed over the garden wall",
                                           metadata={"speaker": " User "}))
    unrelated = await store.store(NewMemory("I like strong tea in the morning"))
    question = "garden bees"
    qvec = await _query_vec(embedder, question)
    tuning = {"embed_model": MODEL, "now": NOW, "limit": 5, "candidates": 5, "k": 60, "w_fulltext": 0.0,
              "w_recency": 0.0}

    off = await search_hybrid(pool, question, qvec, **tuning)
    assert fact not in [h.id for h in off] and all(h.own_rank is None for h in off)

    hits = await search_hybrid(pool, question, qvec, w_own=1.0, **tuning | {"limit": 30})
    own = sorted((h for h in hits if h.own_rank is not None), key=lambda h: h.own_rank)
    assert {h.id for h in own} == {fact, labelled, unrelated}       # not Sam's lines, not the mind's
    assert said not in {h.id for h in own}
    by_id = {h.id: h for h in hits}
    for h in own:
        expected = 1.0 / (60 + h.own_rank) + (1.0 / (60 + h.vec_rank) if h.vec_rank else 0.0)
        assert h.rrf == pytest.approx(expected, rel=1e-12)
        assert h.score == pytest.approx(h.rrf / (2.0 / 61), rel=1e-12)   # rrf_max: both arms that ran
    assert by_id[unrelated].own_rank == 3
    top5 = await search_hybrid(pool, question, qvec, w_own=1.0, **tuning)
    assert fact in [h.id for h in top5]


async def test_the_own_arm_reads_the_partial_index_of_the_users_lines(pool):
    """sql/151's predicate and the search's are the same: the planner can use the index."""
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory(f"line {i}") for i in range(30)])
    args = hybrid_arguments("what do I grow", await _query_vec(embedder, "what do I grow"),
                            embed_model=MODEL, w_own=1.0)
    async with pool.acquire() as conn:
        await conn.execute("SET enable_seqscan = off")
        try:
            plan = "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN {HYBRID_SQL}", *args))
        finally:
            await conn.execute("RESET ALL")
    assert "idx_memories_user_stated" in plan
