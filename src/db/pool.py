"""asyncpg pool: pgvector codecs and iterative HNSW scans on every connection."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

import asyncpg
from pgvector.asyncpg import register_vector

from src.errors import DatabaseUnreachable, StartupError

log = logging.getLogger(__name__)

#: application_name of the service's connections; the CLI's are "moltbot-cli".
SERVICE_APPLICATION = "moltbot"


#: Session settings every connection must have on every use. They are sent in the
#: start-up packet (`server_settings`), which makes them the session's defaults: a RESET
#: ALL (asyncpg's default pool reset, a server restart's new connections) keeps them, where
#: a plain SET was lost (a filtered vector search then came back with 1 row instead of 50).
SESSION_SETTINGS: dict[str, str] = {
    # Filtered vector queries (embed_model = current) must not come back short.
    "hnsw.iterative_scan": "relaxed_order",
}


async def keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset when a connection comes back: nothing to send.

    asyncpg's default sends `SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET
    ALL` on every release, a round trip each, many a cycle (notes.md). An open transaction
    is still rolled back (asyncpg does that before this hook). What the reset query would
    undo, the service never leaves on a pooled connection: settings are `SET LOCAL` /
    `set_config(..., true)` (session defaults ride in the start-up packet,
    SESSION_SETTINGS), advisory locks are transaction locks except the deep pass's, which it
    unlocks (or ends the connection), and nothing LISTENs or holds a cursor.
    tests/test_pool_session.py fails on a statement that would leave state behind."""


async def init_connection(conn: asyncpg.Connection) -> None:
    """Per-connection set-up; also usable on a single connection outside the pool."""
    await register_vector(conn)
    for name, value in SESSION_SETTINGS.items():
        # a connection opened without server_settings (outside the pool) still gets them
        await conn.execute("SELECT set_config($1, $2, false)", name, value)


def redact_dsn(dsn: str) -> str:
    """The DSN with any password removed, for messages and logs."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", dsn)


_CONNECT_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)
#: What an unreachable, restarting or refusing database raises through asyncpg
#: (InternalClientError: a connection terminated in the middle of a statement).
DB_ERRORS: tuple[type[BaseException], ...] = (*_CONNECT_ERRORS, asyncpg.InternalClientError)


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
    server_settings: Mapping[str, str] | None = None,
) -> asyncpg.Pool:
    """Open a pool; DatabaseUnreachable (one line, no password) when the server is not there.

    `application_name` tells the service's connections from the operator CLI's in
    pg_stat_activity (an import checks whether the service is running). `server_settings`
    are more session defaults in the start-up packet (see SESSION_SETTINGS): the web view's
    pool sets its statement timeout there. A connection coming back is not reset (`keep_session`).
    """
    try:
        return await asyncpg.create_pool(
            dsn,
            server_settings={"application_name": application_name, **SESSION_SETTINGS, **(server_settings or {})},
            min_size=min_size,
            max_size=max_size,
            timeout=connect_timeout,
            command_timeout=command_timeout,
            init=init_connection,
            reset=keep_session,
        )
    except _CONNECT_ERRORS as exc:
        raise _unreachable(dsn, exc) from exc
    except ValueError as exc:
        # register_vector on a database without the extension: asyncpg's "unknown type:
        # public.vector" arrived as a 48-line traceback from `python -m src.web`.
        if not str(exc).startswith("unknown type"):
            raise
        raise StartupError(f"no mind in PostgreSQL at {redact_dsn(dsn)}: the database was never migrated "
                           "(no pgvector types); run python -m src.main once to create it") from exc
