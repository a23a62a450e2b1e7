"""Part 2's phases inside a real deep pass, and the approval queue from the prompt and the CLI."""

from __future__ import annotations

import random
import subprocess
import sys

from src.consolidation.deep.deep_pass import DEEP_PHASES, ConsolidationParts, run_deep_pass
from src.consolidation.evolution.promotion import run_promotion
from src.consolidation.evolution.settings import EvolutionSettings
from src.consolidation.settings import ConsolidationSettings
from src.weights.safety import Safety
from tests.evolution_helpers import NOW, add_memory, days_ago, spread, weight
from tests.fakes import HashEmbedder
from tests.proc import ROOT, agent_env, run_agent

PART2 = ["reconsolidation", "promotion", "decay", "temporal_replay", "outcomes", "gate_tuning", "contextual"]


async def test_offline_deep_pass_runs_part_two_after_part_one(pool):
    assert [p.name for p in DEEP_PHASES][-8:-1] == PART2        # then issue 17's skill proposals
    assert DEEP_PHASES[-1].name == "skills"
    pattern = await add_memory(pool, "tea every morning", alpha=2.0, accesses=spread(5, 14.0))
    stale = await add_memory(pool, "a forgotten errand", created=days_ago(200))
    await add_memory(pool, "woke", created=NOW.replace(hour=8))
    await add_memory(pool, "tea", created=NOW.replace(hour=8, minute=10))
    for i in range(20):
        mid = await add_memory(pool, f"recalled {i}", accesses=[days_ago(10)])
        await pool.execute("INSERT INTO recall_outcomes (at, memory_id, rank, contributions) "
                           "VALUES ($1, $2, 1, '{0.5,0.1,0.0,0.1,0.1}')", days_ago(10), mid)
    report = await run_deep_pass(ConsolidationParts(pool, embedder=HashEmbedder(), llm=None, safety=Safety(),
                                                    settings=ConsolidationSettings()),
                                 trigger="manual", now=NOW, rng=random.Random(1))
    assert report.status == "done"
    assert report.phases["promotion"]["counts"] == {"promotion_applied": 1}
    assert report.phases["decay"]["counts"] == {"decayed": 1, "demoted": 0}
    assert report.phases["temporal_replay"]["counts"] == {"temporal_links": 1}
    assert report.phases["outcomes"]["counts"] == {"outcomes_scored": 20, "utility_updated": 20,
                                                   "pathological_weights": 0}
    assert report.phases["gate_tuning"]["counts"] == {"gate_params_changed": 0, "gate_proposals_refused": 0}
    for name in ("reconsolidation", "contextual"):
        assert report.phases[name]["skipped"] == "no language model is configured (reflex mode)"
    assert report.calls == 0
    assert (await weight(pool, pattern))[0] > 2.0
    assert await weight(pool, stale) == (1.0, 5.0)
    checkpoints = await pool.fetch("SELECT phase FROM consolidation_checkpoints WHERE status = 'done'")
    assert set(PART2) <= {r["phase"] for r in checkpoints}


async def _pending_promotion(pool) -> tuple[int, int]:
    mid = await add_memory(pool, "core identity", alpha=30.0, beta=4.0, accesses=spread(10, 30.0))
    await run_promotion(pool, Safety(), EvolutionSettings(), NOW, {})
    return mid, await pool.fetchval("SELECT id FROM approvals")


async def test_cli_lists_and_approves(pool, db_dsn):
    mid, aid = await _pending_promotion(pool)

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "src.consolidation", *args], cwd=ROOT,
                              env=agent_env(DATABASE_URL=db_dsn), capture_output=True, timeout=120)

    listed = cli("pending")
    assert listed.returncode == 0, listed.stderr.decode()
    lines = listed.stdout.decode().splitlines()
    assert lines[0] == "1 approval(s) pending (/approve ID or /reject ID):"
    assert lines[1].startswith(f"  #{aid} promotion (")
    done = cli("approve", str(aid))
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == (f"approval #{aid} (promotion) approved: identity promotion of memory "
                                            f"{mid}: applied, center now 0.886")
    again = cli("approve", str(aid))
    assert again.returncode == 1
    assert (await weight(pool, mid))[0] > 30.0


async def test_prompt_commands_pending_approve_reject(pool, db_dsn):
    mid, aid = await _pending_promotion(pool)
    other = await add_memory(pool, "another", alpha=40.0, beta=4.0, accesses=spread(10, 30.0))
    await run_promotion(pool, Safety(), EvolutionSettings(), NOW, {})
    second = await pool.fetchval("SELECT id FROM approvals WHERE payload->>'memory_id' = $1", str(other))
    result = run_agent(f"/pending\n/approve {aid}\n/reject {second}\n/approve x\n/quit\n".encode(),
                       agent_env(DATABASE_URL=db_dsn))
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    assert "2 approval(s) pending (/approve ID or /reject ID):" in out
    assert f"approval #{aid} (promotion) approved: identity promotion of memory {mid}: applied" in out
    assert f"approval #{second} (promotion) rejected" in out
    assert "usage: /approve ID — the number shown by /pending (got 'x')" in out
    assert await pool.fetchval("SELECT status FROM promotions WHERE memory_id = $1", other) == "rejected"
