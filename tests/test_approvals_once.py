"""`/approve` applies a change exactly once, even when the process dies mid-way (issue 24).

The apply function and the approval's decision share one transaction (the connection
that holds the approval's lock, `ApprovalContext.db`). A child process approves and is
killed with SIGKILL after the change is written and before the commit
(tests/approval_child.py); the approval is still pending and nothing was applied, and
approving it again applies it once. Real PostgreSQL; promotions and skill proposals.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

import pytest

import src.skills.consolidation  # noqa: F401  (registers the approval kind 'skill')
from src.consolidation.evolution import approvals
from src.consolidation.evolution.approval_kinds import ApprovalContext
from src.consolidation.evolution.promotion import run_promotion
from src.consolidation.evolution.settings import EvolutionSettings
from src.skills import repository as skills_repo
from src.skills.proposal import propose_skill
from src.weights.safety import Safety
from tests.approval_child import POINTS
from tests.evolution_helpers import NOW, add_memory, spread, weight
from tests.fakes_llm import ScriptedLLM
from tests.proc import ROOT, agent_env

DRAFT = {"label": "plant_watering", "name": "Plant watering", "when_to_use": "When a house plant looks dry.",
         "procedure": "1. Feel the soil.\n2. Water until it drains.\n3. Empty the saucer."}


async def _approve_and_kill(db_dsn: str, approval_id: int, point: str, tmp_path: Path) -> None:
    """Run the child; SIGKILL it once it stands at `point`."""
    marker = tmp_path / f"frozen-{point}"
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.approval_child", db_dsn, str(approval_id), point, str(marker),
        cwd=ROOT, env=agent_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            if child.returncode is not None:
                raise AssertionError((await child.stderr.read()).decode())
            assert time.monotonic() < deadline, "the child never reached the freeze point"
            await asyncio.sleep(0.05)
        assert marker.read_text() == point
        child.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(child.wait(), 30) == -signal.SIGKILL
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()


async def _approval(pool, approval_id: int) -> tuple[str, str | None]:
    row = await pool.fetchrow("SELECT status, decision FROM approvals WHERE id = $1", approval_id)
    return row["status"], row["decision"]


def _ctx(pool) -> ApprovalContext:
    return ApprovalContext(pool, Safety(), EvolutionSettings(), NOW)


@pytest.mark.parametrize("point", POINTS)
async def test_a_promotion_killed_before_its_commit_is_applied_once_by_the_next_approval(pool, db_dsn, tmp_path,
                                                                                         point):
    mid = await add_memory(pool, "core identity", alpha=30.0, beta=4.0, accesses=spread(10, 30.0))
    counts: dict[str, int] = {}
    await run_promotion(pool, Safety(), EvolutionSettings(), NOW, counts)
    assert counts == {"promotion_pending_approval": 1}
    aid = await pool.fetchval("SELECT id FROM approvals")

    await _approve_and_kill(db_dsn, aid, point, tmp_path)
    # the kill rolled everything back: pending, the weight untouched, no audit row
    assert await _approval(pool, aid) == ("pending", None)
    assert await weight(pool, mid) == (30.0, 4.0)
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log WHERE memory_id = $1", mid) == 0
    assert [tuple(r) for r in await pool.fetch("SELECT tier, status FROM promotions WHERE memory_id = $1",
                                               mid)] == [("identity", "pending_approval")]

    answer = await approvals.decide(_ctx(pool), str(aid), approve=True)
    assert answer == (f"approval #{aid} (promotion) approved: identity promotion of memory {mid}: "
                      "applied, center now 0.886")
    once = await weight(pool, mid)
    log = await pool.fetch("SELECT actor, requested_delta FROM consolidation_log WHERE memory_id = $1", mid)
    assert [tuple(r) for r in log] == [("promotion", 5.0)]
    assert once[0] > 30.0 and once[1] == 4.0
    assert (await _approval(pool, aid))[0] == "approved"

    again = await approvals.decide(_ctx(pool), str(aid), approve=True)
    assert again.startswith(f"approval #{aid} was already approved")
    assert await weight(pool, mid) == once
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log WHERE memory_id = $1", mid) == 1


@pytest.mark.parametrize("point", POINTS)
async def test_a_skill_approval_killed_before_its_commit_saves_the_skill_once(pool, db_dsn, tmp_path, point):
    ids = [await pool.fetchval("INSERT INTO memories (content, memory_type) VALUES ($1, 'procedural') RETURNING id",
                               t) for t in ("How-to instruction: water the fern when the soil is dry",
                                            "How-to instruction: empty the saucer after watering the fern")]
    llm = ScriptedLLM(meta=lambda question, schema: DRAFT)
    proposal = await propose_skill(pool, llm, ids, enqueue=approvals.repo.insert_approval, now=NOW)
    aid = proposal.approval_id

    await _approve_and_kill(db_dsn, aid, point, tmp_path)
    assert await _approval(pool, aid) == ("pending", None)
    assert await skills_repo.labels(pool) == []
    assert await pool.fetchval("SELECT status FROM skill_proposals WHERE id = $1", proposal.id) == "pending"

    answer = await approvals.decide(_ctx(pool), str(aid), approve=True)
    assert answer == f"approval #{aid} (skill) approved: skill 'plant_watering' saved from 2 procedural memories"
    again = await approvals.decide(_ctx(pool), str(aid), approve=True)
    assert again.startswith(f"approval #{aid} was already approved")
    assert await skills_repo.labels(pool) == ["plant_watering"]          # one skill, not plant_watering_2
    row = await pool.fetchrow("SELECT status, skill_id FROM skill_proposals WHERE id = $1", proposal.id)
    assert row["status"] == "approved"
    assert row["skill_id"] == (await skills_repo.get(pool, "plant_watering")).id


async def test_a_taken_label_inside_the_approval_transaction_saves_under_the_next_free_one(pool):
    """The label retry runs in a savepoint: a unique violation must not abort the approval."""
    await skills_repo.create(pool, label="plant_watering", name="Older", when_to_use="w", procedure="p")
    async with pool.acquire() as conn, conn.transaction():
        real_labels = skills_repo.labels
        calls = []

        async def stale_labels(db):     # the first look misses the taken label (a concurrent save)
            calls.append(1)
            return [] if len(calls) == 1 else await real_labels(db)

        skills_repo.labels = stale_labels
        try:
            skill = await skills_repo.create(conn, label="plant_watering", name="Newer", when_to_use="w",
                                             procedure="p")
        finally:
            skills_repo.labels = real_labels
        assert skill.label == "plant_watering_2"
        assert await conn.fetchval("SELECT count(*) FROM skills") == 2     # the transaction is still usable
    assert await skills_repo.labels(pool) == ["plant_watering", "plant_watering_2"]
