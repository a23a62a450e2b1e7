"""python -m src.memory — the operator CLI: import, search, export, reindex, calibrate, stats,
skills, held, kind, forget and correct.

Runs against DATABASE_URL or the embedded server of runtime.yaml, whether the
service runs or not. Exit codes: 0 done, 1 the command failed (named on stderr),
2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import TextIO

from src.config import LoggingSettings, load_settings
from src.errors import ConfigError, MoltBotError, StartupError
from src.logging_setup import configure_logging
from src.memory import (
    calibrate,
    erase_cli,
    export,
    held_cli,
    importer,
    kinds_cli,
    reindex,
    search,
    skills_cli,
    stats,
)
from src.memory.console import printable
from src.memory.session import open_session
from src.providers.factory import Providers

#: Subcommand modules, in --help order; each has add_parser(sub) and async run(args, session).
COMMANDS = (importer, search, export, reindex, calibrate, stats, skills_cli, held_cli, kinds_cli, erase_cli)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m src.memory",
        description="Operate on the mind's memory store (DATABASE_URL, or the embedded server "
                    "of runtime.yaml). Safe while the service runs.")
    parser.add_argument("--config", help="path of runtime.yaml (default: $MOLTBOT_CONFIG or ./runtime.yaml)")
    parser.add_argument("--verbose", action="store_true", help="log at INFO on stderr (default: warnings)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


async def run_cli(argv: list[str], *, out: TextIO | None = None, err: TextIO | None = None,
                  providers: Providers | None = None, env: dict[str, str] | None = None) -> int:
    """Parse `argv` and run the subcommand; `providers`/`env` are for tests."""
    out, err = out or sys.stdout, err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config, env=env)
    except ConfigError as exc:
        err.write(f"configuration error: {exc}\n")
        return 2
    # no log file: a one-off command says what went wrong where it was typed
    configure_logging(LoggingSettings(level="INFO" if args.verbose else "WARNING",
                                      json_format=settings.logging.json_format, file=None))
    for notice in settings.notices:     # a key under its old name: said once, where it was typed
        err.write(f"configuration: {notice}\n")
    try:
        async with open_session(settings, out, err, providers) as session:
            return await args.run(args, session)
    except ConfigError as exc:
        err.write(f"configuration error: {exc}\n")
        return 2
    except StartupError as exc:
        err.write(f"cannot reach the database: {printable(str(exc))}\n")
        return 1
    except MoltBotError as exc:
        err.write(f"{args.command}: {printable(str(exc))}\n")
        return 1


def main(argv: list[str] | None = None) -> int:
    try:
        return asyncio.run(run_cli(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        sys.stderr.write("interrupted; committed batches are kept, re-run to continue\n")
        return 130
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """stdout's reader closed it (`export - | head -1`): stop quietly, as `cat` does.

    Python would print a traceback for the BrokenPipeError, and another when it flushes
    stdout at exit; pointing stdout at /dev/null first stops the second (the Python docs'
    recipe, "Note on SIGPIPE"). Exit 141, the shell's code for a process ended by SIGPIPE.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":
    sys.exit(main())
