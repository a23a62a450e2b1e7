"""The prompt's command registry, built once from what the commands are handed."""

from __future__ import annotations

from src.commands import consolidation, erasure, memory, session, skills
from src.commands.command_context import CommandContext
from src.repl import CommandRegistry


def build_commands(ctx: CommandContext) -> CommandRegistry:
    """Every slash command the guardian can type, each bound to `ctx`."""
    registry = CommandRegistry()
    for module in (session, memory, erasure, consolidation, skills):
        module.register(registry, ctx)
    return registry
