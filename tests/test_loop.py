"""The attentional loop in-process (plan §3.4–§3.7): one pipeline, five sources, real PostgreSQL.

Fakes only at the provider seam: HashEmbedder and ScriptedLLM (which record what they
are sent). Everything else — gates, recall, context assembly, escalation, thought_log —
is the real code on the real database.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import asyncpg
import numpy as np
import pytest

from src.config import load_settings
from src.db.manifest import record_start
from src.loop.prompts import CONTEXT_CLOSE, CONTEXT_OPEN
from src.loop.tool_protocol import NO_TOOLS_NOTE
from src.metacognition.confidence import VERBALIZED_CONFIDENCE_INSTRUCTION
from src.mind import build_mind
from src.providers.costs import CostLedger
from src.providers.endpoint_gate import EndpointGates
from src.providers.settings import ProvidersSettings
from src.recall.store import MemoryStore, NewMemory
from src.tools.verbs import ToolVerb
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM

CONFIDENT = "Earl grey, every morning. Confidence: 0.95"
HEDGED = "I'm not sure, maybe tea? Perhaps coffee? I might be wrong. Confidence: 0.1"


def _meta(question: str, schema: type, fok=("KNOWN", 0.9)) -> dict:
    if schema.__name__ == "FokAnswer":
        return {"judgement": fok[0], "confidence": fok[1]}
    if schema.__name__ == "ContradictionAnswer":
        return {"contradicts": False, "summary_a": question.splitlines()[-1][:60]}
    if schema.__name__ == "RelationsAnswer":     # a user's statement and earlier ones (src/gates/updates.py)
        return {"updates": 0, "contradicts": [], "summary_a": question.splitlines()[-1][:60]}
    raise AssertionError(f"unexpected meta call {schema.__name__}")


async def _mind(pool, tmp_path, *, system1=None, system2=None, overrides=None, fok=("KNOWN", 0.9),
                session="test-session", embedder=None):
    settings = load_settings(tmp_path / "none.yaml", env={}, overrides={
        "gates": {"seed": 1, "exit": {"noise_floor": 0.0}},
        "layers": {"values_path": str(tmp_path / "v.json"), "goals_path": str(tmp_path / "g.json"),
                   "cache_dir": str(tmp_path / "cache")},
        **(overrides or {})})
    providers = SimpleNamespace(endpoints=EndpointGates(),
        embedder=embedder or HashEmbedder(), reranker=None,
        system1=system1 or ScriptedLLM(configured=False), system2=system2 or ScriptedLLM(configured=False),
        meta=system1 or ScriptedLLM(configured=False),
        ledger=CostLedger(pool, session_id=session, prices=ProvidersSettings().prices))
    if system1 is not None:
        system1.meta = lambda q, schema: _meta(q, schema, fok)
    delivered: list[str] = []
    manifest = await record_start(pool, session, "fake-hash-768")
    mind = await build_mind(settings, pool, providers, session_id=session, manifest=manifest,
                            deliver=delivered.append, rng=np.random.default_rng(3))
    return mind, delivered


async def test_every_source_goes_through_the_same_pipeline_with_its_tag(pool, tmp_path):
    mind, delivered = await _mind(pool, tmp_path)
    t = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
    for source, text in [("user", "I drink earl grey tea every morning"),
                         ("dmn", "I just remembered the blue bicycle, it connects to mornings"),
                         ("consolidation", "I notice a pattern about tea and mornings"),
                         ("gut", "something feels unsettled about the garden plans"),
                         ("scheduled", "time to review what I learned this week")]:
        assert await mind.loop.submit(source, text, now=t) is not None
    ran = await mind.loop.run(burst=True)
    assert ran == 5
    rows = await pool.fetch("SELECT cycle, source_tag, winner, candidates, context_summary, output, actions "
                            "FROM thought_log ORDER BY cycle")
    assert [r["cycle"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[0]["source_tag"] == "external_user"            # the user wins on urgency
    assert sorted(r["source_tag"] for r in rows) == sorted(
        ["external_user", "internal_dmn", "internal_consolidation", "internal_gut", "internal_scheduled"])
    assert len(json.loads(rows[0]["candidates"])) == 5           # everyone competed in cycle 1
    for r in rows:                                               # same stages for every source
        summary = json.loads(r["context_summary"])
        assert set(summary["timings_ms"]) == {"recall", "assembly", "think"}
        assert r["output"].startswith("(reflex mode — ")
    # reflex mode: the user is answered; self-generated thoughts stay internal (confidence unknown)
    acts = {r["source_tag"]: json.loads(r["actions"])[0] for r in rows}
    assert acts["external_user"]["allowed"] is True
    assert acts["internal_dmn"]["allowed"] is False
    assert len(delivered) == 1
    scratch = {r["source_tag"] for r in await pool.fetch("SELECT DISTINCT source_tag FROM scratch_buffer")}
    assert scratch >= {"external_user", "internal_dmn", "internal_consolidation", "internal_scheduled"}


async def test_state_report_and_memories_reach_system1(pool, tmp_path):
    s1 = ScriptedLLM().say(CONFIDENT)
    mind, delivered = await _mind(pool, tmp_path, system1=s1)
    await mind.store.store(NewMemory("I drink earl grey tea every morning"))
    await mind.loop.submit("user", "what do I drink every morning?")
    await mind.loop.submit("dmn", "the garden needs water")
    record = await mind.loop.cycle()
    assert record.winner.source == "user"
    [call] = s1.of("generate")
    # what changes every turn goes with the input, after the conversation (issue 38: a
    # server's prompt cache keeps what comes before it); the system prompt holds none of it
    context = call.messages[-1].context
    assert "[COGNITIVE STATE]" in context
    assert '  - User message: "what do I drink every morning?" (salience: ' in context
    assert "Winner: User message" in context
    assert "I drink earl grey tea every morning" in context       # recalled, injected
    assert context.startswith(CONTEXT_OPEN) and context.endswith("Session cost: $0.00 | 24h: $0.00\n\n" + CONTEXT_CLOSE)
    assert "earl grey" not in call.system and "[COGNITIVE STATE]" not in call.system
    # §2.11's verbalized signal is asked for; no tool line: the question is not about the mind
    assert call.system.endswith("\n\n" + VERBALIZED_CONFIDENCE_INSTRUCTION)
    assert call.messages[-1].content == "what do I drink every morning?"
    assert call.messages[-1].text == f"{context}\n\nwhat do I drink every morning?"
    assert delivered == ["Earl grey, every morning."]
    # the winner is embedded once per cycle (for salience) and that vector is reused by
    # recall and the reflection bank: a paid embedding is not bought twice
    query_calls = [c for c in mind.providers.embedder.calls
                   if c.task_type == "RETRIEVAL_QUERY" and "what do I drink every morning?" in c.texts]
    assert len(query_calls) == 1
    fok_calls = s1.of("meta_call_structured")
    assert fok_calls and all(c.messages == () for c in fok_calls)   # isolated meta calls


async def test_a_fact_just_said_reaches_the_model_for_a_question_in_other_words(pool, tmp_path):
    """Before any flush, "Which medicine must I avoid?" shares no word with "I'm allergic to
    penicillin.": the turn's context carries the line (working memory's vector path), and
    the cycle's log names the scratch row it came from."""
    s1 = ScriptedLLM().say("You are allergic to penicillin. Confidence: 0.9",
                           "Penicillin. Confidence: 0.9")
    embedder = HashEmbedder(alias={"medicine": "drug", "penicillin": "drug", "avoid": "allergic"})
    mind, delivered = await _mind(pool, tmp_path, system1=s1, embedder=embedder, overrides={
        "recall": {"retrieval": {"arms": {"fake-hash-768": {"working_floor": 0.3}}}}})
    await mind.loop.submit("user", "I'm allergic to penicillin.")
    await mind.loop.cycle()
    await mind.loop.submit("user", "Which medicine must I avoid?")
    await mind.loop.cycle()
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE content LIKE '%penicillin%'") == 0
    context = s1.of("generate")[-1].messages[-1].context
    assert "just said, not yet consolidated] The user said: I'm allergic to penicillin." in context
    summary = json.loads(await pool.fetchval("SELECT context_summary FROM thought_log ORDER BY id DESC LIMIT 1"))
    fact_row = await pool.fetchval("SELECT id FROM scratch_buffer WHERE content = $1", "I'm allergic to penicillin.")
    assert summary["working_scratch_ids"] == [fact_row]


async def test_the_users_question_about_themselves_is_not_shown_other_peoples_lines(pool, tmp_path):
    s1 = ScriptedLLM().say("Lapsang souchong. Confidence: 0.9", "Emi loves mint tea. Confidence: 0.9")
    mind, _ = await _mind(pool, tmp_path, system1=s1)
    await mind.store.store(NewMemory("My favourite tea is lapsang souchong"))
    await mind.store.store(NewMemory("I love mint tea, it is my favourite tea", source_tag="import",
                                     metadata={"speaker": "Emi"}))
    await mind.loop.submit("user", "Which tea is my favourite?")
    await mind.loop.cycle()
    context = s1.of("generate")[-1].messages[-1].context
    assert "The user said: My favourite tea is lapsang souchong" in context and "Emi said" not in context
    await mind.loop.submit("user", "What tea does Emi love?")          # not about the user
    await mind.loop.cycle()
    assert "Emi said: I love mint tea" in s1.of("generate")[-1].messages[-1].context


async def test_low_confidence_retries_once_then_escalates_and_the_correction_surfaces(pool, tmp_path):
    s1 = ScriptedLLM().say(HEDGED, HEDGED)
    s2 = ScriptedLLM(model="scripted-2").answer_structured({
        "answer": "You drink earl grey every morning.", "explanation": "stated earlier",
        "needed_correction": True, "error_type": "hedged on a known fact",
        "correction_pattern": "state remembered preferences plainly"})
    mind, delivered = await _mind(pool, tmp_path, system1=s1, system2=s2, fok=("UNKNOWN", 0.1))
    await mind.loop.submit("user", "what tea do I drink in the morning?")
    record = await mind.loop.cycle()
    assert record.escalated is True and record.path == "system2"
    assert len(s1.of("generate")) == 2 and len(s2.of("generate_structured")) == 1
    assert delivered == ["You drink earl grey every morning."]
    row = await pool.fetchrow("SELECT escalated, confidence FROM thought_log")
    assert row["escalated"] is True
    correction = await pool.fetchrow("SELECT content, source_tag FROM memories WHERE memory_type = 'correction'")
    assert correction["source_tag"] == "internal_system2"
    # next time, a similar focus brings the correction into System 1's prompt
    s1.say(CONFIDENT)
    await mind.loop.submit("user", "which tea do I drink in the morning?")
    await mind.loop.cycle()
    assert "In similar past situations, you made these errors" in s1.of("generate")[-1].messages[-1].context


async def test_pruning_gives_the_exit_gate_only_what_the_entry_gate_skipped(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path, overrides={
        "context": {"budget": {"context_window": 10300, "identity_cap": 3000, "situational": 2000,
                               "output_reserve": 4000}},
        "gates": {"seed": 1, "exit": {"noise_floor": 0.0},
                  "entry": {"short_skip_rate": 1.0},          # every short input is skipped
                  "scratch": {"prune_embed_interval_s": 0.0}}})
    assert mind.loop.fifo.max_tokens == 10300 - (100 + 3000 + 2000 + 200 + 4000)
    long = " ".join(["the lighthouse keeper counted ships in the fog"] * 12)
    for i in range(12):
        await mind.loop.submit("user", f"{i}: {long}")
        await mind.loop.cycle()
        await mind.loop.submit("user", f"ok {i}")              # < 10 chars: the entry gate skips it
        await mind.loop.cycle()
    pruned = [r["content"] for r in await pool.fetch(
        "SELECT content FROM scratch_buffer WHERE tags @> ARRAY['pruned'] ORDER BY id")]
    assert pruned and set(pruned) <= {f"ok {i}" for i in range(12)}   # the last chance, for what was skipped
    # what the entry gate buffered is judged once, by the scratch flush — never again when pruned
    copies = await pool.fetch("SELECT content, count(*) AS n FROM scratch_buffer WHERE content LIKE '%lighthouse%' "
                              "GROUP BY content")
    assert len(copies) == 12 and {r["n"] for r in copies} == {1}
    assert mind.loop.fifo.tokens <= mind.loop.fifo.max_tokens


async def test_system1_reads_its_own_docs_read_only(pool, tmp_path):
    s1 = ScriptedLLM().say("READ_DOC: README.md", "I am MoltBot, I read my README. Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, system1=s1)
    await mind.loop.submit("user", "what are you, according to your README?")
    await mind.loop.cycle()
    first, second = s1.of("generate")
    assert "`READ_DOC: <relative path>`" in first.system and "Readable: src, notes.md, README.md." in first.system
    assert second.system == first.system
    assert second.messages[-2].content == "READ_DOC: README.md"
    assert second.messages[-1].content.startswith("[READ_DOC README.md]\n")
    assert "make run" in second.messages[-1].content
    assert delivered == ["I am MoltBot, I read my README."]
    actions = json.loads(await pool.fetchval("SELECT actions FROM thought_log"))
    # each tool call also carries the action check's verdict for its kind (issue 15)
    assert actions[1:] == [{"kind": "tool", "verb": "READ_DOC", "argument": "README.md", "refused": False,
                            "action_kind": "read_doc", "allowed": True,
                            "reason": "reading its own docs is read-only"}]


async def test_system1_lists_its_files_then_reads_one(pool, tmp_path):
    s1 = ScriptedLLM().say("LIST_DOCS: src/loop", "READ_DOC: src/loop/turns.py",
                           "Turns are combined in src/loop/turns.py. Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, system1=s1)
    await mind.loop.submit("user", "which file holds your loop code?")
    await mind.loop.cycle()
    first, second, third = s1.of("generate")
    assert "`LIST_DOCS: <relative directory, or . for all>`" in first.system
    listing = second.messages[-1].content
    assert listing.startswith("[LIST_DOCS src/loop]\n") and "src/loop/cognitive_loop.py (" in listing
    assert third.messages[-1].content.startswith('[READ_DOC src/loop/turns.py]\n"""')
    assert "__pycache__" not in listing and delivered == ["Turns are combined in src/loop/turns.py."]
    actions = json.loads(await pool.fetchval("SELECT actions FROM thought_log"))
    assert [(a["verb"], a["action_kind"], a["allowed"], a["refused"]) for a in actions[1:]] == [
        ("LIST_DOCS", "read_doc", True, False), ("READ_DOC", "read_doc", True, False)]


async def test_a_model_that_only_looks_things_up_gives_the_user_what_it_found(pool, tmp_path):
    """Issue 38's script: asked "How do I brew my tea, step by step?", a 1.5B model answered
    with tool calls even when asked to answer without tools. What its last call found is what the
    user asked for: it is the reply, said as found, instead of "I cannot answer"."""
    s1 = ScriptedLLM().say(*["LIST_DOCS: src/loop"] * 6)
    mind, delivered = await _mind(pool, tmp_path, system1=s1)
    await mind.loop.submit("user", "which file holds your loop code?")
    record = await mind.loop.cycle()
    assert record.path == "tool_result" and record.output == delivered[0]
    assert delivered[0].startswith("(The language model only looked this up — LIST_DOCS: src/loop — ")
    assert "src/loop/cognitive_loop.py (" in delivered[0] and "LIST_DOCS src/loop]" not in delivered[0]


async def test_a_model_that_only_writes_tool_lines_never_reaches_the_user(pool, tmp_path):
    """Issue 18: a small model answered with `READ_DOC:` lines; none may be delivered, and the
    refusal must not be what the next cycle answers."""
    s1 = ScriptedLLM().say(*["READ_DOC: /etc/passwd"] * 3, "Nice to meet you, Dana. Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, system1=s1)
    await mind.loop.submit("user", "What do your notes say about the FIFO?")
    record = await mind.loop.cycle()
    asked, again = s1.of("generate")
    assert "READ_DOC" in asked.system and "READ_DOC" not in again.system   # the last request has no tools
    assert again.system.endswith(NO_TOOLS_NOTE)
    assert [m.content for m in again.messages] == ["What do your notes say about the FIFO?"]
    assert record.path == "tool_protocol_failed" and record.output == delivered[0]
    assert delivered == ["(I cannot answer in words right now: the language model answered with a tool call "
                         "instead of words, even when asked to answer without tools.)\n"
                         "Nothing comes back from memory yet."]
    actions = json.loads(await pool.fetchval("SELECT actions FROM thought_log"))
    assert actions[1:] == [{"kind": "tool", "verb": "READ_DOC", "argument": "/etc/passwd", "refused": True,
                            "error": "error: '/etc/passwd' is outside the readable documents "
                                     "(src, notes.md, README.md)",
                            "action_kind": "read_doc", "allowed": True,
                            "reason": "reading its own docs is read-only"}]
    # next cycle: an ordinary message is offered no tool; the third tool line is refused unrun
    await mind.loop.submit("user", "Hello! My name is Dana.")
    await mind.loop.cycle()
    third, final = s1.of("generate")[2:]
    assert "READ_DOC" not in third.system
    window = [m.content for m in third.messages]
    # the failure reply was said, never kept in the window (issue 27): the model does not see it again
    assert window == ["What do your notes say about the FIFO?", "Hello! My name is Dana."]
    assert [m.content for m in final.messages] == window
    assert delivered[1] == "Nice to meet you, Dana."
    assert not any("READ_DOC" in d for d in delivered)
    assert [m.content for m in mind.loop.fifo.window(10_000)][-2:] == ["Hello! My name is Dana.",
                                                                         "Nice to meet you, Dana."]


async def test_a_tool_line_in_the_middle_of_a_reply_is_run_and_not_delivered(pool, tmp_path):
    s1 = ScriptedLLM().say("Good question, let me look.\n`READ_DOC: README.md`\nOne moment please.",
                           "Run it with make run. Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, system1=s1)
    await mind.loop.submit("user", "How do I start you, according to your README?")
    await mind.loop.cycle()
    second = s1.of("generate")[1]
    assert [m.content for m in second.messages[-2:-1]] == ["READ_DOC: README.md"]
    assert "make run" in second.messages[-1].content
    assert delivered == ["Run it with make run."]


async def test_a_database_restart_under_the_loop_costs_one_cycle_not_the_message(pool, db_dsn, tmp_path):
    mind, delivered = await _mind(pool, tmp_path)
    await mind.loop.submit("user", "I keep my bicycle in the garage")
    assert await mind.loop.run(burst=True) == 1
    # every server connection of the pool dies, as in a restart
    outside = await asyncpg.connect(db_dsn)
    try:
        killed = await outside.fetchval(
            """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid()""")
    finally:
        await outside.close()
    assert killed >= 1
    await mind.loop.submit("user", "where do I keep my bicycle?")
    await mind.loop.run(burst=True)
    assert len(delivered) == 2                     # the question was answered after all
    outputs = await pool.fetch("SELECT attention_focus FROM thought_log ORDER BY id")
    assert [r["attention_focus"] for r in outputs][-1] == "where do I keep my bicycle?"


async def test_input_arriving_while_the_database_is_away_is_held_then_buffered(pool, tmp_path):
    mind, delivered = await _mind(pool, tmp_path)
    real_admit = mind.gates.admit
    calls = {"n": 0}

    async def flaky_admit(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise asyncpg.CannotConnectNowError("the database system is starting up")
        return await real_admit(*args, **kwargs)

    mind.gates.admit = flaky_admit
    assert await mind.loop.submit("user", "remember that the spare key is under the blue pot") is not None
    assert await pool.fetchval("SELECT count(*) FROM scratch_buffer") == 0     # held in memory
    await mind.loop.run(burst=True)
    assert await pool.fetchval("SELECT content FROM scratch_buffer") == \
        "remember that the spare key is under the blue pot"
    assert len(delivered) == 1


async def test_a_failing_language_model_gets_a_plain_reply_and_the_loop_goes_on(pool, tmp_path):
    from src.errors import RateLimited

    s1 = ScriptedLLM().say(RateLimited("gemini: 429 quota exhausted", provider="gemini"), CONFIDENT)
    mind, delivered = await _mind(pool, tmp_path, system1=s1)
    await mind.loop.submit("user", "what do I drink in the morning?")
    assert await mind.loop.run(burst=True) == 1
    await mind.loop.submit("user", "and in the evening?")
    assert await mind.loop.run(burst=True) == 1
    assert delivered[0].startswith("(I cannot answer in words right now: the language model failed: "
                                   "gemini: 429 quota exhausted.)")
    assert delivered[1] == "Earl grey, every morning."


async def test_values_and_goals_edited_while_running_take_effect_once_embedded(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path)
    assert mind.retriever.layer_vecs == () and mind.loop.goal_vecs == []
    (tmp_path / "v.json").write_text(json.dumps([{"text": "honesty matters to me", "weight": 0.9}]))
    (tmp_path / "g.json").write_text(json.dumps([{"text": "learn Portuguese this year", "weight": 0.7}]))
    await mind.loop.submit("user", "I started a Portuguese course today")
    await mind.loop.cycle()              # sees the edit; it is embedded off the cycle (issue 26)
    await mind.layers.refreshed()
    await mind.loop.submit("user", "The course meets on Tuesdays")
    await mind.loop.cycle()
    # recall's cue carries the layers attention re-read this cycle (the retriever is not changed)
    assert [w for _, w in mind.loop.attending.layer_vecs] == [0.9, 0.7]
    assert len(mind.loop.goal_vecs) == 1
    # the exit gate spreads from the same, current layers
    assert [w for _, w in await mind.gates.exit.layers()] == [0.9, 0.7]


async def test_one_maturity_setting_reaches_recall_the_exit_gate_and_the_threshold(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path, overrides={"agent": {"maturity_memories": 4}})
    assert (mind.retriever.maturity_memories, mind.gates.exit.maturity_memories,
            mind.threshold.maturity_memories) == (4, 4, 4)
    for i in range(2):
        await mind.store.store(NewMemory(f"memory number {i} about the garden"))
    reading = await mind.threshold.refresh()
    assert 2 <= reading.total_memories < 1000       # (seeding may have stored some already)
    # §3.5 on the 4-memory clock: the store counts as mature already
    assert reading.threshold == pytest.approx(0.3 + 0.5 * (1.0 + reading.identity_density) / 2)


async def test_the_reflex_reply_lists_recalled_content_once_each(pool, tmp_path):
    mind, delivered = await _mind(pool, tmp_path)
    await MemoryStore(pool, HashEmbedder()).store_many([
        NewMemory("Hello! My name is Dana and I keep a lighthouse on the northern cliffs.", compressed="Hello!"),
        NewMemory("The lighthouse lamp is lit every evening at dusk."),
        NewMemory("The lighthouse   lamp is lit every evening at dusk."),      # the same sentence again
    ])
    await mind.loop.submit("user", "tell me about the lighthouse lamp and the cliffs")
    await mind.loop.cycle()
    lines = delivered[0].splitlines()
    assert lines[0].startswith("(reflex mode — no language model is configured")
    recalled = lines[lines.index("What this brings back:") + 1:]
    assert sorted(line.rsplit(" (today, ", 1)[0] for line in recalled) == [
        "  - Hello! My name is Dana and I keep a lighthouse on the northern cliffs.",   # content, not "Hello!"
        "  - The lighthouse lamp is lit every evening at dusk.",                         # once, not twice
    ]
    assert all(re.search(r" \(today, \d\d:\d\d\)$", line) for line in recalled)          # when it was said


async def test_a_verb_of_external_effect_from_a_self_generated_thought_is_refused_before_it_runs(pool, tmp_path):
    sent: list[str] = []
    s1 = ScriptedLLM().say("SEND_MAIL: guardian@example.com", "I keep this to myself. Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, system1=s1)
    mind.loop.tools.register(ToolVerb("SEND_MAIL", lambda to: sent.append(to) or "sent", "SEND_MAIL: <to>",
                                      "When a mail must go out."))       # no kind: an external effect
    await mind.loop.submit("dmn", "I could write to my guardian about the garden")
    record = await mind.loop.cycle()
    assert sent == [] and record.escalated                  # offering it already sent the turn to System 2
    [tool] = json.loads(await pool.fetchval("SELECT actions FROM thought_log"))[1:]
    assert (tool["verb"], tool["refused"], tool["action_kind"], tool["allowed"]) == (
        "SEND_MAIL", True, "external_effect", False)
    assert tool["error"].startswith("error: the action check refused SEND_MAIL: external effect from "
                                    "internal_dmn refused: confidence ")



async def test_user_messages_schedule_the_scratch_flush_as_they_arrive(pool, tmp_path):
    """The store step (issue 23, 36): each user message that passes the entry gate is an
    exchange, counted at intake, not when its turn is answered; the cycle's store step starts
    the background flush every `flush_every`, and it judges the buffer. Impulses and the
    mind's own answers are no exchange."""
    s1 = ScriptedLLM().say("You drink earl grey tea every morning, as you told me. Confidence: 0.95")
    mind, delivered = await _mind(pool, tmp_path, system1=s1, overrides={
        "gates": {"seed": 1, "exit": {"noise_floor": 0.0}, "scratch": {"flush_every": 2}}})
    lifecycle = mind.gates.lifecycle
    await mind.loop.submit("user", "I drink earl grey tea every morning")
    await mind.loop.submit("dmn", "a stray thought about teapots and their spouts")
    assert lifecycle.exchanges == 1
    await mind.loop.cycle()                                # the answer is gated: no exchange
    assert lifecycle.exchanges == 1 and len(delivered) == 1
    await mind.loop.submit("user", "and I walk the dog along the river after breakfast")
    assert lifecycle.exchanges == 2                        # counted before any answer
    assert lifecycle.flush_if_due() is not None            # what the next store step decides
    walk = await pool.fetchval("SELECT id FROM scratch_buffer WHERE content LIKE 'and I walk the dog%'")
    for _ in range(300):
        if await pool.fetchval("SELECT count(*) FROM gate_decisions WHERE gate = 'exit' AND scratch_id = $1", walk):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the background flush did not judge the message that started it")


async def test_an_answer_of_no_words_is_told_as_a_failure_never_printed_empty(pool, tmp_path):
    """A small model answered with a bare "Confidence:" line, retried the same: the user is told
    the model gave no words (a reply, not silence)."""
    s1 = ScriptedLLM().say(*["Confidence: 0.9"] * 4)
    mind, delivered = await _mind(pool, tmp_path, system1=s1, system2=s1)    # one local model: no escalation call
    await mind.loop.submit("user", "Hi! What do you know about marine biology?")
    record = await mind.loop.cycle()
    assert record.path == "empty_answer"
    [reply] = delivered
    assert "the language model answered with no words" in reply


async def test_every_model_call_of_a_turn_says_whose_it_is(pool, tmp_path):
    """Issue 36: no context variable decides a call's priority or budget. The user's turn's
    calls say USER (first at the endpoint, nobody's budget); a DMN impulse's say the DMN's."""
    from src.providers.caller import USER, Caller

    s1 = ScriptedLLM().say(CONFIDENT, "Teapots and their spouts. Confidence: 0.9")   # nothing new: not said
    mind, delivered = await _mind(pool, tmp_path, system1=s1)
    await mind.loop.submit("user", "what do I drink in the morning?")
    await mind.loop.cycle()
    users = list(s1.calls)
    await mind.loop.submit("dmn", "a stray thought about teapots and their spouts")
    await mind.loop.cycle()
    dmn = s1.calls[len(users):]
    assert users and dmn and len(delivered) == 1        # (a thought of its own is not said)
    assert {c.caller for c in users} == {USER}
    assert {c.caller for c in dmn} == {Caller("internal", "dmn")}


async def test_the_reflex_reason_is_said_once_a_session_then_only_the_mode(pool, tmp_path):
    mind, delivered = await _mind(pool, tmp_path)
    t = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
    await mind.loop.submit("dmn", "I keep thinking about the blue bicycle", now=t)   # not the user: not told
    await mind.loop.run(burst=True)
    for i, line in enumerate(["my name is Dana", "I live in Porto", "what is my name?"]):
        await mind.loop.submit("user", line, now=t + timedelta(minutes=i + 1))
        await mind.loop.run(burst=True)
    heads = [d.splitlines()[0] for d in delivered]
    assert len(heads) == 3
    assert heads[0].startswith("(reflex mode — no language model is configured") and len(heads[0]) > 60
    assert heads[1:] == ["(reflex mode — no language model is configured.)"] * 2
