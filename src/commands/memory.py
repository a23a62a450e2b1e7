"""What the mind remembers and how, at the prompt: /memory, /memory-mode, /held, /protect,
/unprotect, /why, /good, /bad."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

import numpy as np

from src.commands.command_context import CommandContext
from src.consolidation.deep.why import format_chain, why_do_i_believe
from src.outcomes.feedback import feedback_command
from src.recall.readable import memory_table
from src.repl import CommandRegistry
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


async def why(ctx: CommandContext, arg: str) -> str:
    """The supersedes chain of one memory id, each memory dated relative to now."""
    if not arg.strip().isdigit():
        return "usage: /why <memory id>, e.g. /why 42"
    return format_chain(int(arg), await why_do_i_believe(ctx.db.pool, int(arg)), now=datetime.now(UTC))


async def feedback(ctx: CommandContext, args: str, *, good: bool) -> str:
    """/good or /bad: outcome evidence for the named memories (none named: those behind the last answer)."""
    return await feedback_command(ctx.db.pool, args, good=good, settings=ctx.settings.outcomes,
                                  now=datetime.now(UTC))
