"""`python -m src.memory forget` and `correct`: the guardian's erasure from the shell (issue 39).

    forget ID…               forget these memories (and what was built from them)
    forget --match TEXT      list every memory and line holding TEXT, then forget what is chosen
    forget … --dry-run       list, and print the receipt a forget would write; change nothing
    forget … --yes           do not ask (needed when stdin is not a terminal)
    correct ID TEXT          store TEXT as the correction of memory ID (it supersedes the old)
    correct ID TEXT --forget-old   and forget the old one

Usable while the mind runs: the forget is one transaction, and the running mind drops
what it holds in memory when it sees the receipt (src/erasure/receipt.py). Exit codes:
0 done (or nothing chosen), 1 a named memory does not exist or the forget failed, 2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime

from src.erasure import matches
from src.erasure.correct import correct
from src.erasure.forget import forget
from src.erasure.spill import scrub_spill
from src.memory.session import Session


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `forget` and `correct` on an argparse subparsers object."""
    p = sub.add_parser("forget", help="forget memories by id or every trace of some words (asks first)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("ids", nargs="*", type=int, metavar="ID", help="memory ids")
    p.add_argument("--match", metavar="TEXT", help="forget what holds TEXT (case-insensitive)")
    p.add_argument("--dry-run", action="store_true", help="print what would be removed; change nothing")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(run=run_forget)
    c = sub.add_parser("correct", help="correct a memory: the new text supersedes the old",
                       description="Store TEXT as the correction of memory ID; the old is kept as earlier.")
    c.add_argument("id", type=int, metavar="ID")
    c.add_argument("text", nargs="+", metavar="TEXT")
    c.add_argument("--forget-old", action="store_true", help="forget the old memory too")
    c.set_defaults(run=run_correct)


async def run_forget(args: argparse.Namespace, s: Session) -> int:
    if bool(args.ids) == bool(args.match):
        s.err.write("forget: name memory ids or --match TEXT (one of the two)\n")
        return 2
    if args.match is not None and not args.match.strip():
        s.err.write("forget: --match needs some words\n")
        return 2
    now = datetime.now(UTC)
    if args.ids:
        found, missing = await matches.by_ids(s.pool, args.ids)
        if missing:
            s.err.write(f"forget: no memory {', '.join(f'#{i}' for i in missing)}\n")
            if not found:
                return 1
    else:
        found = await matches.by_words(s.pool, args.match)
        if not found:
            s.out.write("nothing holds those words; the logs are scrubbed of them only with something to forget\n")
            return 0
    s.out.write(matches.listing(found, now) + "\n")
    if args.dry_run:
        receipt, _ = await forget(s.pool, None, found, who="cli", words=args.match, dry_run=True, now=now)
        s.out.write(receipt.text() + "\n")
        return 0
    chosen = found
    if not args.yes:
        if not sys.stdin.isatty():
            s.err.write("forget: not at a terminal, so nothing was asked; add --yes to forget these\n")
            return 2
        answer = await asyncio.to_thread(input, matches.question(len(found)) + " ")
        picked = matches.choose(answer, found)
        if not isinstance(picked, list):
            s.out.write((picked or "not an answer; nothing was forgotten") + "\n")
            return 0
        chosen = picked
    if not chosen:
        s.out.write("nothing was forgotten\n")
        return 0
    receipt, gone = await forget(s.pool, s.providers.embedder, chosen, who="cli",
                                 words=args.match if chosen == found else None, now=now)
    spilled = scrub_spill(s.settings.agent.spill_dir, gone.needles)
    s.out.write(receipt.text() + "\n" + (f"  input spill: {spilled} lines replaced\n" if spilled else ""))
    return 0


async def run_correct(args: argparse.Namespace, s: Session) -> int:
    text = " ".join(args.text)
    new_id = await correct(s.pool, s.providers.embedder, args.id, text)
    s.out.write(f"memory #{new_id} corrects #{args.id} (the old is kept as earlier)\n")
    if args.forget_old:
        found, _ = await matches.by_ids(s.pool, [args.id])
        receipt, gone = await forget(s.pool, s.providers.embedder, found, who="correction")
        scrub_spill(s.settings.agent.spill_dir, gone.needles)
        s.out.write(receipt.text() + "\n")
    return 0
