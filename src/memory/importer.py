"""`import FILE.jsonl`: bulk-load memories (format: src/memory/jsonl.py).

Bad lines are reported on stderr as `FILE:LINE: reason` and skipped; the rest go
in batches through src/recall/bulk_import (one transaction per batch, staged COPY,
duplicates skipped by import_key). Progress on a terminal, one count line at the end.

HNSW cut-over: inserting into the live index costs a graph search per row, so for
a large import the index is dropped, the rows loaded, and the index built once.
`--index auto` does that when the new rows are at least REBUILD_MIN_ROWS and at
least REBUILD_RATIO of the rows already stored (measured, notes.md), and only when
the service is not connected: while it runs, a rebuild's lock would hold its
writes for the whole build. A missing or invalid index (an import that crashed
between drop and rebuild) is rebuilt at the end of the next import.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from src.errors import InputRejected
from src.memory.console import Progress, printable
from src.memory.jsonl import LineError, parse_line
from src.memory.session import Session
from src.recall import hnsw
from src.recall.bulk_import import (
    BatchResult,
    ImportRecord,
    keyed,
    pending_links,
    write_batch,
    write_links,
)

#: Below this many new rows the live index is always kept (a build has a fixed cost).
REBUILD_MIN_ROWS = 1_000
#: ... and the new rows must be at least this share of the rows already stored: the
#: measured break-even is ~10% at 10k rows (bench/bench_import.py, notes.md); the margin
#: is for the time the vector arm runs without its index.
REBUILD_RATIO = 0.15


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="bulk-load memories from a JSONL file",
                       description=__doc__.split("\n\n")[0] + " One JSON object per line: "
                       '{"content", "memory_type", "event_time", "source_tag", "metadata"}; only '
                       "content is required. Re-running a file imports nothing twice.")
    p.add_argument("file", type=Path, help="JSONL file (an export file restores its memories)")
    p.add_argument("--batch-size", type=int, default=500, metavar="N",
                   help="lines per transaction (default 500): a crash keeps whole batches only")
    p.add_argument("--index", choices=("auto", "live", "rebuild"), default="auto",
                   help="HNSW index during the import: auto (rebuild when large and the service "
                        "is not running), live (keep it), rebuild (drop, load, build)")
    p.set_defaults(run=run)


def rebuild_pays(new_rows: int, existing_rows: int) -> bool:
    """Whether dropping and rebuilding the index beats inserting into it (notes.md)."""
    return new_rows >= REBUILD_MIN_ROWS and new_rows >= REBUILD_RATIO * existing_rows


@dataclass
class ImportReport:
    lines: int = 0
    bad: int = 0
    totals: BatchResult = field(default_factory=BatchResult)
    index: str = "kept"

    def add(self, r: BatchResult) -> None:
        t = self.totals
        t.inserted += r.inserted
        t.duplicates += r.duplicates
        t.unembedded += r.unembedded
        t.links += r.links


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for raw in f if raw.strip())


async def run(args: argparse.Namespace, s: Session) -> int:
    path: Path = args.file
    if args.batch_size < 1:
        s.err.write("import: --batch-size must be at least 1\n")
        return 2
    try:
        total = await asyncio.to_thread(_count_lines, path)
    except OSError as exc:
        s.err.write(f"import: cannot read {printable(str(path))}: {exc.strerror or exc}\n")
        return 1
    existing = await s.pool.fetchval("SELECT count(*) FROM memories")
    state = await hnsw.index_state(s.pool)
    service = await hnsw.service_connections(s.pool)
    rebuild = args.index == "rebuild" or (
        args.index == "auto" and service == 0 and rebuild_pays(total, existing))
    report = ImportReport()
    if rebuild and state != "missing":
        await hnsw.drop_index(s.pool)
        state = "missing"
    progress = Progress("importing", total, s.err)
    ref_ids: dict[int, int] = {}
    links: list[tuple[int, int]] = []
    batch: list[ImportRecord] = []
    name = printable(str(path))

    async def flush() -> None:
        result = await write_batch(s.pool, s.providers.embedder, batch, ref_ids)
        report.add(result)
        links.extend(pending_links(batch, ref_ids))
        batch.clear()
        progress.update(report.lines)

    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                record = parse_line(raw.decode("utf-8", errors="replace"), number)
                if record is None:
                    continue
                keyed([record])                     # what the store would refuse, per line
            except (LineError, InputRejected) as exc:
                report.bad += 1
                s.err.write(f"{name}:{number}: {printable(str(exc))}\n")
                continue
            report.lines += 1
            batch.append(record)
            if len(batch) >= args.batch_size:
                await flush()
    if batch:
        await flush()
    report.totals.links += await write_links(s.pool, links, ref_ids)
    seconds = progress.finish()
    if state != "valid":
        built = await hnsw.rebuild_index(s.pool)
        report.index = f"rebuilt in {built:.1f} s"
    t = report.totals
    s.out.write(f"imported {t.inserted} new memories from {name} in {seconds:.1f} s "
                f"({t.duplicates} already present, {report.bad} bad lines skipped, "
                f"{t.unembedded} stored without embedding, {t.links} supersedes links; "
                f"HNSW index {report.index})\n")
    return 0
