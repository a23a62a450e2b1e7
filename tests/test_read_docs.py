"""The read-only docs tool (plan §4.10): what it reads, and everything it refuses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from src.tools.read_docs import (
    PROJECT_ROOT,
    DocsTool,
    read_doc,
    resolve_roots,
)
from src.tools.settings import DocsToolSettings


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small project: src/ with files, notes.md, and a secret beside it."""
    root = tmp_path / "proj"
    (root / "src" / "context").mkdir(parents=True)
    (root / "src" / "context" / "fifo.py").write_text("# the adaptive FIFO\nprint('hi')\n")
    (root / "src" / "__pycache__").mkdir()
    (root / "src" / "__pycache__" / "x.pyc").write_bytes(b"\x00\x01")
    (root / "notes.md").write_text("# notes\nDecision: YES. Ünïcode ok.\n", encoding="utf-8")
    (root / "secret.env").write_text("API_KEY=sk-not-for-the-agent\n")
    (tmp_path / "outside.txt").write_text("outside the project\n")
    return root


def _tool(root: Path, **settings) -> DocsTool:
    return DocsTool(DocsToolSettings(roots=["src", "notes.md", "README.md"], **settings), root)


def test_reads_an_allowed_file_by_relative_and_absolute_path(project):
    tool = _tool(project)
    assert tool.read("notes.md") == "# notes\nDecision: YES. Ünïcode ok.\n"
    assert tool.read("src/context/fifo.py") == "# the adaptive FIFO\nprint('hi')\n"
    assert tool.read(str(project / "src" / "context" / "fifo.py")) == "# the adaptive FIFO\nprint('hi')\n"


def test_refuses_dot_dot_even_when_it_would_land_inside(project):
    tool = _tool(project)
    assert tool.read("../outside.txt") == (
        "error: '..' is not allowed in paths ('../outside.txt'); give a path under "
        "src, notes.md, README.md")
    assert tool.read("src/../notes.md").startswith("error: '..' is not allowed in paths")
    assert tool.read("src/context/../../secret.env").startswith("error: '..' is not allowed")


def test_refuses_absolute_paths_and_files_outside_the_roots(project, tmp_path):
    tool = _tool(project)
    outside = str(tmp_path / "outside.txt")
    assert tool.read(outside) == (f"error: {outside!r} is outside the readable documents "
                                  "(src, notes.md, README.md)")
    assert tool.read("/etc/passwd").startswith("error: '/etc/passwd' is outside the readable")
    # a missing file outside the roots is refused as outside, so the error names the roots
    assert tool.read("/home/user/documents/placeholder.txt") == (
        "error: '/home/user/documents/placeholder.txt' is outside the readable documents "
        "(src, notes.md, README.md)")
    assert tool.read("docs/missing.md") == ("error: 'docs/missing.md' is outside the readable "
                                            "documents (src, notes.md, README.md)")
    # inside the project but not an allowed root
    assert tool.read("secret.env") == ("error: 'secret.env' is outside the readable documents "
                                       "(src, notes.md, README.md)")


def test_refuses_a_symlink_pointing_out_of_the_root_but_follows_one_within(project):
    (project / "src" / "leak.txt").symlink_to(project / "secret.env")
    (project / "src" / "notes_link.md").symlink_to(project / "notes.md")
    (project / "src" / "up").symlink_to(project)            # a directory link out
    tool = _tool(project)
    assert tool.read("src/leak.txt") == ("error: 'src/leak.txt' is outside the readable documents "
                                         "(src, notes.md, README.md)")
    assert tool.read("src/up/secret.env").startswith("error: 'src/up/secret.env' is outside")
    assert tool.read("src/notes_link.md") == "# notes\nDecision: YES. Ünïcode ok.\n"
    listing = tool.list("src")
    assert "src/leak.txt" not in listing and "secret.env" not in listing
    assert "src/notes_link.md" in listing


def test_refuses_directories_fifos_and_missing_files(project):
    os.mkfifo(project / "src" / "pipe")
    tool = _tool(project)
    assert tool.read("src/context") == ("error: 'src/context' is a directory "
                                       "(LIST_DOCS shows what it holds)")
    assert tool.read("src/pipe") == "error: 'src/pipe' is not a regular file"   # and did not block
    assert tool.read("src/nope.py") == "error: 'src/nope.py' does not exist"
    assert tool.read("") == "error: give a file path, e.g. 'notes.md' or 'src/loop/cognitive_loop.py'"
    assert tool.read("src/a\x00b") == "error: the path contains a NUL byte"


def test_refuses_binary_and_non_utf8_files(project):
    (project / "src" / "blob.bin").write_bytes(bytes(range(256)))
    (project / "src" / "latin1.txt").write_bytes("café".encode("latin-1"))
    tool = _tool(project)
    assert tool.read("src/blob.bin") == "error: 'src/blob.bin' is a binary file (it contains NUL bytes)"
    assert tool.read("src/latin1.txt") == ("error: 'src/latin1.txt' is not UTF-8 text "
                                           "(invalid byte at offset 3)")


def test_a_large_file_is_cut_on_a_character_boundary(project):
    (project / "src" / "big.md").write_text("é" * 100, encoding="utf-8")    # 200 bytes
    tool = _tool(project, max_bytes=51)
    text = tool.read("src/big.md")
    assert text == "é" * 25 + "\n[truncated: src/big.md is 200 bytes; showing the first 51]"


def test_the_tool_cannot_write(project):
    tool = _tool(project)
    before = (project / "notes.md").read_bytes()
    assert tool.call("write_doc", {"path": "notes.md", "text": "x"}) == (
        "error: unknown tool 'write_doc'; available: read_doc, list_docs")
    assert tool.call("read_doc", {"path": "notes.md", "mode": "w"}) == (
        "error: read_doc takes exactly one string argument, 'path'")
    assert (project / "notes.md").read_bytes() == before


def test_list_docs_lists_files_under_the_roots_skipping_caches(project):
    (project / "src" / "blob.bin").write_bytes(b"\x00")
    tool = _tool(project)
    assert tool.call("list_docs", {}) == "\n".join([
        "src/blob.bin (1 bytes)",
        "src/context/fifo.py (32 bytes)",
        "notes.md (37 bytes)",
    ])
    assert tool.call("list_docs", {"subdir": "../"}).startswith("error: '..' is not allowed")
    assert _tool(project, max_list_entries=1).list() == (
        "src/blob.bin (1 bytes)\n[stopped at 1 entries; list a subdirectory]")


def test_call_dispatches_on_the_real_project():
    tool = DocsTool()
    assert tool.roots == resolve_roots(["src", "notes.md", "README.md"], PROJECT_ROOT)
    # the real project: notes.md is readable, pyproject.toml is not a doc
    assert tool.call("read_doc", {"path": "notes.md"}).startswith("# MoltBot — engineering notes")
    assert tool.call("read_doc", {"path": "pyproject.toml"}).startswith(
        "error: 'pyproject.toml' is outside the readable documents")
    assert DocsTool(DocsToolSettings(enabled=False)).call("read_doc", {"path": "notes.md"}) == (
        "error: the docs tool is disabled (tools.docs.enabled: false)")


def test_readable_names_the_roots_relative_to_the_project(project, tmp_path):
    assert _tool(project).readable() == ["src", "notes.md", "README.md"]
    outside = DocsTool(DocsToolSettings(roots=["src", str(tmp_path / "elsewhere")]), project)
    assert outside.readable() == ["src", str(tmp_path / "elsewhere")]


def test_module_function_takes_explicit_roots(project):
    roots = resolve_roots(["notes.md"], project)
    assert read_doc("notes.md", allowed_roots=roots, base=project).startswith("# notes")
    assert read_doc("src/context/fifo.py", allowed_roots=roots, base=project).startswith(
        "error: 'src/context/fifo.py' is outside")
