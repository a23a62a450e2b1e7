"""`import FILE.jsonl`: bulk-load memories (format: src/memory/jsonl.py).

Bad lines are reported on stderr as `FILE:LINE: reason` and skipped; the rest go
in batches through src/recall/bulk_import (one transaction per batch, staged COPY,
duplicates skipped by import_key). Progress on a terminal, one count line at the end.
A line is bad when it is not UTF-8, not a JSON object of the format, nested deeper
than jsonl.MAX_JSON_DEPTH, or carries a text over `--max-content-chars` (default
`agent.max_input_chars`); a line of more than MAX_LINE_BYTES_PER_CHAR bytes per such
character is skipped unread. None of these stops the run.

A line holding the text of a memory the guardian forgot (issue 39) is skipped and
counted on stderr; `--include-forgotten` is the guardian's explicit choice to bring such
memories back (src/recall/bulk_import.py).

Speakers (issue 27). An imported conversation keeps who said each turn: a line's
`metadata.speaker` names its speaker (REALTALK's "Emi"; `user`, `self`, `thought`,
`conclusion` and `correction` are the reserved kinds, src/recall/speakers.py), and the
model then reads "Emi said: …" — the speaker's name at the start of the content
("Emi: …", the benches' convention) is not repeated. Without one, the line's
`source_tag` says it (`external_user`: the user). A speaker that is not a name (not
text, blank, over MAX_NAME_CHARS characters) makes the line bad.

HNSW cut-over: inserting into the live index costs a graph search per row, so for
a large import the index is dropped, the rows loaded, and the index built once.
`--index auto` does that when the new rows are at least REBUILD_MIN_ROWS and at
least REBUILD_RATIO of the rows already stored (measured, notes.md), and only when
the service is not connected: while it runs, a rebuild's lock would hold its
writes for the whole build. The index is dropped just before the first batch that
adds rows (a re-run that adds none keeps it: a whole rebuild for nothing), and
rebuilt in a `finally`, so a run that fails or is interrupted does not leave it
dropped. A missing or invalid index (an import killed between drop and rebuild) is
rebuilt at the end of the next import.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from src.errors import InputRejected
from src.memory.console import Progress, printable
from src.memory.jsonl import LineError, decode_line, parse_line
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
from src.recall.conversation import Threads, follow_record
from src.recall.speakers import MAX_NAME_CHARS

log = logging.getLogger(__name__)

#: Below this many new rows the live index is always kept (a build has a fixed cost).
REBUILD_MIN_ROWS = 1_000
#: ... and the new rows must be at least this share of the rows already stored: above the
#: measured break-even (bench/bench_import.py, notes.md), with a margin for the time the
#: vector arm runs without its index.
REBUILD_RATIO = 0.15
#: A line longer than this many bytes per allowed character is not read into memory: three
#: texts (content, compressed, contextualised) at up to 12 bytes per character (a JSON
#: surrogate-pair escape), and room for the metadata.
MAX_LINE_BYTES_PER_CHAR = 40
_SKIP_CHUNK = 1 << 20


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="bulk-load memories from a JSONL file",
                       description=__doc__.split("\n\n")[0] + " One JSON object per line: "
                       '{"content", "memory_type", "event_time", "source_tag", "metadata"}; only '
                       "content is required; metadata.speaker names who said it (a conversation's "
                       "turn). Re-running a file imports nothing twice.")
    p.add_argument("file", type=Path, help="JSONL file (an export file restores its memories)")
    p.add_argument("--batch-size", type=int, default=500, metavar="N",
                   help="lines per transaction (default 500): a crash keeps whole batches only")
    p.add_argument("--index", choices=("auto", "live", "rebuild"), default="auto",
                   help="HNSW index during the import: auto (rebuild when large and the service "
                        "is not running), live (keep it), rebuild (drop, load, build)")
    p.add_argument("--include-forgotten", action="store_true",
                   help="also import lines whose text is of a memory the guardian forgot (skipped by default)")
    p.add_argument("--max-content-chars", type=int, default=None, metavar="N",
                   help="longest text a line may carry (default: agent.max_input_chars of runtime.yaml)")
    p.set_defaults(run=run)


def rebuild_pays(new_rows: int, existing_rows: int) -> bool:
    """Whether dropping and rebuilding the index beats inserting into it (notes.md)."""
    return new_rows >= REBUILD_MIN_ROWS and new_rows >= REBUILD_RATIO * existing_rows


@dataclass
class ImportReport:
    lines: int = 0
    bad: int = 0
    out_of_order: int = 0               # turns that did not rise within their conversation
    totals: BatchResult = field(default_factory=BatchResult)
    index: str = "kept"

    def add(self, r: BatchResult) -> None:
        t = self.totals
        t.inserted += r.inserted
        t.duplicates += r.duplicates
        t.unembedded += r.unembedded
        t.links += r.links
        t.forgotten += r.forgotten


def bounded_lines(f: BinaryIO, max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """(1-based number, bytes) per line; None for a line over `max_bytes` (read past, never held)."""
    number = 0
    while raw := f.readline(max_bytes + 1):
        number += 1
        if len(raw) > max_bytes and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = f.readline(_SKIP_CHUNK)
            yield number, None
        else:
            yield number, raw


def with_speaker(record: ImportRecord) -> ImportRecord:
    """The record with its `metadata.speaker` checked and its whitespace folded; LineError
    when it is not a name."""
    metadata = dict(record.memory.metadata or {})
    if "speaker" not in metadata:
        return record
    speaker = metadata["speaker"]
    if not isinstance(speaker, str) or not speaker.strip():
        raise LineError("'metadata.speaker' must name who said it (a non-empty text)")
    name = " ".join(speaker.split())
    if len(name) > MAX_NAME_CHARS:
        raise LineError(f"'metadata.speaker' is longer than {MAX_NAME_CHARS} characters: a name, not a text")
    metadata["speaker"] = name
    return replace(record, memory=replace(record.memory, metadata=metadata))


def _count_lines(path: Path, max_bytes: int) -> int:
    with path.open("rb") as f:
        return sum(1 for _, raw in bounded_lines(f, max_bytes) if raw is None or raw.strip())


@dataclass
class IndexPlan:
    """What the import does with the HNSW index: drop it before adding rows, build it at the end."""

    drop: bool                  # drop before the first batch that adds rows
    build: bool                 # build at the end (missing or invalid already)
    dropped: bool = False


async def _plan_index(args: argparse.Namespace, s: Session, total: int) -> IndexPlan:
    existing = await s.pool.fetchval("SELECT count(*) FROM memories")
    state = await hnsw.index_state(s.pool)
    service = await hnsw.service_connections(s.pool)
    rebuild = args.index == "rebuild" or (
        args.index == "auto" and service == 0 and rebuild_pays(total, existing))
    return IndexPlan(drop=rebuild and state != "missing", build=state != "valid")


class _Import:
    """One run over one file: reads, checks and batches lines; owns the index plan."""

    def __init__(self, s: Session, path: Path, batch_size: int, max_chars: int, plan: IndexPlan,
                 progress: Progress):
        self.s = s
        self.path = path
        self.name = printable(str(path))
        self.batch_size = batch_size
        self.max_chars = max_chars
        self.plan = plan
        self.progress = progress
        self.report = ImportReport()
        self.ref_ids: dict[int, int] = {}
        self.links: list[tuple[int, int, str]] = []
        self.batch: list[ImportRecord] = []
        self.seconds = 0.0                          # loading, without the index build
        self.threads = Threads()                    # conversation context (src/recall/conversation.py)
        self.last_turn: dict[str, int] = {}
        self.include_forgotten = False              # --include-forgotten: the guardian's explicit choice

    async def read(self) -> None:
        with self.path.open("rb") as f:
            for number, raw in bounded_lines(f, self.max_chars * MAX_LINE_BYTES_PER_CHAR):
                record = self._check(number, raw)
                if record is None:
                    continue
                self.report.lines += 1
                self.batch.append(self._in_context(record))
                if len(self.batch) >= self.batch_size:
                    await self._flush()
        if self.batch:
            await self._flush()
        self.report.totals.links += await write_links(self.s.pool, self.links, self.ref_ids)
        self.seconds = self.progress.finish()

    def _check(self, number: int, raw: bytes | None) -> ImportRecord | None:
        """The line's record; None for a blank line or a bad one (named on stderr)."""
        try:
            if raw is None:
                raise LineError(f"longer than {self.max_chars * MAX_LINE_BYTES_PER_CHAR:,} bytes; not read")
            record = parse_line(decode_line(raw), number, self.max_chars)
            if record is not None:
                record = with_speaker(record)
                keyed([record])                     # what the store would refuse, per line
            return record
        except (LineError, InputRejected) as exc:
            self.report.bad += 1
            # the store names the line itself ("line 12: …"); the file:line prefix already does
            why = str(exc).removeprefix(f"line {number}: ")
            self.s.err.write(f"{self.name}:{number}: {printable(why)}\n")
            return None

    def _in_context(self, record: ImportRecord) -> ImportRecord:
        """The record with its conversation context (src/recall/conversation.py); a turn
        that does not rise within its conversation is counted."""
        if record.conversation is not None and record.turn is not None:
            if record.turn <= self.last_turn.get(record.conversation, -1):
                self.report.out_of_order += 1
            self.last_turn[record.conversation] = record.turn
        return follow_record(self.threads, record)

    async def _flush(self) -> None:
        result = await write_batch(self.s.pool, self.s.providers.embedder, self.batch, self.ref_ids,
                                   before_insert=self._drop_once, include_forgotten=self.include_forgotten)
        self.report.add(result)
        self.links.extend(pending_links(self.batch, self.ref_ids))
        self.batch.clear()
        self.progress.update(self.report.lines)

    async def _drop_once(self) -> None:
        if self.plan.drop and not self.plan.dropped:
            await hnsw.drop_index(self.s.pool)
            self.plan.dropped = True

    async def restore_index(self, completed: bool) -> None:
        """Build the index when it was dropped or found missing; after a failure, try and say so."""
        if not (self.plan.dropped or self.plan.build):
            return
        if completed:
            self.report.index = f"rebuilt in {await hnsw.rebuild_index(self.s.pool):.1f} s"
            return
        self.s.err.write("import: stopped; restoring the HNSW index before exiting\n")
        try:
            await hnsw.rebuild_index(self.s.pool)
        except Exception as exc:        # the failure that stopped the run is the one to report
            log.warning("the HNSW index could not be restored (the next import rebuilds it): %s", exc)


async def run(args: argparse.Namespace, s: Session) -> int:
    path: Path = args.file
    if args.batch_size < 1:
        s.err.write("import: --batch-size must be at least 1\n")
        return 2
    max_chars = s.settings.agent.max_input_chars if args.max_content_chars is None else args.max_content_chars
    if max_chars < 1:
        s.err.write("import: --max-content-chars must be at least 1\n")
        return 2
    try:
        total = await asyncio.to_thread(_count_lines, path, max_chars * MAX_LINE_BYTES_PER_CHAR)
    except OSError as exc:
        s.err.write(f"import: cannot read {printable(str(path))}: {exc.strerror or exc}\n")
        return 1
    progress = Progress("importing", total, s.err)
    work = _Import(s, path, args.batch_size, max_chars, await _plan_index(args, s, total), progress)
    work.include_forgotten = bool(getattr(args, "include_forgotten", False))
    completed = False
    try:
        await work.read()
        completed = True
    finally:
        await work.restore_index(completed)
    report, t = work.report, work.report.totals
    bad = f"{report.bad} bad line{'' if report.bad == 1 else 's'} skipped"
    s.out.write(f"imported {t.inserted} new memor{'y' if t.inserted == 1 else 'ies'} from {work.name} in "
                f"{work.seconds:.1f} s ({t.duplicates} already present, {bad}, "
                f"{t.unembedded} stored without embedding, {t.links} supersedes links; "
                f"HNSW index {report.index})\n")
    if t.forgotten:
        were = "line was" if t.forgotten == 1 else "lines were"
        s.err.write(f"import: {t.forgotten} {were} of forgotten memories, skipped "
                    "(--include-forgotten imports them)\n")
    if report.out_of_order:
        s.err.write(f"import: {report.out_of_order} lines came after a later turn of their conversation; "
                    "their context is the lines before them in the file\n")
    if report.bad and not report.lines:     # nothing in the file could be read: a failure
        s.err.write(f"import: no line of {work.name} could be read\n")
        return 1
    return 0
