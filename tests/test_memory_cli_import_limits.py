"""`import` against hostile and broken input (issue 26): each bad line costs that line only,
and the HNSW index is never left dropped, nor rebuilt for nothing."""

from __future__ import annotations

import json

import pytest

from src.memory.jsonl import MAX_JSON_DEPTH, LineError, parse_line
from src.recall import hnsw
from tests.fakes import HashEmbedder
from tests.memory_cli_helpers import cli

GOOD = [{"content": f"the heron waited by canal number {i}"} for i in range(3)]


def _file(path, lines: list[bytes]):
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def _json(row: dict) -> bytes:
    return json.dumps(row).encode()


async def test_bad_lines_are_named_with_their_numbers_and_never_stop_the_run(pool, db_dsn, tmp_path):
    deep = b'{"content": "deep", "metadata": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_001
    just_too_deep = b'{"content": "x", "metadata": ' + b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH + b"}"
    f = _file(tmp_path / "in.jsonl", [
        _json(GOOD[0]),
        deep,                                                        # 2: RecursionError stopped every run
        _json({"content": "x" * 1_000_001}),                         # 3: over agent.max_input_chars
        b'{"content": "caf\xe9 au lait"}',                           # 4: Latin-1, stored as U+FFFD before
        _json(GOOD[1]),
        just_too_deep,                                               # 6
        b'{"content": "big", "metadata": {"n": ' + b"9" * 5000 + b"}}",  # 7: int past Python's 4,300 digits
        _json({"content": "y", "access_count": 2**31}),              # 8: past the INTEGER column
        _json(GOOD[2]),
        _json({"content": "z", "alpha": 10**400}),                   # 10: math.isfinite overflowed
    ])
    r = await cli(db_dsn, "import", str(f), "--index", "rebuild", embedder=HashEmbedder())
    assert r.code == 0, r.err
    assert r.err.splitlines() == [
        f"{f}:2: JSON nested deeper than {MAX_JSON_DEPTH} levels",
        f"{f}:3: 'content' is 1,000,001 characters; at most 1,000,000 are imported",
        f"{f}:4: not valid UTF-8 (byte 0xe9 at byte 17: invalid continuation byte)",
        f"{f}:6: JSON nested deeper than {MAX_JSON_DEPTH} levels",
        f"{f}:7: not valid JSON (Exceeds the limit (4300 digits) for integer string conversion)",
        f"{f}:8: 'access_count' must be a whole number from 0 to 2147483647, got 2147483648",
        f"{f}:10: 'alpha' must be a finite number, got {'1' + '0' * 39}",
    ]
    assert "imported 3 new memories" in r.out and "7 bad lines skipped" in r.out
    assert "HNSW index rebuilt in " in r.out
    assert [x["content"] for x in await pool.fetch("SELECT content FROM memories ORDER BY id")] == [
        g["content"] for g in GOOD]
    assert await hnsw.index_state(pool) == "valid"


async def test_a_line_far_over_the_limit_is_skipped_unread(pool, db_dsn, tmp_path):
    # the limit is a setting: --max-content-chars (default agent.max_input_chars)
    f = _file(tmp_path / "in.jsonl", [_json({"content": "z" * 5_000}), _json({"content": "w" * 101}),
                                       _json({"content": "fine " * 20}), b'{"content": "' + b"v" * 300_000 + b'"}',
                                       _json(GOOD[0])])
    r = await cli(db_dsn, "import", str(f), "--max-content-chars", "100", embedder=HashEmbedder())
    assert r.code == 0
    assert r.err.splitlines() == [
        f"{f}:1: longer than 4,000 bytes; not read",
        f"{f}:2: 'content' is 101 characters; at most 100 are imported",
        f"{f}:4: longer than 4,000 bytes; not read",
    ]
    assert "imported 2 new memories" in r.out
    assert await pool.fetchval("SELECT count(*) FROM memories") == 2


async def test_a_rerun_that_adds_nothing_keeps_the_index(db_dsn, tmp_path):
    rows = [_json({"content": f"note {i} about the orchard"}) for i in range(1000)]
    f = _file(tmp_path / "in.jsonl", rows)
    first = await cli(db_dsn, "import", str(f), embedder=HashEmbedder())
    assert "imported 1000 new memories" in first.out and "HNSW index rebuilt in " in first.out
    again = await cli(db_dsn, "import", str(f), embedder=HashEmbedder())      # 56 s for nothing before
    assert "imported 0 new memories" in again.out and again.out.endswith("HNSW index kept)\n")
    forced = await cli(db_dsn, "import", str(f), "--index", "rebuild", embedder=HashEmbedder())
    assert forced.out.endswith("HNSW index kept)\n")


class FailingEmbedder(HashEmbedder):
    """Fails on its second call, as a bug or an interrupt would part way through a run."""

    async def embed(self, texts, task_type, titles=None):
        if self.calls:
            raise RuntimeError("boom")
        return await super().embed(texts, task_type, titles)


async def test_a_run_that_fails_part_way_restores_the_index(pool, db_dsn, tmp_path):
    f = _file(tmp_path / "in.jsonl", [_json({"content": f"fact {i} about the garden"}) for i in range(10)])
    with pytest.raises(RuntimeError, match="boom"):
        await cli(db_dsn, "import", str(f), "--index", "rebuild", "--batch-size", "4",
                  embedder=FailingEmbedder())
    assert await pool.fetchval("SELECT count(*) FROM memories") == 4        # the first batch committed
    assert await hnsw.index_state(pool) == "valid"


def test_supersedes_links_carry_their_via_and_plain_ids_are_insights():
    record = parse_line(json.dumps({"content": "x", "id": 9, "supersedes": [3, {"id": 4, "via": "merge"}]}), 1)
    assert record.supersedes == ((3, "insight"), (4, "merge"))
    with pytest.raises(LineError, match="via must be one of insight, merge, narrative, update, got 'guess'"):
        parse_line(json.dumps({"content": "x", "supersedes": [{"id": 4, "via": "guess"}]}), 1)


async def test_protected_and_contextualised_text_are_restored(pool, db_dsn, tmp_path):
    f = _file(tmp_path / "in.jsonl", [_json({"content": "keep this", "protected": True,
                                             "content_contextualized": "About the garden.\n\nkeep this"})])
    r = await cli(db_dsn, "import", str(f), embedder=HashEmbedder())
    assert "imported 1 new memory" in r.out
    row = await pool.fetchrow("SELECT protected, content_contextualized FROM memories")
    assert tuple(row) == (True, "About the garden.\n\nkeep this")
