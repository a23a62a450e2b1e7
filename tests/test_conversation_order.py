"""The terminal a person expects (issue 41 item 5), from a real `python -m src.main`:
answers and command output in the order the lines were typed, a reply naming the message it
answers when other lines came after it, start-up lines off a piped stdout, the reflex reason
said once; and in-process, the reflex reply showing the statement a question's own turn holds.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

from src.loop.intake import Origin
from src.loop.just_said import bearing_on
from src.loop.turns import REFERENCE, quote
from src.recall.when import said_when
from tests.proc import READY, agent_env, run_agent
from tests.test_loop import _mind

NO_MODEL = ("(reflex mode — no language model is configured: GEMINI_API_KEY not set, "
            "llm.base_url not set; I cannot answer in words.)")


async def test_a_pipe_gets_the_conversation_in_input_order_and_start_up_on_stderr(db_dsn):
    result = run_agent(b"Hello, my name is Dana.\n/cost\nWhat is my name?\n/held\n", agent_env(DATABASE_URL=db_dsn),
                       timeout=120)
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, err
    lines = out.splitlines()
    # each command after the answer to the message typed before it; each answer names its
    # message (the next line was typed before it came); the reason said once, then the mode
    assert lines[:4] == ['[re: "Hello, my name is Dana."]', NO_MODEL, "Nothing comes back from memory yet.",
                         "No language-model calls recorded yet."]
    assert lines[4:7] == ['[re: "What is my name?"]', "(reflex mode — no language model is configured.)",
                          "What this brings back:"]
    assert re.fullmatch(r"  - Hello, my name is Dana\. \(today, \d\d:\d\d\)", lines[7]), lines[7]
    assert lines[8:] == ["no memories are held for your decision", "shutting down"]
    # the banner, the providers and the ready line are on stderr, in their order
    assert err.index("database: PostgreSQL at ") < err.index("system1: reflex (") < err.index(READY)


async def test_a_reflex_reply_shows_the_statement_its_own_turn_holds(pool, tmp_path):
    """Recall leaves a turn's own rows out; the two lines typed together must still show the
    name the question asks for (issue 41: "Nothing comes back from memory yet.")."""
    mind, delivered = await _mind(pool, tmp_path)
    said = datetime.now(UTC) - timedelta(seconds=5)
    await mind.loop.submit("user", "my name is Dana", now=said)
    await mind.loop.submit("user", "What is my name?", now=said + timedelta(seconds=2))
    assert await mind.loop.run(burst=True) == 1
    lines = delivered[0].splitlines()
    assert lines[0] == '(answering 2 messages together: "my name is Dana" to "What is my name?")'
    assert lines[2:] == ["What this brings back:", f"  - my name is Dana ({said_when(said, datetime.now(UTC))})"]


def test_only_statements_sharing_a_word_with_the_question_bear_on_it():
    at = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    lines = [("I live in Porto", at), ("my  name is Dana", at), ("what is my name?", at),
             ("my name is Dana", None), ("ok", at)]
    assert bearing_on("What is my name?", lines) == [("my name is Dana", at)]


def test_a_reference_quotes_one_line_cut():
    assert REFERENCE.format(quoted=quote("What is\nmy name?")) == '[re: "What is my name?"]'
    assert quote("x" * 80) == f'"{"x" * 39}…"'


async def test_a_command_waits_for_the_terminals_messages_only(pool, tmp_path):
    """What a command typed at the terminal waits for (src/main.py `after_earlier_messages`):
    the terminal's unanswered messages, not another channel's queue."""
    mind, delivered = await _mind(pool, tmp_path)
    intake = mind.loop.intake
    await mind.loop.submit("user", "my sister lives in Porto", origin=Origin(channel="terminal"))
    await mind.loop.submit("user", "what is the weather like", origin=Origin(channel="api"))
    await mind.loop.submit("dmn", "a stray thought about rivers")
    assert (intake.waiting_from("terminal"), intake.waiting_from("api")) == (1, 1)
    waiting = asyncio.create_task(intake.until_answered("terminal", recheck_s=0.05))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    while intake.waiting_from("terminal"):
        await mind.loop.cycle()
    await asyncio.wait_for(waiting, 1)
    assert intake.waiting_from("terminal") == 0 and len(delivered) >= 1
