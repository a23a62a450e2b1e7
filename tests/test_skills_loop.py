"""Skills in the running loop: the section in a System 1 prompt whose focus is near a skill,
RECALL_SKILL through the loop's tool protocol, the counters. Real loop and database; the
model is scripted and the embedder is the bag-of-words fake, both recording what they are sent."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np

from src.config import load_settings
from src.db.manifest import record_start
from src.mind import build_mind
from src.providers.costs import CostLedger
from src.providers.endpoint_gate import EndpointGates
from src.providers.settings import ProvidersSettings
from src.skills import repository as repo
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM

CSV = dict(label="csv_summary", name="CSV summary", when_to_use="When the user asks to summarise a CSV file.",
           procedure="1. Read the header.\n2. Count rows.\n3. Report per-column types and nulls.")
TEA = dict(label="tea_brewing_procedure", name="Tea brewing", when_to_use="When the guardian wants to brew tea.",
           procedure="1. Boil the water to 90 °C.\n2. Warm the pot.\n3. Steep exactly 3 minutes.")
#: The fake embedder's cosine is the share of words two texts have in common (about 0.25 for
#: "please summarise sales.csv for me" and the CSV skill's cue, under 0.06 for an unrelated
#: question): its own floor, as each real embedder has one (tests/test_skills_relevance.py).
NEAR = {"skills": {"near_similarity": {"fake-hash-768": 0.15}}}


def _meta(question: str, schema: type) -> dict:
    if schema.__name__ == "FokAnswer":
        return {"judgement": "KNOWN", "confidence": 0.9}
    if schema.__name__ == "ContradictionAnswer":
        return {"contradicts": False, "summary_a": "same"}
    if schema.__name__ == "RelationsAnswer":     # a user's statement and earlier ones (src/gates/updates.py)
        return {"updates": 0, "contradicts": [], "summary_a": "same"}
    raise AssertionError(f"unexpected meta call {schema.__name__}")


def this_turn(call) -> str:
    """What a model request says for its turn: the system prompt and the last message with
    any context it carries (the skills section sits in one or the other, by the prompt's
    layout), not the earlier turns of the window."""
    last = call.messages[-1]
    return "\n".join([call.system or "", last.content, getattr(last, "context", None) or ""])


async def _mind(pool, tmp_path, system1, overrides=None, embedder=None):
    settings = load_settings(tmp_path / "none.yaml", env={}, overrides={
        "gates": {"seed": 1, "exit": {"noise_floor": 0.0}},
        "layers": {"values_path": str(tmp_path / "v.json"), "goals_path": str(tmp_path / "g.json"),
                   "cache_dir": str(tmp_path / "cache")}, **NEAR, **(overrides or {})})
    system1.meta = _meta
    providers = SimpleNamespace(endpoints=EndpointGates(), embedder=embedder or HashEmbedder(), reranker=None,
                                system1=system1,
                                system2=ScriptedLLM(configured=False), meta=system1,
                                ledger=CostLedger(pool, session_id="s", prices=ProvidersSettings().prices))
    delivered: list[str] = []
    manifest = await record_start(pool, "s", "fake-hash-768")
    mind = await build_mind(settings, pool, providers, session_id="s", manifest=manifest,
                            deliver=delivered.append, rng=np.random.default_rng(3))
    return mind, delivered


async def test_a_prompt_near_a_skill_carries_the_skills_section_and_the_memory_mode(pool, tmp_path):
    await repo.create(pool, **CSV)
    system1 = ScriptedLLM().say("Sure. Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, system1)
    await mind.loop.submit("user", "please summarise sales.csv for me")
    await mind.loop.run(burst=True)
    system = system1.of("generate")[0].messages[-1].context    # with the input (src/loop/turn_context.py)
    assert ("[PROCEDURAL MEMORY — skills available]\nProcedures you have learned, one per line: label — when "
            "to use it. Recall one (RECALL_SKILL) only when it fits the task at hand.\n"
            f"- csv_summary — {CSV['when_to_use']}") in system
    assert "Memory mode: autopilot — I decide what to keep." in system
    assert delivered == ["Sure."]


async def test_an_unrelated_question_gets_no_skills_section_and_no_verb(pool, tmp_path):
    """Measured with a 1.5B model: with the skills line in every prompt, "what is my pet's
    name?" was answered `RECALL_SKILL: tea_brewing_procedure`. Far from every skill, the
    prompt lists none and offers no verb, and a call made anyway is refused."""
    await repo.create(pool, **CSV)
    await repo.create(pool, **TEA)
    system1 = ScriptedLLM().say("RECALL_SKILL: tea_brewing_procedure", "I don't know your pet's name yet. "
                                "Confidence: 0.9")
    embedder = HashEmbedder()
    mind, delivered = await _mind(pool, tmp_path, system1, embedder=embedder)
    await mind.loop.submit("user", "What is my pet's name?")
    await mind.loop.cycle()
    first, second = system1.of("generate")
    assert "What is my pet's name?" in this_turn(first)
    assert "PROCEDURAL MEMORY" not in this_turn(first) and "RECALL_SKILL" not in this_turn(first)
    assert "RECALL_SKILL" not in this_turn(second)
    assert delivered == ["I don't know your pet's name yet."]
    [tool] = json.loads(await pool.fetchval("SELECT actions FROM thought_log"))[1:]
    assert (tool["verb"], tool["refused"], tool["error"]) == (
        "RECALL_SKILL", True, "error: RECALL_SKILL is not available for this message")
    # the two new skills' cues were embedded once, as documents, to be judged by their vectors
    [cues] = [c for c in embedder.calls if any("CSV summary." in t for t in c.texts)]
    assert cues.task_type == "RETRIEVAL_DOCUMENT"
    assert sorted(cues.texts) == [
        f"csv summary. CSV summary. {CSV['when_to_use']}\n{CSV['procedure']}",
        f"tea brewing procedure. Tea brewing. {TEA['when_to_use']}\n{TEA['procedure']}"]
    assert await pool.fetchval("SELECT count(*) FROM skills WHERE cue_embed_model = 'fake-hash-768'") == 2
    assert (await repo.get(pool, "tea_brewing_procedure")).recommended == 0


async def test_a_related_question_is_offered_the_skill_near_it_and_only_that_one(pool, tmp_path):
    await repo.create(pool, **CSV)
    await repo.create(pool, **TEA)
    system1 = ScriptedLLM().say("RECALL_SKILL: tea_brewing_procedure", "Steep it exactly 3 minutes. Confidence: 0.9",
                                "Lisbon, I think. Confidence: 0.9")
    embedder = HashEmbedder()
    mind, delivered = await _mind(pool, tmp_path, system1, embedder=embedder)
    await mind.loop.submit("user", "How long should I steep the tea?")
    await mind.loop.cycle()
    await mind.loop.submit("user", "Where did I say my sister lives?")
    await mind.loop.cycle()
    tea_first, tea_second, sister = system1.of("generate")
    assert (f"only when it fits the task at hand.\n- tea_brewing_procedure — {TEA['when_to_use']}"
            in this_turn(tea_first))
    assert "csv_summary" not in this_turn(tea_first)
    assert "`RECALL_SKILL: <label>`" in this_turn(tea_first)
    assert tea_second.messages[-1].content.endswith(TEA["procedure"])
    assert "Where did I say my sister lives?" in this_turn(sister)
    assert "PROCEDURAL MEMORY" not in this_turn(sister) and "RECALL_SKILL" not in this_turn(sister)
    assert delivered == ["Steep it exactly 3 minutes.", "Lisbon, I think."]
    assert len([c for c in embedder.calls if any("Tea brewing." in t for t in c.texts)]) == 1   # cues embedded once
    skill = await repo.get(pool, "tea_brewing_procedure")
    assert (skill.recommended, skill.used) == (1, 1)


async def test_no_skills_no_section(pool, tmp_path):
    system1 = ScriptedLLM().say("Hello. Confidence: 0.9")
    mind, _ = await _mind(pool, tmp_path, system1)
    await mind.loop.submit("user", "hello there, how are you today")
    await mind.loop.run(burst=True)
    assert "PROCEDURAL MEMORY" not in system1.of("generate")[0].messages[-1].text


async def test_recall_skill_with_a_misspelt_label_through_the_loop(pool, tmp_path):
    await repo.create(pool, **CSV)
    s1 = ScriptedLLM().say("RECALL_SKILL: csv_sumary", "Read the header, count rows, report types. Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, s1)
    await mind.loop.submit("user", "please summarise sales.csv for me")
    await mind.loop.cycle()
    first, second = s1.of("generate")
    assert "`RECALL_SKILL: <label>`" in first.system
    assert second.messages[-2].content == "RECALL_SKILL: csv_sumary"
    assert second.messages[-1].content.startswith(
        "[RECALL_SKILL csv_sumary]\nwarning: no skill is called 'csv_sumary'; using the closest, 'csv_summary'.\n"
        "Skill `csv_summary` — CSV summary (version 1)")
    assert second.messages[-1].content.endswith(CSV["procedure"])
    assert delivered == ["Read the header, count rows, report types."]     # the protocol line never is
    skill = await repo.get(pool, "csv_summary")
    assert (skill.recommended, skill.used) == (1, 1)                        # credited to the resolved label
    [tool] = json.loads(await pool.fetchval("SELECT actions FROM thought_log"))[1:]
    assert tool == {"kind": "tool", "verb": "RECALL_SKILL", "argument": "csv_sumary", "refused": False,
                    "action_kind": "internal", "allowed": True,
                    "reason": "internal actions change only the mind's own state"}


async def test_offering_a_skill_does_not_send_a_confident_turn_to_system2(pool, tmp_path):
    """RECALL_SKILL only reads a procedure: offering it is no irreversible action (it was
    once unlisted, so every turn with a skill in the prompt escalated)."""
    await repo.create(pool, **CSV)
    system1 = ScriptedLLM().say("Sure, send me the file. Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, system1)
    await mind.loop.submit("user", "please summarise sales.csv for me")
    record = await mind.loop.cycle()
    assert "RECALL_SKILL" in system1.of("generate")[0].system               # offered this turn
    assert (record.escalated, record.path, delivered) == (False, "system1", ["Sure, send me the file."])
    assert {v: mind.loop.tools.kind(v) for v in mind.loop.tools.verbs} == {
        "READ_DOC": "read_doc", "LIST_DOCS": "read_doc", "GOAL_ACHIEVED": "internal", "RECALL_SKILL": "internal"}


async def test_an_unknown_label_gets_the_list_and_the_model_asks_again(pool, tmp_path):
    await repo.create(pool, **CSV)
    s1 = ScriptedLLM().say("RECALL_SKILL: quantum_gravity", "RECALL_SKILL: csv_summary",
                           "Header, rows, types. Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, s1)
    await mind.loop.submit("user", "please summarise sales.csv for me")
    await mind.loop.cycle()
    _, second, third = s1.of("generate")
    assert second.messages[-1].content == (
        "[RECALL_SKILL quantum_gravity]\nNo skill is called 'quantum_gravity'. Known skills: csv_summary. "
        "Reply `RECALL_SKILL: <label>` with one of them, or answer without a skill.")
    assert third.messages[-1].content.startswith("[RECALL_SKILL csv_summary]\nSkill `csv_summary`")
    assert delivered == ["Header, rows, types."]
    skill = await repo.get(pool, "csv_summary")
    assert (skill.recommended, skill.used) == (1, 1)


async def test_without_skills_the_verb_is_not_offered_and_a_stray_call_is_refused(pool, tmp_path):
    s1 = ScriptedLLM().say("RECALL_SKILL: anything", "Hello there. Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, s1)
    await mind.loop.submit("user", "hello there, how are you today")
    await mind.loop.cycle()
    first, second = s1.of("generate")
    assert "RECALL_SKILL" not in first.system
    assert delivered == ["Hello there."]
    [tool] = json.loads(await pool.fetchval("SELECT actions FROM thought_log"))[1:]
    assert {k: tool[k] for k in ("kind", "verb", "argument", "refused", "error")} == {
        "kind": "tool", "verb": "RECALL_SKILL", "argument": "anything", "refused": True,
        "error": "error: RECALL_SKILL is not available for this message"}
