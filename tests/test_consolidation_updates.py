"""Consolidation respects time (issue 37 item 5): a newer statement that updates an older one
(`memory_supersedes` via 'update', sql/153, written here by the exit gate's own `link`) is
never merged with it, is the current fact in an insight's dated evidence, and the older fades:
no promotion, no protection from decay by being recalled. Real PostgreSQL; the model is
scripted at the provider seam and checks what it is sent."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from src.consolidation.deep import insights
from src.consolidation.deep.deep_pass import DEEP_PHASES, ConsolidationParts, run_deep_pass
from src.consolidation.deep.reconsolidation import run_conflicts, run_reevaluation
from src.consolidation.evolution import approvals
from src.consolidation.evolution.forgetting import run_decay, run_demotion
from src.consolidation.evolution.promotion import run_promotion
from src.consolidation.evolution.settings import EvolutionSettings, ReconsolidationSettings
from src.consolidation.light.ticker import LightTicker
from src.consolidation.settings import ConsolidationSettings
from src.gates.updates import link
from src.providers.embedding import embed_memories
from src.recall.store import MemoryStore, NewMemory
from src.weights.protection import protect_command
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, ids_in, language_model
from tests.evolution_helpers import NOW as EVOLUTION_NOW
from tests.evolution_helpers import add_memory, days_ago, spread, step_context, weight
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
MERGE_ONLY = [p for p in DEEP_PHASES if p.name == "merge"]
REFLECTION = [p for p in DEEP_PHASES if p.name in ("questions", "insights")]
# a rescheduled appointment: one word in eleven changed, close enough for the merge's guards
TUESDAY = "My physiotherapy appointment with Dr Okafor at the Leeds Road clinic is on Tuesday morning, second floor."
THURSDAY = TUESDAY.replace("Tuesday", "Thursday")
BREAD = "I love baking sourdough bread with rye flour on Sundays."
PORTO = "I live in Porto, in a flat near the river."
LISBON = "I moved to Lisbon last week, a flat in Alfama."
EVOLUTION = EvolutionSettings()


async def updated(pool, newer: int, older: int) -> None:
    """The exit gate's link: `newer` updates `older`."""
    async with pool.acquire() as conn:
        assert await link(conn, [(newer, older)]) == 1


async def pass_of(pool, embedder, phases, llm=None, settings=None, now=NOW):
    report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=llm, safety=Safety(),
                                                    settings=settings or ConsolidationSettings()),
                                 trigger="manual", now=now, rng=random.Random(7), phases=phases)
    assert report.status == "done", report.error
    return report


async def merged_sources(pool) -> list[list[int]]:
    rows = await pool.fetch("""SELECT array_agg(source_id ORDER BY source_id) AS ids FROM memory_supersedes
                                WHERE via = 'merge' GROUP BY insight_id ORDER BY insight_id""")
    return [list(r["ids"]) for r in rows]


# --- merges -------------------------------------------------------------------------------------

async def test_a_merge_never_joins_the_two_ends_of_an_update(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    tuesday, thursday, bread, bread_again = await store.store_many(
        [NewMemory(TUESDAY), NewMemory(THURSDAY), NewMemory(BREAD), NewMemory(BREAD.replace(".", "!"))])
    await updated(pool, thursday, tuesday)                 # rescheduled

    report = await pass_of(pool, embedder, MERGE_ONLY)

    # the unlinked near-duplicates merge as before; the appointment's two days do not
    assert report.phases["merge"]["counts"] == {"clusters": 1, "insights": 1, "superseded": 2}
    assert await merged_sources(pool) == [[bread, bread_again]]
    assert await weight(pool, tuesday) == (1.0, 4.0) and await weight(pool, thursday) == (1.0, 4.0)


async def test_what_was_merged_from_a_since_updated_memory_does_not_merge_with_its_successor(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    first, again = await store.store_many([NewMemory(TUESDAY), NewMemory(TUESDAY.replace(".", "!"))])
    await pass_of(pool, embedder, MERGE_ONLY)
    assert await merged_sources(pool) == [[first, again]]  # said twice: one memory "…on Tuesday…"

    [thursday] = await store.store_many([NewMemory(THURSDAY)])
    await updated(pool, thursday, first)
    report = await pass_of(pool, embedder, MERGE_ONLY)

    # the merged Tuesday states the earlier day: it stays apart from the Thursday
    assert report.phases["merge"]["counts"] == {"clusters": 0}
    assert await merged_sources(pool) == [[first, again]]


# --- insights -----------------------------------------------------------------------------------

async def _home_store(pool, embedder) -> tuple[int, int]:
    store = MemoryStore(pool, embedder)
    porto, lisbon, *_ = await store.store_many(
        [NewMemory(PORTO), NewMemory(LISBON), NewMemory("I work as a nurse at the children's hospital."),
         NewMemory("My sister Mara visits every spring.")])
    await pool.execute("UPDATE memories SET created_at = $1", datetime(2026, 10, 1, 9, tzinfo=UTC))
    await pool.execute("UPDATE memories SET created_at = $2 WHERE id = $1", porto, datetime(2026, 3, 3, 9, tzinfo=UTC))
    await pool.execute("UPDATE memories SET created_at = $2 WHERE id = $1", lisbon,
                       datetime(2026, 11, 20, 18, tzinfo=UTC))
    await updated(pool, lisbon, porto)
    return porto, lisbon


async def test_an_insight_question_dates_its_evidence_and_marks_the_earlier_statement(pool):
    embedder = HashEmbedder()
    porto, lisbon = await _home_store(pool, embedder)
    asked: list[str] = []
    insight = "The user lived in a flat in Porto near the river, then moved to a flat in Lisbon in Alfama."

    def answer(request) -> str:
        prompt = request.messages[0].content
        asked.append(prompt)
        assert prompt.startswith("Question: Where does the user live, in which flat?")
        assert set(ids_in(prompt)) >= {porto, lisbon}
        return json.dumps({"insights": [{"insight": insight, "cited_ids": [porto, lisbon]}]})

    backend = (ConsolidationModel().push("questions", json.dumps({"questions": ["Where does the user live, in which flat?"]}))
               .push("insights", answer))
    report = await pass_of(pool, embedder, REFLECTION, language_model(backend, pool))

    [prompt] = asked
    # each statement with its date; the earlier one marked, naming the newer that updated it
    assert (f"[{porto}] earlier, until 20 Nov 2026, since updated by [{lisbon}]: The user said: {PORTO} "
            "(Tue 3 Mar 2026, 9 months ago)") in prompt
    assert f"[{lisbon}] The user said: {LISBON} (Fri 20 Nov 2026, 8 days ago)" in prompt
    assert "Each statement says when it was said." in prompt
    assert 'A statement marked "earlier, until <date>"' in prompt and "Never state it as current" in prompt
    # and the citation checks still let an insight rest on both
    assert report.phases["insights"]["counts"] == {"insights": 1}
    row = await pool.fetchrow("SELECT id FROM memories WHERE content = $1", insight)
    links = await pool.fetch("SELECT source_id FROM memory_supersedes WHERE insight_id = $1 AND via = 'insight' "
                             "ORDER BY 1", row["id"])
    assert [r["source_id"] for r in links] == [porto, lisbon]


async def test_the_newer_statement_joins_evidence_that_found_only_the_earlier(pool):
    embedder = HashEmbedder()
    porto, lisbon = await _home_store(pool, embedder)
    ctx = step_context(pool, embedder, None, EVOLUTION, phase="insights", now=NOW)
    ctx.settings.deep.insight_evidence = 1                 # the search keeps only its best

    hits = await insights._evidence(ctx, "Porto river")

    assert [h.id for h in hits] == [porto, lisbon]
    assert (hits[0].superseded_by, hits[1].superseded_by) == (lisbon, None)


# --- promotion ----------------------------------------------------------------------------------

async def test_a_superseded_memory_is_not_promoted_nor_lends_its_sightings_to_the_newer(pool):
    older = await add_memory(pool, "I work at Acme", alpha=2.0, accesses=spread(6, 20.0))
    newer = await add_memory(pool, "I quit Acme, I work at Globex now", alpha=2.0,
                             accesses=spread(3, 10.0, end_days_ago=0.5))
    await updated(pool, newer, older)
    counts: dict[str, int] = {}
    await run_promotion(pool, Safety(), EVOLUTION, EVOLUTION_NOW, counts)
    assert counts == {}
    assert await weight(pool, older) == (2.0, 4.0) and await weight(pool, newer) == (2.0, 4.0)
    assert await pool.fetchval("SELECT count(*) FROM promotions") == 0


async def test_a_climb_stops_and_an_approval_is_refused_once_an_update_supersedes_it(pool):
    climbing = await add_memory(pool, "I train for the Leeds half marathon", alpha=2.0, beta=4.0,
                                accesses=spread(5, 14.0))
    waiting = await add_memory(pool, "I am vegetarian", alpha=30.0, beta=4.0, accesses=spread(10, 30.0))
    counts: dict[str, int] = {}
    await run_promotion(pool, Safety(), EVOLUTION, EVOLUTION_NOW, counts)
    # the one granted (its climb owed), the other waits for the operator
    assert counts == {"promotion_applied": 1, "promotion_pending_approval": 1}
    assert await pool.fetchval("SELECT remaining > 0 FROM promotions WHERE memory_id = $1", climbing)
    approval = await pool.fetchval("SELECT approval_id FROM promotions WHERE memory_id = $1", waiting)

    for older, text in ((climbing, "I dropped the half marathon, I swim now"), (waiting, "I eat fish again")):
        await updated(pool, await add_memory(pool, text, created=days_ago(1)), older)
    before = await weight(pool, climbing)
    counts = {}
    await run_promotion(pool, Safety(), EVOLUTION, EVOLUTION_NOW + timedelta(days=1), counts)
    assert counts == {} and await weight(pool, climbing) == before
    ok, message = await approvals.decide_outcome(
        approvals.ApprovalContext(pool, Safety(), EVOLUTION, EVOLUTION_NOW), str(approval), approve=True)
    assert not ok and "was since updated by #" in message and await weight(pool, waiting) == (30.0, 4.0)


# --- decay and demotion -------------------------------------------------------------------------

async def test_recall_does_not_keep_a_superseded_memory_from_decay_and_the_newer_is_left_alone(pool):
    # the older: stored long ago, then brought along by every recall of the subject
    older = await add_memory(pool, "I live in Porto", created=days_ago(300),
                             accesses=[days_ago(200), days_ago(150), *spread(8, 60.0, end_days_ago=2.0)])
    newer = await add_memory(pool, "I moved to Lisbon", created=days_ago(100), accesses=[days_ago(5)])
    kept_alive = await add_memory(pool, "I like fado", created=days_ago(300),
                                  accesses=[days_ago(200), days_ago(150), *spread(8, 60.0, end_days_ago=2.0)])
    guarded = await add_memory(pool, "My first flat was in Braga", created=days_ago(300),
                               accesses=spread(8, 60.0, end_days_ago=2.0))
    await updated(pool, newer, older)
    await updated(pool, await add_memory(pool, "My flat is in Coimbra now", created=days_ago(95),
                                         accesses=[days_ago(3)]), guarded)
    await protect_command(pool, str(guarded), True)        # the guardian's choice still holds

    counts: dict[str, int] = {}
    assert await run_decay(pool, Safety(), EVOLUTION, EVOLUTION_NOW, counts) == [older]
    assert await weight(pool, older) == (1.0, 5.0)
    assert await weight(pool, newer) == (1.0, 4.0) and await weight(pool, kept_alive) == (1.0, 4.0)
    assert await weight(pool, guarded) == (1.0, 4.0)
    reason = await pool.fetchval("SELECT reason FROM consolidation_log WHERE memory_id = $1 AND actor = 'decay'",
                                 older)
    assert reason == "updated by a newer statement; idle for 90+ days (recalls since the update do not count)"
    # once per idle stretch, as any memory: recall after the update starts none
    await pool.execute("UPDATE memories SET last_accessed = $2, access_count = access_count + 1 WHERE id = $1",
                       older, EVOLUTION_NOW + timedelta(days=1))
    assert await run_decay(pool, Safety(), EVOLUTION, EVOLUTION_NOW + timedelta(days=2), {}) == []
    assert await pool.fetchval("SELECT count(*) FROM memories") == 5          # never deleted


async def test_a_promoted_memory_an_update_superseded_is_demoted_though_recalled(pool):
    older = await add_memory(pool, "My goal is to run the Leeds marathon", alpha=6.0, beta=3.0,
                             created=days_ago(200), accesses=[days_ago(2)])
    current = await add_memory(pool, "My goal is to swim a mile", alpha=6.0, beta=3.0,
                               created=days_ago(60), accesses=[days_ago(2)])
    await updated(pool, current, older)
    assert await run_demotion(pool, Safety(), EVOLUTION, EVOLUTION_NOW, {}) == [older]
    assert await weight(pool, older) == (6.0, 3.5) and await weight(pool, current) == (6.0, 3.0)


async def test_the_light_decay_nudges_a_superseded_memory_recall_keeps_fresh(pool):
    embedder = HashEmbedder()
    older, newer, other = await MemoryStore(pool, embedder).store_many(
        [NewMemory("I live in Porto"), NewMemory("I moved to Lisbon"), NewMemory("I like fado")])
    await pool.execute("UPDATE memories SET created_at = $1", NOW - timedelta(days=30))
    await pool.execute("UPDATE memories SET created_at = $1 WHERE id = $2", NOW - timedelta(days=10), newer)
    await pool.execute("UPDATE memories SET last_accessed = $1, access_count = 5", NOW - timedelta(hours=1))
    await updated(pool, newer, older)
    ticker = LightTicker(pool, embedder=embedder, llm=None, safety=Safety(),
                         settings=ConsolidationSettings(light={"contradiction_samples": 0}),
                         rng=random.Random(3), clock=lambda: NOW)
    assert await ticker.decay(NOW) == 1
    assert await weight(pool, older) == (1.0, 4.01)
    assert await weight(pool, newer) == (1.0, 4.0) and await weight(pool, other) == (1.0, 4.0)
    assert await ticker.decay(NOW + timedelta(hours=1)) == 0           # once per decay period
    reason = await pool.fetchval("SELECT reason FROM consolidation_log WHERE actor = 'light_consolidation'")
    assert reason == "decay: updated by a newer statement 7+ days ago"


# --- reconsolidation ----------------------------------------------------------------------------

RECON = EvolutionSettings(reconsolidation=ReconsolidationSettings(similarity=0.3))


async def _with_vector(pool, embedder, text, memory_type="episodic", **kw) -> int:
    vec = (await embed_memories(embedder, [text], [memory_type]))[0]
    return await add_memory(pool, text, memory_type=memory_type, vector=vec, embed_model=embedder.model_name, **kw)


async def test_an_earlier_statement_is_no_new_information_against_an_insight(pool):
    embedder = HashEmbedder()
    source = await _with_vector(pool, embedder, "the user lives in lisbon now", created=days_ago(40))
    insight = await _with_vector(pool, embedder, "the user lives in lisbon", "reflection", created=days_ago(30))
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id, via) VALUES ($1, $2, 'insight')",
                       insight, source)
    # an old statement stored late (an import), already updated by what the insight rests on
    earlier = await _with_vector(pool, embedder, "the user never lives in lisbon, porto it is", created=days_ago(1))
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id, via) VALUES ($1, $2, 'update')",
                       source, earlier)
    llm = ScriptedLLM(meta=lambda q, s: {"verdict": "update", "insight": "The user lives in Porto.",
                                         "explanation": "moved"})
    counts: dict[str, int] = {}
    await run_conflicts(step_context(pool, embedder, llm, RECON, phase="reconsolidation"), counts)
    assert llm.calls == [] and counts == {}


async def test_an_insight_whose_source_was_updated_is_re_evaluated_with_the_source_marked_earlier(pool):
    embedder = HashEmbedder()
    porto = await add_memory(pool, "I live in Porto", created=days_ago(50))
    river = await add_memory(pool, "I walk by the Douro every evening", created=days_ago(45))
    insight = await _with_vector(pool, embedder, "the user lives by the river in Porto", "reflection",
                                 created=days_ago(30))
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id, via) SELECT $1, unnest($2::bigint[]), "
                       "'insight'", insight, [porto, river])
    seen: list[str] = []

    def keep(question, schema):
        seen.append(question)
        return {"verdict": "keep", "explanation": "still true"}

    llm = ScriptedLLM(meta=keep)
    await run_reevaluation(step_context(pool, embedder, llm, RECON, phase="reconsolidation"), {})
    assert seen == []                                       # nothing changed yet
    lisbon = await add_memory(pool, "I moved to Lisbon", created=days_ago(2))
    await pool.execute("UPDATE memories SET event_time = $2 WHERE id = $1", lisbon, datetime(2026, 5, 28, tzinfo=UTC))
    await updated(pool, lisbon, porto)

    def revise(question, schema):
        seen.append(question)
        assert schema.__name__ == "ReevaluationAnswer"
        return {"verdict": "revise", "insight": "The user lived by the river in Porto until May 2026.",
                "explanation": "the user moved"}

    llm = ScriptedLLM(meta=revise)
    counts: dict[str, int] = {}
    await run_reevaluation(step_context(pool, embedder, llm, RECON, phase="reconsolidation"), counts)
    assert counts == {"insights_revised": 1}
    [question] = seen
    assert '- (weight 0.20; earlier, until 28 May 2026, since updated: "I moved to Lisbon") I live in Porto' in question
    assert "- (weight 0.20) I walk by the Douro every evening" in question
    assert "Never state it as current" in question
    # the update link made no source of the revised insight: only derivations do
    new_id = await pool.fetchval("SELECT id FROM memories WHERE content LIKE 'The user lived by the river%'")
    sources = await pool.fetch("SELECT source_id FROM memory_supersedes WHERE insight_id = $1 ORDER BY 1", new_id)
    assert [r["source_id"] for r in sources] == sorted([insight, porto, river])


async def test_a_dmn_association_shows_its_own_memories_dated_and_the_newer_beside_the_earlier(pool):
    embedder = HashEmbedder()
    porto, lisbon = await _home_store(pool, embedder)
    nurse = await pool.fetchval("SELECT id FROM memories WHERE content LIKE 'I work as a nurse%'")
    await pool.execute("""INSERT INTO dmn_items (at, channel, memory_ids, text, detail)
                          VALUES ($1, 'creative', $2, 'a connection', '{"days_apart": 212}')""",
                       NOW - timedelta(hours=2), [porto, nurse])
    asked: list[str] = []

    def answer(request) -> str:
        prompt = request.messages[0].content
        asked.append(prompt)
        return json.dumps({"insights": [{"insight": "The user worked as a nurse while living in Porto near the river.",
                                         "cited_ids": [porto, nurse]}]})

    backend = ConsolidationModel().push("insights", answer)
    await pass_of(pool, embedder, [p for p in DEEP_PHASES if p.name == "insights"], language_model(backend, pool))

    [prompt] = asked
    assert (f"[{porto}] earlier, until 20 Nov 2026, since updated by [{lisbon}]: The user said: {PORTO} "
            "(Tue 3 Mar 2026, 9 months ago)") in prompt
    assert f"[{nurse}] The user said: I work as a nurse at the children's hospital. (Thu 1 Oct 2026, 8 weeks ago)" \
        in prompt
    assert f"[{lisbon}] The user said: {LISBON} (Fri 20 Nov 2026, 8 days ago)" in prompt
