"""The guardian's window: a real service with a scripted conversation, read over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys

import aiohttp
import asyncpg
import pytest
from pydantic import SecretStr

from src.config import load_settings
from src.errors import ConfigError
from src.gates.utterance import classify
from src.web.app import WebServer, check_bind, is_loopback
from src.web.escape import esc, visible
from src.web.settings import WebSettings
from src.web.svg import beta_interval, beta_pdf
from src.web.view import View
from tests.proc import ROOT, agent_env, run_agent
from tests.web_service import CONVERSATION, HOSTILE, Service, spawn_viewer

PAGES = ["/", "/memories", "/thoughts", "/gates", "/consolidation", "/gut"]


async def _get(session: aiohttp.ClientSession, url: str, **kw) -> tuple[int, str]:
    async with session.get(url, **kw) as resp:
        return resp.status, await resp.text()


# -- pure parts ------------------------------------------------------------------------
def test_esc_makes_markup_and_control_characters_harmless():
    assert esc('<b a="1">&') == "&lt;b a=&quot;1&quot;&gt;&amp;"
    assert esc("a\x1bb") == 'a<span class="ctl">\\x1b</span>b'
    assert esc("x\u202ey") == 'x<span class="ctl">\\u202e</span>y'
    assert esc("\x85") == '<span class="ctl">\\x85</span>'
    assert esc("line\nnext\ttab") == "line\nnext\ttab"
    assert visible("a\x07\u2066b") == "a\\x07\\u2066b"
    assert esc(None) == ""


def test_beta_density_and_interval():
    assert beta_pdf(0.5, 2.0, 2.0) == pytest.approx(1.5)
    assert beta_pdf(0.0, 2.0, 2.0) == 0.0
    lo, hi = beta_interval(1.0, 1.0, 0.9)
    assert lo == pytest.approx(0.05, abs=1e-3) and hi == pytest.approx(0.95, abs=1e-3)
    lo, hi = beta_interval(30.0, 10.0, 0.9)
    assert lo < 0.75 < hi and hi - lo < 0.25


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                            ("127.0.0.2", True), ("0.0.0.0", False), ("10.1.2.3", False),
                                            ("example.org", False)])
def test_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_public_bind_without_token_refuses_to_start():
    with pytest.raises(ConfigError) as exc:
        check_bind("0.0.0.0", None)
    assert str(exc.value) == (
        "web.host '0.0.0.0' is not a loopback address and no token is set: set MOLTBOT_WEB_TOKEN "
        "(then send it as 'Authorization: Bearer <token>' or ?token=<token>), or bind web.host 127.0.0.1")
    check_bind("0.0.0.0", "s3cret")
    check_bind("127.0.0.1", None)


def test_token_comes_from_the_environment_only(tmp_path):
    cfg = tmp_path / "runtime.yaml"
    cfg.write_text("web: {token: abc}\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(cfg, env={})
    assert str(exc.value) == (f"{cfg}: 'web.token' cannot be set in the file; "
                              "set the MOLTBOT_WEB_TOKEN environment variable instead")
    cfg.write_text("web: {host: 0.0.0.0, port: 9000}\n")
    s = load_settings(cfg, env={"MOLTBOT_WEB_TOKEN": "abc"})
    assert (s.web.host, s.web.port, s.web.token.get_secret_value()) == ("0.0.0.0", 9000, "abc")


# -- the token off loopback, served in this process on the test database -------------------
async def test_token_is_required_off_loopback(pool):
    settings = WebSettings(host="0.0.0.0", port=0)
    with pytest.raises(ConfigError):
        WebServer(View(pool=pool, settings=settings, mode="test"))
    server = WebServer(View(pool=pool, settings=WebSettings(host="0.0.0.0", port=0,
                                                            token=SecretStr("s3cret")), mode="test"))
    url = (await server.start()).replace("0.0.0.0", "127.0.0.1")
    try:
        # unsafe=True: aiohttp's client keeps no cookies for IP-address hosts otherwise
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:
            for page in PAGES:
                status, text = await _get(s, url.rstrip("/") + page)
                assert status == 401, page
                assert "a token is required" in text
            assert (await _get(s, url, headers={"Authorization": "Bearer wrong"}))[0] == 401
            assert (await _get(s, url, headers={"Authorization": "Bearer s3cret"}))[0] == 200
            async with s.get(url + "gates?token=s3cret") as resp:
                assert resp.status == 200
                assert resp.cookies["moltbot_token"]["httponly"]
            # the cookie set by ?token= carries the next request
            assert (await _get(s, url + "thoughts"))[0] == 200
        async with aiohttp.ClientSession() as s:
            async with s.post(url + "?token=s3cret") as resp:
                assert resp.status == 405
    finally:
        await server.stop()


def test_python_m_src_web_refuses_public_bind_without_token(db_dsn):
    result = subprocess.run([sys.executable, "-m", "src.web", "--host", "0.0.0.0", "--port", "0"], cwd=ROOT,
                            env=agent_env(DATABASE_URL=db_dsn), capture_output=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.decode().strip() == (
        "configuration error: web.host '0.0.0.0' is not a loopback address and no token is set: set "
        "MOLTBOT_WEB_TOKEN (then send it as 'Authorization: Bearer <token>' or ?token=<token>), or bind "
        "web.host 127.0.0.1")


# -- a real service with a scripted conversation ---------------------------------------------
async def _poll_every_page(url: str, stop: asyncio.Event, statuses: list[int]) -> None:
    async with aiohttp.ClientSession() as s:
        while not stop.is_set():
            for page in PAGES + ["/memories?q=octopus"]:
                statuses.append((await _get(s, url.rstrip("/") + page))[0])


async def test_every_page_of_a_real_service(db_dsn, tmp_path):
    service = Service(db_dsn, tmp_path)
    stop = asyncio.Event()
    statuses: list[int] = []
    poller = asyncio.create_task(_poll_every_page(service.url, stop, statuses))
    try:
        # the statements before the question are memories before it is asked: the flush runs in
        # the background, and the question would otherwise find them in working memory instead
        asked = CONVERSATION.index("What do you remember about the octopus Olga?")
        await service.converse(CONVERSATION[:asked])
        await service.wait_for("SELECT count(*) >= $1 FROM memories WHERE source_tag = 'external_user'", asked)
        await service.converse(CONVERSATION[asked:], answered=asked)
        # each exchange is flushed at once (settle): every statement becomes a memory (the
        # question is not stored as a fact)
        statements = [t for t in CONVERSATION if classify(t).kind == "statement"]
        assert len(statements) == len(CONVERSATION) - 1
        await service.wait_for("SELECT count(*) = $1 FROM memories WHERE source_tag = 'external_user'",
                               len(statements))
        stop.set()
        await poller
        base = service.url.rstrip("/")
        async with aiohttp.ClientSession() as s:
            pages = {p: await _get(s, base + p) for p in PAGES}
            data = {p: json.loads((await _get(s, base + p + "?format=json"))[1]) for p in PAGES}
            for p, (status, text) in pages.items():
                assert status == 200, (p, text[:300])
                # hostile content never reaches the browser as markup or raw control characters
                assert "<script>" not in text and "\x1b" not in text and "\u202e" not in text, p
            conn = await asyncpg.connect(db_dsn)
            try:
                hostile_id = await conn.fetchval("SELECT id FROM memories WHERE content LIKE '%owned%'")
                octopus_id = await conn.fetchval("SELECT id FROM memories WHERE content LIKE '%marine%'")
                n_types = await conn.fetch("SELECT memory_type, count(*) AS n FROM memories GROUP BY 1")
                gate_rows = await conn.fetchval("SELECT count(*) FROM gate_decisions")
                log_rows = await conn.fetchval("SELECT count(*) FROM consolidation_log")
                accesses = await conn.fetchval("SELECT sum(access_count) FROM memories")
            finally:
                await conn.close()
            assert hostile_id is not None and octopus_id is not None

            # overview: facts and memories by type match the tables
            assert data["/"]["facts"]["cycles_total"] == len(CONVERSATION)
            assert data["/"]["facts"]["restarts"] == 0
            assert 0 < data["/"]["facts"]["uptime_hours_this_session"] < 1     # running since this test began
            assert {r["memory_type"]: r["n"] for r in data["/"]["memories_by_type"]} == \
                {r["memory_type"]: r["n"] for r in n_types}
            assert len(data["/"]["readiness"]) == 10
            assert sum(r["n"] for r in data["/"]["center_histogram"]) == sum(r["n"] for r in n_types)
            assert "<svg" in pages["/"][1]

            # thoughts: one row per cycle, the focus text escaped on the page
            focus = sorted(r["attention_focus"] for r in data["/thoughts"]["thoughts"])
            assert focus == sorted(CONVERSATION)
            assert [r["cycle"] for r in data["/thoughts"]["thoughts"]] == list(range(len(CONVERSATION), 0, -1))
            assert "&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;" in pages["/thoughts"][1]
            assert '<span class="ctl">\\x1b</span>[31mred' in pages["/thoughts"][1]
            assert '<span class="ctl">\\u202e</span>evil' in pages["/thoughts"][1]
            assert data["/thoughts"]["winners_per_day"][0]["source"] == "external_user"

            # gates: every decision counted per cell and action
            assert sum(r["n"] for r in data["/gates"]["matrix"]) == gate_rows
            assert len(data["/gates"]["recent"]) == min(gate_rows, 100)

            # the list of memories shows the hostile one, escaped
            assert hostile_id in [m["id"] for m in data["/memories"]["memories"]]
            assert f'href="/memories/{hostile_id}"' in pages["/memories"][1]

            # one memory's page: Beta plot, weight history, gate decisions that wrote it
            status, text = await _get(s, f"{base}/memories/{hostile_id}")
            assert status == 200
            assert "&lt;script&gt;" in text and "<script>" not in text
            mem = json.loads((await _get(s, f"{base}/memories/{hostile_id}?format=json"))[1])
            assert mem["memory"]["content"] == HOSTILE
            assert mem["weight"]["center"] == pytest.approx(mem["weight"]["alpha"] / (mem["weight"]["alpha"]
                                                                                      + mem["weight"]["beta"]))
            assert any(d["wrote_it"] and d["gate"] == "exit" for d in mem["gate_decisions"])
            assert "90% interval [" in text and "<polygon" in text     # the Beta plot with its band
            octo = json.loads((await _get(s, f"{base}/memories/{octopus_id}?format=json"))[1])
            assert octo["weight_history"], "the question about Olga recalled and reinforced it"
            assert {r["actor"] for r in octo["weight_history"]} <= {"retrieval", "exit_gate"}

            # search: read-only recall with its components; nothing mutated by the polling
            status, text = await _get(s, f"{base}/memories?q=octopus&format=json")
            found = json.loads(text)
            assert status == 200 and found["read_only"] is True
            first = found["results"][0]
            assert set(first["relevance"]["components"]) == {"semantic", "coactivation", "noise", "emotional",
                                                             "recency"}
            assert set(first["act_r"]) == {"B", "S", "P", "noise", "A", "p_retrieve"}
            assert set(first["search"]) == {"score", "rrf", "vector_rank", "cosine", "fulltext_rank",
                                            "fulltext_score", "own_rank", "recency"}
            assert (first["rank"], first["near_miss"]) == (1, False)
            conn = await asyncpg.connect(db_dsn)
            try:
                assert await conn.fetchval("SELECT count(*) FROM consolidation_log") == log_rows
                assert await conn.fetchval("SELECT sum(access_count) FROM memories") == accesses
            finally:
                await conn.close()

            status, text = await _get(s, f"{base}/memories?q=octopus+Olga")
            assert status == 200 and "&lt;script&gt;alert(&quot;owned&quot;)" in text and "<script>" not in text

            # consolidation and gut: the tables of parts not yet in this mind are named, not fatal
            conn = await asyncpg.connect(db_dsn)
            try:
                for page, names in (("/consolidation", data["/consolidation"]["tables_present"]),
                                    ("/gut", data["/gut"]["tables_present"])):
                    for name, present in names.items():
                        assert present == await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", name)
                        if not present and name in ("consolidation_passes", "gut_axes", "dmn_items"):
                            assert f"not in this mind yet (no {name} table)" in pages[page][1], (page, name)
            finally:
                await conn.close()

            # the gut page plots every delta the loop logged (up to 200)
            conn = await asyncpg.connect(db_dsn)
            try:
                deltas = await conn.fetchval("SELECT count(*) FROM gut_deltas")
                passes = await conn.fetchval("SELECT count(*) FROM consolidation_passes")
            finally:
                await conn.close()
            assert len(data["/gut"]["gut_deltas"]) == min(deltas, 200)
            assert len(data["/consolidation"]["passes"]) == min(passes, 100)

            # errors a guardian can meet
            status, text = await _get(s, f"{base}/memories?type=bogus")
            assert status == 400 and "type must be one of episodic" in text
            assert (await _get(s, f"{base}/memories/999999"))[0] == 404
            assert (await _get(s, f"{base}/memories/<x>"))[0] == 404
        out, err = service.stop()
    finally:
        stop.set()
        poller.cancel()
        with contextlib.suppress(BaseException):
            await poller
        if service.proc.poll() is None:
            service.proc.kill()
            service.proc.wait()
    assert statuses and set(statuses) == {200}, sorted(set(statuses))
    assert "Traceback" not in err
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", service.url)     # the start-up line
    assert out.count("(reflex mode") == len(CONVERSATION)


async def test_python_m_src_web_serves_a_stopped_mind_read_only(db_dsn, tmp_path):
    service = Service(db_dsn, tmp_path)
    service.say(CONVERSATION[1])
    await service.wait_cycles(1)
    service.stop()
    config = tmp_path / "runtime.yaml"
    proc = spawn_viewer(agent_env(DATABASE_URL=db_dsn), "--config", str(config))
    try:
        line = proc.stdout.readline().decode()
        match = re.match(r"web view \(read-only\) of PostgreSQL at \S+ \(DATABASE_URL\): (http://\S+/)$",
                         line.strip())
        assert match, (line, proc.stderr.read1().decode() if proc.poll() is not None else "")
        url = match.group(1)
        async with aiohttp.ClientSession() as s:
            data = json.loads((await _get(s, url + "?format=json"))[1])
            assert data["facts"]["mode"] == "standalone viewer (the mind is not run here)"
            assert data["facts"]["cycles_total"] == 1
            found = json.loads((await _get(s, url + "memories?q=marine+biologist&format=json"))[1])
            assert found["results"][0]["content"] == CONVERSATION[1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert proc.returncode == 0


async def test_consolidation_and_gut_pages_show_their_tables(pool):
    """Rows as deep consolidation, the gut and the DMN write them; hostile text escaped."""
    async with pool.acquire() as conn:
        await conn.execute(
            """INSERT INTO consolidation_passes (trigger, status, llm_calls, llm_budget, tokens_in, counts, skipped)
               VALUES ('timer', 'done', 3, 10, 1200, '{"merge": 2, "insight": 1}', '{"narrative": "reflex mode"}')""")
        await conn.execute(
            """INSERT INTO consolidation_checkpoints (pass_id, phase, status, result)
               SELECT id, 'merge', 'done', '{"merged": 2}' FROM consolidation_passes""")
        await conn.execute("INSERT INTO approvals (kind, reason) VALUES ('promotion', '<b>promote #7</b>')")
        await conn.execute(
            """INSERT INTO gut_deltas (delta, magnitude, context, cycle)
               SELECT array_fill(0.1::real, ARRAY[768])::halfvec, m, 'focus ' || c, c
                 FROM unnest(ARRAY[0.3, 0.7]::float8[], ARRAY[1, 2]) AS t(m, c)""")
        await conn.execute(
            """INSERT INTO gut_axes (rank, component, explained_variance, samples, name)
               VALUES (1, array_fill(0.1::real, ARRAY[768])::halfvec, 0.4, 20, 'calm <-> tense')""")
        await conn.execute("INSERT INTO dmn_items (channel, text) VALUES ('creative', 'bees\u202eand octopus')")
    server = WebServer(View(pool=pool, settings=WebSettings(port=0), mode="test"))
    url = await server.start()
    try:
        async with aiohttp.ClientSession() as s:
            cons = json.loads((await _get(s, url + "consolidation?format=json"))[1])
            gut = json.loads((await _get(s, url + "gut?format=json"))[1])
            cons_html = (await _get(s, url + "consolidation"))[1]
            gut_html = (await _get(s, url + "gut"))[1]
    finally:
        await server.stop()
    (p,) = cons["passes"]
    assert (p["trigger"], p["status"], p["llm_calls"], p["llm_budget"], p["counts"]) == (
        "timer", "done", 3, 10, {"merge": 2, "insight": 1})
    assert p["phases"] == [{"phase": "merge", "status": "done", "result": {"merged": 2}}]
    assert p["skipped"] == {"narrative": "reflex mode"}
    assert [a["reason"] for a in cons["approvals"]] == ["<b>promote #7</b>"]
    assert "&lt;b&gt;promote #7&lt;/b&gt;" in cons_html and "<b>promote" not in cons_html
    assert "LLM calls per deep pass" in cons_html
    assert [(d["cycle"], d["magnitude"]) for d in gut["gut_deltas"]] == [(1, 0.3), (2, 0.7)]
    assert [(a["rank"], a["name"], a["samples"]) for a in gut["axes"]] == [(1, "calm <-> tense", 20)]
    assert [d["text"] for d in gut["dmn_items"]] == ["bees\u202eand octopus"]
    assert "calm &lt;-&gt; tense" in gut_html
    assert 'bees<span class="ctl">\\u202e</span>and octopus' in gut_html
    assert "Gut magnitude, last 2 deltas" in gut_html


def test_beside_the_mind_a_public_bind_without_token_leaves_the_view_off_not_the_mind(db_dsn):
    """What the README and docker-compose.yml promise a container started without
    MOLTBOT_WEB_TOKEN: the mind runs and answers, the start-up line says the view is off."""
    result = run_agent(b"My sister lives in Porto.\n/quit\n",
                       agent_env(DATABASE_URL=db_dsn, MOLTBOT_WEB_HOST="0.0.0.0"), timeout=120)
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert ("web view not started: web.host '0.0.0.0' is not a loopback address and no token is set"
            in result.stderr.decode())     # a start-up line: on stderr when stdout is a pipe
    assert "(reflex mode" in out
