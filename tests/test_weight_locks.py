"""The weights' row locks (src/weights/apply.py `_lock_rows`) do not hold back a writer of
rows that only reference the memories: a co-access pair or a recall outcome inserted
beside a retrieval's mutation runs at once (with FOR UPDATE it waited, and deadlocked)."""

from __future__ import annotations

from datetime import UTC, datetime

from src.recall.co_access import record_co_access
from src.recall.store import MemoryStore, NewMemory
from src.weights.apply import WeightChange, apply_weight_changes
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


async def test_a_co_access_upsert_does_not_wait_behind_an_open_weight_change(pool):
    a, b = await MemoryStore(pool, HashEmbedder()).store_many([NewMemory("the harbour lamp"),
                                                               NewMemory("the keeper's boat")])
    async with pool.acquire() as holder, pool.acquire() as other:
        async with holder.transaction():
            await apply_weight_changes(holder, [WeightChange(a, "reinforce", 1.0, "retrieval", "recalled"),
                                                WeightChange(b, "contradict", 0.5, "retrieval", "near miss")],
                                       safety=Safety())
            # the weight change is not committed: its locks are held while the pair is written
            await other.execute("SET lock_timeout = '2s'")
            assert await record_co_access(other, [a, b], NOW) == 1
            await other.execute("RESET lock_timeout")
        weights = await pool.fetch("SELECT depth_weight_alpha, depth_weight_beta FROM memories "
                                   "WHERE id = ANY($1::bigint[]) ORDER BY id", [a, b])
    assert await pool.fetchval("SELECT co_access_count FROM memory_co_access") == 1
    assert weights[0]["depth_weight_alpha"] > 1.0 and weights[1]["depth_weight_beta"] > 1.0
