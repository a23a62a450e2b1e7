"""The HTTP API of a real service (`python -m src.main`, a subprocess), killed mid-way: every
message sent over the API is answered, none twice, and a restart gives each its reply."""

from __future__ import annotations

import json
import signal
import uuid

import aiohttp
import asyncpg

from src.api.messages import Sent
from src.api.openapi import document
from tests.web_service import Service


async def _post(http: aiohttp.ClientSession, base: str, text: str, key: str, wait_s: float) -> dict:
    async with http.post(f"{base}api/v1/messages", json={"text": text, "wait_s": wait_s},
                         headers={"Idempotency-Key": key}) as r:
        assert r.status in (200, 202), await r.text()
        return await r.json()


async def test_api_messages_survive_a_sigkill_and_are_answered_once(db_dsn, tmp_path):
    texts = [f"Note {i}: my bicycle is parked at rack {i}." for i in range(8)]
    keys = [str(uuid.uuid4()) for _ in texts]
    first = Service(db_dsn, tmp_path)
    async with aiohttp.ClientSession() as http:
        answered = await _post(http, first.url, "My sister Maren lives in Lisbon.", str(uuid.uuid4()), 60)
        assert answered["state"] == "answered" and answered["reply"]
        sent = [await _post(http, first.url, t, k, 0) for t, k in zip(texts, keys, strict=True)]
    assert all(s["id"] is not None for s in sent)        # durable before the API answered
    first.proc.send_signal(signal.SIGKILL)
    out1 = first.proc.communicate(timeout=30)[0].decode()

    second = Service(db_dsn, tmp_path)
    try:
        async with aiohttp.ClientSession() as http:
            for s, k, t in zip(sent, keys, texts, strict=True):
                async with http.get(f"{second.url}api/v1/messages/{s['id']}", params={"wait_s": "60"}) as r:
                    got = await r.json()
                assert got["state"] == "answered", got
                # sent again with its key after the restart: the same message, not a new one
                again = await _post(http, second.url, t, k, 5)
                assert again["id"] == s["id"] and again["state"] == "answered"
    finally:
        out2, _ = second.stop()
    conn_rows = await _journal(db_dsn)
    assert [r["state"] for r in conn_rows] == ["answered"] * (1 + len(texts))
    # each message answered by exactly one cycle: the two runs' replies together, no repeats
    cycles = {(r["answered_session"], r["answered_cycle"]) for r in conn_rows}
    assert len(cycles) <= len(conn_rows) and None not in {c for _, c in cycles}
    printed = out1.count("(reflex mode — ") + out2.count("(reflex mode — ")
    assert printed == len(cycles), (printed, len(cycles))


async def _journal(dsn: str) -> list:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch("SELECT id, state, answered_session, answered_cycle FROM input_journal "
                                "WHERE kind = 'message' ORDER BY id")
    finally:
        await conn.close()


def test_the_message_json_is_what_the_openapi_document_says():
    schema = document()["components"]["schemas"]["Message"]
    for sent in (Sent("k", 1, "answered", "hi"), Sent(None, 2, "pending"), Sent("k", None, "held")):
        body = json.loads(json.dumps(sent.json()))
        assert set(schema["required"]) <= set(body) <= set(schema["properties"])
        assert body["state"] in schema["properties"]["state"]["enum"]

