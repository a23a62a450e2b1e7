"""Every memory the guardian or the model reads says when (issue 37 item 1, the remaining
surfaces): the reflection bank's corrections in the prompt, `/memory`, `python -m src.memory
search` (text and JSON), `why` with its update links, and the web view's memory pages.

Dates are the model's words (src/recall/when.py) or the operator's (src/recall/dated.py); each
test fixes `now` where the surface takes one, else computes the words from the clock it read.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np

from src.commands.memory import why as why_command
from src.consolidation.deep.why import format_chain, why_do_i_believe
from src.metacognition.prompts import reflection_block
from src.metacognition.reflection import NewCorrection, corrections_for, store_correction
from src.metacognition.settings import ReflectionSettings
from src.recall.dated import said_words, short_when
from src.recall.readable import LEGEND, memory_table
from src.recall.retrieval import Retriever
from src.recall.settings import RetrievalSettings
from src.recall.store import MemoryStore, NewMemory
from src.recall.when import said_when
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM
from tests.memory_cli_helpers import cli, write_jsonl
from tests.test_loop import CONFIDENT, _mind
from tests.test_web_pages import _text, served

NOW = datetime(2026, 11, 28, 15, 10, tzinfo=UTC)
HELD = datetime(2024, 5, 3, 9, 0, tzinfo=UTC)           # an imported conversation's own date
LOOSE = ReflectionSettings(min_similarity={"default": 0.2})


async def _at(pool, memory_id: int, created_at: datetime) -> None:
    await pool.execute("UPDATE memories SET created_at = $2 WHERE id = $1", memory_id, created_at)


# -- the model: the corrections block --------------------------------------------------------------

async def test_each_correction_in_the_prompt_says_when_it_was_recorded(pool, tmp_path):
    s1 = ScriptedLLM().say(CONFIDENT)
    mind, _ = await _mind(pool, tmp_path, system1=s1)
    correction = await store_correction(mind.store, NewCorrection(
        "what tea do I drink in the morning?", "hedged on a known fact", "maybe tea?",
        "state remembered preferences plainly", "source external_user"))
    await _at(pool, correction, NOW - timedelta(days=3))
    await mind.loop.submit("user", "which tea do I drink in the morning?")
    await mind.loop.cycle(now=NOW)
    context = s1.of("generate")[0].messages[-1].context     # with the input (src/loop/turn_context.py)
    [line] = [line for line in context.splitlines() if line.startswith("1. ")]
    assert line.startswith("1. [hedged on a known fact] Situation: what tea do I drink in the morning?")
    assert line.endswith("| Do instead: state remembered preferences plainly (Wed 25 Nov 2026, 3 days ago)")


async def test_the_corrections_block_dates_each_line_relative_to_the_given_now(pool):
    store = MemoryStore(pool, HashEmbedder())
    first = await store_correction(store, NewCorrection("rotate the database credentials", "missed step", "",
                                                        "keep two valid credentials", ""))
    await _at(pool, first, NOW - timedelta(hours=2))
    found = await corrections_for(pool, HashEmbedder(), "rotate the database credentials", settings=LOOSE)
    block = reflection_block(found, now=NOW)
    assert block.splitlines()[1].endswith("Do instead: keep two valid credentials (today, 13:10)")
    assert "(today" not in reflection_block(found)          # no now: no date read


# -- the guardian's terminal: /memory and /help --------------------------------------------------

async def test_memory_table_says_when_each_row_was_said_and_stored_where_apart(pool):
    store = MemoryStore(pool, HashEmbedder())
    imported = await store.store(NewMemory("the harbour ferry to the island leaves at noon", event_time=HELD))
    recent = await store.store(NewMemory("the harbour cafe closes early on mondays"))
    await _at(pool, imported, NOW - timedelta(hours=1))
    await _at(pool, recent, NOW - timedelta(days=3))
    retriever = Retriever(pool, HashEmbedder(), None, Safety(), RetrievalSettings(keep=5))
    result = await retriever.retrieve("harbour ferry cafe", rng=np.random.default_rng(0), mutate=False)
    lines = memory_table(result, NOW).splitlines()
    assert lines[1].split() == ["memory", "of", "best", "words", "meaning", "held", "said", "stored", "kind", "text"]
    rows = {line.split()[0]: line for line in lines[2:] if line.startswith("  #")}
    said, stored = lines[1].index("said"), lines[1].index("stored")
    assert rows[f"#{imported}"][said:stored].strip() == "3 May 2024, 2y ago"
    assert rows[f"#{imported}"][stored:].startswith("today 14:10 ")
    assert rows[f"#{recent}"][said:stored].strip() == "25 Nov 2026, 3d ago"
    assert rows[f"#{recent}"][stored:].startswith("— ")
    # without an imported row the table has no stored column
    await pool.execute("UPDATE memories SET event_time = NULL")
    result = await retriever.retrieve("harbour ferry cafe", rng=np.random.default_rng(0), mutate=False)
    assert "stored" not in memory_table(result, NOW).splitlines()[1]
    legend = "\n".join(LEGEND)
    assert legend.count("  said ") == 1 and legend.count("  stored ") == 1
    assert all(len(line) <= 80 for line in LEGEND if "said" in line or "stored" in line)   # a terminal's width


def test_the_compact_date_of_a_table_cell():
    assert [short_when(NOW - timedelta(days=d), NOW) for d in (0, 1, 3, 20, 95, 800)] == [
        "today 15:10", "27 Nov 2026, yesterday", "25 Nov 2026, 3d ago", "8 Nov 2026, 2w ago",
        "25 Aug 2026, 3mo ago", "19 Sep 2024, 2y ago"]
    assert said_words(HELD, NOW, NOW) == "Fri 3 May 2024, 2 years ago (stored today, 15:10)"
    assert said_words(NOW - timedelta(minutes=5), NOW, NOW) == "today, 15:05"      # stored minutes later


# -- the operator CLI: search ------------------------------------------------------------------------

async def test_search_says_when_in_text_and_json(pool, db_dsn, tmp_path):
    f = write_jsonl(tmp_path / "held.jsonl", [
        {"content": "the lighthouse keeper rows to the village on sundays", "event_time": HELD.isoformat()},
        {"content": "the lighthouse lamp is lit every evening at dusk"}])
    assert (await cli(db_dsn, "import", str(f), embedder=HashEmbedder())).code == 0
    text = await cli(db_dsn, "search", "lighthouse keeper lamp", "--k", "2", "--seed", "1", embedder=HashEmbedder())
    listed = await cli(db_dsn, "search", "lighthouse keeper lamp", "--k", "2", "--seed", "1", "--json",
                       embedder=HashEmbedder())
    now = datetime.now(UTC)
    stored = await pool.fetchval("SELECT created_at FROM memories WHERE event_time IS NOT NULL")
    heads = [line for line in text.out.splitlines() if re.match(r"\d\. #\d+ ", line)]
    assert len(heads) == 2
    assert any(h.endswith(f"]  said {said_when(HELD, now)} (stored {said_when(stored, now)})") for h in heads), heads
    assert any(re.search(r"\]  said today, \d\d:\d\d$", h) for h in heads), heads
    results = {r["content"]: r for r in listed.json_lines[0]["results"]}
    keeper = results["the lighthouse keeper rows to the village on sundays"]
    assert keeper["said"] == said_when(HELD, now) and keeper["said"].startswith("Fri 3 May 2024, ")
    assert datetime.fromisoformat(keeper["event_time"]) == HELD and keeper["created_at"]
    assert re.fullmatch(r"today, \d\d:\d\d", results["the lighthouse lamp is lit every evening at dusk"]["said"])


# -- why: dated, and an update link in words -------------------------------------------------------

async def _update(pool) -> tuple[int, int]:
    """An older statement and the newer one that updates it (sql/153_update_links.sql)."""
    store = MemoryStore(pool, HashEmbedder())
    older = await store.store(NewMemory("my sister lives in Lisbon"))
    newer = await store.store(NewMemory("my sister moved to Porto"))
    await _at(pool, older, datetime(2026, 8, 20, 9, 0, tzinfo=UTC))
    await _at(pool, newer, NOW - timedelta(hours=1))
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id, via) VALUES ($1, $2, 'update')",
                       newer, older)
    return older, newer


async def test_why_dates_each_memory_and_names_an_update_link(pool):
    older, newer = await _update(pool)
    lines = format_chain(newer, await why_do_i_believe(pool, newer), now=NOW).splitlines()
    assert lines[0].startswith(f"#{newer} [episodic] said today, 14:10; center ")
    assert lines[1].startswith(f"  #{older} [episodic, earlier statement: updated by #{newer} 3 months later] "
                               "said Thu 20 Aug 2026, 3 months ago; center ")
    assert lines[2] == "  (an original experience: nothing was consolidated into it)"   # an update is said
    # asked about the older one: the newer statement that updated it since
    lines = format_chain(older, await why_do_i_believe(pool, older), now=NOW).splitlines()
    assert lines[0].startswith(f"#{older} [episodic] said Thu 20 Aug 2026, 3 months ago; ")
    assert lines[1] == f"  updated by #{newer}, said 3 months later (today, 14:10)"


async def test_why_at_the_prompt_is_dated_by_the_clock(pool):
    older, newer = await _update(pool)
    text = await why_command(SimpleNamespace(db=SimpleNamespace(pool=pool)), str(newer))
    assert f"earlier statement: updated by #{newer} 3 months later] said Thu 20 Aug 2026, " in text
    assert said_when(datetime(2026, 8, 20, 9, 0, tzinfo=UTC), datetime.now(UTC)) in text


# -- the web view ----------------------------------------------------------------------------------

async def test_web_memory_pages_show_when_and_update_links_in_words(pool):
    older, newer = await _update(pool)
    imported = await MemoryStore(pool, HashEmbedder()).store(NewMemory("the ferry log\x1b[2J", event_time=HELD))
    await _at(pool, imported, NOW - timedelta(minutes=30))
    async with served(pool, clock=lambda: NOW) as (s, base):
        newer_html = (await _text(s, f"{base}/memories/{newer}"))[1]
        older_html = (await _text(s, f"{base}/memories/{older}"))[1]
        older_json = json.loads((await _text(s, f"{base}/memories/{older}?format=json"))[1])
        listed = (await _text(s, f"{base}/memories"))[1]
        listed_json = json.loads((await _text(s, f"{base}/memories?format=json"))[1])
        found = json.loads((await _text(s, f"{base}/memories?q=ferry+log&format=json"))[1])
        found_html = (await _text(s, f"{base}/memories?q=ferry+log"))[1]
    assert "<td>said</td><td>today, 14:10</td>" in newer_html
    # the newer memory's chain: the older statement it updates; the older's: the later one
    assert f'<td>earlier statement: <a href="/memories/{newer}">#{newer}</a> updates it</td>' in newer_html
    assert f'<td>later statement: it updates <a href="/memories/{older}">#{older}</a></td>' in older_html
    assert "Thu 20 Aug 2026, 3 months ago" in older_html
    [link] = older_json["supersedes"]
    assert (link["id"], link["via"], link["link"], link["said"]) == (
        newer, "update", f"later statement: it updates #{older}", "today, 14:10")
    said = {m["id"]: m["said"] for m in listed_json["memories"]}
    assert said[imported] == "Fri 3 May 2024, 2 years ago (stored today, 14:40)"
    assert "<th>said</th>" in listed and "<td>Fri 3 May 2024, 2 years ago (stored today, 14:40)</td>" in listed
    [hit] = [r for r in found["results"] if r["id"] == imported]
    assert hit["said"] == "Fri 3 May 2024, 2 years ago"            # the model's words
    assert "<td>Fri 3 May 2024, 2 years ago (stored today, 14:40)</td>" in found_html
    assert '<span class="ctl">\\x1b</span>[2J' in listed                # the escaping is kept
