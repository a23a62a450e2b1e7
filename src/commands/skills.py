"""/skills and /skill at the prompt; the work is src/skills/commands.py (shared with the CLI)."""

from __future__ import annotations

from functools import partial

from src.commands.command_context import CommandContext
from src.providers.caller import USER
from src.providers.charged import ChargedModel
from src.repl import CommandRegistry
from src.skills.commands import SkillCommands


def register(registry: CommandRegistry, ctx: CommandContext) -> None:
    registry.add("skills", "the skills the mind has learned, with their counters", partial(skills, ctx))
    registry.add("skill", "/skill save [hint] | show <label> | remove <label> | history | outcome",
                 partial(skill, ctx))


def skill_commands(ctx: CommandContext) -> SkillCommands:
    """The skill operations over this session's database, System 1 model and conversation window."""
    # the guardian waits for a draft: its calls go first at the model endpoint
    return SkillCommands(ctx.db.pool, ChargedModel(ctx.providers.system1, USER), lambda: ctx.mind.loop.fifo.window(),
                         ctx.settings.skills, session_id=ctx.session_id)


async def skills(ctx: CommandContext, args: str) -> str:
    return await skill_commands(ctx).skills(args)


async def skill(ctx: CommandContext, args: str) -> str:
    return await skill_commands(ctx).skill(args)
