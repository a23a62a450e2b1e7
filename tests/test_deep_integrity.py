"""Consolidation cannot launder weight (issue 27 item 2) and reconsolidation's source tag
(issue 25), against the real database with a scripted model at the provider seam.

The store is the real run's: the user's fact at 0.21, the four seeded boundaries at
Beta(50, 1). The model's answer holds what a small model wrote then: the user's fact in
the first person citing a boundary, a copy of boundary #3, a question, an insight citing
a memory it says nothing about, and two honest insights.
"""

from __future__ import annotations

import json
import logging
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from src.bootstrap.seeding import seed_boundaries
from src.consolidation.deep import checkpoints
from src.consolidation.deep.contextual import run_contextual
from src.consolidation.deep.deep_pass import (
    DEEP_PHASES,
    ConsolidationParts,
    announce_hook,
    run_deep_pass,
)
from src.consolidation.deep.integrity import evidence_prior, refuse_by_words, screen
from src.consolidation.deep.memories_repository import memories_by_id
from src.consolidation.deep.phase import CallBudget
from src.consolidation.deep.reconsolidation import run_conflicts
from src.consolidation.evolution.settings import EvolutionSettings, ReconsolidationSettings
from src.consolidation.settings import ConsolidationSettings, SimilarityThresholds
from src.errors import ContextOverflow
from src.providers.embedding import embed_memories
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, ids_in, language_model
from tests.evolution_helpers import NOW, add_memory, days_ago, step_context, weight
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
FACT = "Hi! My name is Priya Raman and I am a marine biologist."
TEA = "I drink green tea every morning before work."
BOUNDARY_3 = "I do not evade the logging, limits and oversight my guardian set."
HONEST = "Priya Raman is a marine biologist."
ABOUT_BOUNDARY = "I stop and ask my guardian first when unsure about possible harm."
MIGRATION_120 = (Path(__file__).resolve().parents[1] / "sql" / "120_deep_pass_failures.sql").read_text()


async def _store(pool, embedder) -> dict:
    store = MemoryStore(pool, embedder)
    boundaries = await seed_boundaries(store)
    texts = {await pool.fetchval("SELECT content FROM memories WHERE id = $1", b): b for b in boundaries}
    fact = await store.store(NewMemory(FACT, alpha=1.05, beta=3.95))         # center 0.21, as in the real run
    tea = await store.store(NewMemory(TEA))
    cat = await store.store(NewMemory("My cat Miso is three years old."))
    return {"fact": fact, "tea": tea, "cat": cat, "b1": boundaries[0], "b3": texts[BOUNDARY_3],
            "b4": boundaries[3], "boundaries": boundaries}


def _answer(ids: dict):
    def answer(request) -> str:
        shown = set(ids_in(request.messages[0].content))
        cited = {ids["fact"], ids["tea"], ids["b1"], ids["b3"], ids["b4"]}
        assert cited <= shown, "the fake cites only what the prompt showed it"
        return json.dumps({"insights": [
            {"insight": HONEST, "cited_ids": [ids["fact"]]},
            {"insight": "My profession is marine biology.", "cited_ids": [ids["fact"], ids["b1"]]},
            {"insight": BOUNDARY_3, "cited_ids": [ids["b3"]]},
            {"insight": "What do you remember about me?", "cited_ids": [ids["fact"]]},
            {"insight": "Priya Raman keeps a cat called Miso.", "cited_ids": [ids["tea"]]},
            {"insight": ABOUT_BOUNDARY, "cited_ids": [ids["b4"]]},
        ]})
    return answer


async def test_an_insight_rests_on_its_evidence_never_on_boundaries(pool, caplog):
    embedder = HashEmbedder()
    ids = await _store(pool, embedder)
    backend = ConsolidationModel().push("questions", json.dumps({"questions": ["What do I know about the user?"]}))
    backend.push("insights", _answer(ids))
    settings = ConsolidationSettings(deep={"insights_per_question": 6})
    phases = [p for p in DEEP_PHASES if p.name in ("questions", "insights")]
    announced: list[str] = []

    async def submit(_source: str, text: str):
        announced.append(text)

    caplog.set_level(logging.INFO, logger="src.consolidation")
    report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=language_model(backend, pool),
                                                    safety=Safety(), settings=settings),
                                 trigger="manual", now=T0, rng=random.Random(1), phases=phases,
                                 after=[announce_hook(submit)])

    assert report.status == "done"
    assert report.phases["insights"]["counts"] == {"insights": 2, "refused_boundary": 1, "refused_copy": 1,
                                                   "refused_question": 1, "refused_irrelevant": 1}
    stored = {r["content"]: (r["a"], r["b"]) for r in await pool.fetch(
        "SELECT content, depth_weight_alpha a, depth_weight_beta b FROM memories WHERE metadata->>'via' = 'insight'")}
    # the prior is the evidence's: the user's fact's Beta; a boundary lends none (blank slate)
    assert stored == {HONEST: (1.05, 3.95), ABOUT_BOUNDARY: (1.0, 4.0)}
    # the user's fact is not weakened by the insight drawn from it (was 0.21 -> 0.14)
    assert await weight(pool, ids["fact"]) == (1.05, 3.95)
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log") == 0
    assert announced == [HONEST, ABOUT_BOUNDARY]
    refusals = [r.getMessage() for r in caplog.records if " refused: " in r.getMessage()]
    assert len(refusals) == 4
    assert any(f"cites boundary #{ids['b1']}, which is not its subject" in m for m in refusals)
    assert any(f"restates memory #{ids['b3']}" in m for m in refusals)
    assert any("a question, not a statement" in m for m in refusals)
    assert any(f"#{ids['tea']} at " in m for m in refusals)


async def test_the_citation_floor_is_per_embed_model(pool):
    embedder = HashEmbedder()
    ids = await _store(pool, embedder)
    rows = await memories_by_id(pool, [ids["fact"]])
    strict = ConsolidationSettings(thresholds={embedder.model_name: SimilarityThresholds(insight_citation=0.9)})
    kw = {"copy_overlap": 0.8, "subject_overlap": 0.25}
    loose = ConsolidationSettings().thresholds_for(embedder.model_name).insight_citation
    assert await screen(embedder, HONEST, rows, citation_floor=loose, **kw) is None
    refusal = await screen(embedder, HONEST, rows,
                           citation_floor=strict.thresholds_for(embedder.model_name).insight_citation, **kw)
    assert refusal is not None and refusal.reason == "irrelevant" and "below the floor 0.9" in refusal.detail
    # the offline embedder's own floor (measured, settings.WORDLLAMA_THRESHOLDS) is keyed by its name
    assert ConsolidationSettings().thresholds_for("wordllama-l2-supercat-256").insight_citation < loose


async def test_a_boundary_that_is_the_subject_may_be_cited_and_lends_no_weight(pool):
    embedder = HashEmbedder()
    ids = await _store(pool, embedder)
    rows = await memories_by_id(pool, [ids["b4"], ids["fact"]])
    assert refuse_by_words(ABOUT_BOUNDARY, rows, copy_overlap=0.8, subject_overlap=0.25) is None
    assert refuse_by_words("Marine biology is what I do.", rows, copy_overlap=0.8,
                           subject_overlap=0.25).reason == "boundary"
    # the prior leaves the boundary's Beta(50, 1) out
    assert evidence_prior(rows) == (1.05, 3.95)
    assert evidence_prior([r for r in rows if r["id"] == ids["b4"]]) == (1.0, 4.0)


async def test_questions_and_boundaries_are_never_merged(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    boundaries = await seed_boundaries(store)
    copy = await store.store(NewMemory(BOUNDARY_3))                        # the user says a boundary word for word
    questions = await store.store_many([NewMemory("What do you remember about me?") for _ in range(3)])
    garden = await store.store_many([NewMemory(f"the garden tomatoes in the back bed need water every single "
                                               f"summer morning {i}") for i in range(3)])
    phases = [p for p in DEEP_PHASES if p.name == "merge"]
    report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=None, safety=Safety(),
                                                    settings=ConsolidationSettings()),
                                 trigger="manual", now=T0, phases=phases)

    assert report.phases["merge"]["counts"]["insights"] == 1
    merged = [r["source_id"] for r in await pool.fetch("SELECT source_id FROM memory_supersedes WHERE via = 'merge'")]
    assert sorted(merged) == sorted(garden)
    assert not set(merged) & {copy, *questions, *boundaries}
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log") == 3      # only the garden notes give way


async def test_a_merged_text_that_is_a_question_is_rejected(pool):
    embedder = HashEmbedder()
    garden = await MemoryStore(pool, embedder).store_many(
        [NewMemory(f"the garden tomatoes in the back bed need water every single summer morning {i}")
         for i in range(3)])

    def question(request) -> str:
        return json.dumps({"insights": [{"cluster": 1, "insight": "Do the garden tomatoes need water 0 1 2?",
                                         "cited_ids": ids_in(request.messages[0].content)}]})

    backend = ConsolidationModel().push("merge", question)
    phases = [p for p in DEEP_PHASES if p.name == "merge"]
    report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=language_model(backend, pool),
                                                    safety=Safety(), settings=ConsolidationSettings()),
                                 trigger="manual", now=T0, phases=phases)
    assert report.status == "done" and backend.kinds() == ["merge"]
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE metadata->>'via' = 'merge'") == 0
    failure = await pool.fetchrow("SELECT phase, error, items FROM consolidation_failures")
    assert failure["phase"] == "merge" and failure["error"] == "cluster 1's insight is a question, not a statement"
    assert json.loads(failure["items"]) == [{"cluster": sorted(garden)}]


# -- reconsolidation (plan §4.4) ---------------------------------------------------------------

RECON = EvolutionSettings(reconsolidation=ReconsolidationSettings(similarity=0.3))


async def _vector_memory(pool, embedder, text, memory_type="episodic", **kw):
    vec = (await embed_memories(embedder, [text], [memory_type]))[0]
    return await add_memory(pool, text, memory_type=memory_type, vector=vec, embed_model=embedder.model_name, **kw)


async def _conflict(pool, embedder):
    s1 = await _vector_memory(pool, embedder, "deployed the app on friday evening", created=days_ago(40))
    insight = await _vector_memory(pool, embedder, "the agent always deploys on fridays", "reflection",
                                   created=days_ago(30), alpha=6.0, beta=2.0, source_tag="internal_consolidation")
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id) VALUES ($1, $2)", insight, s1)
    new = await _vector_memory(pool, embedder, "the agent never deploys on fridays now", created=days_ago(1))
    return insight, new


async def test_a_reconsolidated_insight_is_the_minds_own_and_wakes_no_questions(pool):
    embedder = HashEmbedder()
    await _conflict(pool, embedder)
    # the last pass began after everything above was stored: nothing new since
    last = await pool.fetchval("INSERT INTO consolidation_passes (trigger, status, started_at) "
                               "VALUES ('timer', 'done', $1) RETURNING id", NOW - timedelta(hours=12))
    assert await checkpoints.new_experiences_since_last_pass(pool, last + 1) == 0
    llm = ScriptedLLM(meta=lambda q, s: {"verdict": "update", "insight": "The agent stopped deploying on Fridays.",
                                         "explanation": "the newer memory reverses the habit"})
    counts: dict[str, int] = {}
    await run_conflicts(step_context(pool, embedder, llm, RECON, phase="reconsolidation"), counts)
    assert counts == {"insights_superseded": 1}
    tag = await pool.fetchval("SELECT source_tag FROM memories WHERE content = 'The agent stopped deploying on Fridays.'")
    assert tag == "internal_consolidation"
    # the mind's own conclusion is not new experience: the questions phase stays asleep
    assert await checkpoints.new_experiences_since_last_pass(pool, last + 1) == 0
    backend = ConsolidationModel()
    report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=language_model(backend, pool),
                                                    safety=Safety(), settings=ConsolidationSettings()),
                                 trigger="manual", now=NOW,
                                 phases=[p for p in DEEP_PHASES if p.name == "questions"])
    assert report.phases["questions"]["skipped"] == "no new memories since the last pass" and backend.kinds() == []


async def test_a_rewritten_insight_that_is_a_question_is_not_stored(pool):
    embedder = HashEmbedder()
    insight, _ = await _conflict(pool, embedder)
    llm = ScriptedLLM(meta=lambda q, s: {"verdict": "update", "insight": "Does the agent still deploy on Fridays?",
                                         "explanation": "unclear"})
    counts: dict[str, int] = {}
    await run_conflicts(step_context(pool, embedder, llm, RECON, phase="reconsolidation"), counts)
    assert counts == {"refused_not_statement": 1, "no_conflict": 1}
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE memory_type = 'reflection'") == 1
    assert await weight(pool, insight) == (6.0, 2.0)


async def test_old_reconsolidated_rows_are_retagged_by_the_migration(pool):
    old = await add_memory(pool, "an insight reconsolidation stored before the fix", memory_type="reflection",
                           source_tag="consolidation")
    retag = next(line for line in MIGRATION_120.splitlines() if line.startswith("UPDATE memories SET source_tag"))
    await pool.execute(retag)
    assert await pool.fetchval("SELECT source_tag FROM memories WHERE id = $1", old) == "internal_consolidation"
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE source_tag = 'consolidation'") == 0


# -- a batch over the model's window -----------------------------------------------------------

async def test_contextual_asks_fewer_at_a_time_when_a_batch_is_over_the_window(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory(f"note number {i} about the garden") for i in range(4)])
    sizes: list[int] = []

    def answer(question: str, schema):
        ids = [int(x) for x in __import__("re").findall(r'<memory id="(\d+)"', question)]
        sizes.append(len(ids))
        if len(ids) > 1:
            return ContextOverflow("over the window; not sent", provider="scripted")
        return {"contexts": [{"id": ids[0], "context": "Said while gardening."}]}

    ctx = step_context(pool, embedder, ScriptedLLM(meta=answer), EvolutionSettings(), phase="contextual", now=T0,
                       budget=CallBudget(15))
    done = await run_contextual(ctx, {})
    assert done == 4 and ctx.skipped_steps == {}
    assert sizes == [4, 2, 1, 1, 2, 1, 1]
