"""The deep pass on request and the changes waiting for the guardian: /consolidate, /pending,
/approve, /reject (the approval queue is src/consolidation/evolution/approvals.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

from src.commands.command_context import CommandContext
from src.consolidation.evolution import approvals
from src.repl import CommandRegistry


def register(registry: CommandRegistry, ctx: CommandContext) -> None:
    registry.add("consolidate", "run a deep consolidation pass now", partial(consolidate, ctx))
    registry.add("pending", "changes waiting for your approval", partial(pending, ctx))
    registry.add("approve", "/approve ID: apply a pending change", partial(decide, ctx, approve=True))
    registry.add("reject", "/reject ID: refuse a pending change", partial(decide, ctx, approve=False))


async def consolidate(ctx: CommandContext, _: str) -> str:
    """Start a deep pass in the background; its summary is said (ctx.say) when it ends."""
    # in the background: awaited here, the pass held the next message for its whole length
    if not ctx.mind.consolidation.start_deep_pass(ctx.say):
        return "a deep pass is already running; try again later"
    return "deep pass started; its summary follows when it is done"


async def pending(ctx: CommandContext, _: str) -> str:
    """The approval queue, and how many memory items copilot holds (they are listed by /held)."""
    held = len(ctx.mind.gates.exit.confirmations)     # copilot's items wait elsewhere: point there
    return (await approvals.pending_text(ctx.db.pool)
            + (f"\n{held} memory item(s) held for your decision (copilot): /held lists them" if held else ""))


async def decide(ctx: CommandContext, arg: str, *, approve: bool) -> str:
    """Apply (approve) or refuse one pending change."""
    decision = approvals.ApprovalContext(ctx.db.pool, ctx.mind.safety, ctx.settings.consolidation.evolution,
                                         datetime.now(UTC))
    return await approvals.decide(decision, arg, approve=approve)
