"""Every memory says when (issue 37 item 1): the words of a date (src/recall/when.py), and the
prompt a model is sent for a question carries the current date and each recalled line's."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from src.recall.store import MemoryStore, NewMemory
from src.recall.when import ago, memory_time, now_line, said_when
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM
from tests.test_loop import CONFIDENT, _mind

NOW = datetime(2026, 11, 28, 15, 10, tzinfo=UTC)


def test_a_date_in_words_absolute_and_relative():
    assert said_when(NOW - timedelta(days=3), NOW) == "Wed 25 Nov 2026, 3 days ago"
    assert said_when(NOW - timedelta(hours=2), NOW) == "today, 13:10"
    assert said_when(NOW - timedelta(days=1), NOW) == "Fri 27 Nov 2026, yesterday"
    assert said_when(None, NOW) == ""
    assert [ago(NOW - timedelta(days=d), NOW) for d in (20, 95, 800)] == ["2 weeks ago", "3 months ago",
                                                                          "2 years ago"]
    # an imported conversation keeps its own date: the event time comes first
    held = datetime(2024, 5, 3, 9, 0, tzinfo=UTC)
    assert memory_time(held, NOW) == held and memory_time(None, NOW) == NOW
    assert now_line(NOW) == "Now: Saturday 28 November 2026, 15:10 UTC. Each memory line says when it was said."


async def test_the_prompt_for_a_question_carries_now_and_every_recalled_lines_date(pool, tmp_path):
    s1 = ScriptedLLM().say(CONFIDENT)
    mind, _ = await _mind(pool, tmp_path, system1=s1)
    held = datetime(2024, 5, 3, 9, 0, tzinfo=UTC)
    await MemoryStore(pool, HashEmbedder()).store_many([
        NewMemory("The lighthouse keeper rows to the village on sundays.", event_time=held),
        NewMemory("The lighthouse lamp is lit every evening at dusk.")])
    await mind.loop.submit("user", "tell me about the lighthouse keeper and the lamp")
    record = await mind.loop.cycle(now=NOW)
    assert record.retrieval.ids
    # what changes every turn goes with the input (src/loop/turn_context.py)
    system = s1.of("generate")[0].messages[-1].context
    assert now_line(NOW) in system and now_line(NOW) not in s1.of("generate")[0].system
    lines = [line for line in system.splitlines() if "lighthouse" in line and line.startswith("- [")]
    assert lines, system
    assert all(re.search(r"\((today, \d\d:\d\d|\w{3} \d{1,2} \w{3} \d{4}, [^)]+)\)$", line) for line in lines), lines
    assert any(line.endswith("(Fri 3 May 2024, 2 years ago)") for line in lines), lines   # its own date
