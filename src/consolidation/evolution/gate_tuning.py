"""Gate tuning (plan §4.5): the gates learn from what was later needed, or never used.

Evidence, from `gate_decisions` of the last `window_days`:
- too aggressive: an item the entry gate skipped or the exit gate dropped whose
  later near-duplicate (a memory created after the decision, cosine >=
  `near_duplicate_similarity` to the dropped preview) was retrieved. Checked for
  the newest `max_drops_checked` drops: one embedding batch, one LATERAL query.
- too permissive: exit-gate persists at least `never_retrieved_days` old whose memory
  was never retrieved (access_count = 0).

Parameters, each with bounds and a step (settings), and the class of evidence it
answers to: the exit `noise_floor` (exit drops; up = more permissive), the entry
`short_skip_rate` and `mechanical_skip_rate` (entry skips by that rule; down = more
permissive), the scratch `ttl_hours` (all drops; up = more permissive: buffered
content stays recoverable longer). A parameter moves one step toward permissive
when its class's needed-later rate exceeds `aggressive_rate`; otherwise one step
toward selective when the never-retrieved rate exceeds `permissive_rate`. Each needs
`min_evidence` cases.

Every proposal passes the Two-Gate guardrail (Phase B): validation margin = the
signal's rate minus its threshold on the *worse* of two held-out halves of the
evidence (split by decision id parity), so one lucky half cannot move a gate;
capacity = the share of the parameter's range used in the direction of the move.
Values are clipped to their bounds. Every proposal, applied or refused, is logged
in `gate_tuning_log` with its evidence; applied values go to `gate_tuning`, which
the gates read (src/gates/tuning.py holds that state and these reads; the gates apply it in
src/gates/memory_gate.py `Gates.load_tuning`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.evolution.settings import EvolutionSettings, GateTuningSettings, evolution_of
from src.errors import ProviderError
from src.gates import tuning
from src.gates.settings import GateSettings
from src.providers.embedding import embed_memories
from src.providers.protocols import Embedder
from src.weights import safety_rules as rules
from src.weights.safety import Safety, SafetyEvent, insert_safety_events

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Param:
    name: str
    permissive_sign: int          # +1: raising it keeps more; -1: lowering it keeps more
    evidence_class: str           # exit | short | mechanical | all


PARAMS = (Param("noise_floor", +1, "exit"), Param("short_skip_rate", -1, "short"),
          Param("mechanical_skip_rate", -1, "mechanical"), Param("scratch_ttl_hours", +1, "all"))


def _rate(hits: list[bool]) -> float:
    return sum(hits) / len(hits) if hits else 0.0


def held_out_margin(cases: list[tuple[int, bool]], threshold: float) -> float:
    """Signal rate minus threshold on the worse of the two halves split by id parity."""
    halves = [[hit for i, hit in cases if i % 2 == k] for k in (0, 1)]
    return min(_rate(h) for h in halves) - threshold


def propose(param: Param, value: float, bounds: tuple[float, float, float], aggressive: list[tuple[int, bool]],
            permissive: list[tuple[int, bool]], cfg: GateTuningSettings) -> dict[str, Any] | None:
    """One parameter's proposal from its evidence, or None when the evidence says nothing. Pure."""
    lo, hi, step = bounds
    if len(aggressive) >= cfg.min_evidence and _rate([h for _, h in aggressive]) > cfg.aggressive_rate:
        direction, sign = "more_permissive", param.permissive_sign
        margin = held_out_margin(aggressive, cfg.aggressive_rate)
        signal = {"needed_later": sum(h for _, h in aggressive), "dropped_checked": len(aggressive)}
    elif len(permissive) >= cfg.min_evidence and _rate([h for _, h in permissive]) > cfg.permissive_rate:
        direction, sign = "more_selective", -param.permissive_sign
        margin = held_out_margin(permissive, cfg.permissive_rate)
        signal = {"never_retrieved": sum(h for _, h in permissive), "persisted": len(permissive)}
    else:
        return None
    proposed = min(hi, max(lo, value + sign * step))
    if abs(proposed - value) < 1e-12:
        return None                                        # already at its bound
    capacity = (proposed - lo) / (hi - lo) if sign > 0 else (hi - proposed) / (hi - lo)
    return {"param": param.name, "before": value, "proposed": proposed, "direction": direction,
            "margin": margin, "capacity": capacity,
            "evidence": {**signal, "bounds": [lo, hi], "step": step, "held_out_margin": round(margin, 4)}}


async def _aggressive_evidence(pool: asyncpg.Pool, embedder: Embedder, now: datetime,
                               cfg: GateTuningSettings) -> dict[str, list[tuple[int, bool]]]:
    drops = await tuning.dropped_decisions(pool, now, cfg.window_days, cfg.max_drops_checked)
    by_class: dict[str, list[tuple[int, bool]]] = {"exit": [], "short": [], "mechanical": [], "all": []}
    if not drops:
        return by_class
    try:
        vectors = await embed_memories(embedder, [d["content_preview"] or " " for d in drops],
                                       ["episodic"] * len(drops))
    except ProviderError as exc:
        log.warning("gate tuning: dropped items could not be embedded, aggressiveness not judged: %s", exc)
        return by_class
    needed = set(await tuning.needed_later(pool, [d["id"] for d in drops], [d["at"] for d in drops], vectors,
                                         embedder.model_name, cfg.near_duplicate_similarity))
    for d in drops:
        case = (d["id"], d["id"] in needed)
        by_class["all"].append(case)
        key = "exit" if d["gate"] == "exit" else (d["rule"] if d["rule"] in ("short", "mechanical") else None)
        if key:
            by_class[key].append(case)
    return by_class


async def run_gate_tuning(pool: asyncpg.Pool, embedder: Embedder, safety: Safety, settings: EvolutionSettings,
                          now: datetime, counts: dict[str, int], gates: GateSettings | None = None) -> dict[str, float]:
    """One tuning step for every parameter; returns the values applied (also written to gate_tuning).

    The value a step starts from: the tuned value when there is one, else the one the gates
    last used (their decisions record it), else `gates` (default: GateSettings()).
    """
    cfg = settings.gate_tuning
    values = {**tuning.current_values(gates or GateSettings()), **await tuning.gate_values_in_force(pool),
              **await tuning.tuned_gate_values(pool)}
    aggressive = await _aggressive_evidence(pool, embedder, now, cfg)
    permissive = await tuning.persisted_usage(pool, now, cfg.window_days, cfg.never_retrieved_days,
                                            cfg.max_persists_checked)
    s = safety.settings
    entries = []
    events: list[SafetyEvent] = []   # this pass's refusals, written by its own transaction
    for param in PARAMS:
        proposal = propose(param, values[param.name], getattr(cfg, param.name),
                           aggressive[param.evidence_class], permissive, cfg)
        if proposal is None:
            continue
        passed, reason = safety.two_gate.check(
            rules.two_gate(proposal["margin"], s.two_gate_min_margin, proposal["capacity"], s.two_gate_capacity_cap),
            action={"actor": "gate_tuning", "param": param.name, "before": proposal["before"],
                    "proposed": proposal["proposed"]}, events=events)
        entries.append({**proposal, "applied": passed,
                        "reason": reason or f"two-gate passed: margin {proposal['margin']:.3f}, "
                                            f"capacity {proposal['capacity']:.3f}"})
    async with pool.acquire() as conn, conn.transaction():
        await tuning.write_gate_tuning(conn, now, entries)
        if events:
            await insert_safety_events(conn, events)
    applied = {e["param"]: e["proposed"] for e in entries if e["applied"]}
    counts["gate_params_changed"] = counts.get("gate_params_changed", 0) + len(applied)
    counts["gate_proposals_refused"] = counts.get("gate_proposals_refused", 0) + len(entries) - len(applied)
    for e in entries:
        log.info("gate tuning %s: %s %.4g -> %.4g (%s)", "applied" if e["applied"] else "refused", e["param"],
                 e["before"], e["proposed"], e["reason"])
    return applied


async def run(ctx: DeepPassContext) -> PhaseResult:
    """Deep-pass phase: gate tuning (§4.5)."""
    result = PhaseResult()
    await run_gate_tuning(ctx.pool, ctx.embedder, ctx.safety, evolution_of(ctx), ctx.now, result.counts)
    return result
