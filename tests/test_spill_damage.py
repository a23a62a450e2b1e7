"""Issue 41 item 8: a damaged input spill file never stops the mind from starting.

Every kind of damage our reliability scripts wrote into `data/input-spill/` (15 cases) is read
line by line: the good lines are stored and answered, each bad one is named in the log (its
number and why, not its words) and kept aside byte for byte in the quarantine file; a
directory at the spill's path is moved aside; a spilled line obeys the typed line's limit.
"""

from __future__ import annotations

import json
import uuid

import asyncpg
import pytest

from src.loop import spill
from tests.proc import agent_env, run_agent

GOOD = {"kind": "message", "line": "My sister lives in Porto.", "session": "s0", "key": str(uuid.uuid4())}
DAMAGE = {
    "not an object": b"[1, 2, 3]",
    "a string": b'"hello"',
    "a number": b"42",
    "null": b"null",
    "invalid UTF-8": b'{"kind": "message", "line": "caf\xe9"}',
    "broken JSON": b'{"kind": "message", "line": "cut mid-wri',
    "no kind": b'{"line": "hello there"}',
    "an evil kind": b'{"kind": "evil", "line": "rm -rf /"}',
    "a null line": b'{"kind": "message", "line": null}',
    "a number for a line": b'{"kind": "message", "line": 7}',
    "an empty line": b'{"kind": "message", "line": "   "}',
    "a NUL only": b'{"kind": "message", "line": "\\u0000"}',
    "too long": json.dumps({"kind": "message", "line": "x" * 5000}).encode(),
    "a bad key": None,       # a good line with an unusable key: stored with a new key
    "nested deep": b'{"kind": "message", "line": {"a": {"b": [1]}}}',
    "an unknown channel": b'{"kind": "message", "line": "hello", "channel": "carrier pigeon"}',
}


def _spill(path, cases):
    rows = [json.dumps(GOOD).encode()]
    for name in cases:
        raw = DAMAGE[name]
        if raw is None:
            raw = json.dumps({"kind": "command", "line": "  hello with a bad key", "key": "not-a-uuid"}).encode()
        rows.append(raw)
    path.write_bytes(b"\n".join(rows) + b"\n")


def test_every_damage_is_kept_aside_and_the_good_lines_read(tmp_path, caplog):
    path = tmp_path / "s-db.jsonl"
    _spill(path, list(DAMAGE))
    caplog.set_level("WARNING")
    got = spill.read(path, max_chars=4000)
    assert [(g.kind, g.text) for g in got] == [("message", "My sister lives in Porto."),
                                                ("message", "  hello with a bad key")]
    assert got[0].key == GOOD["key"] and uuid.UUID(got[1].key)
    quarantine = (tmp_path / "s-db.jsonl.quarantine").read_bytes().split(b"\n")
    assert len([q for q in quarantine if q]) == len(DAMAGE) - 1
    assert DAMAGE["invalid UTF-8"] in quarantine                    # byte for byte
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == len(DAMAGE) - 1
    assert any(m.startswith("input spill s-db.jsonl line 6 kept aside") and m.endswith(": not UTF-8") for m in logged)
    assert any(m.endswith("line 5 kept aside in s-db.jsonl.quarantine: a JSON null, not an object") for m in logged)
    assert any("over the 4,000 a typed line may have" in m for m in logged)
    assert not any("rm -rf" in m or "hello there" in m for m in logged)   # never the words


def test_a_directory_at_the_spill_path_is_moved_aside(tmp_path):
    path = tmp_path / "s-db.jsonl"
    path.mkdir()
    (path / "inside").write_text("x")
    assert spill.read(path) == []
    assert not path.exists() and (tmp_path / "s-db.jsonl.aside-1" / "inside").exists()


@pytest.mark.parametrize("case", ["not an object", "invalid UTF-8", "no kind", "a null line", "an evil kind",
                                  "a NUL only", "too long"])
async def test_the_service_starts_stores_the_good_line_and_answers_it(db_dsn, tmp_path, case):
    conn = await asyncpg.connect(db_dsn)
    try:
        row = await conn.fetchrow("SELECT current_database() AS db, "
                                  "(SELECT system_identifier FROM pg_control_system()) AS sys")
    finally:
        await conn.close()
    spill_dir = tmp_path / "input-spill"
    spill_dir.mkdir()
    path = spill_dir / f"{row['sys']}-{row['db']}.jsonl"
    _spill(path, [case])
    config = tmp_path / "runtime.yaml"
    config.write_text(f"agent:\n  spill_dir: {spill_dir}\n  max_input_chars: 4000\nweb:\n  enabled: false\n",
                      encoding="utf-8")
    result = run_agent(b"/quit\n", agent_env(DATABASE_URL=db_dsn), ("--config", str(config)), timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    assert "Porto" in result.stdout.decode() or "reflex mode" in result.stdout.decode()
    conn = await asyncpg.connect(db_dsn)
    try:
        lines = [r["line"] for r in await conn.fetch("SELECT line FROM input_journal WHERE kind = 'message'")]
        assert lines == ["My sister lives in Porto."]
        assert await conn.fetchval("SELECT state FROM input_journal WHERE kind = 'message'") == "answered"
    finally:
        await conn.close()
    assert not path.exists() and (spill_dir / (path.name + ".quarantine")).exists()


def test_a_held_line_keeps_its_channel_and_an_old_spill_is_the_terminals(tmp_path):
    """An API message held during an outage is answered on the API after the database is back."""
    path = tmp_path / "spill.jsonl"
    key = str(uuid.uuid4())
    spill.append(path, [("message", "from the API", key, "api")], "s1")
    with path.open("ab") as f:      # a line written before channels existed
        f.write(json.dumps({"kind": "message", "line": "typed", "session": "s0", "key": str(uuid.uuid4())}).encode() + b"\n")
    got = spill.read(path)
    assert [(x.text, x.key, x.channel) for x in got] == [("from the API", key, "api"), ("typed", got[1].key, "terminal")]
