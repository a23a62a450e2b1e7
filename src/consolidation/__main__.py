"""python -m src.consolidation — run consolidation once, or ask why a memory is believed.

    python -m src.consolidation run           one light tick (every operation, now)
    python -m src.consolidation run --deep    one deep pass (or resume the unfinished one)
    python -m src.consolidation why ID        the supersedes chain of memory ID
    python -m src.consolidation history ID    the weight history of memory ID
    python -m src.consolidation pending       approvals waiting for the operator
    python -m src.consolidation approve ID    apply approval ID (reject ID: refuse it)

Uses the same runtime.yaml, database and providers as `python -m src.main`.
Exit codes: 0 done, 1 cannot start or the pass failed, 2 bad arguments or configuration.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from datetime import UTC, datetime

from src.cli_runner import run_entry
from src.config import Settings
from src.consolidation.deep.deep_pass import ConsolidationParts, run_deep_pass
from src.consolidation.deep.why import format_chain, why_do_i_believe
from src.consolidation.evolution import approvals
from src.consolidation.light.ticker import LightTicker
from src.db.database import open_database
from src.providers.factory import build_providers
from src.weights.approval import ApprovalLine
from src.weights.history import weight_history_text
from src.weights.safety import Safety


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    db = await open_database(settings.database)
    safety = Safety(settings.weights.safety, approval=ApprovalLine.of(settings.consolidation.evolution.promotion))
    try:
        if args.command == "why":
            print(format_chain(args.memory_id, await why_do_i_believe(db.pool, args.memory_id), now=datetime.now(UTC)))
            return 0
        if args.command == "history":
            print(await weight_history_text(db.pool, args.memory_id))
            return 0
        if args.command in ("pending", "approve", "reject"):
            return await approvals.cli(db.pool, safety, settings.consolidation.evolution,
                                       args.command, getattr(args, "approval_id", ""))
        providers = build_providers(settings.providers, settings.secrets, db.pool, f"consolidation-{uuid.uuid4().hex[:6]}")
        try:
            if args.deep:
                parts = ConsolidationParts(db.pool, embedder=providers.embedder, llm=providers.meta,
                                           safety=safety, settings=settings.consolidation)
                report = await run_deep_pass(parts, trigger="manual")
                if report is None:
                    print("a deep pass is already running (another process holds the lock); try again later")
                    return 1
                print(report.summary())
                return 0 if report.status == "done" else 1
            ticker = LightTicker(db.pool, embedder=providers.embedder, llm=providers.meta, safety=safety,
                                 settings=settings.consolidation)
            did = await ticker.tick()
            print("light tick: " + ", ".join(f"{k} {v}" for k, v in did.items()) + f" ({ticker.last_tick_ms:.0f} ms)")
            return 0
        finally:
            await providers.aclose()
    finally:
        await db.close()


def _command(sub: argparse._SubParsersAction, name: str, text: str) -> argparse.ArgumentParser:
    """A subcommand whose own --help says what it does (not only the usage line)."""
    return sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.consolidation", description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="path of runtime.yaml (default: $MOLTBOT_CONFIG or ./runtime.yaml)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run = _command(sub, "run", "one light tick (every operation, now), or with --deep one deep pass "
                               "(or the unfinished one resumed)")
    run.add_argument("--deep", action="store_true", help="run a deep pass instead of a light tick")
    why = _command(sub, "why", "why do I believe memory ID: the memories it was consolidated from, "
                               "its supersedes chain")
    why.add_argument("memory_id", type=int, metavar="ID", help="a memory id (memories.id)")
    history = _command(sub, "history", "the weight history of memory ID: every change, newest first "
                                       "(consolidation_log)")
    history.add_argument("memory_id", type=int, metavar="ID", help="a memory id (memories.id)")
    _command(sub, "pending", "the changes waiting for the operator's approval (approve or reject them by ID)")
    for verb, does in (("approve", "apply"), ("reject", "refuse")):
        decide = _command(sub, verb, f"{does} the pending change ID (the number `pending` shows)")
        decide.add_argument("approval_id", metavar="ID", help="the approval's number, from `pending`")
    args = parser.parse_args(argv)
    return run_entry(lambda settings: _run(settings, args), config=args.config)

if __name__ == "__main__":
    sys.exit(main())
