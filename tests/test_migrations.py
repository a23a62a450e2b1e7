"""Migrations: apply to an empty database, re-apply as a no-op, refuse a tampered file."""

from __future__ import annotations

import shutil

import asyncpg
import pytest

from src.db.migrations import SQL_DIR, apply_migrations, discover
from src.errors import MigrationError


async def test_apply_then_reapply_is_noop(empty_db):
    conn = await asyncpg.connect(empty_db)
    try:
        first = await apply_migrations(conn)
        assert first == [m.filename for m in discover()]
        assert first[0] == "001_schema.sql"
        second = await apply_migrations(conn)
        assert second == []
        rows = await conn.fetch("SELECT version, filename, checksum FROM schema_migrations ORDER BY version")
        assert [(r["version"], r["filename"], r["checksum"]) for r in rows] == [
            (m.version, m.filename, m.checksum) for m in discover()
        ]
    finally:
        await conn.close()


async def test_modified_applied_file_is_refused_by_name(empty_db, tmp_path):
    sql_dir = tmp_path / "sql"
    shutil.copytree(SQL_DIR, sql_dir)
    conn = await asyncpg.connect(empty_db)
    try:
        await apply_migrations(conn, sql_dir)
        target = sql_dir / "001_schema.sql"
        target.write_text(target.read_text() + "\n-- an innocent edit\n")
        with pytest.raises(MigrationError, match=r"^migration 001_schema\.sql was modified after it was applied"):
            await apply_migrations(conn, sql_dir)
    finally:
        await conn.close()


async def test_failed_migration_rolls_back_alone(empty_db, tmp_path):
    sql_dir = tmp_path / "sql"
    shutil.copytree(SQL_DIR, sql_dir)
    (sql_dir / "900_good.sql").write_text("CREATE TABLE probe_good (x int);")
    (sql_dir / "901_bad.sql").write_text("CREATE TABLE probe_bad (x int);\nSELECT no_such_function();")
    conn = await asyncpg.connect(empty_db)
    try:
        with pytest.raises(MigrationError, match=r"^migration 901_bad\.sql failed: function no_such_function\(\) does not exist"):
            await apply_migrations(conn, sql_dir)
        tables = {r["tablename"] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE tablename LIKE 'probe_%'")}
        assert tables == {"probe_good"}
        versions = [r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations ORDER BY 1")]
        assert versions[-1] == 900
    finally:
        await conn.close()


def test_badly_named_file_is_an_error(tmp_path):
    (tmp_path / "1_x.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="must be named NNN_lowercase_name.sql"):
        discover(tmp_path)
