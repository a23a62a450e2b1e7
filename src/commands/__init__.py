"""The guardian's slash commands at the prompt: `/status`, `/memory <words>`, `/approve ID` …

    command_context.py  `CommandContext`: what every command is handed when the registry is
                        built (settings, database, providers, the running mind, `say`, the
                        session, the quitting event)
    registry.py         `build_commands(ctx)`: the prompt's one `CommandRegistry`, each
                        module's commands in it
    session.py          the session and the process: /help, /quit, /status, /cost, /readiness
    memory.py           what the mind remembers and how: /memory, /memory-mode, /held,
                        /protect, /unprotect, /why, /good, /bad
    consolidation.py    the deep pass on request and the changes it waits to have approved:
                        /consolidate, /pending, /approve, /reject
    skills.py           /skills and /skill, at the prompt (the work is src/skills/commands.py)

Each command module has `register(registry, ctx)`. The commands only speak to the guardian:
the work is done where it lives (recall, gates, weights, consolidation, skills, outcomes).
src/main.py builds the registry and dispatches typed lines to it; nothing else imports
this package. Import from the submodules; this package imports nothing.
"""
