"""What is current (issue 37 item 3, src/recall/current.py): the newer of two statements about
the same subject ranks first; the older stays findable, first for a question that looks back,
and the model's context marks it as earlier."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import numpy as np

from src.context.situational import situational_candidates
from src.context.tracks import render_line
from src.db.deferred import run_now
from src.gates.memory_gate import Gates
from src.recall.retrieval import Cue, Retriever
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, gate_settings

NOW = datetime(2026, 11, 28, 16, 0, tzinfo=UTC)
CHANGES = [
    ("My sister Maren lives in Porto.", "Update: my sister Maren moved to Lisbon last month.",
     "Where does my sister Maren live?", "Where did my sister Maren live before?"),
    ("My dentist appointment is on Tuesday at 10am.", "The dentist moved my appointment to Thursday at 3pm.",
     "When is my dentist appointment?", "When was my dentist appointment before?"),
    ("I work as a nurse at the city hospital.", "I quit nursing, I now work as a software tester at Finch Labs.",
     "Do I work as a nurse?", "Did I work as a nurse before?"),
]


async def _store_of_others(pool, n: int = 1500) -> None:
    """Other people's chat, dated months back: the store is past maturity."""
    texts = [f"Kim said the {w} at the market was {a} on day {i}"
             for i, (w, a) in enumerate(zip(["bread", "fish", "cheese", "wine", "fruit"] * (n // 5),
                                            ["cheap", "fresh", "late", "sold out", "good"] * (n // 5), strict=True))]
    ids = await MemoryStore(pool, HashEmbedder()).store_many(
        [NewMemory(t, "episodic", source_tag="import", metadata={"speaker": "Kim"}) for t in texts])
    await pool.execute("UPDATE memories SET created_at = $2, event_time = $2 WHERE id = ANY($1::bigint[])",
                       ids, NOW - timedelta(days=400))


async def _say(pool, text: str, at: datetime) -> None:
    """The user says `text` at `at`, through the entry and exit gates as the loop does."""
    gates = Gates.build(pool, HashEmbedder(), ScriptedMetaLLM(configured=False), gate_settings(noise_floor=0.0),
                        Safety(), rng=random.Random(5))
    await gates.admit(text, exchange=False)
    await gates.exit.flush(reason="test")
    await pool.execute("UPDATE memories SET created_at = $2, event_time = $2 WHERE content = $1", text, at)


async def _ranked(pool, question: str) -> list[str]:
    retriever = Retriever(pool, HashEmbedder(), None, Safety())      # a new process: nothing cached
    found = await retriever.retrieve(Cue(question), rng=np.random.default_rng(1), now=NOW, mutate=False)
    return [m.hit.content for m in found.memories]


async def test_three_changes_in_a_store_of_1500_rank_the_newer_first_and_the_older_for_before(pool):
    await _store_of_others(pool)
    for older, *_ in CHANGES:
        await _say(pool, older, NOW - timedelta(days=60))
    for _, newer, *_ in CHANGES:
        await _say(pool, newer, NOW - timedelta(days=2))
    assert await pool.fetchval("SELECT count(*) FROM memory_supersedes WHERE via = 'update'") == 3
    for older, newer, now_q, before_q in CHANGES:
        ranked = await _ranked(pool, now_q)
        assert newer in ranked and older in ranked, (now_q, ranked)
        assert ranked.index(newer) < ranked.index(older), (now_q, ranked)
        back = await _ranked(pool, before_q)
        assert older in back and (newer not in back or back.index(older) < back.index(newer)), (before_q, back)


async def test_a_superseded_memory_brings_its_successor_the_search_missed(pool):
    store = MemoryStore(pool, HashEmbedder())
    older = await store.store(NewMemory("My locker code is 7419.", "episodic", source_tag="external_user"))
    newer = await store.store(NewMemory("Changed it: the gym gave me new digits, 5523.", "episodic",
                                        source_tag="external_user"))
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id, via) VALUES ($1, $2, 'update')",
                       newer, older)
    ranked = await _ranked(pool, "What is my locker code?")
    assert ranked[:2] == ["Changed it: the gym gave me new digits, 5523.", "My locker code is 7419."]


async def test_the_context_marks_the_older_as_earlier(pool):
    store = MemoryStore(pool, HashEmbedder())
    older = await store.store(NewMemory("My sister Maren lives in Porto.", "episodic", source_tag="external_user"))
    newer = await store.store(NewMemory("Update: my sister Maren moved to Lisbon.", "episodic",
                                        source_tag="external_user"))
    await pool.execute("UPDATE memories SET created_at = $2 WHERE id = $1", newer, NOW - timedelta(days=1))
    await pool.execute("UPDATE memories SET created_at = $2 WHERE id = $1", older, NOW - timedelta(days=90))
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id, via) VALUES ($1, $2, 'update')",
                       newer, older)
    retriever = Retriever(pool, HashEmbedder(), None, Safety())
    found = await retriever.retrieve(Cue("Where does my sister Maren live?"), rng=np.random.default_rng(1),
                                     now=NOW, mutate=False)
    lines = {c.content: render_line(c.memory_type, c.content, c.speaker, c.when, c.until)
             for c in situational_candidates(found, now=NOW)}
    assert lines["My sister Maren lives in Porto."].startswith(
        "- [episodic] until 27 Nov 2026: The user said: My sister Maren lives in Porto.")
    assert "until" not in lines["Update: my sister Maren moved to Lisbon."]


# --- the two rules on scored candidates (no database) ---------------------------------------

def _recalled(i: int, weighted: float, vec, days_ago: int, *, tag: str = "external_user",
              superseded_by: int | None = None):
    from src.recall.activation import ActivationResult
    from src.recall.hit import SearchHit
    from src.recall.scoring import Recalled
    v = np.asarray(vec, dtype=np.float32)
    hit = SearchHit(id=i, content=f"m{i}", compressed=None, memory_type="episodic", alpha=1.0, beta=1.0,
                    immutable=False, source_tag=tag, source_confidence=1.0, access_count=0, last_accessed=None,
                    access_timestamps=[], event_time=None, created_at=NOW - timedelta(days=days_ago), metadata={},
                    embedding=v / np.linalg.norm(v), embed_model="m", similarity=0.5, vec_rank=None,
                    fts_rank=None, fts_score=None, rrf=0.0, recency=0.0, score=0.0, superseded_by=superseded_by)
    return Recalled(hit, ActivationResult(0.0, 0.0, 0.0, 0.0, 0.5), (0.0,) * 4, weighted, weighted, 0.0)


def _order(scored) -> list[int]:
    return [r.id for r in sorted(scored, key=lambda r: (-r.weighted, r.id))]


def test_a_linked_successor_ranks_just_above_and_a_look_back_turns_it_round():
    from src.recall.current import current_first, newer_first
    old, new, other = _recalled(1, 0.9, [1, 0, 0], 90, superseded_by=2), _recalled(2, 0.4, [0, 1, 0], 1), \
        _recalled(3, 0.6, [0, 0, 1], 5)
    assert _order(current_first([old, new, other], looking_back=False, same_subject=0.6, close=0.7)) == [2, 1, 3]
    old2, new2 = _recalled(1, 0.3, [1, 0, 0], 90, superseded_by=2), _recalled(2, 0.9, [0, 1, 0], 1)
    assert _order(current_first([old2, new2, other], looking_back=True, same_subject=0.6, close=0.7)) == [1, 2, 3]
    # after a rerank put them the wrong way round, the final order mends it
    assert [r.id for r in newer_first([old, other, new], looking_back=False)] == [2, 1, 3]


def test_the_newer_of_two_close_user_statements_ranks_first_only_when_it_answers_nearly_as_well():
    from src.recall.current import current_first
    older, newer = _recalled(1, 0.80, [1, 0.1, 0], 90), _recalled(2, 0.70, [1, 0.2, 0], 2)
    assert _order(current_first([older, newer], looking_back=False, same_subject=0.6, close=0.7)) == [2, 1]
    # a distinct fact about the same subject answers much less well: it keeps its place
    weaker = _recalled(2, 0.40, [1, 0.2, 0], 2)
    assert _order(current_first([older, weaker], looking_back=False, same_subject=0.6, close=0.7)) == [1, 2]
    # other speakers' lines are no restatement of the user's
    theirs = _recalled(2, 0.70, [1, 0.2, 0], 2, tag="import")
    assert _order(current_first([older, theirs], looking_back=False, same_subject=0.6, close=0.7)) == [1, 2]
    # about other subjects: nothing moves
    far = _recalled(2, 0.70, [0, 0, 1], 2)
    assert _order(current_first([older, far], looking_back=False, same_subject=0.6, close=0.7)) == [1, 2]
    # a look back leaves the older first
    assert _order(current_first([older, newer], looking_back=True, same_subject=0.6, close=0.7)) == [1, 2]


async def test_recall_strengthens_the_current_statement_not_the_superseded_one(pool):
    store = MemoryStore(pool, HashEmbedder())
    older = await store.store(NewMemory("My sister Maren lives in Porto.", "episodic", source_tag="external_user"))
    newer = await store.store(NewMemory("Update: my sister Maren moved to Lisbon.", "episodic",
                                        source_tag="external_user"))
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id, via) VALUES ($1, $2, 'update')",
                       newer, older)
    before = {r["id"]: r["a"] for r in await pool.fetch("SELECT id, depth_weight_alpha a FROM memories")}
    retriever = Retriever(pool, HashEmbedder(), None, Safety())
    for question in ("Where does my sister Maren live?", "Where did my sister Maren live before?"):
        found = await retriever.retrieve(Cue(question), rng=np.random.default_rng(1), now=NOW)
        assert {older, newer} <= set(found.ids)
        await run_now(found.writes)
        after = {r["id"]: r["a"] for r in await pool.fetch("SELECT id, depth_weight_alpha a FROM memories")}
        assert after[newer] > before[newer]
        # only a question that looks back strengthens the earlier statement
        assert (after[older] > before[older]) is question.endswith("before?")
        before = after
