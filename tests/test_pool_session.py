"""Pooled connections are not reset when they come back (src/db/pool.py keep_session), so no
code may leave session state on one. A transaction's state ends with it; this test proves
that on a real connection, and fails on any SQL in src/ that would outlive its transaction."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from src.db.pool import create_pool

SRC = Path(__file__).resolve().parents[1] / "src"

# (pattern, files allowed to use it, why)
SESSION_STATE = [
    (re.compile(r"\bpg_(try_)?advisory_lock(_shared)?\s*\(", re.I),
     {"consolidation/deep/deep_pass.py", "db/migrations.py"},
     "session advisory locks: the deep pass unlocks (or ends the connection); migrations use their own"),
    (re.compile(r"\bset_config\s*\([^)]*,\s*false\s*\)", re.I), {"db/pool.py", "recall/hnsw.py"},
     "session settings: only the connection set-up, to the start-up packet's values, and the index "
     "rebuild's own connection (never a pooled one)"),
    # SQL keywords are written in capitals here; prose ("; set the variable") is not SQL
    (re.compile(r"^\s*SET\s+(?!LOCAL\b)"), set(), "SET outlives the transaction; use SET LOCAL"),
    (re.compile(r";\s*SET\s+(?!LOCAL\b)"), set(), "SET outlives the transaction; use SET LOCAL"),
    (re.compile(r"\bLISTEN\s+\w"), set(), "a LISTEN stays on the connection"),
    (re.compile(r"\bWITH\s+HOLD\b"), set(), "a held cursor stays open"),
    (re.compile(r"^\s*PREPARE\s+\w"), set(), "a prepared statement stays"),
    (re.compile(r"\bCREATE\s+TEMP(ORARY)?\s+TABLE\b", re.I), {"recall/bulk_import.py"},
     "a temp table stays for the session: the import's stage is created IF NOT EXISTS and emptied"),
]


def _strings(path: Path) -> list[str]:
    return [node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_no_sql_in_src_leaves_session_state_on_a_pooled_connection():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for text in _strings(path):
            for pattern, allowed, why in SESSION_STATE:
                if pattern.search(text) and rel not in allowed:
                    found.append(f"{rel}: {text.strip()[:80]!r} ({why})")
    assert found == []


def test_the_scan_sees_what_it_guards_against():
    texts = ["SET work_mem = '1GB'", "BEGIN; SET search_path TO x", "LISTEN news",
             "DECLARE c CURSOR WITH HOLD FOR SELECT 1", "SELECT set_config('a.b', 'c', false)"]
    for text in texts:
        assert any(p.search(text) for p, _, _ in SESSION_STATE), text
    for text in ["SET LOCAL work_mem = '1GB'", "UPDATE memories\n   SET content = $1", "SELECT set_config('a', 'b', true)",
                 "SELECT pg_advisory_xact_lock($1)"]:
        assert not any(p.search(text) for p, _, _ in SESSION_STATE), text


async def test_transaction_state_ends_with_the_transaction_and_the_pool_does_not_reset(db_dsn):
    pool = await create_pool(db_dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT set_config('work_mem', '1234kB', true), pg_advisory_xact_lock(42)")
            await conn.execute("SET LOCAL statement_timeout = '1s'")
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW work_mem") != "1234kB"
            assert await conn.fetchval("SHOW statement_timeout") == "0"
            assert await conn.fetchval("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                       "AND pid = pg_backend_pid()") == 0
            assert await conn.fetchval("SHOW hnsw.iterative_scan") == "relaxed_order"   # the session default
            # what the scan above forbids: a session SET comes back with the connection
            await conn.execute("SET work_mem = '2345kB'")
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW work_mem") == "2345kB"
        # an open transaction is still rolled back when its connection comes back
        conn = await pool.acquire()
        await conn.execute("BEGIN")
        await conn.execute("CREATE TABLE left_open (x int)")
        await pool.release(conn)
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT to_regclass('left_open')") is None
    finally:
        await pool.close()
