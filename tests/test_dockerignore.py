"""Issue 41 item 4: the image's build context leaves out the virtualenv, the local databases
and the logs (data/), and keeps what the Dockerfile copies."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ignored(path: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(path, p.rstrip("/")) or fnmatch.fnmatch(path, p.rstrip("/") + "/*")
               or fnmatch.fnmatch(path, p.replace("**/", "*/").rstrip("/")) for p in patterns)


def test_the_build_context_leaves_out_the_venv_and_the_data_and_keeps_what_is_copied():
    patterns = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    for path in (".venv/lib/python3.11/site.py", "data/pg/base/1/1259", "data/moltbot.log", ".git/HEAD"):
        assert _ignored(path, patterns), path
    copied = re.findall(r"^COPY\s+(.+?)\s+\S+$", (ROOT / "Dockerfile").read_text(), re.M)
    for sources in copied:
        for source in sources.split():
            assert not _ignored(source.rstrip("/"), patterns), source
