"""asyncpg pool: pgvector codecs and iterative HNSW scans on every connection."""

from __future__ import annotations

import logging
import re

import asyncpg
from pgvector.asyncpg import register_vector

from src.errors import DatabaseUnreachable

log = logging.getLogger(__name__)

#: application_name of the service's connections; the CLI's are "moltbot-cli".
SERVICE_APPLICATION = "moltbot"


async def init_connection(conn: asyncpg.Connection) -> None:
    """Per-connection set-up; also usable on a single connection outside the pool."""
    await register_vector(conn)
    # Filtered vector queries (embed_model = current) must not come back short.
    await conn.execute("SET hnsw.iterative_scan = 'relaxed_order'")


def redact_dsn(dsn: str) -> str:
    """The DSN with any password removed, for messages and logs."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", dsn)


_CONNECT_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


def _unreachable(dsn: str, exc: BaseException) -> DatabaseUnreachable:
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return DatabaseUnreachable(f"cannot connect to PostgreSQL at {redact_dsn(dsn)}: {reason}")


async def connect(dsn: str, *, connect_timeout: float = 10.0) -> asyncpg.Connection:
    """One plain connection (no codecs): for migrations, before the extension exists."""
    try:
        return await asyncpg.connect(dsn, timeout=connect_timeout)
    except _CONNECT_ERRORS as exc:
        raise _unreachable(dsn, exc) from exc


async def create_pool(
    dsn: str,
    *,
    min_size: int = 1,
    max_size: int = 8,
    connect_timeout: float = 10.0,
    command_timeout: float | None = 30.0,
    application_name: str = SERVICE_APPLICATION,
) -> asyncpg.Pool:
    """Open a pool; DatabaseUnreachable (one line, no password) when the server is not there.

    `application_name` tells the service's connections from the operator CLI's in
    pg_stat_activity (an import checks whether the service is running).
    """
    try:
        return await asyncpg.create_pool(
            dsn,
            server_settings={"application_name": application_name},
            min_size=min_size,
            max_size=max_size,
            timeout=connect_timeout,
            command_timeout=command_timeout,
            init=init_connection,
        )
    except _CONNECT_ERRORS as exc:
        raise _unreachable(dsn, exc) from exc
