"""Issue 41 item 7: the operator CLI's small defects, each as a newcomer met it."""

from __future__ import annotations

from tests.fakes import HashEmbedder
from tests.memory_cli_helpers import cli, write_jsonl


async def test_export_to_a_missing_folder_is_one_line_not_a_traceback(db_dsn, tmp_path):
    r = await cli(db_dsn, "export", str(tmp_path / "nonexistent" / "dir" / "out.jsonl"), embedder=HashEmbedder())
    assert r.code == 1
    assert r.err.startswith("export: cannot write ") and "No such file or directory" in r.err
    assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1


async def test_held_json_with_nothing_held_is_an_empty_list(db_dsn):
    r = await cli(db_dsn, "held", "--json", embedder=HashEmbedder())
    assert (r.code, r.out) == (0, "[]\n")


async def test_an_import_where_no_line_is_good_fails_and_counts_in_words(db_dsn, tmp_path):
    f = write_jsonl(tmp_path / "bad.jsonl", ["{not json"])
    r = await cli(db_dsn, "import", str(f), embedder=HashEmbedder())
    assert r.code == 1
    assert "1 bad line skipped" in r.out and "imported 0 new memories" in r.out
    assert "no line of" in r.err
    one = write_jsonl(tmp_path / "one.jsonl", [{"content": "My sister lives in Porto."}])
    r = await cli(db_dsn, "import", str(one), embedder=HashEmbedder())
    assert r.code == 0 and "imported 1 new memory from" in r.out and "0 bad lines skipped" in r.out


async def test_an_import_error_names_its_line_once(db_dsn, tmp_path):
    f = write_jsonl(tmp_path / "empty.jsonl", [{"content": "\u0000\u0000"}])
    r = await cli(db_dsn, "import", str(f), embedder=HashEmbedder())
    assert f"{f}:1: the memory content is empty" in r.err and "line 1: line 1" not in r.err
    assert ":1: line 1:" not in r.err
