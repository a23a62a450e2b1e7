"""Deep consolidation proposes a skill from a cluster of procedural memories; the proposal
waits for approval. Real PostgreSQL; System 1 is a scripted fake that records its calls."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from src.skills import repository as repo
from src.skills.drafting import DRAFT_SYSTEM, OFFLINE_REFUSAL, SkillDraft
from src.skills.proposal import apply_proposal, fingerprint, propose_skill, reject_proposal
from src.skills.repository import SkillError
from tests.fakes_llm import ScriptedLLM

NOW = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)
DRAFT = {"label": "plant_watering", "name": "Plant watering", "when_to_use": "When a house plant looks dry.",
         "procedure": "1. Feel the soil.\n2. Water until it drains.\n3. Empty the saucer."}


class Queue:
    """Stands in for the approval queue's insert; records what it is asked to queue."""

    def __init__(self):
        self.calls = []

    async def __call__(self, conn, kind, payload, reason, now):
        assert conn.is_in_transaction()          # queued in the proposal's transaction
        self.calls.append((kind, dict(payload), reason, now))
        return 100 + len(self.calls)


async def _procedural(pool, *texts, memory_type="procedural"):
    return [await pool.fetchval("INSERT INTO memories (content, memory_type) VALUES ($1, $2) RETURNING id",
                                t, memory_type) for t in texts]


async def test_a_cluster_becomes_a_pending_proposal_then_a_skill_on_approval(pool):
    ids = await _procedural(pool, "How-to instruction: water the fern when the soil is dry",
                            "How-to instruction: empty the saucer after watering the fern")
    other = await _procedural(pool, "we talked about ferns", memory_type="episodic")
    llm, queue = ScriptedLLM(meta=lambda question, schema: DRAFT), Queue()
    proposal = await propose_skill(pool, llm, [*ids, *other], enqueue=queue, now=NOW)
    assert proposal.memory_ids == tuple(ids) and proposal.approval_id == 101
    (call,) = llm.of("meta_call_structured")          # isolated: no identity, no conversation
    assert (call.purpose, call.schema, call.messages) == ("consolidation:skills", SkillDraft, ())
    assert call.question.startswith(DRAFT_SYSTEM)
    assert f"[memory {ids[0]}] How-to instruction: water the fern" in call.question
    assert "we talked about ferns" not in call.question
    [(kind, payload, reason, at)] = queue.calls
    assert (kind, at) == ("skill", NOW)
    assert payload == {"proposal_id": proposal.id, "memory_ids": ids, **DRAFT}
    assert reason == "skill 'plant_watering' from 2 procedural memories: When a house plant looks dry."
    assert await repo.labels(pool) == []                      # nothing before approval

    assert await propose_skill(pool, llm, ids, enqueue=queue, now=NOW) is None   # proposed once
    assert len(llm.calls) == 1

    ok, message = await apply_proposal(pool, {**payload, "approval_id": 101}, NOW)
    assert (ok, message) == (True, "skill 'plant_watering' saved from 2 procedural memories")
    skill = await repo.get(pool, "plant_watering")
    assert skill.provenance == {"origin": "consolidation", "memory_ids": ids, "approval_id": 101}
    row = await pool.fetchrow("SELECT status, skill_id, decided_at, fingerprint FROM skill_proposals")
    assert (row["status"], row["skill_id"], row["decided_at"], row["fingerprint"]) == (
        "approved", skill.id, NOW, fingerprint(ids))
    assert await apply_proposal(pool, payload, NOW) == (False, f"skill proposal #{proposal.id} was already approved")


async def test_rejected_cluster_is_not_proposed_again_and_offline_is_refused(pool):
    ids = await _procedural(pool, "How-to instruction: restart the router", "How-to instruction: check cables")
    queue = Queue()
    with pytest.raises(SkillError, match=re.escape(OFFLINE_REFUSAL)):
        await propose_skill(pool, ScriptedLLM(configured=False), ids, enqueue=queue, now=NOW)
    assert queue.calls == [] and await pool.fetchval("SELECT count(*) FROM skill_proposals") == 0
    proposal = await propose_skill(pool, ScriptedLLM(meta=lambda q, schema: DRAFT), ids, enqueue=queue, now=NOW)
    await reject_proposal(pool, {"proposal_id": proposal.id}, NOW)
    assert await pool.fetchval("SELECT status FROM skill_proposals") == "rejected"
    assert await propose_skill(pool, ScriptedLLM(), list(reversed(ids)), enqueue=queue, now=NOW) is None
    assert json.loads(await pool.fetchval("SELECT draft FROM skill_proposals"))["label"] == "plant_watering"
    assert await propose_skill(pool, ScriptedLLM(), await _procedural(pool, "chat", memory_type="episodic"),
                               enqueue=queue, now=NOW) is None


async def test_the_deep_pass_phase_proposes_from_a_procedural_cluster_and_approve_saves_it(pool):
    import random

    from src.consolidation.deep.phase import CallBudget, DeepPassContext
    from src.consolidation.evolution import approvals
    from src.consolidation.evolution.settings import EvolutionSettings
    from src.consolidation.settings import ConsolidationSettings
    from src.recall.store import MemoryStore, NewMemory
    from src.skills import consolidation as skills_phase
    from src.weights.safety import Safety
    from tests.fakes import HashEmbedder

    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    texts = ["water the fern when the soil is dry and empty the saucer",
             "water the fern when the soil is dry, then empty the saucer",
             "water the fern when soil is dry and always empty the saucer"]
    ids = [await store.store(NewMemory(t, "procedural")) for t in texts]
    await store.store(NewMemory("water the fern when the soil is dry and empty the saucer"))  # episodic: not a pattern
    llm = ScriptedLLM(meta=lambda question, schema: DRAFT)
    ctx = DeepPassContext(pool=pool, embedder=embedder, llm=llm, safety=Safety(), settings=ConsolidationSettings(),
                          now=NOW, rng=random.Random(1), pass_id=1, budget=CallBudget(limit=5),
                          phase="skills")
    result = await skills_phase.run(ctx)
    assert (result.counts, result.calls, ctx.budget.used) == ({"proposed": 1}, 1, 1)
    (call,) = llm.of("meta_call_structured")
    assert call.purpose == "consolidation:skills"
    again = await skills_phase.run(ctx)                            # a resumed or later pass
    assert (again.counts, again.calls) == ({"already_proposed": 1}, 0)

    approval = await pool.fetchrow("SELECT id, kind, reason FROM approvals")
    assert (approval["kind"], approval["reason"]) == (
        "skill", "skill 'plant_watering' from 3 procedural memories: When a house plant looks dry.")
    decision = approvals.ApprovalContext(pool, Safety(), EvolutionSettings(), NOW)
    answer = await approvals.decide(decision, str(approval["id"]), approve=True)
    assert answer == (f"approval #{approval['id']} (skill) approved: skill 'plant_watering' saved from "
                      "3 procedural memories")
    skill = await repo.get(pool, "plant_watering")
    assert skill.provenance == {"origin": "consolidation", "memory_ids": ids, "approval_id": approval["id"]}
