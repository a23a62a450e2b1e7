"""The web view's pages as the guardian reads them (issue 26): time axes, colours, captions,
paging, tables instead of JSON, empty plots that say so, and bad URLs without a traceback.

Each test serves a View in this process on a fresh migrated database and reads it over HTTP.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import aiohttp
import asyncpg
import numpy as np

from src.recall.retrieval import Retriever
from src.recall.settings import RetrievalSettings
from src.recall.store import MemoryStore, NewMemory
from src.web import svg
from src.web.app import WebServer
from src.web.search_page import query_seed
from src.web.settings import WebSettings
from src.web.view import View
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

# 10:00 yesterday (UTC): inside every plot's window of days, clock labels known in advance
T0 = datetime.now(UTC).replace(hour=10, minute=0, second=0, microsecond=0) - timedelta(days=1)
PAGES = ["/", "/memories", "/thoughts", "/gates", "/consolidation", "/gut"]


@asynccontextmanager
async def served(pool: asyncpg.Pool, **view: object) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """A session and the base URL of a view served on `pool` (with a hash-embedder retriever)."""
    retriever = Retriever(pool, HashEmbedder(), None, Safety(), RetrievalSettings())
    server = WebServer(View(pool=pool, settings=view.pop("settings", WebSettings(port=0)), mode="test",
                            retriever=retriever, **view))
    url = await server.start()
    try:
        async with aiohttp.ClientSession() as s:
            yield s, url.rstrip("/")
    finally:
        await server.stop()


async def _text(s: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with s.get(url) as r:
        return r.status, await r.text()


def _svgs(html: str) -> list[str]:
    return re.findall(r"<svg.*?</svg>", html, re.S)


def _svg_titled(html: str, title: str) -> str:
    (found,) = [s for s in _svgs(html) if f'aria-label="{title}' in s]
    return found


def _tick_labels(chart: str) -> list[str]:
    """The x-axis labels of a chart (font-size 10, under the axis)."""
    return re.findall(r'<text x="[\d.]+" y="194" text-anchor="\w+" font-size="10"[^>]*>([^<]*)</text>', chart)


def _legend(chart: str) -> dict[str, str]:
    """name -> colour of a chart's legend."""
    return {name: color for color, name in re.findall(
        r'<rect x="\d+" y="\d+" width="10" height="10" fill="([^"]+)"/><text[^>]*>([^<]*)</text>', chart)}


async def _thought_rows(pool: asyncpg.Pool) -> None:
    """Two sessions, cycles restarting at 1: user and DMN candidates, winners of both sources."""
    rows = []
    for session, start, n in (("s-one", T0, 3), ("s-two", T0 + timedelta(minutes=10), 2)):
        for cycle in range(1, n + 1):
            tag, short = ("external_user", "user") if cycle % 2 else ("internal_dmn", "dmn")
            cands = [{"source": "user", "source_tag": "external_user", "salience": 0.4 + cycle / 20, "text": "hi",
                      "won": short == "user"},
                     {"source": "dmn", "source_tag": "internal_dmn", "salience": 0.3, "text": "bees",
                      "won": short == "dmn"}]
            rows.append((start + timedelta(minutes=cycle), session, cycle, tag, json.dumps(cands)))
    await pool.executemany(
        """INSERT INTO thought_log (at, session_id, cycle, source_tag, attention_focus, candidates, confidence)
           VALUES ($1, $2, $3, $4, 'focus', $5::jsonb, 0.5)""", rows)


# -- bad input: 404/400, never a traceback -------------------------------------------------
async def test_a_superscript_digit_memory_id_is_404_not_500(pool, caplog):
    async with served(pool) as (s, base):
        for raw in ("%C2%B2", "%D9%A3", "1%C2%B2"):        # ², Arabic-Indic 3: str.isdigit, not int()
            status, text = await _text(s, f"{base}/memories/{raw}")
            assert status == 404, (raw, text[:200])
            assert "memory ids are whole numbers" in text
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []


async def test_an_unknown_page_is_the_styled_404_with_its_links(pool):
    async with served(pool) as (s, base):
        status, text = await _text(s, f"{base}/nosuchpage")
        assert status == 404
        assert "<html" in text.lower() and "no page at /nosuchpage" in text and 'href="/memories"' in text
        status, text = await _text(s, f"{base}/nosuchpage?format=json")
        assert status == 404 and json.loads(text)["error"].startswith("no page at /nosuchpage")


def test_a_busy_port_names_the_fix_where_it_applies(db_dsn):
    """Standalone (`python -m src.web`) the fix is --port, not a runtime.yaml switch."""
    import socket
    import subprocess
    import sys

    from tests.proc import ROOT, agent_env
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "src.web", "--port", str(port)], cwd=ROOT,
                           env=agent_env(DATABASE_URL=db_dsn), capture_output=True, timeout=60)
    err = r.stderr.decode()
    assert r.returncode != 0 and "choose another port with --port" in err and "web.enabled" not in err, err


async def test_a_100_kb_search_is_refused_without_a_traceback_in_the_log(pool, caplog):
    caplog.set_level(logging.INFO)
    async with served(pool) as (s, base):
        status, _ = await _text(s, f"{base}/memories?q={'x' * 100_000}")
        assert status == 400
        assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
        status, text = await _text(s, f"{base}/memories?q={'octopus%20' * 300}")    # under aiohttp's limit
        assert status == 400 and "at most 2,000" in text
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    assert any("refused a malformed request (400" in r.getMessage() for r in caplog.records)


# -- search: layout and a reproducible draw --------------------------------------------------
async def test_search_results_give_the_text_room_at_1400_px(pool):
    """The components sat in a no-wrap cell beside the text and pushed it off the right edge,
    one word per line; now they wrap in a row of their own under each result."""
    await MemoryStore(pool, HashEmbedder()).store_many(
        [NewMemory(f"Olga the octopus opened jar number {i} in the marine lab, " * 3) for i in range(5)])
    async with served(pool) as (s, base):
        status, html = await _text(s, f"{base}/memories?q=octopus+Olga")
    assert status == 200
    table = re.search(r"<table class=results>.*?</table>", html, re.S).group(0)
    assert "nowrap" not in table
    shown = table.count("<td class=why colspan=7>search ")        # components beneath, across the row
    assert shown >= 1 and table.count("<td class=t>") == shown       # the text column: a min-width, wraps by words
    assert "table.results td.t{min-width:28em}" in html


async def test_search_draws_from_a_seed_fixed_per_query_and_says_so(pool):
    await MemoryStore(pool, HashEmbedder()).store_many(
        [NewMemory(f"octopus note {i}: Olga likes crabs and puzzles") for i in range(12)])
    seeds: list[int] = []

    def rng(seed: int) -> np.random.Generator:
        seeds.append(seed)
        return np.random.default_rng(seed)

    async with served(pool, rng=rng) as (s, base):
        first = json.loads((await _text(s, f"{base}/memories?q=octopus+Olga&format=json"))[1])
        again = json.loads((await _text(s, f"{base}/memories?q=octopus++Olga&format=json"))[1])
        other = json.loads((await _text(s, f"{base}/memories?q=octopus+Olga&seed=7&format=json"))[1])
        status, html = await _text(s, f"{base}/memories?q=octopus+Olga")
        bad, text = await _text(s, f"{base}/memories?q=octopus&seed=%C2%B2")
    assert first["seed"] == again["seed"] == query_seed("octopus Olga") and other["seed"] == 7
    assert seeds[:3] == [first["seed"], first["seed"], 7]
    assert [r["id"] for r in first["results"]] == [r["id"] for r in again["results"]] != []
    assert status == 200 and "Recall is random by design" in html
    assert f"draws from seed {first['seed']}, fixed for this search text" in html
    assert f"seed={first['seed'] + 1}" in html
    assert bad == 400 and "seed must be a whole number" in text


# -- time axes, restarts, colours ---------------------------------------------------------------
async def test_thoughts_plots_run_on_time_with_the_restart_marked(pool):
    await _thought_rows(pool)
    async with served(pool) as (s, base):
        html = (await _text(s, f"{base}/thoughts"))[1]
    for title in ("Salience of the candidates", "Confidence per cycle"):
        chart = _svg_titled(html, title)
        ticks = _tick_labels(chart)
        assert ticks[0] == "10:01 UTC" and ticks[-1] == "10:12", (title, ticks)   # clock times, not cycles 1 2 3 1 2
        assert chart.count(">restart</text>") == 1
    # no line joins the last cycle of a session to the first of the next
    confidence = _svg_titled(html, "Confidence per cycle")
    assert len(re.findall(r"<polyline", confidence)) == 2


async def test_one_colour_per_source_in_every_chart(pool):
    await _thought_rows(pool)
    async with served(pool) as (s, base):
        html = (await _text(s, f"{base}/thoughts"))[1]
    salience = _legend(_svg_titled(html, "Salience of the candidates"))
    winners = _legend(_svg_titled(html, "Attention winners by source per day"))
    assert salience == winners                                  # one name, one colour, in both charts
    assert salience == {"external_user": svg.source_color("external_user"),
                        "internal_dmn": svg.source_color("internal_dmn")}
    assert svg.source_color("external_user") != svg.source_color("internal_dmn")
    assert svg.source_color("some_new_tag") == svg.source_color("some_new_tag")


async def test_memory_page_plots_the_center_over_time_not_log_ids(pool):
    [mid] = await MemoryStore(pool, HashEmbedder()).store_many([NewMemory("Olga escaped again")])
    await _thought_rows(pool)
    await pool.executemany(
        """INSERT INTO consolidation_log (at, memory_id, operation, actor, alpha_after, beta_after)
           VALUES ($1, $2, 'reinforce', 'retrieval', $3, 4)""",
        [(T0 + timedelta(minutes=m), mid, a) for m, a in ((1, 2.0), (2, 3.0), (11, 4.0))])
    async with served(pool) as (s, base):
        html = (await _text(s, f"{base}/memories/{mid}"))[1]
    chart = _svg_titled(html, "Center after each weight change")
    assert _tick_labels(chart)[0] == "10:01 UTC" and _tick_labels(chart)[-1] == "10:11"
    assert chart.count(">restart</text>") == 1


async def test_gut_magnitude_is_explained_and_runs_on_time(pool):
    await pool.executemany(
        """INSERT INTO gut_deltas (at, session_id, cycle, delta, magnitude, context)
           VALUES ($1, $2, $3, array_fill(0.1::real, ARRAY[768])::halfvec, $4, 'focus')""",
        [(T0 + timedelta(minutes=c), "s-one" if c < 3 else "s-two", c if c < 3 else c - 2, c / 10)
         for c in range(1, 5)])
    async with served(pool) as (s, base):
        html = (await _text(s, f"{base}/gut"))[1]
    chart = _svg_titled(html, "Gut magnitude, last 4 deltas")
    assert _tick_labels(chart)[0] == "10:01:00 UTC" and chart.count(">restart</text>") == 1
    assert "Magnitude |attention − subconscious| (no unit, 0–2)" in html


# -- captions, empty plots ---------------------------------------------------------------------
async def test_every_plot_on_every_page_has_a_caption_under_it(pool):
    await _thought_rows(pool)
    [mid] = await MemoryStore(pool, HashEmbedder()).store_many([NewMemory("Olga escaped again")])
    async with served(pool) as (s, base):
        pages = {p: (await _text(s, base + p))[1] for p in [*PAGES, f"/memories/{mid}"]}
    for page, html in pages.items():
        figures = re.findall(r"<figure>(<svg.*?</svg>)<figcaption>([^<]+)</figcaption></figure>", html, re.S)
        assert len(figures) == len(_svgs(html)), page
        assert all(len(caption) > 30 for _, caption in figures), page


async def test_plots_with_nothing_to_draw_say_so_on_a_fresh_mind(pool):
    async with served(pool) as (s, base):
        html = (await _text(s, base + "/"))[1]
        thoughts = (await _text(s, base + "/thoughts"))[1]
    assert "no weight change in the last 30 days left a memory contested or uninformed" in \
        _svg_titled(html, "Weight changes ending contested")
    assert "no model call cost anything in the last 30 days" in _svg_titled(html, "Cost per day (USD)")
    assert "no memories yet" in _svg_titled(html, "Weight centers")
    assert "no cycle yet" in _svg_titled(thoughts, "Confidence per cycle")
    assert "no cycle yet" in _svg_titled(thoughts, "Cost per cycle (USD)")


# -- /memories: paging and event time -------------------------------------------------------------
async def test_memories_page_through_everything_with_event_time(pool):
    items = [NewMemory(f"memory number {i}", event_time=T0 - timedelta(days=i) if i % 2 else None)
             for i in range(250)]
    await MemoryStore(pool, HashEmbedder()).store_many(items)
    async with served(pool) as (s, base):
        pages = [json.loads((await _text(s, f"{base}/memories?page={n}&format=json"))[1]) for n in (1, 2, 3)]
        html1 = (await _text(s, f"{base}/memories"))[1]
        html3 = (await _text(s, f"{base}/memories?page=3&type=episodic"))[1]
        bad = [(await _text(s, f"{base}/memories?page={p}"))[0] for p in ("0", "%C2%B2", "x", "-1")]
    assert [len(p["memories"]) for p in pages] == [100, 100, 50]
    assert [p["more"] for p in pages] == [True, True, False]
    ids = [m["id"] for p in pages for m in p["memories"]]
    assert len(set(ids)) == 250
    dated = [m for m in pages[0]["memories"] if m["event_time"] is not None]
    assert len(dated) == 50 and "<th>said</th>" in html1
    assert f"<td>{dated[0]['said']}</td>" in html1 and dated[0]["said"].startswith(
        datetime.fromisoformat(dated[0]["event_time"]).strftime("%a %-d %b %Y, "))     # its own date, in words
    assert 'href="/memories?page=2">older (page 2) →</a>' in html1
    assert 'href="/memories?type=episodic&amp;page=2">← newer (page 2)</a>' in html3
    assert "older (page 4)" not in html3
    assert bad == [400, 400, 400, 400]


# -- tables instead of raw JSON -------------------------------------------------------------------
async def test_deep_passes_and_readiness_are_tables_not_json(pool):
    await pool.execute(
        """INSERT INTO consolidation_passes (trigger, status, llm_calls, llm_budget, tokens_in, counts, skipped)
           VALUES ('timer', 'done', 3, 10, 1200, '{"merge": 2, "insight": 1}', '{"narrative": "reflex mode"}')""")
    await pool.execute(
        """INSERT INTO consolidation_checkpoints (pass_id, phase, status, result)
           SELECT id, 'merge', 'done', '{"merged": 2}' FROM consolidation_passes""")
    await pool.execute(
        """INSERT INTO consolidation_checkpoints (pass_id, phase, status, result)
           SELECT id, 'decay', 'done', '{"calls": 0, "counts": {"decayed": 3, "demoted": 1}, "skipped": null,
                                         "data": {}}' FROM consolidation_passes""")
    await pool.execute("""INSERT INTO readiness_events (milestone, event)
                          VALUES (1, '{"memory_ids": [5, 6], "path": "entry → scratch → exit → persist"}'),
                                 (2, '{"cycle": 6, "recalled": [6, 1]}')""")
    async with served(pool) as (s, base):
        cons = (await _text(s, base + "/consolidation"))[1]
        overview = (await _text(s, base + "/"))[1]
    for html in (cons, overview):
        assert "&quot;" not in html and "<code>" not in html
    assert re.search(r"<h2>Deep pass #\d+, phase by phase</h2><table><tr><th>phase</th><th>status</th>"
                     r"<th>calls</th><th>results</th>", cons)
    assert "<td>merged 2</td>" in cons and "<td>decayed 3, demoted 1</td>" in cons
    assert "<td>narrative: reflex mode</td>" in cons               # what the pass skipped, and why
    assert '<td>memory_ids</td><td><a href="/memories/5">#5</a>, <a href="/memories/6">#6</a></td>' in overview
    assert "<td>path</td><td>entry → scratch → exit → persist</td>" in overview
    assert '<td>recalled</td><td><a href="/memories/6">#6</a>, <a href="/memories/1">#1</a></td>' in overview
