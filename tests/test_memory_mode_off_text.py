"""Issue 26, Deliver 2: memory mode off keeps nothing new anywhere.

After an off-mode turn no table holds a word of it: every column of every table is
searched (each row cast to text). The logs keep a placeholder with the text's size
instead, and that is what the pages show; the input journal keeps the line until it is
answered, then the placeholder; a restart answers an unanswered off-mode line as one.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import asyncpg
import numpy as np

from src.config import load_settings
from src.db.manifest import record_start
from src.gates.modes import unkept_text
from src.loop.input_journal import InputJournal
from src.loop.intake import Origin
from src.loop.outage import Outage
from src.mind import build_mind
from src.providers.costs import CostLedger
from src.providers.endpoint_gate import EndpointGates
from src.providers.settings import ProvidersSettings
from src.recall.store import NewMemory
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM
from tests.proc import agent_env, run_agent
from tests.test_memory_modes import _meta

SAID = "Alma in Porto says my neighbour Zebulon keeps seventeen quokkas in his attic"
FEEDBACK = "thanks, that is right about the quokkas of Zebulon"
MARKS = ("zebulon", "quokka", "attic")
PLACEHOLDER = "[not kept: memory mode off; "


async def tables_holding(db: asyncpg.Pool | asyncpg.Connection, words: tuple[str, ...]) -> dict[str, int]:
    """{table: rows} of every table with a row whose text (all columns) contains one of `words`."""
    tables = [r["table_name"] for r in await db.fetch(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name")]
    assert {"thought_log", "gate_decisions", "gut_deltas", "input_journal", "scratch_buffer"} <= set(tables)
    found = {}
    for table in tables:
        n = await db.fetchval(f'SELECT count(*) FROM "{table}" AS t WHERE t::text ILIKE ANY($1::text[])',
                              [f"%{w}%" for w in words])
        if n:
            found[table] = n
    return found


def test_placeholder_keeps_the_size_only():
    assert unkept_text("Zebulon keeps quokkas") == "[not kept: memory mode off; 3 words, 21 characters]"
    assert unkept_text("x") == "[not kept: memory mode off; 1 word, 1 character]"


async def test_an_off_mode_conversation_leaves_no_word_in_any_table(db_dsn):
    stdin = f"/memory-mode off\n{SAID}\n{FEEDBACK}\n/status\n/quit\n".encode()
    result = run_agent(stdin, agent_env(DATABASE_URL=db_dsn), timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    assert "memory mode: autopilot -> off" in result.stdout.decode()
    conn = await asyncpg.connect(db_dsn)
    try:
        assert await tables_holding(conn, MARKS) == {}
        # what is there instead, and what the pages (/thoughts, /gates, /gut) show
        focus = [r["attention_focus"] for r in await conn.fetch("SELECT attention_focus FROM thought_log")]
        assert focus and all(PLACEHOLDER in f for f in focus)
        lines = {r["line"] for r in await conn.fetch("SELECT line FROM input_journal WHERE kind = 'message'")}
        assert lines == {unkept_text(SAID), unkept_text(FEEDBACK)}
        previews = {r["content_preview"] for r in await conn.fetch(
            "SELECT content_preview FROM gate_decisions WHERE source_tag = 'external_user'")}
        assert previews == {unkept_text(SAID), unkept_text(FEEDBACK)}
        assert {r["rule"] for r in await conn.fetch("SELECT rule FROM gate_decisions")} == {"off"}
        contexts = [r["context"] for r in await conn.fetch("SELECT context FROM gut_deltas")]
        assert all(c.startswith(PLACEHOLDER) for c in contexts)
        assert await conn.fetchval("SELECT count(*) FROM memories WHERE NOT immutable") == 0
    finally:
        await conn.close()


async def _mind(pool, tmp_path, mode: str, answers: list[str]):
    settings = load_settings(tmp_path / "none.yaml", env={}, overrides={
        "memory": {"mode": mode}, "gates": {"seed": 1},
        "layers": {"values_path": str(tmp_path / "v.json"), "goals_path": str(tmp_path / "g.json"),
                   "cache_dir": str(tmp_path / "cache")}})
    system1 = ScriptedLLM().say(*answers)
    system1.meta = _meta
    providers = SimpleNamespace(endpoints=EndpointGates(), embedder=HashEmbedder(), reranker=None, system1=system1,
                                system2=ScriptedLLM(configured=False), meta=system1,
                                ledger=CostLedger(pool, session_id="s", prices=ProvidersSettings().prices))
    delivered: list[str] = []
    mind = await build_mind(settings, pool, providers, session_id="s",
                            manifest=await record_start(pool, "s", "fake-hash-768"),
                            deliver=delivered.append, rng=np.random.default_rng(3))
    return mind, delivered


async def test_a_model_answer_that_repeats_it_is_not_kept_either(pool, tmp_path):
    mind, delivered = await _mind(pool, tmp_path, "off", [
        "Zebulon's seventeen quokkas in the attic sound lively. Confidence: 0.95",
        "Glad I got the quokkas right. Confidence: 0.95"])
    await mind.store.store(NewMemory("my sister Alma lives in Porto and teaches piano"))
    for text in (SAID, FEEDBACK):
        assert await mind.loop.submit("user", text) is not None
        await mind.loop.run(burst=True)
    await mind.close()
    assert delivered[0].startswith("Zebulon's seventeen quokkas")       # the conversation went on
    assert await tables_holding(pool, MARKS) == {}
    rows = await pool.fetch("SELECT output, actions FROM thought_log ORDER BY cycle")
    assert [r["output"] for r in rows] == [unkept_text("Zebulon's seventeen quokkas in the attic sound lively."),
                                           unkept_text("Glad I got the quokkas right.")]
    assert await pool.fetchval("SELECT count(*) FROM escalations") >= 1     # written, with the placeholder
    assert await pool.fetchval("SELECT description FROM outcomes WHERE kind = 'feedback'") == (
        f"user feedback: {unkept_text(FEEDBACK)}")


async def test_a_line_typed_while_off_is_answered_as_off_after_a_restart(pool, tmp_path):
    # the crashed run journaled the line and its entry gate tagged the scratch row; no answer
    ref = await pool.fetchval("INSERT INTO input_journal (session_id, kind, line) "
                              "VALUES ('before', 'message', $1) RETURNING id", SAID)
    await pool.execute("INSERT INTO scratch_buffer (content, source_tag, metadata, expires_at) "
                       "VALUES ($1, 'external_user', $2::jsonb, now() + interval '1 day')",
                       unkept_text(SAID), json.dumps({"journal_id": ref, "memory_mode": "off"}))
    journal = InputJournal(pool, "after", tmp_path / "spill", outage=Outage(), notify=lambda _: None)
    [line] = await journal.open()
    assert (line.id, line.gated, line.unkept) == (ref, True, True)
    mind, delivered = await _mind(pool, tmp_path, "autopilot", ["Seventeen quokkas! Confidence: 0.95"])
    mind.loop.on_answered = journal.answered
    await mind.loop.submit("user", line.text, origin=Origin(ref=line.id, gated=line.gated), unkept=line.unkept)
    await mind.loop.run(burst=True)
    await mind.close()
    assert delivered == ["Seventeen quokkas!"]
    assert await tables_holding(pool, MARKS) == {}       # the mode is autopilot now; the line was said while off
    assert await pool.fetchrow("SELECT state, line FROM input_journal WHERE id = $1", ref) == (
        "answered", unkept_text(SAID))
