"""Test fixtures: a real embedded PostgreSQL (pgvector), a fresh database per test.

The session starts (or reuses) the embedded server in data/test-pg, builds one
migrated template database named after the migrations' checksums, and every test
gets `CREATE DATABASE … TEMPLATE` (~40 ms) so tests never see each other's rows.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import uuid
from pathlib import Path

import asyncpg
import pytest

from src.db.embedded import start_embedded
from src.db.migrations import SQL_DIR, apply_migrations, discover
from src.db.pool import create_pool

ROOT = Path(__file__).resolve().parents[1]
TEST_DATA_DIR = ROOT / "data" / "test-pg"
_TEMPLATE_LOCK = 0x6D6F6C7474706C  # advisory lock: concurrent test runs build the template once
_counter = itertools.count()


def dsn_for(base_uri: str, dbname: str) -> str:
    """Swap the database name in the embedded server's unix-socket URI."""
    head, _, query = base_uri.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{dbname}?{query}"


def _template_name() -> str:
    digest = hashlib.sha256("".join(m.checksum for m in discover(SQL_DIR)).encode()).hexdigest()
    return f"moltbot_tpl_{digest[:12]}"


async def _ensure_template(base_uri: str, name: str) -> None:
    admin = await asyncpg.connect(base_uri)
    try:
        await admin.execute("SELECT pg_advisory_lock($1)", _TEMPLATE_LOCK)
        try:
            exists = await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
            if exists:
                return
            building = f"{name}_building_{os.getpid()}"
            await admin.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
            await admin.execute(f'CREATE DATABASE "{building}"')
            conn = await asyncpg.connect(dsn_for(base_uri, building))
            try:
                await apply_migrations(conn)
            finally:
                await conn.close()
            await admin.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
        finally:
            await admin.execute("SELECT pg_advisory_unlock($1)", _TEMPLATE_LOCK)
    finally:
        await admin.close()


async def _tune_test_server(base_uri: str) -> None:
    # Durability is not under test; fsync costs most of the suite's time on this disk.
    admin = await asyncpg.connect(base_uri)
    try:
        await admin.execute("ALTER SYSTEM SET fsync = off")
        await admin.execute("ALTER SYSTEM SET synchronous_commit = off")
        await admin.execute("SELECT pg_reload_conf()")
    finally:
        await admin.close()


@pytest.fixture(scope="session")
def pg_server() -> str:
    """URI of the embedded test server's maintenance database."""
    uri, _ = start_embedded(TEST_DATA_DIR, shared_buffers="auto")   # as the service's (runtime.yaml)
    asyncio.run(_tune_test_server(uri))
    return uri


@pytest.fixture(scope="session")
def template_db(pg_server: str) -> str:
    name = _template_name()
    asyncio.run(_ensure_template(pg_server, name))
    return name


async def _admin(pg_server: str, statement: str) -> None:
    """One statement on the server's maintenance connection (CREATE/DROP DATABASE cannot
    run inside a transaction or a pool's session)."""
    admin = await asyncpg.connect(pg_server)
    try:
        await admin.execute(statement)
    finally:
        await admin.close()


async def _own_database(pg_server: str, template: str | None = None):
    """A database for one test alone (a clone of `template`, else empty): its DSN, then dropped."""
    name = f"t_{os.getpid()}_{next(_counter)}_{uuid.uuid4().hex[:6]}"
    await _admin(pg_server, f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    yield dsn_for(pg_server, name)
    await _admin(pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def empty_db(pg_server: str):
    """DSN of a brand-new database with nothing in it (for migration tests)."""
    async for dsn in _own_database(pg_server):
        yield dsn


@pytest.fixture
async def db_dsn(pg_server: str, template_db: str):
    """DSN of a fresh, fully migrated database for this test alone."""
    async for dsn in _own_database(pg_server, template_db):
        yield dsn


@pytest.fixture
async def pool(db_dsn: str):
    """asyncpg pool (pgvector codecs, iterative scan) on a fresh migrated database."""
    p = await create_pool(db_dsn, min_size=1, max_size=8)
    yield p
    await p.close()
