"""What the mind remembers and how, at the prompt: /memory, /memory-mode, /held, /protect,
/unprotect, /value, /goal, /kind, /why, /good, /bad."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

import numpy as np

from src.commands.command_context import CommandContext
from src.consolidation.deep.why import format_chain, why_do_i_believe
from src.outcomes.feedback import feedback_command
from src.recall.readable import memory_table
from src.repl import CommandRegistry
from src.weights import self_kinds
from src.weights.protection import protect_command


def register(registry: CommandRegistry, ctx: CommandContext) -> None:
    registry.add("memory", "/memory <words>: what that recalls (read-only)", partial(recall, ctx))
    registry.add("memory-mode", "/memory-mode [autopilot|copilot|off]: how eagerly the mind writes",
                 partial(memory_mode, ctx))
    registry.add("held", "memories held for your decision (copilot), oldest first", partial(held, ctx))
    registry.add("protect", "/protect ID: decay, demotion and near-miss suppression skip it",
                 partial(protect, ctx, protected=True))
    registry.add("unprotect", "/unprotect ID: let a protected memory fade again",
                 partial(protect, ctx, protected=False))
    registry.add("value", "/value ID: the memory is one of the mind's values (tension detection weighs it); "
                 "/value alone lists values and goals", partial(self_kind, ctx, kind="value"))
    registry.add("goal", "/goal ID: the memory is one of the mind's goals (the goal budget weighs it)",
                 partial(self_kind, ctx, kind="goal"))
    registry.add("kind", "/kind ID value|goal|none: mark a memory a value or a goal, or neither; "
                 "/kind alone lists them", partial(self_kind, ctx, kind=None))
    registry.add("why", "/why <memory id>: why do I believe it (its supersedes chain)", partial(why, ctx))
    registry.add("good", "/good [ID ...]: the memory was good to rely on (no ID: those behind the last "
                 "answer); outcome evidence", partial(feedback, ctx, good=True))
    registry.add("bad", "/bad [ID ...]: the memory was wrong to rely on (no ID: those behind the last "
                 "answer); outcome evidence", partial(feedback, ctx, good=False))


async def recall(ctx: CommandContext, query: str) -> str:
    """What `query` recalls, as a table; read-only (mutate=False: no access is counted)."""
    if not query:
        return "usage: /memory <words>"
    result = await ctx.mind.retriever.retrieve(query, rng=np.random.default_rng(), mutate=False)
    return memory_table(result, datetime.now(UTC))


async def memory_mode(ctx: CommandContext, args: str) -> str:
    return ctx.mind.gates.mode.command(args)


async def held(ctx: CommandContext, _: str) -> str:
    return await ctx.mind.gates.held_text()


async def protect(ctx: CommandContext, args: str, *, protected: bool) -> str:
    return await protect_command(ctx.db.pool, args, protected)


async def self_kind(ctx: CommandContext, args: str, *, kind: str | None) -> str:
    """/value ID, /goal ID, /kind ID value|goal|none; alone, the listing (src/weights/self_kinds.py)."""
    parts = args.replace("#", " ").split()
    if not parts:
        return await self_kinds.listing(ctx.db.pool)
    usage = "usage: /value ID, /goal ID, /kind ID value|goal|none (a memory id, e.g. /value 42)"
    if kind is None:
        if len(parts) != 2 or parts[1] not in (*self_kinds.SELF_KINDS, "none"):
            return usage
        kind = None if parts[1] == "none" else parts[1]
    elif len(parts) != 1:
        return usage
    if not parts[0].isdigit() or int(parts[0]) >= 2**63:
        return usage
    if ctx.mind is None:
        return "marking a memory needs the running mind"
    promotion = ctx.settings.consolidation.evolution.promotion
    center = {"value": promotion.identity_target, "goal": promotion.goal_target}.get(kind or "")
    async with ctx.db.pool.acquire() as conn:
        change = await self_kinds.set_self_kind(conn, int(parts[0]), kind, by="guardian", now=datetime.now(UTC),
                                                safety=ctx.mind.safety, center=center)
    return self_kinds.describe(change)


async def why(ctx: CommandContext, arg: str) -> str:
    """The supersedes chain of one memory id, each memory dated relative to now."""
    if not arg.strip().isdigit():
        return "usage: /why <memory id>, e.g. /why 42"
    return format_chain(int(arg), await why_do_i_believe(ctx.db.pool, int(arg)), now=datetime.now(UTC))


async def feedback(ctx: CommandContext, args: str, *, good: bool) -> str:
    """/good or /bad: outcome evidence for the named memories (none named: those behind the last answer)."""
    return await feedback_command(ctx.db.pool, args, good=good, settings=ctx.settings.outcomes,
                                  now=datetime.now(UTC))
