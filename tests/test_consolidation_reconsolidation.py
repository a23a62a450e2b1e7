"""Reconsolidation (§4.4) and contextual retrieval (§4.6) with a scripted model at the provider seam."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from src.consolidation.deep.contextual import run_contextual
from src.consolidation.deep.phase import CallBudget
from src.consolidation.deep.reconsolidation import run_conflicts, run_reevaluation
from src.consolidation.evolution.settings import (
    ContextualSettings,
    EvolutionSettings,
    ReconsolidationSettings,
)
from src.providers.embedding import embed_memories
from tests.evolution_helpers import NOW, add_memory, days_ago, step_context, weight
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM

SETTINGS = EvolutionSettings(reconsolidation=ReconsolidationSettings(similarity=0.3))


async def _with_vector(pool, embedder, text, memory_type="episodic", **kw):
    vec = (await embed_memories(embedder, [text], [memory_type]))[0]
    return await add_memory(pool, text, memory_type=memory_type, vector=vec, embed_model=embedder.model_name, **kw)


async def _insight(pool, embedder, text, sources, **kw):
    iid = await _with_vector(pool, embedder, text, "reflection", created=days_ago(30), **kw)
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id) SELECT $1, unnest($2::bigint[])",
                       iid, sources)
    return iid


def _recon(pool, embedder, llm, budget: CallBudget | None = None):
    """The context reconsolidation's steps run in, its model calls named as the phase's."""
    return step_context(pool, embedder, llm, SETTINGS, phase="reconsolidation", budget=budget)


async def _conflict_setup(pool, embedder):
    s1 = await _with_vector(pool, embedder, "deployed the app on friday evening", created=days_ago(40))
    s2 = await _with_vector(pool, embedder, "friday deploy went fine again", created=days_ago(35))
    insight = await _insight(pool, embedder, "the agent always deploys on fridays", [s1, s2], alpha=6.0, beta=2.0)
    new = await _with_vector(pool, embedder, "the agent never deploys on fridays now", created=days_ago(1))
    return insight, new, (s1, s2)


async def test_a_contradicting_memory_gets_a_superseding_insight(pool):
    embedder = HashEmbedder()
    insight, new, _ = await _conflict_setup(pool, embedder)

    def answer(question, schema):
        assert schema.__name__ == "ConflictAnswer"
        assert "Stored insight:\nthe agent always deploys on fridays" in question
        assert "New information:\nthe agent never deploys on fridays now" in question
        return {"verdict": "update", "insight": "The agent stopped deploying on Fridays.",
                "explanation": "the newer memory reverses the habit"}

    llm = ScriptedLLM(meta=answer)
    counts: dict[str, int] = {}
    budget = CallBudget(5)
    await run_conflicts(_recon(pool, embedder, llm, budget), counts)
    assert counts == {"insights_superseded": 1}
    assert [c.purpose for c in llm.calls] == ["consolidation:reconsolidation"] and budget.used == 1
    row = await pool.fetchrow("SELECT id, content, memory_type, metadata, embed_model, created_at FROM memories "
                              "WHERE content = 'The agent stopped deploying on Fridays.'")
    assert (row["memory_type"], row["embed_model"], row["created_at"]) == ("reflection", embedder.model_name, NOW)
    links = await pool.fetch("SELECT source_id FROM memory_supersedes WHERE insight_id = $1 ORDER BY 1", row["id"])
    assert [r["source_id"] for r in links] == sorted([insight, new])
    old_meta = json.loads(await pool.fetchval("SELECT metadata FROM memories WHERE id = $1", insight))
    assert old_meta["superseded_by"] == row["id"]
    assert await weight(pool, insight) == (6.0, 3.0)          # contradict(1.0) through the choke point
    log = await pool.fetchrow("SELECT actor, reason FROM consolidation_log WHERE memory_id = $1", insight)
    assert tuple(log) == ("reconsolidation", f"superseded by insight {row['id']}")
    # the superseded insight is not offered again
    await run_conflicts(_recon(pool, embedder, llm, budget), {})
    assert len(llm.calls) == 1


async def test_a_productive_contradiction_is_recorded_and_asked_once(pool):
    embedder = HashEmbedder()
    insight, new, _ = await _conflict_setup(pool, embedder)
    llm = ScriptedLLM(meta=lambda q, s: {"verdict": "productive_contradiction",
                                         "explanation": "both are true at different times"})
    counts: dict[str, int] = {}
    # stored before the previous pass began: screened then, not again
    await run_conflicts(_recon(pool, embedder, llm), counts, since=days_ago(0.5))
    assert llm.calls == [] and counts == {}
    await run_conflicts(_recon(pool, embedder, llm), counts)
    assert counts == {"productive_contradictions": 1}
    row = await pool.fetchrow("SELECT insight_id, memory_id, explanation FROM productive_contradictions")
    assert tuple(row) == (insight, new, "both are true at different times")
    await run_conflicts(_recon(pool, embedder, llm), {})
    assert len(llm.calls) == 1
    assert await weight(pool, insight) == (6.0, 2.0)


async def test_insights_are_re_evaluated_when_a_source_changes(pool):
    embedder = HashEmbedder()
    s1 = await add_memory(pool, "ran five kilometres", created=days_ago(50))
    s2 = await add_memory(pool, "ran again in the rain", created=days_ago(45))
    insight = await _insight(pool, embedder, "running is a habit", [s1, s2])
    llm = ScriptedLLM(meta=lambda q, s: {"verdict": "keep", "explanation": "still true"})
    await run_reevaluation(_recon(pool, embedder, llm), {})
    assert llm.calls == []                                    # nothing changed yet
    await pool.execute(
        """INSERT INTO consolidation_log (memory_id, operation, actor, reason, evidence)
           VALUES ($1, 'contradict', 'decay', 'old', jsonb_build_object('at', $2::timestamptz))""", s1, days_ago(2))

    def revise(question, schema):
        assert schema.__name__ == "ReevaluationAnswer"
        assert "- (weight 0.20) ran five kilometres" in question
        return {"verdict": "revise", "insight": "Running was a habit for a while.", "explanation": "it faded"}

    llm = ScriptedLLM(meta=revise)
    counts: dict[str, int] = {}
    await run_reevaluation(_recon(pool, embedder, llm), counts)
    assert counts == {"insights_revised": 1}
    new_id = await pool.fetchval("SELECT id FROM memories WHERE content = 'Running was a habit for a while.'")
    links = await pool.fetch("SELECT source_id FROM memory_supersedes WHERE insight_id = $1 ORDER BY 1", new_id)
    assert [r["source_id"] for r in links] == sorted([insight, s1, s2])
    # neither the old (superseded) nor the new insight (just evaluated) is asked again
    await run_reevaluation(_recon(pool, embedder, llm), {})
    assert len(llm.calls) == 1


async def test_offline_reconsolidation_and_contextual_are_skipped_and_logged(pool):
    embedder = HashEmbedder()
    await _conflict_setup(pool, embedder)
    llm = ScriptedLLM(configured=False)
    ctx = _recon(pool, embedder, llm)
    for step in (run_conflicts, run_reevaluation):
        await step(ctx, {})
    ctx.llm = None                                           # reflex mode: no model at all
    assert await run_contextual(ctx, {}) == 0
    assert ctx.skipped_steps == {"reconsolidation (conflicts)": "no language model is configured",
                                 "reconsolidation (re-evaluation)": "no language model is configured",
                                 "contextual retrieval": "no language model is configured"}
    assert llm.calls == []
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE content_contextualized IS NOT NULL") == 0


async def test_contextual_text_changes_full_text_match_and_embedding(pool):
    embedder = HashEmbedder()
    ids = [await _with_vector(pool, embedder, text, created=days_ago(3 - i))
           for i, text in enumerate(["we talked about the release", "it failed twice", "then it worked"])]
    before = {r["id"]: r["embedding"].to_numpy() for r in await pool.fetch("SELECT id, embedding FROM memories")}

    def contexts(question, schema):
        assert schema.__name__ == "ContextBatch"
        # the session: what was stored just before each memory
        assert f'<session>\n- we talked about the release\n</session>\n<memory id="{ids[1]}"' in question
        found = [int(x) for x in re.findall(r'<memory id="(\d+)"', question)]
        return {"contexts": [{"id": i, "context": f"Kubernetes rollout chat, memory {i}"} for i in found]}

    llm = ScriptedLLM(meta=contexts)
    settings = EvolutionSettings(contextual=ContextualSettings(batch_size=2, max_calls_per_pass=1))
    budget, counts = CallBudget(10), {}
    ctx = step_context(pool, embedder, llm, settings, phase="contextual", budget=budget)
    assert await run_contextual(ctx, counts) == 2
    assert counts == {"contextualized": 2} and budget.used == 1
    assert [c.purpose for c in llm.calls] == ["consolidation:contextual"]
    rows = {r["id"]: r for r in await pool.fetch(
        "SELECT id, content, content_contextualized, embedding, content_tsv @@ 'kubernet'::tsquery AS hit "
        "FROM memories")}
    newest = [ids[2], ids[1]]                                 # newest first; the oldest waits for the next pass
    for mid in newest:
        assert rows[mid]["content_contextualized"] == f"Kubernetes rollout chat, memory {mid}\n\n{rows[mid]['content']}"
        assert rows[mid]["hit"] is True
        expected = (await embed_memories(embedder, [rows[mid]["content_contextualized"]], ["episodic"]))[0]
        assert rows[mid]["embedding"].to_numpy() == pytest.approx(expected, abs=1e-3)
        assert not np.allclose(rows[mid]["embedding"].to_numpy(), before[mid], atol=1e-3)
    assert rows[ids[0]]["content_contextualized"] is None and rows[ids[0]]["hit"] is False
