"""The operator CLI, `python -m src.memory`: import, search, export, reindex, stats, skills, held.

One module per subcommand (importer, search, export, reindex, stats, skills_cli, held_cli) plus what they
share (session: settings, database and providers; jsonl: the line format; console:
progress and safe printing). Each subcommand module has `add_parser(subparsers)` and
`async run(args, session)`; __main__ wires them. The recall code does the work
(src/recall/bulk_import, retrieval, reembed); these modules only speak to the operator.
A new subcommand (e.g. `skills`) is one more module with those two functions, listed in
__main__.COMMANDS.

Compatibility note: before the structure split (issue 10) `src/memory/` held the store,
recall, gates, context and metacognition; those live in src/recall, src/weights,
src/gates, src/context and src/metacognition now. The name was kept only for the
operator's command, `python -m src.memory` (issue 12); no code of the mind lives here.
"""
