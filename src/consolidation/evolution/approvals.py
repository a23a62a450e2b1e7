"""The operator approval queue: changes the mind may not make alone yet.

A row of `approvals` has a `kind` that names its apply function in `REGISTRY`
('promotion' here: plan §4.3, center > 0.85 while trust_level < 3; other features
add their own kind with `approval_kinds.register`). The operator lists them with `/pending` (or
`python -m src.consolidation pending`) and decides with `/approve ID` or
`/reject ID`. Approving runs the kind's apply function in the row's lock and in the
transaction that marks the row decided (the function writes through `ctx.db`): an
approval is applied exactly once — whoever else approves it at the same moment, and
whenever the process dies (a crash before the commit leaves it pending with nothing
applied; issue 24, tests/test_approvals_once.py).
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime

import asyncpg

from src.consolidation.evolution import approvals_repository as repo

# promotion registers its kind on import; imported here so every entry point knows it
from src.consolidation.evolution import promotion  # noqa: F401
from src.consolidation.evolution.approval_kinds import REGISTRY, REJECT_HOOKS, ApprovalContext
from src.consolidation.evolution.settings import EvolutionSettings
from src.terminal import escape
from src.text import excerpt
from src.weights.safety import Safety

log = logging.getLogger(__name__)


def _printable(text: str, limit: int = 300) -> str:
    """Operator-facing text: control characters escaped, cut to `limit`."""
    return escape(excerpt(text, limit))


async def pending_text(pool: asyncpg.Pool, limit: int = 50) -> str:
    """The `/pending` listing."""
    rows = await repo.pending_approvals(pool, limit)
    if not rows:
        return "no approvals pending"
    lines = [f"{len(rows)} approval(s) pending (/approve ID or /reject ID):"]
    for r in rows:
        lines.append(f"  #{r['id']} {r['kind']} ({r['created_at']:%Y-%m-%d %H:%M}) {_printable(r['reason'])}")
    return "\n".join(lines)


def parse_id(arg: str) -> int | None:
    arg = arg.strip().lstrip("#")
    return int(arg) if arg.isdigit() else None


async def decide(ctx: ApprovalContext, arg: str, *, approve: bool) -> str:
    """Approve (apply) or reject approval `arg`; the answer names what happened."""
    return (await decide_outcome(ctx, arg, approve=approve))[1]


async def decide_outcome(ctx: ApprovalContext, arg: str, *, approve: bool) -> tuple[bool, str]:
    """(took effect, answer) of approving or rejecting approval `arg`."""
    verb = "approve" if approve else "reject"
    approval_id = parse_id(arg)
    if approval_id is None:
        return False, f"usage: /{verb} ID — the number shown by /pending (got {_printable(arg, 40)!r})"
    async with ctx.pool.acquire() as conn, conn.transaction():
        row = await repo.lock_approval(conn, approval_id)
        if row is None:
            return False, f"no approval #{approval_id}; /pending lists the open ones"
        if row["status"] != "pending":
            return False, (f"approval #{approval_id} was already {row['status']}: "
                           f"{_printable(row['decision'] or '')}")
        payload = json.loads(row["payload"]) if isinstance(row["payload"], str) else dict(row["payload"])
        if not approve:
            await repo.decide_approval(conn, approval_id, "rejected", "rejected by the operator", ctx.now)
            apply_reject = REJECT_HOOKS.get(row["kind"])
            if apply_reject is not None:
                await apply_reject(conn, approval_id, payload, ctx.now)
            return True, f"approval #{approval_id} ({row['kind']}) rejected"
        apply = REGISTRY.get(row["kind"])
        if apply is None:
            known = ", ".join(sorted(REGISTRY)) or "none"
            return False, (f"approval #{approval_id} has kind {row['kind']!r}, which nothing can apply "
                           f"(known kinds: {known}); it stays pending")
        # one transaction: the change and the decision commit together (issue 24)
        result = await apply(replace(ctx, conn=conn), {**payload, "approval_id": approval_id})
        await repo.decide_approval(conn, approval_id, "approved" if result.ok else "failed",
                                   result.message, ctx.now)
    # the message may name a skill the model drafted from the user's words (issue 39): at DEBUG
    log.info("approval #%d (%s) %s", approval_id, row["kind"], "applied" if result.ok else "failed")
    log.debug("approval #%d: %s", approval_id, result.message)
    state = "approved" if result.ok else "could not be applied"
    return result.ok, f"approval #{approval_id} ({row['kind']}) {state}: {_printable(result.message)}"


async def cli(pool: asyncpg.Pool, safety: Safety, settings: EvolutionSettings, command: str, arg: str) -> int:
    """`python -m src.consolidation pending | approve ID | reject ID`; the exit code says if it took effect."""
    if command == "pending":
        print(await pending_text(pool))
        return 0
    ok, answer = await decide_outcome(ApprovalContext(pool, safety, settings, datetime.now(UTC)), arg,
                                      approve=command == "approve")
    print(answer)
    return 0 if ok else 1
