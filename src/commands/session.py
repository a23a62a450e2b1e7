"""The session and the process at the prompt: /help, /quit, /status, /cost, /readiness."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

from src.bootstrap.readiness import format_readiness, readiness
from src.commands.command_context import CommandContext
from src.db.manifest import status_counts
from src.providers.costs import format_cost_table
from src.recall.hnsw import index_state
from src.recall.readable import LEGEND
from src.repl import CommandRegistry


def register(registry: CommandRegistry, ctx: CommandContext) -> None:
    registry.add("help", "this list", partial(help_text, registry))
    registry.add("quit", "save what is buffered and stop", partial(quit_session, ctx), in_order=False)
    registry.add("status", "database, providers, safety, attention, session", partial(status, ctx))
    registry.add("cost", "what thinking has cost: this session, 24 h, lifetime", partial(cost, ctx))
    registry.add("readiness", "the ten bootstrap achievements (plan §5.2)", partial(readiness_text, ctx))


async def help_text(registry: CommandRegistry, _: str) -> str:
    """Every command of `registry`, then the legend of /memory's table."""
    return registry.help_text() + "\n\n" + "\n".join(LEGEND)


async def quit_session(ctx: CommandContext, _: str) -> str | None:
    """Set the quitting event; say how many messages are answered first (none: say nothing)."""
    # "shutting down" is said once the loop has drained (the process's serve), after the last answer
    ctx.quitting.set()
    waiting = ctx.mind.loop.user_messages_waiting() if ctx.mind is not None else 0
    return f"answering {waiting} waiting message(s) before shutting down" if waiting else None


async def cost(ctx: CommandContext, _: str) -> str:
    return format_cost_table(await ctx.providers.ledger.totals())


async def readiness_text(ctx: CommandContext, _: str) -> str:
    return format_readiness(await readiness(ctx.db.pool))


async def _index_line(ctx: CommandContext) -> str:
    """The HNSW index's state; while it is rebuilt in the background, that too."""
    state = await index_state(ctx.db.pool)
    building = any(t.get_name() == "index-rebuild" and not t.done() for t in getattr(ctx.mind, "background", []))
    return f"{state} (rebuilding)" if building else state


async def status(ctx: CommandContext, _: str) -> str:
    """Database, providers, safety, consolidation, budget, DMN pacing, attention, memory mode, age."""
    row = await status_counts(ctx.db.pool)
    mind = ctx.mind
    pending = ", ".join(f"{k} {v}" for k, v in mind.loop.queue.counts().items() if v) or "none"
    dropped = ", ".join(f"{k} {v}" for k, v in mind.loop.queue.dropped.items() if v) or "none"
    return (
        f"database: {ctx.db.description}\n"
        + "".join(f"{line}\n" for line in ctx.providers.report)
        + f"{mind.safety.status_line()}\n"
        + f"{await mind.consolidation.status_line()}\n"
        + (f"{mind.budget.status_line()}\n" if mind.budget is not None else "")
        + (f"{mind.dmn.pacing.describe(datetime.now(UTC))}\n" if mind.dmn is not None else "")
        + f"session: {ctx.session_id}  cycles: {mind.loop.cycles}  pending attention: {pending}\n"
        f"dropped impulses (attention queue full): {dropped}\n"
        f"memories: {row['memories']}  buffered: {row['buffered']}  protected: {row['protected']}  "
        f"skills: {row['skills']}  vector index: {await _index_line(ctx)}\n"
        f"memory mode: {mind.gates.mode.current}"
        + (f" ({len(mind.gates.exit.confirmations)} awaiting confirmation)"
           if mind.gates.mode.copilot or len(mind.gates.exit.confirmations) else "")
        + "\n"
        f"age: {float(row['age_days']):.2f} days  restarts: {row['times_restarted']}  "
        f"uptime: {row['uptime_total_hours']:.2f} h before this session"
    )
