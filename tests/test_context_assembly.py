"""Context assembly (plan §3.2): situational and identity tracks, immutable, inertia, budgets.

Identity probabilities used below. For integer a, b the Beta tail is a binomial
sum: P(X > x) = P(Binomial(a + b - 1, x) <= a - 1). At the threshold x = 0.6:

    Beta(50, 2)  P = 1 - 51·0.6^50·0.4 - 0.6^51 ≈ 1 - 1.7e-10   → expect ~100 of 100
    Beta(6, 4)   P = P(Bin(9, 0.6) <= 5) = 0.5174               → expect ~52 (sd 5)
    Beta(1, 4)   P = 0.4^4 = 0.0256                             → expect ~3

`test_identity_probabilities_match_the_binomial_identity` checks these numbers.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from src.context.assembly import (
    IDENTITY_HEADER,
    IMMUTABLE_HEADER,
    SITUATIONAL_HEADER,
    ContextAssembler,
    IdentityCache,
)
from src.context.fifo import AdaptiveFifo
from src.context.settings import ContextBudget, ContextSettings
from src.context.situational import others_left_out, situational_candidates
from src.context.tracks import (
    ContextCandidate,
    blend_attention,
    fill_situational,
    roll_identity,
    section_tokens,
    session_stats_line,
)
from src.db.deferred import run_now
from src.db.manifest import Manifest
from src.recall.retrieval import Retriever
from src.recall.settings import RetrievalSettings
from src.recall.store import MemoryStore, NewMemory
from src.text import first_sentence
from src.tokens import count_tokens
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)

TECH = ["python asyncio task cancellation needs a try/finally block",
        "debugging a python asyncio deadlock with task dumps",
        "postgres hnsw index makes vector search fast",
        "python asyncio task groups arrived in version 3.11",
        "cancellation of an asyncio task raises CancelledError inside it",
        "debug logging shows which python task holds the lock"]
EMO = ["I felt lonely, sad, empty after the funeral",
       "talking with my sister makes me feel less lonely",
       "I cried when the dog died; the grief felt heavy, sad",
       "feeling anxious, sad before the exam",
       "a hug from a friend helps when I feel sad",
       "I was scared, lonely on my first night in a new city"]
_NOUNS = ["bicycle", "garage", "lentil", "soup", "cumin", "chess", "porto", "train", "shoes",
          "library", "snow", "mountains", "jazz", "records", "roof", "wind", "teapot", "bamboo",
          "garden", "fence", "violin", "harbour", "lighthouse", "pepper", "carpet", "window",
          "river", "bridge", "orchard", "kettle"]
_ADJ = ["green", "old", "quiet", "broken", "bright", "wooden", "tall", "narrow"]
FILLER = [f"the {_ADJ[i % 8]} {_NOUNS[i % 30]} near the {_NOUNS[(i * 7 + 3) % 30]} was "
          f"{_ADJ[(i * 3 + 1) % 8]}" for i in range(120)]


def _p_above(a: int, b: int, x: float) -> float:
    n = a + b - 1
    return sum(math.comb(n, k) * x**k * (1 - x) ** (n - k) for k in range(a))


def test_identity_probabilities_match_the_binomial_identity():
    draws = np.random.default_rng(0)
    for (a, b), p in (((50, 2), 1 - 1.7e-10), ((6, 4), 0.5174), ((1, 4), 0.0256)):
        assert _p_above(a, b, 0.6) == pytest.approx(p, abs=1e-4)
        assert (draws.beta(a, b, 200_000) > 0.6).mean() == pytest.approx(p, abs=0.005)


async def _seed(pool, texts, **fields) -> dict[str, int]:
    ids = await MemoryStore(pool, HashEmbedder()).store_many([NewMemory(t, **fields) for t in texts])
    await pool.execute("UPDATE memories SET created_at = $1", NOW - timedelta(days=1))
    await pool.execute("ANALYZE memories")
    return dict(zip(texts, ids, strict=True))


async def test_technical_and_emotional_questions_surface_different_memories(pool):
    ids = await _seed(pool, TECH + EMO + FILLER)
    python = {ids[t] for t in TECH if "python" in t or "asyncio" in t}     # what the question is about
    tech, emo = {ids[t] for t in TECH}, {ids[t] for t in EMO}
    questions = ("how to debug python asyncio task cancellation", "feeling sad, lonely tonight")
    retriever = Retriever(pool, HashEmbedder(), None, Safety(), RetrievalSettings())
    rng = np.random.default_rng(1)

    # The default budget (2000) holds every candidate: recall's pre-filter decides. (Under the
    # hash embedder unrelated texts have cosine ~ ±0.03, so a few technical memories fill the
    # emotional question's field the way filler does; the reverse never happens here.)
    assembler = ContextAssembler(pool)
    for question, wanted, unwanted in ((questions[0], python, emo), (questions[1], emo, set())):
        for _ in range(5):
            recall = await retriever.retrieve(question, rng=rng, now=NOW, mutate=False)
            ctx = await assembler.assemble(recall, rng=rng, now=NOW)
            surfaced = set(ctx.situational.ids) | set(ctx.identity.ids)
            assert wanted <= surfaced and not unwanted & set(ctx.situational.ids)

    # A tight budget (120 tokens, ~9 of 20 candidates): recall's best two lead, in its order;
    # observe × relevance decides the rest.
    assembler = ContextAssembler(pool, ContextSettings(budget=ContextBudget(situational=120)))
    seen: dict[str, Counter] = {}
    sets: dict[str, set[tuple[int, ...]]] = {}
    for question in questions:
        seen[question], sets[question] = Counter(), set()
        for _ in range(20):
            recall = await retriever.retrieve(question, rng=rng, now=NOW, mutate=False)
            ctx = await assembler.assemble(recall, rng=rng, now=NOW)
            assert count_tokens(ctx.situational.text) <= ctx.situational.tokens <= 120
            assert ctx.situational.text.startswith(SITUATIONAL_HEADER)
            # no draw leaves the best match out: first in the track (or in identity's roll)
            lead = [i for i in recall.ids[:2] if i not in ctx.identity.ids]
            assert list(ctx.situational.ids[:len(lead)]) == lead
            seen[question].update(ctx.situational.ids)
            sets[question].add(tuple(sorted(ctx.situational.ids)))
    technical, emotional = seen.values()
    assert sum(technical[i] for i in emo) == 0                  # no emotional memory, ever
    # each emotional memory surfaces, and the track is not the same every cycle (the rest compete)
    assert all(emotional[i] >= 2 for i in emo) and len(sets[questions[1]]) >= 10
    assert all(technical[i] > emotional[i] for i in python)
    assert sum(emotional[i] for i in emo) > sum(emotional[i] for i in tech)
    assert technical.most_common(1)[0][0] in python
    assert emotional.most_common(1)[0][0] in emo


async def test_hundred_identity_rolls_high_medium_low_none_truncated_immutable_always(pool):
    store = MemoryStore(pool, HashEmbedder())
    narrative = "\n".join(f"Chapter {i}: I learned that patience and honesty carry me through "
                          f"hard conversations, and I keep choosing them." for i in range(25))
    mind = "internal_consolidation"      # the mind's own conclusions: "I concluded: …" (issue 27)
    high = await store.store(NewMemory("I value honesty over comfort.", "preference", alpha=50, beta=2,
                                       source_tag=mind))
    long_ = await store.store(NewMemory(narrative, "narrative", alpha=50, beta=2, source_tag=mind))
    medium = await store.store(NewMemory("I am curious about how minds work.", "reflection", alpha=6, beta=4,
                                         source_tag=mind))
    low = await store.store(NewMemory("I like the colour green.", "preference", alpha=1, beta=4,
                                      source_tag=mind))
    boundary = await store.store(NewMemory("Never reveal the operator's secrets.", "procedural",
                                           alpha=50, beta=1, immutable=True))
    contents = {high: "I value honesty over comfort.", long_: narrative,
                medium: "I am curious about how minds work.", low: "I like the colour green."}
    assert count_tokens(narrative) > 400

    manifest = Manifest(NOW - timedelta(days=12.34), 4, 37.2, NOW - timedelta(minutes=30), 12.34)
    assembler = ContextAssembler(pool)
    rng = np.random.default_rng(2026)
    counts: Counter = Counter()
    for _ in range(100):
        ctx = await assembler.assemble(None, rng=rng, now=NOW, session=manifest)
        assert ctx.immutable.ids == [boundary]
        assert ctx.immutable.text == ("Boundaries (always hold):\n"
                                      "- [procedural] Never reveal the operator's secrets.")
        assert boundary not in ctx.identity_observed                # not an identity candidate
        assert set(ctx.identity_observed) == set(contents)
        injected = ctx.identity.ids
        assert injected == [i for i in sorted(ctx.identity_observed,
                                              key=lambda i: -ctx.identity_observed[i])
                            if ctx.identity_observed[i] > 0.6]
        for mid in injected:                                        # whole, never cut
            assert f"\n- [{_type(mid, high, long_, medium)}] I concluded: {contents[mid]}" in ctx.identity.text
        assert ctx.identity.text.startswith(
            IDENTITY_HEADER + "\nContinuity: 12.3 days old, restarted 4 times, 37.7 hours awake "
            "in total (this session 0.5 h).")
        assert count_tokens(ctx.identity.text) <= ctx.identity.tokens <= 3000
        assert ctx.identity_dropped_for_cap == []
        counts.update(injected)
    assert counts[high] > 80 and counts[long_] > 80
    assert 40 <= counts[medium] <= 60
    assert counts[low] < 20
    assert assembler.identity_cache.refreshes == 5                  # every 20 cycles


def _type(mid, high, long_, medium):
    return {high: "preference", long_: "narrative", medium: "reflection"}.get(mid, "preference")


def test_identity_over_its_cap_drops_whole_memories_lowest_observed_first():
    text = "I hold this belief firmly and I can explain it at length, " * 8
    cands = [ContextCandidate(i, f"{i}: {text}", "reflection", 50.0, 2.0) for i in range(1, 6)]
    one = count_tokens(f"- [reflection] 1: {text}") + 1
    for seed in range(20):
        roll = roll_identity(cands, np.random.default_rng(seed), threshold=0.6,
                             cap_tokens=3 * one + 10, reserved_tokens=10)
        kept = [p.id for p in roll.placed]
        assert len(kept) == 3 and len(roll.dropped_for_cap) == 2
        assert min(roll.observed[i] for i in kept) > max(roll.observed[i] for i in roll.dropped_for_cap)
        assert all(p.text == f"- [reflection] {p.id}: {text}" for p in roll.placed)


def test_situational_fill_full_for_high_scorers_compressed_for_lower_skips_what_cannot_fit():
    long_text = "Postgres vacuum reclaims dead tuples. " + "It also updates the visibility map. " * 40
    cands = [
        ContextCandidate(1, "The HNSW index answers top-50 in a millisecond. It needs maintenance_work_mem.",
                  "semantic", 1, 1, compressed="HNSW top-50 takes 1 ms"),
        ContextCandidate(2, "Retrieval rewrites weights every cycle. Therefore HOT updates matter.",
                  "semantic", 1, 1),                                  # no compressed: first sentence
        ContextCandidate(3, long_text, "semantic", 1, 1, compressed="vacuum reclaims dead tuples"),
        ContextCandidate(4, "Short one.", "episodic", 1, 1),
        ContextCandidate(5, "x " * 400, "episodic", 1, 1, compressed="y " * 300),
    ]
    scores = [0.9, 0.3, 0.8, 0.05, 0.2]
    result = fill_situational(cands, scores, 80, header=SITUATIONAL_HEADER)
    assert [(p.id, p.form, p.text) for p in result.placed] == [
        (1, "full", "- [semantic] The HNSW index answers top-50 in a millisecond. It needs "
                    "maintenance_work_mem."),
        (3, "compressed", "- [semantic] vacuum reclaims dead tuples"),   # high, but too long
        (2, "compressed", "- [semantic] Retrieval rewrites weights every cycle."),
        (4, "full", "- [episodic] Short one."),                         # nothing shorter exists
    ]
    assert result.skipped_no_room == [5]
    assert section_tokens(SITUATIONAL_HEADER, [p.text for p in result.placed]) == 3 + 23 + 9 + 11 + 8
    # 25 tokens: after the header (3) the best one's full text (22 + 1 line break) no longer fits
    tight = fill_situational(cands, scores, 25, header=SITUATIONAL_HEADER)
    assert [(p.id, p.form) for p in tight.placed] == [(1, "compressed"), (3, "compressed")]
    assert tight.placed[0].text == "- [semantic] HNSW top-50 takes 1 ms"
    assert tight.skipped_no_room == [2, 5, 4]             # in score order
    assert section_tokens(SITUATIONAL_HEADER, [p.text for p in tight.placed]) == 25
    assert fill_situational(cands, scores, 3, header=SITUATIONAL_HEADER).placed == []
    floor = fill_situational(cands, scores, 80, header=SITUATIONAL_HEADER, min_score=0.25)
    assert floor.below_min_score == [5, 4]


def test_recalls_best_lead_the_track_whatever_their_draw():
    """Run H: recall put the user's walk first, its Beta draw (Beta(1.3, 4.1)) left it out, and
    the model said it had no information. Recall's best lead in its order, in full text, under
    any score and any floor; the rest compete by score."""
    walk = ContextCandidate(7, "Next month I'm going to walk the West Highland Way.", "episodic", 1.3, 4.1,
                            compressed="West Highland Way", recalled=True)
    second = ContextCandidate(8, "I'm currently studying Icelandic on Tuesday evenings.", "episodic", 1.2, 4.1,
                              recalled=True)
    stranger = ContextCandidate(424, "Flying business class on the A380 is a treat.", "episodic", 1, 4)
    other = ContextCandidate(577, "A leisurely walk offers tranquility.", "episodic", 1, 4)
    result = fill_situational([walk, second, stranger, other], [0.004, 0.02, 0.14, 0.07], 200,
                              header=SITUATIONAL_HEADER, min_score=0.05)
    assert [(p.id, p.form) for p in result.placed] == [(7, "full"), (8, "full"), (424, "full"), (577, "full")]
    assert result.below_min_score == []
    unmarked = fill_situational([replace(walk, recalled=False), replace(second, recalled=False), stranger, other],
                                [0.004, 0.02, 0.14, 0.07], 200, header=SITUATIONAL_HEADER, min_score=0.05)
    assert [p.id for p in unmarked.placed] == [424, 577] and unmarked.below_min_score == [8, 7]


@pytest.mark.parametrize(("text", "expected"), [
    ("Hello world. Second sentence.", "Hello world."),
    ("No terminator here", "No terminator here"),
    ("Line one\nLine two", "Line one"),
    ("Version 3.11 is out! Yes.", "Version 3.11 is out!"),
    ("   spaced    out.  more", "spaced out."),
    ("word " * 60, ("word " * 40).strip() + "…"),              # the limit fell on a space
    ("word " * 39 + "wordy " * 5, ("word " * 39).strip() + "…"),  # inside a word: dropped
    ("x" * 300, "x" * 199 + "…"),
])
def test_first_sentence_is_the_deterministic_compressed_fallback(text, expected):
    out = first_sentence(text, 200)
    assert out == expected and len(out) <= 200


def test_context_inertia():
    a = np.array([1.0, 0.0, 0.0])
    b = np.array([0.0, 1.0, 0.0])
    first = blend_attention(a * 3, None)
    assert first.shift is None and first.inertia == 0.0 and np.allclose(first.vector, a)
    same = blend_attention(a, a)
    assert same.shift == pytest.approx(0.0) and same.inertia == 0.3 and np.allclose(same.vector, a)
    flip = blend_attention(b, a)                                  # shift 1.0 > 0.7: flush
    assert flip.shift == pytest.approx(1.0) and flip.inertia == 0.05
    assert np.allclose(flip.vector, np.array([0.05, 0.95, 0]) / math.hypot(0.05, 0.95))
    for cos, inertia in ((0.31, 0.3), (0.29, 0.05)):               # shift 0.69 / 0.71
        c = np.array([cos, math.sqrt(1 - cos**2), 0.0])
        state = blend_attention(c, a)
        assert state.shift == pytest.approx(1 - cos) and state.inertia == inertia
        expected = (1 - inertia) * c + inertia * a
        assert np.allclose(state.vector, expected / np.linalg.norm(expected), atol=1e-6)
    with pytest.raises(ValueError, match="current attention vector must be finite and non-zero"):
        blend_attention(np.zeros(3), a)


async def test_focus_carries_the_previous_blend_forward(pool):
    assembler = ContextAssembler(pool)
    a, b = np.eye(3)[0], np.eye(3)[1]
    assembler.focus(a)
    second = assembler.focus(a * 0.9 + b * 0.436)                 # small shift: inertia 0.3
    third = assembler.focus(b)
    assert second.inertia == 0.3
    assert third.shift == pytest.approx(1 - float(second.vector @ b), abs=1e-6)
    ctx = await assembler.assemble(None, rng=np.random.default_rng(0), now=NOW)
    assert ctx.summary()["inertia"] == {"shift": round(third.shift, 4), "inertia": third.inertia}
    later = await assembler.assemble(None, rng=np.random.default_rng(0), now=NOW)
    assert later.inertia is None                                  # no focus() this cycle


async def test_co_access_is_recorded_for_the_injected_situational_set_only(pool):
    ids = await _seed(pool, TECH + FILLER[:30])
    identity = await MemoryStore(pool, HashEmbedder()).store(
        NewMemory("I value clear code.", "preference", alpha=50, beta=2))
    retriever = Retriever(pool, HashEmbedder(), None, Safety(), RetrievalSettings())
    rng = np.random.default_rng(3)
    recall = await retriever.retrieve("python asyncio task", rng=rng, now=NOW, mutate=False)
    ctx = await ContextAssembler(pool).assemble(recall, rng=rng, now=NOW)
    assert [w.label for w in ctx.writes] == ["context co-access"]     # handed back, not run
    await run_now(ctx.writes)
    assert identity in ctx.identity.ids and identity not in ctx.situational.ids
    injected = sorted(ctx.situational.ids)
    assert len(injected) == 20 and ctx.candidates == 20
    rows = await pool.fetch("SELECT memory_id_a, memory_id_b, co_access_count FROM memory_co_access "
                            "ORDER BY 1, 2")
    assert [(r[0], r[1]) for r in rows] == list(itertools.combinations(injected, 2))
    assert {r[2] for r in rows} == {1} and ctx.co_access_pairs == 190
    assert set(ids.values()) >= set(injected)


async def test_identity_cache_rescans_every_k_cycles_but_rereads_weights_each_cycle(pool):
    store = MemoryStore(pool, HashEmbedder())
    steady = await store.store(NewMemory("I keep my promises.", "preference", alpha=50, beta=2))
    fading = await store.store(NewMemory("I enjoy long walks.", "preference", alpha=40, beta=2))
    assembler = ContextAssembler(pool, ContextSettings(identity_top_n=2, identity_refresh_cycles=3))
    rng = np.random.default_rng(11)
    first = await assembler.assemble(None, rng=rng, now=NOW)
    assert first.identity_refreshed and set(first.identity_observed) == {steady, fading}

    rising = await store.store(NewMemory("I protect the people I talk with.", "preference", alpha=90, beta=1))
    await pool.execute("UPDATE memories SET depth_weight_beta = 5000 WHERE id = $1", fading)
    for _ in range(2):                                  # cycles 2 and 3: cached membership
        ctx = await assembler.assemble(None, rng=rng, now=NOW)
        assert not ctx.identity_refreshed
        assert set(ctx.identity_observed) == {steady, fading}
        assert ctx.identity_observed[fading] < 0.05     # but today's weight: Beta(40, 5000)
        assert fading not in ctx.identity.ids
    fourth = await assembler.assemble(None, rng=rng, now=NOW)
    assert fourth.identity_refreshed and set(fourth.identity_observed) == {rising, steady}
    assert assembler.identity_cache.refreshes == 2


async def test_identity_min_center_keeps_blank_slate_memories_out(pool):
    store = MemoryStore(pool, HashEmbedder())
    blank = await store.store(NewMemory("I saw a red car."))                       # Beta(1, 4)
    even = await store.store(NewMemory("I think rain is fine.", alpha=3, beta=3))  # center 0.5
    plan_rule = IdentityCache(20, 5)
    assert (await plan_rule.candidates(pool)) == ([even, blank], True)
    assert plan_rule.entries == [(even, 0.5), (blank, 0.2)]
    assert (await IdentityCache(20, 5, min_center=0.5).candidates(pool)) == ([even], True)


async def test_after_pruning_identity_is_reinjected_from_a_fresh_scan(pool):
    store = MemoryStore(pool, HashEmbedder())
    await store.store(NewMemory("I keep my promises.", "preference", alpha=50, beta=2))
    assembler = ContextAssembler(pool, ContextSettings(identity_refresh_cycles=1000))
    rng = np.random.default_rng(5)
    await assembler.assemble(None, rng=rng, now=NOW)
    core = await store.store(NewMemory("I was built to be honest with the people I talk with.", "narrative",
                                       alpha=200, beta=1))
    gate_saw: list = []

    async def exit_gate(messages):
        gate_saw.append([m.content for m in messages])

    fifo = AdaptiveFifo(300, exit_gate)
    for i in range(30):
        fifo.append("user", f"message {i} " + "talk " * 10)
    result = await fifo.prune(0.5)
    assert gate_saw == [[m.content for m in result.pruned]] and result.pruned
    assert result.reinject_identity
    ctx = await assembler.assemble(None, rng=rng, now=NOW, refresh_identity=result.reinject_identity)
    fifo.identity_reinjected()
    assert ctx.identity_refreshed and core in ctx.identity.ids     # resurfaced at once
    assert not fifo.needs_identity_reinjection


async def test_budget_table_summary_and_conversation_room(pool):
    budget = ContextBudget().resolve(128_000, 4000)      # the shares at 128k: plan §3.2's table
    assert (budget.immutable, budget.identity_expected, budget.identity_cap, budget.situational,
            budget.cognitive_state, budget.output_reserve) == (100, 1500, 3000, 2000, 200, 4000)
    assert budget.conversation_tokens == 128_000 - 9_300
    with pytest.raises(ValueError, match="context_window 9000 leaves no room for the conversation"):
        ContextBudget(context_window=9000, identity_cap=3000, situational=2000, output_reserve=4000)
    store = MemoryStore(pool, HashEmbedder())
    await store.store(NewMemory("Do no harm.", "procedural", alpha=50, beta=1, immutable=True))
    ctx = await ContextAssembler(pool).assemble(None, rng=np.random.default_rng(0), now=NOW)
    summary = json.loads(json.dumps(ctx.summary()))
    assert summary["tokens"]["immutable"] == ctx.immutable.tokens == (
        count_tokens(IMMUTABLE_HEADER) + count_tokens("- [procedural] Do no harm.") + 1)
    assert summary["tokens"]["total"] == ctx.tokens
    assert summary["budgets"] == {"immutable": 100, "identity": 3000, "situational": 2000}
    assert summary["identity_expected"] == 1500
    assert summary["ids"]["situational"] == [] and ctx.situational.text == ""
    assert ctx.conversation_budget == 128_000 - ctx.tokens - 200 - 1024   # no model: 128k, a 1,024-token reply
    assert ctx.text == ctx.immutable.text                          # empty sections left out


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=60), min_size=1, max_size=6), st.text(max_size=30))
def test_section_accounting_never_undercounts_the_joined_text(lines, header):
    from src.context.tracks import Placed, render_section
    placed = [Placed(i, "situational", "full", 1.0, line, count_tokens(line))
              for i, line in enumerate(lines)]
    assert count_tokens(render_section(header, placed)) <= section_tokens(header, lines)


def test_session_stats_line():
    m = Manifest(NOW, 1, 0.0, NOW - timedelta(hours=2), 0.04)
    assert session_stats_line(m, NOW) == ("Continuity: 0.0 days old, restarted 1 time, 2.0 hours "
                                          "awake in total (this session 2.0 h).")


async def test_other_peoples_lines_stay_out_of_the_users_question_about_themselves(pool):
    """Runs G, H and J of the local model's script: "Which tea do I like best?" answered from
    Emi's imported "I love mint tea" with the user's own line first in the same context."""
    stranger = "I love mint tea, it is my favourite tea of all"
    ids = await _seed(pool, [stranger], source_tag="import", metadata={"speaker": "Emi"})
    ids |= await _seed(pool, ["My favourite tea is lapsang souchong"])
    await _seed(pool, FILLER[:20], source_tag="import")          # no speaker: nobody's line
    retriever = Retriever(pool, HashEmbedder(), None, Safety(), RetrievalSettings())
    assembler = ContextAssembler(pool)

    async def shown(question: str, users_question: str) -> set[int]:
        recall = await retriever.retrieve(question, rng=np.random.default_rng(0), now=NOW, mutate=False)
        assert ids[stranger] in recall.ids
        ctx = await assembler.assemble(recall, rng=np.random.default_rng(0), now=NOW, users_question=users_question)
        return set(ctx.situational.ids)

    question = "Which tea do I like best?"
    assert ids["My favourite tea is lapsang souchong"] in await shown(question, question)
    assert ids[stranger] not in await shown(question, question)
    assert ids[stranger] in await shown(question, "")                 # not the user's question: as before
    named = "What did Emi say about my favourite tea?"
    assert ids[stranger] in await shown(named, named)                  # the person the question names

    # without a line of the user's in view, other people's lines are all there is: they stay
    await pool.execute("DELETE FROM memories WHERE id = $1", ids["My favourite tea is lapsang souchong"])
    recall = await retriever.retrieve(question, rng=np.random.default_rng(0), now=NOW, mutate=False)
    candidates = situational_candidates(recall, now=NOW)
    assert ids[stranger] in [c.id for c in others_left_out(candidates, recall, question)]
    assert others_left_out(candidates, recall, question) == candidates
