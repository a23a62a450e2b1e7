"""Issue 39 items 1, 2 and 4 at the prompt of a running mind: /forget by id while the mind
runs (the next turn's context has it nowhere), a forget request said in conversation and
confirmed, and what may never ask for one (a DMN thought, a consolidation insight)."""

from __future__ import annotations

import json

import asyncpg

from src.gates.forget_request import forget_request
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder
from tests.proc import agent_env, noiseless_config, read_until, run_agent, spawn_agent, wait_ready
from tests.test_forget_everything import tables_holding

SECRET = "My gym locker code is zebrafish 7419."
REPLY = "(reflex mode"


def _context_ids(summary: str) -> set[int]:
    ids = json.loads(summary).get("ids", {})
    return {i for group in ids.values() for i in group}


async def test_forget_by_id_while_the_mind_runs_then_the_next_turn_has_it_in_no_context(db_dsn):
    conn = await asyncpg.connect(db_dsn)
    try:
        from src.db.pool import create_pool
        pool = await create_pool(db_dsn, min_size=1, max_size=2)
        try:
            store = MemoryStore(pool, HashEmbedder())
            secret = await store.store(NewMemory(SECRET, "episodic", source_tag="external_user"))
        finally:
            await pool.close()
        proc = spawn_agent(agent_env(DATABASE_URL=db_dsn))
        try:
            wait_ready(proc)
            proc.stdin.write(b"What is my gym locker code?\n")
            proc.stdin.flush()
            read_until(proc, lambda line: "Nothing comes back" in line or "zebrafish" in line or "#" in line)
            before = await conn.fetchval("SELECT context_summary FROM thought_log ORDER BY id DESC LIMIT 1")
            proc.stdin.write(f"/forget {secret}\n".encode())
            proc.stdin.flush()
            listed = read_until(proc, lambda line: "Forget these 1?" in line)
            assert any(f"memory #{secret}" in line for line in listed), listed
            proc.stdin.write(b"y\nWhat is my gym locker code?\n/quit\n")
            proc.stdin.flush()
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err.decode()
        assert "forgot 1 memory" in out.decode()
        assert secret in _context_ids(before)            # the first turn recalled it
        after = await conn.fetchval("SELECT context_summary FROM thought_log ORDER BY id DESC LIMIT 1")
        assert secret not in _context_ids(after)
        assert "zebrafish" not in (out.decode().split("forgot 1 memory", 1)[1])
        assert await tables_holding(conn, ("zebrafish",)) == {}
    finally:
        await conn.close()


async def test_a_request_in_conversation_lists_asks_and_forgets_only_when_confirmed(db_dsn, tmp_path):
    said = (f"{SECRET}\nMy sister lives in Porto.\nPlease forget my locker code.\nn\n"
            "Please forget my locker code.\ny\n/quit\n").encode()
    # noiseless: the exit gate's noise floor left the Porto line buffered in ~5% of runs
    config = noiseless_config(tmp_path)
    result = run_agent(said, agent_env(DATABASE_URL=db_dsn), ("--config", str(config)), timeout=120)
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert out.count("Forget these") == 2
    assert "nothing was forgotten" in out                       # "n": nothing
    assert "receipt #1 (conversation," in out
    conn = await asyncpg.connect(db_dsn)
    try:
        assert await tables_holding(conn, ("zebrafish",)) == {}
        # the request is not a message for the model and never a memory
        assert await conn.fetchval("SELECT count(*) FROM memories WHERE content ILIKE '%forget%'") == 0
        assert await conn.fetchval("SELECT count(*) FROM thought_log WHERE attention_focus ILIKE '%forget%'") == 0
        porto = await conn.fetchval("SELECT count(*) FROM memories WHERE content ILIKE '%Porto%'")
        assert porto == 1, (out, result.stderr.decode())
        assert await conn.fetchval("SELECT who FROM forget_receipts") == "conversation"
    finally:
        await conn.close()


def test_only_the_user_can_ask_and_only_by_asking():
    ask = "Forget that my locker code is 7731"
    assert forget_request(ask, "external_user").about == "my locker code is 7731"
    for source in ("internal_dmn", "internal_consolidation", "internal_self", "internal_thought", "external_docs"):
        assert forget_request(ask, source) is None, source
    assert forget_request("please don't remember what I said about my brother", "external_user").about == "my brother"
    assert forget_request("scratch that, forget what I just said", "external_user").last
    for other in ("I always forget my keys", "don't forget my birthday is on May 3", "I forgot to call my mum",
                  "how do I delete my Instagram account?", "do you ever forget things?"):
        assert forget_request(other, "external_user") is None, other
