"""`export FILE.jsonl`: every memory, as `import` reads it back.

One line per memory in id order, with every column import restores: its weights
(alpha, beta), flags (immutable, protected), timestamps (event_time, created_at,
last_accessed), access history (access_count, access_timestamps), metadata,
compressed and contextualised forms, the conversation context, and the memories it supersedes with the step
that linked them (`supersedes`: `{"id", "via"}` from memory_supersedes; without
`via` a merge came back as an insight). Embeddings are not exported: import embeds
with the current model. `tests/test_memory_cli_import.py` compares every column of
a restored store with the original, so a column added to one side only fails there. Read in one REPEATABLE READ snapshot, streamed
through a cursor, so a running service's writes never tear the file.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

from src.memory.console import Progress, printable
from src.memory.session import Session

_EXPORT = """
SELECT m.id, m.content, m.memory_type, m.event_time, m.source_tag, m.metadata,
       m.depth_weight_alpha AS alpha, m.depth_weight_beta AS beta, m.immutable, m.protected,
       m.source_confidence, m.compressed, m.content_contextualized, m.conversation_context, m.created_at, m.access_count,
       m.last_accessed, m.access_timestamps, m.utility_score, m.embed_model,
       ARRAY(SELECT s.source_id FROM memory_supersedes s WHERE s.insight_id = m.id
             ORDER BY s.source_id) AS supersedes,
       ARRAY(SELECT s.via FROM memory_supersedes s WHERE s.insight_id = m.id
             ORDER BY s.source_id) AS supersedes_via
FROM memories m
ORDER BY m.id
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write every memory to a JSONL file that import restores",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("file", type=Path, help="output file ('-' for stdout)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.set_defaults(run=run)


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def export_line(row: asyncpg.Record) -> dict[str, Any]:
    """One memory as its export object (the import format plus its history)."""
    metadata = row["metadata"]
    return {
        "id": row["id"], "content": row["content"], "memory_type": row["memory_type"],
        "event_time": _iso(row["event_time"]), "source_tag": row["source_tag"],
        "metadata": json.loads(metadata) if isinstance(metadata, str) else metadata,
        "alpha": row["alpha"], "beta": row["beta"], "immutable": row["immutable"],
        "protected": row["protected"], "source_confidence": row["source_confidence"],
        "compressed": row["compressed"], "content_contextualized": row["content_contextualized"],
        "conversation_context": row["conversation_context"], "created_at": _iso(row["created_at"]), "access_count": row["access_count"],
        "last_accessed": _iso(row["last_accessed"]),
        "access_timestamps": [_iso(t) for t in row["access_timestamps"]],
        "utility_score": row["utility_score"],
        "supersedes": [{"id": i, "via": v} for i, v in zip(row["supersedes"], row["supersedes_via"], strict=True)],
        "embed_model": row["embed_model"],
    }


async def run(args: argparse.Namespace, s: Session) -> int:
    to_stdout = str(args.file) == "-"
    if not to_stdout and args.file.exists() and not args.force:
        s.err.write(f"export: {printable(str(args.file))} exists; pass --force to overwrite it\n")
        return 1
    tmp = None if to_stdout else args.file.with_name(args.file.name + ".part")
    try:
        out = s.out if to_stdout else tmp.open("w", encoding="utf-8")
    except OSError as exc:      # a missing folder, no permission: one line, no traceback
        s.err.write(f"export: cannot write {printable(str(args.file))}: {exc.strerror or exc}\n")
        return 1
    count = 0
    try:
        async with s.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            total = await conn.fetchval("SELECT count(*) FROM memories")
            progress = Progress("exporting", total, s.err)
            async for row in conn.cursor(_EXPORT, prefetch=500):
                out.write(json.dumps(export_line(row), ensure_ascii=False) + "\n")
                count += 1
                if count % 500 == 0:
                    progress.update(count)
            seconds = progress.finish()
    except BaseException:
        if tmp is not None:
            out.close()
            tmp.unlink(missing_ok=True)         # no half-written file left behind
        raise
    if tmp is not None:
        out.close()
        os.replace(tmp, args.file)      # a crash never leaves a half-written FILE
        s.out.write(f"exported {count} memories to {printable(str(args.file))} in {seconds:.1f} s\n")
    return 0
