"""The guardian's erasure at the prompt: /forget and /correct (issue 39; src/erasure/)."""

from __future__ import annotations

import re
from functools import partial

from src.commands.command_context import CommandContext
from src.repl import CommandRegistry

_IDS = re.compile(r"^#?\d+(?:[\s,]+#?\d+)*$")


def register(registry: CommandRegistry, ctx: CommandContext) -> None:
    registry.add("forget", "/forget ID… or /forget <words>: list what would be forgotten (with what was built "
                 "from it and every trace of its words), then ask", partial(forget, ctx))
    registry.add("correct", "/correct ID new text [--forget-old]: the new text supersedes the memory",
                 partial(correct, ctx))


async def forget(ctx: CommandContext, args: str) -> str:
    if ctx.erasure is None:
        return "forgetting needs the running mind"
    args = args.strip()
    if not args:
        return "usage: /forget ID… (memory ids) or /forget <words> (every memory and line holding them)"
    if _IDS.match(args):
        return await ctx.erasure.ask(ids=[int(i) for i in re.findall(r"\d+", args)])
    return await ctx.erasure.ask(words=args)


async def correct(ctx: CommandContext, args: str) -> str:
    if ctx.erasure is None:
        return "correcting needs the running mind"
    return await ctx.erasure.correct(args)
