"""The stdio MCP server (`python -m src.mcp`, a subprocess started by the SDK's own stdio
client) attached to a real running mind (`python -m src.main`, a subprocess with its web
server), and the same server when no mind is running: one stderr line, tool errors that say so."""

from __future__ import annotations

import socket
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.proc import ROOT, agent_env
from tests.web_service import Service

NOT_RUNNING = "the mind is not running at {url} (nothing answers there): start it with `make run` " \
              "(python -m src.main), or point --url / MOLTBOT_API_URL at its web server"


@asynccontextmanager
async def _stdio(url: str, errlog: Path, **env: str):
    """`python -m src.mcp --url <url>` as a desktop client starts it, and its client session."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "src.mcp", "--url", url], cwd=str(ROOT),
                                   env=agent_env(**env))
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_the_stdio_server_reaches_the_running_mind(db_dsn, tmp_path):
    service = Service(db_dsn, tmp_path)
    try:
        async with _stdio(service.url, tmp_path / "mcp.err") as mcp:
            assert {t.name for t in (await mcp.list_tools()).tools} == \
                {"remember", "recall", "ask", "reply", "forget", "status"}
            asked = (await mcp.call_tool("ask", {"message": "My sister Maren lives in Lisbon.", "wait_s": 60}))
            sent = asked.structured_content
            assert sent["state"] == "answered" and sent["reply"].startswith("(reflex mode — ")
            kept = (await mcp.call_tool("remember", {"statement": "My bicycle is parked at rack 12."}))
            assert kept.structured_content["state"] == "buffered"
            await service.wait_for("SELECT count(*) > 0 FROM memories WHERE content LIKE '%Maren%'")
            found = (await mcp.call_tool("recall", {"query": "Where does Maren live?"})).structured_content
            assert any("Maren" in m["content"] for m in found["results"] + found["working"])
            would = (await mcp.call_tool("forget", {"match": "Maren"})).structured_content
            assert would["forgotten"] is False and would["matches"]
            status = (await mcp.call_tool("status", {})).structured_content
            assert status["pending_messages"] == 0 and status["memories"] >= 1
            refused = await mcp.call_tool("ask", {"message": "/quit"})
            assert refused.is_error and "is a command" in refused.content[0].text
    finally:
        service.stop()
    conn = await asyncpg.connect(db_dsn)
    try:
        row = await conn.fetchrow("SELECT channel, state FROM input_journal WHERE id = $1", sent["id"])
    finally:
        await conn.close()
    assert (row["channel"], row["state"]) == ("mcp", "answered")
    assert (tmp_path / "mcp.err").read_text() == ""      # nothing went wrong, so nothing was said


async def test_without_a_running_mind_the_stdio_server_says_so_and_stays_up(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}/"
    async with _stdio(url, tmp_path / "mcp.err") as mcp:
        status = await mcp.call_tool("status", {})
        assert status.is_error and status.content[0].text == \
            "Error executing tool status: " + NOT_RUNNING.format(url=url)
        assert {t.name for t in (await mcp.list_tools()).tools} >= {"status"}     # still serving
    assert (tmp_path / "mcp.err").read_text() == f"moltbot mcp: {NOT_RUNNING.format(url=url)}\n"


async def test_a_wrong_token_is_named(db_dsn, tmp_path):
    service = Service(db_dsn, tmp_path, MOLTBOT_WEB_TOKEN="s3cret")
    try:
        async with _stdio(service.url, tmp_path / "mcp.err", MOLTBOT_WEB_TOKEN="wrong") as mcp:
            status = await mcp.call_tool("status", {})
        assert status.is_error and "wants its token: set MOLTBOT_WEB_TOKEN" in status.content[0].text
        async with _stdio(service.url, tmp_path / "mcp2.err", MOLTBOT_WEB_TOKEN="s3cret") as mcp:
            assert not (await mcp.call_tool("status", {})).is_error
    finally:
        service.stop()
