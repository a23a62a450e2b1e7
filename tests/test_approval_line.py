"""The guardian's approval line holds on every path that raises a center (issue 40 item 5;
plan §4.3 "Operator approval required for center > 0.85 at trust_level < 3").

Retrieval's reinforcement and the exit gate's are capped just below the line by the weight
choke point while trust is low, and audited as capped; at autonomous trust they pass it.
Promotion still asks the guardian, and what the guardian approved passes the line.
"""

from __future__ import annotations

import ast
import json
import random
from pathlib import Path

import pytest

from src.consolidation.evolution import approvals
from src.consolidation.evolution.promotion import run_promotion
from src.consolidation.evolution.settings import EvolutionSettings, PromotionSettings
from src.gates.memory_gate import Gates
from src.providers.embedding import embed_memories
from src.recall.mutation import mutate_after_retrieval
from src.recall.store import MemoryStore, NewMemory
from src.weights.apply import WeightChange, apply_weight_changes
from src.weights.approval import APPROVAL_MARGIN, ApprovalLine, approved_gain
from src.weights.safety import Safety
from tests.evolution_helpers import NOW, add_memory, spread, weight
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, attention_for, gate_settings

LINE = 0.85
SRC = Path(__file__).resolve().parents[1] / "src"


def _line(trust: int) -> Safety:
    return Safety(approval=ApprovalLine.of(PromotionSettings(trust_level=trust)))


async def _center(pool, memory_id: int) -> float:
    a, b = await weight(pool, memory_id)
    return a / (a + b)


def test_the_gain_is_capped_just_below_the_line():
    closed = ApprovalLine(trust_level=2)
    assert approved_gain(8.0, 2.0, 0.1, closed) == 0.1                         # 0.800 -> 0.802: below
    capped = approved_gain(8.4, 1.6, 1.0, closed)                              # would reach 0.856
    assert (8.4 + capped) / (8.4 + capped + 1.6) == pytest.approx(LINE - APPROVAL_MARGIN)
    assert approved_gain(9.5, 1.0, 1.0, closed) == 0.0                         # 0.905: approved earlier
    assert approved_gain(8.4, 1.6, 1.0, ApprovalLine(trust_level=3)) == 1.0    # autonomous: open


@pytest.mark.parametrize(("trust", "passes"), [(2, False), (3, True)])
async def test_retrieval_never_lifts_a_center_past_the_line_at_low_trust(pool, trust, passes):
    mid = await add_memory(pool, "the ferry leaves at noon", alpha=8.4, beta=1.6)        # center 0.84
    safety = _line(trust)
    for i in range(60):
        await mutate_after_retrieval(pool, [mid], [], safety=safety, at=NOW, query=f"question {i}")
    center = await _center(pool, mid)
    assert (center > LINE) is passes
    if not passes:
        assert center == pytest.approx(LINE - APPROVAL_MARGIN)
        # the first reinforcements applied in full; the one that met the line is audited as capped
        rows = await pool.fetch("""SELECT requested_delta, applied_delta, reason, evidence FROM consolidation_log
                                    WHERE memory_id = $1 AND actor = 'retrieval' ORDER BY id""", mid)
        capped = [r for r in rows if "capped below the approval line" in r["reason"]]
        assert capped and len(capped) < len(rows)
        first = capped[0]
        assert first["reason"] == "retrieved; capped below the approval line 0.85 (trust level 2 < 3)"
        assert 0.0 < first["applied_delta"] < json.loads(first["evidence"])["approval_line"]["requested_gain"]
        assert json.loads(first["evidence"])["approval_line"]["center"] == LINE
        assert {r["applied_delta"] for r in capped[1:]} <= {0.0}                # at the line: nothing more
        assert await pool.fetchval("SELECT count(*) FROM safety_events") == 0   # a cap is no failed check


@pytest.mark.parametrize(("trust", "passes"), [(2, False), (3, True)])
async def test_the_exit_gates_reinforcement_holds_the_line_too(pool, trust, passes):
    embedder = HashEmbedder()
    stored = "Fresh espresso tastes best before nine"
    [mid] = await MemoryStore(pool, embedder).store_many([NewMemory(stored, alpha=8.4, beta=1.6)])
    gates = Gates.build(pool, embedder, ScriptedMetaLLM(), gate_settings(noise_floor=0.0), _line(trust),
                        rng=random.Random(3))
    said = stored + "!"
    [vec] = await embed_memories(embedder, [said], ["episodic"])
    for _ in range(10):            # said again and again in a core focus: confirming -> reinforce
        admitted = await gates.admit(said, source_tag="internal_dmn", exchange=False)
        await gates.note_focus([admitted.scratch_id], attention_for(vec[None, :], [0.7]))
        await gates.exit.flush(reason="test")
    assert {r["action"] for r in await pool.fetch("SELECT action FROM gate_decisions WHERE gate = 'exit'")} == {
        "reinforce"}
    assert (await _center(pool, mid) > LINE) is passes
    capped = await pool.fetchval("""SELECT count(*) FROM consolidation_log WHERE memory_id = $1 AND actor = 'exit_gate'
                                      AND reason LIKE '%capped below the approval line%'""", mid)
    assert (capped > 0) is not passes


async def test_promotion_still_asks_and_what_the_guardian_approves_passes_the_line(pool):
    mid = await add_memory(pool, "core identity", alpha=30.0, beta=4.0, accesses=spread(10, 30.0))
    settings = EvolutionSettings(promotion=PromotionSettings(trust_level=2))
    safety = Safety(approval=ApprovalLine.of(settings.promotion))
    counts: dict[str, int] = {}
    await run_promotion(pool, safety, settings, NOW, counts)
    assert counts == {"promotion_pending_approval": 1}
    assert await weight(pool, mid) == (30.0, 4.0)
    aid = await pool.fetchval("SELECT id FROM approvals WHERE kind = 'promotion' AND status = 'pending'")
    answer = await approvals.decide(approvals.ApprovalContext(pool, safety, settings, NOW), str(aid), approve=True)
    assert answer.endswith("applied, center now 0.886")
    assert await _center(pool, mid) > LINE


async def test_a_change_that_holds_the_line_itself_is_not_capped(pool):
    mid = await add_memory(pool, "a memory", alpha=8.4, beta=1.6)
    [out] = await apply_weight_changes(pool, [WeightChange(mid, "reinforce", 5.0, "promotion", "approved",
                                                           approval_checked=True)], safety=_line(0))
    assert out.center_after > LINE


def test_every_safety_the_service_builds_holds_the_line():
    """The line comes from the settings each process passes in (no global): a Safety built
    without it would let retrieval and the gate pass 0.85 unasked."""
    built = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Safety":
                built.append((path.relative_to(SRC.parent).as_posix(), {k.arg for k in node.keywords}))
    assert len(built) >= 4                       # the mind, the web view, consolidation's CLI, search
    assert [where for where, keywords in built if "approval" not in keywords] == []
