"""Running `python -m src.memory` in-process against a test database, with fake providers."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from src.memory.__main__ import run_cli


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def json_lines(self) -> list[dict]:
        return [json.loads(line) for line in self.out.splitlines()]


async def cli(dsn: str, *argv: str, embedder=None, reranker=None) -> CliResult:
    """Run the CLI on database `dsn`; fakes at the provider seam when given."""
    out, err = io.StringIO(), io.StringIO()
    providers = None if embedder is None else SimpleNamespace(embedder=embedder, reranker=reranker)
    code = await run_cli(list(argv), out=out, err=err, providers=providers, env={"DATABASE_URL": dsn})
    return CliResult(code, out.getvalue(), err.getvalue())


def write_jsonl(path: Path, rows: list) -> Path:
    """Rows (dicts, or raw strings written as they are) as one line each."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path
