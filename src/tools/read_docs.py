"""The agent reads its own docs (plan §4.10): a read-only tool System 1 can call.

`read_doc` and `list_docs` see only files under the allowed roots (settings:
`src/`, `notes.md`, `README.md` of the project by default). They never raise
into the loop: every refusal or failure comes back as one line starting with
``error:`` that says what was wrong, which the model reads like any tool output.

What is refused, and how:

- ``..`` anywhere in the requested path, before any resolution (no climbing out,
  not even "src/../src");
- a path (absolute, or relative to the project root) whose *resolved* form —
  every symlink followed — is not inside a root: so absolute paths elsewhere
  and symlinks pointing out of a root are refused, symlinks within are fine;
- anything that is not a regular file once opened (directories, FIFOs, sockets,
  devices): checked with fstat on the opened descriptor, which is opened with
  O_NONBLOCK (a FIFO cannot hang the loop) and O_NOFOLLOW (the resolved final
  component cannot have been swapped for a symlink since it was checked);
- content that is not UTF-8 or contains NUL bytes (binary).

Files over `max_bytes` are cut there (on a character boundary) with a note.
There is no write function, and files are opened O_RDONLY. Known limit: a
directory *inside* a root swapped for a symlink between the check and the open
could redirect one read; only someone who can already write the repository
could do that.
"""

from __future__ import annotations

import codecs
import errno
import logging
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from src.tools.settings import DocsToolSettings

log = logging.getLogger(__name__)

#: The repository root: src/tools/read_docs.py -> parents[2].
PROJECT_ROOT = Path(__file__).resolve().parents[2]
ERROR_PREFIX = "error: "
_SKIP_DIRS = {"__pycache__", ".git", ".venv", "node_modules"}



def _error(message: str) -> str:
    return ERROR_PREFIX + message


def resolve_roots(roots: Sequence[str | Path], base: Path = PROJECT_ROOT) -> list[Path]:
    """Absolute, symlink-free forms of the configured roots (missing ones are kept: they
    simply contain nothing)."""
    return [(base / root).resolve() for root in roots]


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _display(path: Path, base: Path) -> str:
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)


def _locate(path: str, roots: Sequence[Path], base: Path) -> Path | str:
    """The resolved path, or an error string."""
    if not isinstance(path, str) or not path.strip():
        return _error("give a file path, e.g. 'notes.md' or 'src/loop/cognitive_loop.py'")
    if "\x00" in path:
        return _error("the path contains a NUL byte")
    if ".." in Path(path).parts or ".." in path.replace("\\", "/").split("/"):
        return _error(f"'..' is not allowed in paths ({path!r}); give a path under "
                      f"{', '.join(_display(r, base) for r in roots)}")
    outside = _error(f"{path!r} is outside the readable documents "
                     f"({', '.join(_display(r, base) for r in roots)})")
    try:
        # a path outside the roots is refused as such even when it does not exist:
        # the error names the roots, so the model learns where it may read
        if not _inside((base / path.strip()).resolve(), roots):
            return outside
        resolved = (base / path.strip()).resolve(strict=True)
    except FileNotFoundError:
        return _error(f"{path!r} does not exist")
    except (OSError, RuntimeError) as exc:        # RuntimeError: a symlink loop
        return _error(f"cannot resolve {path!r}: {exc}")
    if not _inside(resolved, roots):
        return outside
    return resolved


def read_doc(path: str, *, allowed_roots: Sequence[Path], base: Path = PROJECT_ROOT,
             max_bytes: int = 200_000) -> str:
    """The text of one file under `allowed_roots`, or a line starting with ``error:``.

    `allowed_roots` must be resolved (`resolve_roots`); a relative `path` is taken
    from `base`, the project root.
    """
    located = _locate(path, allowed_roots, base)
    if isinstance(located, str):
        return located
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(located, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _error(f"{path!r} changed into a symlink while being opened; refused")
        return _error(f"cannot open {path!r}: {exc.strerror or exc}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            hint = " (LIST_DOCS shows what it holds)" if stat.S_ISDIR(info.st_mode) else ""
            return _error(f"{path!r} is {kind}{hint}")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(65536, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return _error(f"cannot read {path!r}: {exc.strerror or exc}")
    finally:
        os.close(fd)
    data = b"".join(chunks)
    cut = len(data) > max_bytes
    data = data[:max_bytes]
    if b"\x00" in data:
        return _error(f"{path!r} is a binary file (it contains NUL bytes)")
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=not cut)
    except UnicodeDecodeError as exc:
        return _error(f"{path!r} is not UTF-8 text (invalid byte at offset {exc.start})")
    if cut:
        text += f"\n[truncated: {path} is {info.st_size} bytes; showing the first {max_bytes}]"
    return text


def list_docs(subdir: str = "", *, allowed_roots: Sequence[Path], base: Path = PROJECT_ROOT,
              max_entries: int = 500) -> str:
    """Readable files (path and size), one a line; all roots, or those under `subdir`."""
    if subdir.strip():
        located = _locate(subdir, allowed_roots, base)
        if isinstance(located, str):
            return located
        starts = [located]
    else:
        starts = [r for r in allowed_roots if r.exists()]
    lines: list[str] = []
    for start in starts:
        for file in _walk(start, allowed_roots):
            if len(lines) >= max_entries:
                lines.append(f"[stopped at {max_entries} entries; list a subdirectory]")
                return "\n".join(lines)
            try:
                size = file.stat().st_size
            except OSError:
                continue
            lines.append(f"{_display(file, base)} ({size} bytes)")
    return "\n".join(lines) if lines else "(no readable files)"


def _walk(start: Path, roots: Sequence[Path]):
    if start.is_file():
        yield start
        return
    for dirpath, dirnames, filenames in os.walk(start):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            file = Path(dirpath) / name
            try:
                real = file.resolve(strict=True)
            except (OSError, RuntimeError):
                continue
            if real.is_file() and _inside(real, roots):
                yield file


class DocsTool:
    """`read_doc` and `list_docs` bound to the configured roots; `call` is the seam the
    `READ_DOC:` and `LIST_DOCS:` verbs go through (src/tools/docs_verb.py)."""

    def __init__(self, settings: DocsToolSettings | None = None, project_root: Path = PROJECT_ROOT):
        self.settings = settings or DocsToolSettings()
        self.base = project_root.resolve()
        self.roots = resolve_roots(self.settings.roots, self.base)

    def readable(self) -> list[str]:
        """The roots as the model should write them (relative to the project root)."""
        return [_display(r, self.base) for r in self.roots]

    def read(self, path: str) -> str:
        return read_doc(path, allowed_roots=self.roots, base=self.base,
                        max_bytes=self.settings.max_bytes)

    def list(self, subdir: str = "") -> str:
        return list_docs(subdir, allowed_roots=self.roots, base=self.base,
                         max_entries=self.settings.max_list_entries)

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> str:
        """Dispatch a model's tool call; bad names or arguments come back as ``error:`` lines."""
        if not self.settings.enabled:
            return _error("the docs tool is disabled (tools.docs.enabled: false)")
        args = dict(arguments or {})
        try:
            if name == "read_doc":
                if set(args) != {"path"} or not isinstance(args["path"], str):
                    return _error("read_doc takes exactly one string argument, 'path'")
                return self.read(args["path"])
            if name == "list_docs":
                if set(args) - {"subdir"} or not isinstance(args.get("subdir", ""), str):
                    return _error("list_docs takes one optional string argument, 'subdir'")
                return self.list(args.get("subdir", ""))
        except Exception as exc:        # the seam: a tool failure is the model's to read
            log.exception("docs tool %s failed", name)
            return _error(f"{name} failed: {type(exc).__name__}: {exc}")
        return _error(f"unknown tool {name!r}; available: read_doc, list_docs")
