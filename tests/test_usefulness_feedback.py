"""The guardian's /good and /bad (issue 25 item 3, plan §5.3): each writes outcome evidence
(memory_uses rows and a linked `feedback` outcome) and says what it recorded."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from src.config import load_settings
from src.consolidation.evolution.dirichlet_evolution import run_outcomes
from src.consolidation.evolution.settings import EvolutionSettings
from src.main import Agent
from src.outcomes.feedback import feedback_command, parse_ids
from src.outcomes.settings import OutcomeSettings
from tests.evolution_helpers import NOW, add_memory

SETTINGS = OutcomeSettings()


async def _answer_row(pool, cycle: int, ids: dict, *, session: str = "s1", source: str = "user") -> None:
    await pool.execute(
        """INSERT INTO thought_log (session_id, cycle, source_tag, attention_focus, winner, context_summary, output)
           VALUES ($1, $2, 'external_user', 'q', $3::jsonb, $4::jsonb, 'an answer')""",
        session, cycle, json.dumps({"source": source}), json.dumps({"ids": ids}))


async def _outcomes(pool) -> list:
    return await pool.fetch("SELECT o.id, o.kind, o.valence, o.description, "
                            "array_agg(l.subject_id ORDER BY l.subject_id) FILTER (WHERE l.subject_kind = 'memory') "
                            "AS memories FROM outcomes o LEFT JOIN outcome_links l ON l.outcome_id = o.id "
                            "GROUP BY o.id ORDER BY o.id")


def test_ids_are_parsed_or_refused():
    assert parse_ids("") == [] and parse_ids(" 42 ") == [42] and parse_ids("#3, 9 3") == [3, 9]
    assert parse_ids("forty-two") is None and parse_ids("3 x") is None


async def test_good_with_an_id_records_use_and_a_linked_outcome(pool):
    mid = await add_memory(pool, "Mara keeps three beehives behind the orchard.")
    reply = await feedback_command(pool, f"#{mid}", good=True, settings=SETTINGS, now=NOW)
    [outcome] = await _outcomes(pool)
    assert reply == (f"recorded /good for memory: #{mid} 'Mara keeps three beehives behind the orchard.' "
                     f"(outcome #{outcome['id']}; it counts in their utility at the next deep pass)")
    assert (outcome["kind"], outcome["valence"], outcome["memories"]) == ("feedback", 1.0, [mid])
    [use] = await pool.fetch("SELECT memory_id, kind, valence, evidence, folded FROM memory_uses")
    assert (use["memory_id"], use["kind"], use["valence"], use["folded"]) == (mid, "good", 1.0, False)
    assert json.loads(use["evidence"]) == {"by": "guardian", "command": "/good"}
    # folded into utility by the next pass, once: a memory never recalled is reached too
    await run_outcomes(pool, EvolutionSettings(), NOW, {})
    await run_outcomes(pool, EvolutionSettings(), NOW, {})
    assert await pool.fetchval("SELECT utility_score FROM memories WHERE id = $1", mid) == pytest.approx(0.1)


async def test_bad_without_an_id_is_about_what_the_last_answer_drew_on(pool):
    drawn, other, unrelated = [await add_memory(pool, f"memory {i}") for i in range(3)]
    await _answer_row(pool, 1, {"situational": [unrelated]})
    await _answer_row(pool, 2, {"situational": [drawn, other], "identity": [], "immutable": [unrelated]})
    await _answer_row(pool, 3, {"situational": [unrelated]}, source="dmn")       # not an answer to the user
    await pool.execute("INSERT INTO memory_uses (at, memory_id, kind, valence, session_id, cycle, share) "
                       "VALUES ($1, $2, 'reflected', 0, 's1', 2, 0.6)", NOW, drawn)
    reply = await feedback_command(pool, "", good=False, settings=SETTINGS, now=NOW)
    assert reply.startswith(f"recorded /bad for the memories the last answer drew on: #{drawn} 'memory 0' ")
    rows = await pool.fetch("SELECT memory_id, kind, valence, evidence FROM memory_uses WHERE kind = 'bad'")
    assert [(r["memory_id"], r["valence"]) for r in rows] == [(drawn, -1.0)]
    assert json.loads(rows[0]["evidence"]) == {"by": "guardian", "command": "/bad", "answer_session": "s1",
                                               "answer_cycle": 2, "behind": "drew on"}
    [outcome] = await _outcomes(pool)
    assert (outcome["valence"], outcome["memories"]) == (-1.0, [drawn])


async def test_without_a_reflected_memory_nothing_is_credited(pool):
    """Being in the answer's context is not being drawn on (issue 40: a newcomer's /good credited
    16 unrelated imports); the reply says so in words, no source file named."""
    a, b, seed = [await add_memory(pool, f"memory {i}") for i in range(3)]
    await _answer_row(pool, 7, {"situational": [b], "identity": [a], "immutable": [seed]})
    reply = await feedback_command(pool, "", good=True, settings=SETTINGS, now=NOW)
    assert reply == ("the last answer drew on none of its 2 memories (none has enough of its own words in "
                     "the answer); nothing recorded; name a memory: /good <memory id>")
    assert await pool.fetchval("SELECT count(*) FROM memory_uses") == 0
    assert await pool.fetchval("SELECT count(*) FROM outcomes") == 0


async def test_nothing_is_recorded_for_a_bad_line(pool):
    assert await feedback_command(pool, "", good=True, settings=SETTINGS, now=NOW) == (
        "no answer yet to give feedback on; name a memory: /good <memory id>")
    assert await feedback_command(pool, "999", good=False, settings=SETTINGS, now=NOW) == (
        "no memory #999; nothing recorded")
    assert await feedback_command(pool, "the last one", good=False, settings=SETTINGS, now=NOW) == (
        "usage: /bad [memory id ...] — without an id: the memories behind the last answer")
    assert await pool.fetchval("SELECT count(*) FROM memory_uses") == 0
    assert await pool.fetchval("SELECT count(*) FROM outcomes") == 0


async def test_the_prompt_has_good_and_bad(pool, tmp_path):
    mid = await add_memory(pool, "a memory")
    settings = load_settings(tmp_path / "none.yaml", env={})
    agent = Agent(settings, SimpleNamespace(pool=pool), SimpleNamespace(), "s", out=None)
    help_text = await agent.commands.dispatch("/help")
    assert "/good" in help_text and "/bad" in help_text
    assert (await agent.commands.dispatch(f"/bad {mid}")).startswith(f"recorded /bad for memory: #{mid} 'a memory'")
    assert await pool.fetchval("SELECT kind FROM memory_uses") == "bad"


async def test_scoring_reads_the_users_lines_and_the_guardians_word(pool):
    """A recall is used when the user said it again at the exit gate (reinforce) or contradicted
    it (persist_flag, nearest memory), or the guardian spoke of it; /bad or a contradiction
    makes its reward -1 even when the answer drew on it."""
    from datetime import timedelta

    from src.consolidation.evolution.utility import reward
    from src.recall.outcomes import score_outcomes

    at = NOW - timedelta(days=5)
    confirmed, contradicted, drawn_bad, alone, late = [await add_memory(pool, f"m{i}") for i in range(5)]
    for mid in (confirmed, contradicted, drawn_bad, alone, late):
        await pool.execute("INSERT INTO recall_outcomes (at, memory_id, rank, contributions) "
                           "VALUES ($1, $2, 1, '{0,0,0,0,0}')", at, mid)
    gate = ("INSERT INTO gate_decisions (at, gate, memory_id, nearest_memory_id, source_tag, content_preview, "
            "action, reason) VALUES ($1, 'exit', $2, $3, $4, 'x', $5, 'r')")
    await pool.execute(gate, at + timedelta(hours=1), confirmed, confirmed, "external_user", "reinforce")
    await pool.execute(gate, at + timedelta(hours=1), None, contradicted, "external_user", "persist_flag")
    await pool.execute(gate, at + timedelta(hours=1), alone, alone, "internal_self", "reinforce")   # the mind's own
    await pool.execute("INSERT INTO memory_uses (at, memory_id, kind, valence) VALUES ($1, $2, 'reflected', 0), "
                       "($3, $2, 'bad', -1), ($4, $5, 'good', 1)",
                       at, drawn_bad, at + timedelta(days=1), at + timedelta(days=4), late)   # /good too late
    async with pool.acquire() as conn, conn.transaction():
        rows = {r["memory_id"]: (r["used"], r["wrong"]) for r in await score_outcomes(conn, NOW, 3.0, 100)}
    assert rows == {confirmed: (True, False), contradicted: (True, True), drawn_bad: (True, True),
                    alone: (False, False), late: (False, False)}
    assert [reward(*rows[m], -0.25) for m in (confirmed, contradicted, drawn_bad, alone)] == [1.0, -1.0, -1.0, -0.25]
