"""The MCP server (issue 41 item 2) at /mcp on the mind's web server, in process: a real mind
(reflex System 1), its journal and loop running, and the SDK's own streamable HTTP client.
Also the ASGI bridge that serves the SDK's transport from aiohttp, on its own."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import aiohttp
import httpx2
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from src.config import load_settings
from src.loop.input_journal import InputJournal
from src.loop.outage import Outage
from src.mcp.asgi import serve_asgi
from src.web.serve import start_beside_mind
from tests.test_api import REFLEX
from tests.test_loop import _mind

TOOLS = {"remember", "recall", "ask", "reply", "forget", "status"}


@asynccontextmanager
async def _served(pool, dsn, tmp_path, **web_settings):
    """The mind with its journal and loop running, and the web server (API and /mcp); its URL."""
    settings = load_settings(tmp_path / "none.yaml", env={}, overrides={
        "web": {"enabled": True, "port": 0, **web_settings},
        "agent": {"spill_dir": str(tmp_path / "spill"), "max_input_chars": 20_000}})
    mind, delivered = await _mind(pool, tmp_path)
    mind.providers.report = []
    journal = InputJournal(pool, "test-session", tmp_path / "spill", outage=Outage(), notify=lambda _: None)
    await journal.open()
    mind.loop.on_answered = journal.answered
    stop = asyncio.Event()
    thinking = asyncio.create_task(mind.loop.run(stop=stop))
    server, line = await start_beside_mind(settings, mind, "test-session", dsn=dsn, journal=journal, stop=stop)
    assert server is not None, line
    assert f"MCP (streamable HTTP): {server.url}mcp" in line
    try:
        yield server, mind, delivered
    finally:
        stop.set()
        mind.loop.wake.set()
        await asyncio.wait_for(thinking, 10)
        await server.stop()


@asynccontextmanager
async def _client(url: str, token: str | None = None):
    """The SDK's client session on /mcp."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http, \
            streamable_http_client(f"{url}mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _text(result) -> str:
    return "".join(c.text for c in result.content if c.type == "text")


async def test_every_tool_over_streamable_http_does_what_its_route_does(pool, db_dsn, tmp_path):
    async with _served(pool, db_dsn, tmp_path) as (server, mind, delivered), _client(server.url) as mcp:
        listed = (await mcp.list_tools()).tools
        assert {t.name for t in listed} == TOOLS
        schema = {t.name: t.input_schema for t in listed}
        assert schema["recall"]["properties"]["k"]["maximum"] == 50
        assert schema["ask"]["properties"]["message"]["maxLength"] == 20_000   # agent.max_input_chars

        kept = await mcp.call_tool("remember", {"statement": "My gym locker code is 7731."})
        assert not kept.is_error and kept.structured_content["state"] == "buffered"
        assert delivered == []                           # remembered: no turn, no reply
        await mind.gates.exit.flush(reason="test")
        mid = await pool.fetchval("SELECT id FROM memories WHERE content = 'My gym locker code is 7731.'")
        assert mid is not None

        found = await mcp.call_tool("recall", {"query": "What is my locker code?", "k": 3})
        assert found.structured_content["query"] == "What is my locker code?"
        assert mid in [m["id"] for m in found.structured_content["results"]]

        asked = await mcp.call_tool("ask", {"message": "My sister Maren lives in Lisbon.", "wait_s": 20})
        sent = asked.structured_content
        assert sent["state"] == "answered" and sent["reply"].startswith(REFLEX) and "poll" not in sent
        assert await pool.fetchrow("SELECT channel, state FROM input_journal WHERE id = $1", sent["id"]) == \
            ("mcp", "answered")
        again = await mcp.call_tool("reply", {"message_id": sent["id"], "wait_s": 0})
        assert (again.structured_content["state"], again.structured_content["reply"]) == ("answered", sent["reply"])

        would = await mcp.call_tool("forget", {"match": "locker code is 7731"})
        assert would.structured_content["forgotten"] is False
        assert await pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", mid) == 1
        gone = await mcp.call_tool("forget", {"match": "locker code is 7731", "confirm": True})
        assert gone.structured_content["forgotten"] is True and gone.structured_content["receipt"]["who"] == "api"
        assert await pool.fetchval("SELECT count(*) FROM memories WHERE content LIKE '%7731%'") == 0

        status = (await mcp.call_tool("status", {})).structured_content
        assert status["session_id"] == "test-session" and status["pending_messages"] == 0


async def test_an_unanswered_ask_says_how_to_get_the_reply(pool, db_dsn, tmp_path):
    async with _served(pool, db_dsn, tmp_path) as (server, mind, delivered), _client(server.url) as mcp:
        sent = (await mcp.call_tool("ask", {"message": "I work as a nurse.", "wait_s": 0})).structured_content
        if sent["state"] == "pending":                   # the loop may already have answered it
            assert sent["note"] == f"not answered yet: call `reply` with message_id={sent['id']} to get the answer"
        got = (await mcp.call_tool("reply", {"message_id": sent["id"], "wait_s": 20})).structured_content
        assert got["state"] == "answered" and got["reply"].startswith(REFLEX) and "note" not in got


async def test_refusals_are_tool_errors_in_the_apis_words(pool, db_dsn, tmp_path):
    async with _served(pool, db_dsn, tmp_path) as (server, mind, delivered), _client(server.url) as mcp:
        command = await mcp.call_tool("ask", {"message": "/quit"})
        assert command.is_error and "a line starting with '/' is a command" in _text(command)
        both = await mcp.call_tool("forget", {"ids": [1], "match": "x"})
        assert both.is_error and _text(both) == ("Error executing tool forget: name what to forget: "
                                                 '"ids" (memory ids) or "match" (words), one of the two')
        unknown = await mcp.call_tool("reply", {"message_id": 999999})
        assert unknown.is_error and _text(unknown) == "Error executing tool reply: no message 999999"
        too_many = await mcp.call_tool("recall", {"query": "x", "k": 500})
        assert too_many.is_error and "less than or equal to 50" in _text(too_many)
        assert await pool.fetchval("SELECT count(*) FROM input_journal") == 0


async def test_a_token_guards_mcp_like_the_api(pool, db_dsn, tmp_path):
    async with _served(pool, db_dsn, tmp_path, token="s3cret") as (server, mind, delivered):
        url = server.url
        async with aiohttp.ClientSession() as http, http.post(f"{url}mcp", json={}) as r:
            assert r.status == 401 and "a token is required" in await r.text()
        async with _client(url, token="s3cret") as mcp:
            status = (await mcp.call_tool("status", {})).structured_content
        assert status["session_id"] == "test-session"


async def test_mcp_refuses_a_foreign_host_header_on_loopback(pool, db_dsn, tmp_path):
    """DNS rebinding: a page from evil.example resolving to 127.0.0.1 does not reach the tools."""
    async with _served(pool, db_dsn, tmp_path) as (server, mind, delivered):
        url = server.url
        async with aiohttp.ClientSession() as http, http.post(
                f"{url}mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Host": "evil.example:80", "Accept": "application/json, text/event-stream"}) as r:
            assert r.status == 421


async def test_the_web_server_stops_while_a_client_is_still_connected(pool, db_dsn, tmp_path):
    """The session manager stops before the server: an open session's streams do not hold it."""
    async with _served(pool, db_dsn, tmp_path) as (server, mind, delivered):
        async with _client(server.url) as mcp:
            assert (await mcp.call_tool("status", {})).structured_content["session_id"] == "test-session"
            await asyncio.wait_for(server.stop(), 30)
            async with aiohttp.ClientSession() as http:
                with pytest.raises(aiohttp.ClientConnectorError):
                    await http.get(f"{server.url}mcp")


async def _echo(scope, receive, send) -> None:
    """A small ASGI app: what it was asked, answered in three body messages."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 207,
                "headers": [(b"content-type", b"text/plain"), (b"x-seen", scope["method"].encode())]})
    for part in (f"{scope['path']}?{scope['query_string'].decode()} ".encode(),
                 dict(scope["headers"]).get(b"x-name", b"?") + b" ", body):
        await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def test_the_asgi_bridge_passes_the_request_and_the_streamed_answer():
    async def handler(request: web.Request) -> web.StreamResponse:
        return await serve_asgi(_echo, request)

    app = web.Application()
    app.router.add_route("*", "/asgi", handler)
    async with TestClient(TestServer(app)) as client:
        r = await client.post("/asgi?a=1", data=b"x" * 200_000, headers={"X-Name": "Olga"})
        assert (r.status, r.headers["x-seen"], r.headers["content-type"]) == (207, "POST", "text/plain")
        assert await r.read() == b"/asgi?a=1 Olga " + b"x" * 200_000
        r = await client.get("/asgi")
        assert await r.read() == b"/asgi? ? "


async def test_the_asgi_bridge_refuses_an_app_that_never_answers():
    async def silent(scope, receive, send) -> None:
        await receive()

    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            return await serve_asgi(silent, request)
        except RuntimeError as exc:
            return web.Response(status=500, text=str(exc))

    app = web.Application()
    app.router.add_route("*", "/asgi", handler)
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/asgi")
        assert (r.status, await r.text()) == (500, "the ASGI application ended without a response")
