"""`python -m src.memory held`: the memories copilot holds for the guardian's decision.

Read-only: the same listing as the prompt's /held (src/gates/held.py), oldest first,
whether the service runs or not. Deciding stays at the prompt ("Keep these?
(y/n/numbers)" after an answer), where the running mind settles an item in the
transaction that writes it; `--json` prints one object per item (`[]` when nothing is held).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from src.gates import held, held_repository
from src.memory.session import Session


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `held` on an argparse subparsers object."""
    p = sub.add_parser("held", help="memories held for the guardian's decision (copilot), read-only",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="one JSON object per line instead of text")
    p.set_defaults(run=run)


async def run(args: argparse.Namespace, s: Session) -> int:
    """List the held items; exit 0 (an empty list is not a failure)."""
    rows = await held_repository.held_items(s.pool)
    if args.json:
        if not rows:    # nothing held: still a JSON answer a script can read
            s.out.write("[]\n")
        for r in rows:
            s.out.write(json.dumps({"scratch_id": r["scratch_id"], "why": r["why"], "action": r["action"],
                                    "held_at": r["held_at"].isoformat(), "embed_model": r["embed_model"],
                                    "content": r["content"]}, ensure_ascii=True) + "\n")
        return 0
    s.out.write(held.listing(rows, datetime.now(UTC)) + "\n")
    return 0
