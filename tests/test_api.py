"""The HTTP API (issue 41 item 1) in process: a real mind (reflex System 1), its input journal
and loop running, the web server on a free port, a real HTTP client."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import asynccontextmanager

import aiohttp
import pytest

from src.api.routes import ROUTES
from src.config import load_settings
from src.loop.input_journal import InputJournal
from src.loop.outage import Outage
from src.web.serve import start_beside_mind
from tests.test_loop import _mind

REFLEX = "(reflex mode — "


@asynccontextmanager
async def _served(pool, dsn, tmp_path, **web):
    """The mind with its journal, its loop running, and the web server with the API."""
    settings = load_settings(tmp_path / "none.yaml", env={}, overrides={
        "web": {"enabled": True, "port": 0, **web},
        "agent": {"spill_dir": str(tmp_path / "spill"), "max_input_chars": 20_000}})
    mind, delivered = await _mind(pool, tmp_path)
    mind.providers.report = []                       # the start-up lines the view shows: none here
    journal = InputJournal(pool, "test-session", tmp_path / "spill", outage=Outage(), notify=lambda _: None)
    await journal.open()
    mind.loop.on_answered = journal.answered         # the service passes its journal to build_mind
    stop = asyncio.Event()
    thinking = asyncio.create_task(mind.loop.run(stop=stop))
    server, line = await start_beside_mind(settings, mind, "test-session", dsn=dsn, journal=journal, stop=stop)
    assert server is not None, line
    try:
        async with aiohttp.ClientSession(base_url=server.url.rstrip("/")) as http:
            yield http, mind, delivered
    finally:
        stop.set()
        mind.loop.wake.set()
        await asyncio.wait_for(thinking, 10)
        await server.stop()


async def test_a_message_is_stored_answered_and_found_again(pool, db_dsn, tmp_path):
    async with _served(pool, db_dsn, tmp_path) as (http, mind, delivered):
        async with http.post("/api/v1/messages", json={"text": "My cat is called Pimenta.", "wait_s": 20}) as r:
            assert r.status == 200, await r.text()
            sent = await r.json()
        assert sent["state"] == "answered" and sent["reply"].startswith(REFLEX)
        assert r.headers["Location"] == f"/api/v1/messages/{sent['id']}"
        row = await pool.fetchrow("SELECT line, state, answered_cycle FROM input_journal WHERE id = $1", sent["id"])
        assert (row["line"], row["state"]) == ("My cat is called Pimenta.", "answered")
        assert row["answered_cycle"] is not None
        async with http.get(f"/api/v1/messages/{sent['id']}") as r:
            again = await r.json()
        assert (again["state"], again["reply"]) == ("answered", sent["reply"])
        # the reply went back to the API; the terminal saw it once, as a quiet line
        assert delivered == [f"(answered on the HTTP API, message {sent['id']}) {' '.join(sent['reply'].split())}"]
        assert await pool.fetchval("SELECT channel FROM input_journal WHERE id = $1", sent["id"]) == "api"


async def test_a_retry_with_the_same_key_is_answered_once(pool, db_dsn, tmp_path):
    key = str(uuid.uuid4())
    async with _served(pool, db_dsn, tmp_path) as (http, mind, delivered):
        ids = []
        for _ in range(3):
            async with http.post("/api/v1/messages", json={"text": "I live in Porto.", "wait_s": 20},
                                 headers={"Idempotency-Key": key}) as r:
                sent = await r.json()
                ids.append(sent["id"])
                assert sent["key"] == key and sent["state"] == "answered"
        assert len(set(ids)) == 1
        assert await pool.fetchval("SELECT count(*) FROM input_journal") == 1
        assert len(delivered) == 1                   # answered exactly once


async def test_without_waiting_the_message_is_acknowledged_and_polled(pool, db_dsn, tmp_path):
    async with _served(pool, db_dsn, tmp_path) as (http, mind, delivered):
        async with http.post("/api/v1/messages", json={"text": "I work as a nurse.", "wait_s": 0}) as r:
            assert r.status in (200, 202)
            sent = await r.json()
        async with http.get(f"/api/v1/messages/{sent['id']}?wait_s=20") as r:
            polled = await r.json()
        assert polled["state"] == "answered" and polled["reply"].startswith(REFLEX)


@pytest.mark.parametrize(("body", "status", "says"), [
    ({"text": ""}, 400, '"text": a non-empty string'),
    ({"txt": "hello"}, 400, '"text": a non-empty string'),
    ({"text": "/quit"}, 400, "is a command"),
    ({"text": "x" * 20_001}, 413, "more than the 20,000 allowed"),
    ({"text": "hi", "wait_s": 1000}, 400, "wait_s must be between 0 and 120"),
    ([1, 2], 400, "a JSON object"),
])
async def test_refused_messages_say_why_in_json_and_store_nothing(pool, db_dsn, tmp_path, body, status, says):
    async with _served(pool, db_dsn, tmp_path) as (http, mind, delivered):
        async with http.post("/api/v1/messages", json=body) as r:
            assert r.status == status
            assert says in (await r.json())["error"]
        assert await pool.fetchval("SELECT count(*) FROM input_journal") == 0


async def test_the_read_routes_answer_json(pool, db_dsn, tmp_path):
    async with _served(pool, db_dsn, tmp_path) as (http, mind, delivered):
        async with http.post("/api/v1/messages", json={"text": "My sister Maren lives in Lisbon.", "wait_s": 20}):
            pass
        await mind.gates.exit.flush(reason="test")
        async with http.get("/api/v1/memories/search", params={"q": "Where does Maren live?", "k": "3"}) as r:
            found = await r.json()
        assert r.status == 200 and found["query"] == "Where does Maren live?"
        assert any("Maren" in m["content"] for m in found["results"] + found["working"])
        assert all("said" in m for m in found["results"])
        async with http.get("/api/v1/status") as r:
            st = await r.json()
        assert st["session_id"] == "test-session" and st["memories"] >= 1 and st["pending_messages"] == 0
        async with http.get("/api/v1/cost") as r:
            assert set(await r.json()) >= {"session_usd", "day_usd", "lifetime_usd", "rows"}
        async with http.get("/api/v1/readiness") as r:
            milestones = await r.json()
        assert [m["number"] for m in milestones] == list(range(1, 11))
        async with http.get("/api/v1/held") as r:
            assert await r.json() == []
        async with http.get("/api/v1/memories/search") as r:
            assert r.status == 400 and "?q=" in (await r.json())["error"]
        async with http.get("/api/v1/messages/123456") as r:
            assert r.status == 404 and (await r.json())["error"] == "no message 123456"
        async with http.get("/api/v1/nothing") as r:
            assert r.status == 404 and "openapi.json" in (await r.json())["error"]


async def test_the_openapi_document_names_every_route_and_no_other(pool, db_dsn, tmp_path):
    async with _served(pool, db_dsn, tmp_path) as (http, mind, delivered):
        async with http.get("/api/v1/openapi.json") as r:
            doc = await r.json()
    documented = {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}
    routed = {(method, path.replace("{message_id}", "{message_id}")) for method, path, _ in ROUTES}
    assert documented == routed
    assert doc["openapi"].startswith("3.1")


async def test_a_token_guards_the_api_like_the_view(pool, db_dsn, tmp_path):
    async with _served(pool, db_dsn, tmp_path, token="s3cret") as (http, mind, delivered):
        async with http.post("/api/v1/messages", json={"text": "hello"}) as r:
            assert r.status == 401
        async with http.post("/api/v1/messages", json={"text": "hello", "wait_s": 20},
                             headers={"Authorization": "Bearer s3cret"}) as r:
            assert r.status == 200
        async with http.get("/memories", headers={"Authorization": "Bearer s3cret"}, allow_redirects=False) as r:
            assert r.status == 200
        async with http.post("/memories", headers={"Authorization": "Bearer s3cret"}) as r:
            assert r.status == 405                   # the view itself stays read-only


async def test_remember_forget_and_correct_over_the_api(pool, db_dsn, tmp_path):
    async with _served(pool, db_dsn, tmp_path) as (http, mind, delivered):
        async with http.post("/api/v1/memories", json={"text": "My gym locker code is 7731."}) as r:
            assert r.status == 202
            kept = await r.json()
        assert kept["state"] == "buffered" and kept["scratch_id"] is not None
        await mind.gates.exit.flush(reason="test")
        mid = await pool.fetchval("SELECT id FROM memories WHERE content = 'My gym locker code is 7731.'")
        assert mid is not None and delivered == []       # remembered: no reply, no model call

        # without confirm: what would go, nothing changed
        async with http.post("/api/v1/forget", json={"match": "locker code is 7731"}) as r:
            would = await r.json()
        assert would["forgotten"] is False and [m["id"] for m in would["matches"] if m["kind"] == "memory"] == [mid]
        assert would["would"]["dry_run"] is True and would["would"]["memories"] == 1
        assert await pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", mid) == 1
        async with http.post("/api/v1/forget", json={"match": "locker code is 7731", "confirm": True}) as r:
            gone = await r.json()
        assert gone["forgotten"] is True and gone["receipt"]["who"] == "api" and gone["receipt"]["id"]
        assert await pool.fetchval("SELECT count(*) FROM memories WHERE content LIKE '%7731%'") == 0
        assert await pool.fetchval("SELECT count(*) FROM scratch_buffer WHERE content LIKE '%7731%'") == 0

        async with http.post("/api/v1/memories", json={"text": "My sister lives in Porto."}):
            pass
        await mind.gates.exit.flush(reason="test")
        old = await pool.fetchval("SELECT id FROM memories WHERE content = 'My sister lives in Porto.'")
        async with http.post("/api/v1/correct", json={"id": old, "text": "My sister lives in Lisbon."}) as r:
            assert r.status == 201
            fixed = await r.json()
        assert fixed["corrects"] == old
        assert await pool.fetchval("SELECT content FROM memories WHERE id = $1", fixed["id"]) == \
            "My sister lives in Lisbon."
        async with http.post("/api/v1/correct", json={"id": 99999999, "text": "x"}) as r:
            assert r.status == 404 and "no memory" in (await r.json())["error"]
        async with http.post("/api/v1/forget", json={"ids": [1], "match": "x"}) as r:
            assert r.status == 400 and "one of the two" in (await r.json())["error"]
        async with http.post("/api/v1/held/answer", json={"answer": "y"}) as r:
            assert r.status == 409 and "no question" in (await r.json())["error"]


async def test_a_message_is_found_by_its_key_also_while_held(pool, db_dsn, tmp_path):
    key = str(uuid.uuid4())
    async with _served(pool, db_dsn, tmp_path) as (http, mind, delivered):
        async with http.post("/api/v1/messages", json={"text": "My bike is blue.", "wait_s": 20},
                             headers={"Idempotency-Key": key}) as r:
            sent = await r.json()
        async with http.get("/api/v1/messages", params={"key": key}) as r:
            found = await r.json()
        assert (found["id"], found["state"], found["key"]) == (sent["id"], "answered", key)
        async with http.get("/api/v1/messages", params={"key": str(uuid.uuid4())}) as r:
            assert r.status == 404
        async with http.get("/api/v1/messages", params={"key": "nope"}) as r:
            assert r.status == 400 and "UUID" in (await r.json())["error"]


def test_a_held_message_says_where_to_ask_by_key():
    from src.api.messages import Sent
    held = Sent("5c8f79a1-b859-4469-9b51-e3728f0a5e5d", None, "held").json()
    assert held["poll"] == "/api/v1/messages?key=5c8f79a1-b859-4469-9b51-e3728f0a5e5d"


async def test_a_client_names_its_channel_and_a_wrong_one_is_refused(pool, db_dsn, tmp_path):
    """An MCP client over the API (src/mcp) sends X-MoltBot-Channel: mcp; the journal keeps it."""
    async with _served(pool, db_dsn, tmp_path) as (http, mind, delivered):
        async with http.post("/api/v1/messages", json={"text": "My bike is blue.", "wait_s": 20},
                             headers={"X-MoltBot-Channel": "mcp"}) as r:
            sent = await r.json()
        assert sent["state"] == "answered"
        assert await pool.fetchval("SELECT channel FROM input_journal WHERE id = $1", sent["id"]) == "mcp"
        assert delivered[-1].startswith(f"(answered on an MCP client, message {sent['id']}) ")
        async with http.post("/api/v1/messages", json={"text": "hi"}, headers={"X-MoltBot-Channel": "page"}) as r:
            assert r.status == 400 and "api or mcp" in (await r.json())["error"]
        assert await pool.fetchval("SELECT count(*) FROM input_journal WHERE line = 'hi'") == 0
