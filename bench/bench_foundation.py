"""Foundation: embedded PostgreSQL start-up (cold and warm), migrations, per-test database clone."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg

from src.db.embedded import start_embedded
from src.db.migrations import apply_migrations

ROOT = Path(__file__).resolve().parents[1]


def _cold_start_in_subprocess(data_dir: Path) -> float:
    """First start in an empty dir (initdb + start), measured in a fresh process."""
    code = ("import sys; from src.db.embedded import start_embedded; "
            "uri, s = start_embedded(sys.argv[1], stop_on_exit=True); print(s)")
    out = subprocess.run([sys.executable, "-c", code, str(data_dir)], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


async def run() -> list[dict]:
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "pg"
        rows.append({"name": "embedded PG cold start (initdb + start)", "value": _cold_start_in_subprocess(data_dir), "unit": "s"})
        rows.append({"name": "embedded PG start, data dir exists, server stopped", "value": _cold_start_in_subprocess(data_dir), "unit": "s"})
        uri, _ = start_embedded(data_dir, stop_on_exit=True)
        rows.append({"name": "embedded PG attach, server already running", "value": start_embedded(data_dir)[1] * 1000, "unit": "ms"})
        admin = await asyncpg.connect(uri)
        try:
            await admin.execute("CREATE DATABASE bench_tpl")
            conn = await asyncpg.connect(uri.replace("/postgres?", "/bench_tpl?"))
            started = time.perf_counter()
            await apply_migrations(conn)
            rows.append({"name": "apply all migrations to an empty database", "value": (time.perf_counter() - started) * 1000, "unit": "ms"})
            started = time.perf_counter()
            await apply_migrations(conn)
            rows.append({"name": "re-run migrations (no-op)", "value": (time.perf_counter() - started) * 1000, "unit": "ms"})
            await conn.close()
            clones = []
            for i in range(10):
                started = time.perf_counter()
                await admin.execute(f"CREATE DATABASE bench_clone_{i} TEMPLATE bench_tpl")
                clones.append((time.perf_counter() - started) * 1000)
                await admin.execute(f"DROP DATABASE bench_clone_{i}")
            rows.append({"name": "per-test database clone from template (p50)", "value": statistics.median(clones), "unit": "ms"})
        finally:
            await admin.close()
    return rows
