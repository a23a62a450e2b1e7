"""Apply sql/NNN_name.sql in order, once each, under an advisory lock.

Each file runs in its own transaction and is recorded with its sha256 in
`schema_migrations`. Re-running is a no-op. An applied file whose bytes changed
stops start-up: schema history is append-only, write a new file instead.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from src.errors import MigrationError

log = logging.getLogger(__name__)

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
# pg_advisory_lock key: any constant unique to this application ("moltmigr" in ASCII).
MIGRATION_LOCK_KEY = 0x6D6F6C746D696772
_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    path: Path
    checksum: str

    @property
    def filename(self) -> str:
        return self.path.name


def discover(sql_dir: Path = SQL_DIR) -> list[Migration]:
    """The migration files in version order; a malformed name or duplicate version is an error."""
    found: dict[int, Migration] = {}
    for path in sorted(Path(sql_dir).glob("*.sql")):
        match = _NAME.match(path.name)
        if not match:
            raise MigrationError(f"{path}: migration files must be named NNN_lowercase_name.sql")
        version = int(match.group(1))
        if version in found:
            raise MigrationError(f"{path}: version {version:03d} is also used by {found[version].filename}")
        checksum = hashlib.sha256(path.read_bytes()).hexdigest()
        found[version] = Migration(version, path, checksum)
    return [found[v] for v in sorted(found)]


async def apply_migrations(conn: asyncpg.Connection, sql_dir: Path = SQL_DIR) -> list[str]:
    """Apply pending migrations on `conn`; return the filenames applied this time."""
    migrations = discover(sql_dir)
    applied_now: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
    try:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version    INTEGER PRIMARY KEY,
                   filename   TEXT NOT NULL,
                   checksum   TEXT NOT NULL,
                   applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"""
        )
        rows = await conn.fetch("SELECT version, filename, checksum FROM schema_migrations")
        done = {r["version"]: r for r in rows}
        for m in migrations:
            previous = done.get(m.version)
            if previous is not None:
                if previous["checksum"] != m.checksum:
                    raise MigrationError(
                        f"migration {m.filename} was modified after it was applied "
                        f"(recorded sha256 {previous['checksum'][:12]}…, file has {m.checksum[:12]}…); "
                        "restore it and put the change in a new sql/NNN_*.sql file"
                    )
                continue
            sql = m.path.read_text(encoding="utf-8")
            try:
                async with conn.transaction():
                    await conn.execute(sql)
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, filename, checksum) VALUES ($1, $2, $3)",
                        m.version, m.filename, m.checksum,
                    )
            except asyncpg.PostgresError as exc:
                raise MigrationError(f"migration {m.filename} failed: {exc}") from exc
            log.info("applied migration %s", m.filename)
            applied_now.append(m.filename)
        unknown = sorted(set(done) - {m.version for m in migrations})
        if unknown:
            log.warning("database has migrations this code does not know: %s", unknown)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
    return applied_now
