"""The operator CLI, `python -m src.memory`: import, search, export, reindex, stats, skills, held.

One module per subcommand (importer, search, export, reindex, stats, skills_cli, held_cli) plus what they
share (session: settings, database and providers; jsonl: the line format; console:
progress and safe printing). Each subcommand module has `add_parser(subparsers)` and
`async run(args, session)`; __main__ wires them. The recall code does the work
(src/recall/bulk_import, retrieval, reembed); these modules only speak to the operator.
A new subcommand (e.g. `skills`) is one more module with those two functions, listed in
__main__.COMMANDS.
"""
