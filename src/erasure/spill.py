"""Forgotten words out of the input spill files (issue 39 item 6).

While the database is away, typed lines wait in a spill file (src/loop/input_journal.py,
one JSON object a line) and are moved into the journal when it is back. A forget runs
with the database up, so a spill is normally empty — but one left by a run that crashed
during an outage is stored and answered at the next start, which would bring a forgotten
line back. After a forget commits, every spill file's line that holds the words gets the
placeholder as its text (the line itself stays: it was typed and will be answered, as an
off-mode line is). The rewrite goes through a temporary file and a rename, so a crash
leaves the old file or the new one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from src.erasure.placeholder import forgotten_text, holds


def scrub_spill(spill_dir: Path, found: Sequence[str]) -> int:
    """Replace the text of every spilled line holding one of `found`; how many lines."""
    if not spill_dir.is_dir():
        return 0
    changed = 0
    for path in sorted(spill_dir.glob("*.jsonl")):
        if not path.is_file():
            continue
        raw = path.read_bytes().decode("utf-8", errors="replace").splitlines()
        out, n = [], 0
        for line in raw:
            try:
                item = json.loads(line)
            except ValueError:
                item = None
            if isinstance(item, dict) and isinstance(item.get("line"), str) and holds(item["line"], found):
                item["line"] = forgotten_text(item["line"])
                line, n = json.dumps(item, ensure_ascii=False), n + 1
            elif not isinstance(item, dict) and holds(line, found):
                line, n = json.dumps({"kind": "message", "line": forgotten_text(line)}), n + 1
            out.append(line)
        if n:
            tmp = path.with_suffix(".jsonl.forget")
            tmp.write_text("".join(f"{x}\n" for x in out), encoding="utf-8")
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
            changed += n
    return changed
