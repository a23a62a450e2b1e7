"""Issue 39 item 7: a forget killed by SIGKILL in the middle leaves all or nothing.

A child process forgets a memory and is killed after the memories are deleted, or after
everything is scrubbed and the receipt written, before the commit (tests/forget_child.py).
Nothing of it is left: the memory, its merge, its words in the journal and the logs are
as before, no receipt. The forget run again then removes everything once."""

from __future__ import annotations

import asyncio
import signal
import sys
import time

import pytest

from src.erasure import matches
from src.erasure.forget import forget
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder
from tests.forget_child import POINTS
from tests.proc import ROOT, agent_env

SECRET = "My gym locker code is zebrafish 7419."


async def _kill_at(db_dsn: str, memory_id: int, point: str, tmp_path) -> None:
    marker = tmp_path / f"frozen-{point}"
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.forget_child", db_dsn, str(memory_id), point, str(marker),
        cwd=ROOT, env=agent_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            if child.returncode is not None:
                raise AssertionError((await child.stderr.read()).decode())
            assert time.monotonic() < deadline, "the child never reached the freeze point"
            await asyncio.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(child.wait(), 30) == -signal.SIGKILL
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()


async def _state(pool) -> tuple:
    return (await pool.fetchval("SELECT count(*) FROM memories WHERE NOT immutable"),
            await pool.fetchval("SELECT count(*) FROM memory_supersedes"),
            await pool.fetchval("SELECT count(*) FROM input_journal WHERE line LIKE '%zebrafish%'"),
            await pool.fetchval("SELECT count(*) FROM forget_receipts"),
            await pool.fetchval("SELECT sum(memories) FROM memory_kind_counts"))


@pytest.mark.parametrize("point", POINTS)
async def test_a_forget_killed_before_its_commit_leaves_everything_then_runs_once(pool, db_dsn, tmp_path, point):
    store = MemoryStore(pool, HashEmbedder())
    a = await store.store(NewMemory(SECRET, "episodic", source_tag="external_user"))
    b = await store.store(NewMemory("I swim at the gym on Mondays.", "episodic", source_tag="external_user"))
    c = await store.store(NewMemory("I swim at the gym pool on Fridays.", "episodic", source_tag="external_user"))
    merge = await store.store(NewMemory(f"{SECRET} Also: swim on Mondays; Fridays", "reflection",
                                        source_tag="internal_consolidation"))
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id, via) "
                       "SELECT $1, unnest($2::bigint[]), 'merge'", merge, [a, b, c])
    await pool.execute("INSERT INTO input_journal (session_id, kind, line, state) VALUES ('s', 'message', $1, 'done')",
                       SECRET)
    before = await _state(pool)
    assert before[:4] == (4, 3, 1, 0)

    await _kill_at(db_dsn, a, point, tmp_path)
    assert await _state(pool) == before                        # nothing happened
    assert SECRET in await pool.fetchval("SELECT content FROM memories WHERE id = $1", merge)

    found, _ = await matches.by_ids(pool, [a])
    rec, _ = await forget(pool, HashEmbedder(), found, who="cli")
    assert rec.memories == 1 and rec.rewritten == 1
    assert await _state(pool) == (3, 2, 0, 1, before[4] - 1)
    assert "zebrafish" not in await pool.fetchval("SELECT content FROM memories WHERE id = $1", merge)
