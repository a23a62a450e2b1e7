"""Open the mind's database: choose the server, lock the data dir, migrate, pool."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import asyncpg

from src.db.embedded import STOP_COMMAND, start_embedded
from src.db.instance_lock import InstanceLock
from src.db.migrations import apply_migrations
from src.db.pool import SERVICE_APPLICATION, connect, create_pool, redact_dsn
from src.db.settings import DatabaseSettings

log = logging.getLogger(__name__)


@dataclass
class Database:
    pool: asyncpg.Pool
    description: str            # one line for the start-up report, never a password
    applied_migrations: list[str]
    startup_seconds: float
    _lock: InstanceLock | None = field(default=None, repr=False)
    # Said when the process ends: the embedded server outlives it on purpose (fast restart),
    # and a user who never hears so finds a postgres running after /quit.
    left_running: str | None = None
    # where the pool connects (may hold a password: never printed); the web view opens its
    # own small pool on it (src/web/serve.py, issue 24)
    dsn: str = field(default="", repr=False)

    async def close(self) -> None:
        try:
            await self.pool.close()
        finally:
            if self._lock is not None:
                self._lock.release()


async def open_database(settings: DatabaseSettings, *, take_lock: bool = True,
                        application_name: str = SERVICE_APPLICATION,
                        unbounded_commands: bool = False) -> Database:
    """Start or reach the server, apply migrations, return a ready pool.

    With DATABASE_URL the server is the operator's; without it, the embedded server
    in `data_dir`, guarded by an instance lock so two agents never share one mind.
    The operator CLI (`python -m src.memory`) passes `take_lock=False`: it works
    beside a running service, never instead of it, and `unbounded_commands=True`
    (an index rebuild or a large export outlasts the service's statement timeout).
    """
    lock: InstanceLock | None = None
    seconds = 0.0
    left_running = None
    if settings.url is not None:
        dsn = settings.url.get_secret_value()
        description = f"PostgreSQL at {redact_dsn(dsn)} (DATABASE_URL)"
    else:
        if take_lock:
            lock = InstanceLock(settings.data_dir.expanduser().resolve().parent)
            lock.acquire()
        try:
            dsn, seconds = start_embedded(settings.data_dir, stop_on_exit=settings.stop_embedded_on_exit,
                                          shared_buffers=settings.shared_buffers)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        description = f"embedded PostgreSQL in {settings.data_dir} (started in {seconds:.2f} s)"
        if not settings.stop_embedded_on_exit:
            left_running = (f"the embedded PostgreSQL in {settings.data_dir} keeps running, so the next "
                            f"start is instant; `{STOP_COMMAND}` stops it")
    try:
        conn = await connect(dsn, connect_timeout=settings.connect_timeout_s)
        try:
            # Migrations first, on a plain connection: the pool's pgvector codecs need
            # the extension that the first migration creates.
            applied = await apply_migrations(conn)
        finally:
            await conn.close()
        pool = await create_pool(
            dsn,
            min_size=settings.pool_min,
            max_size=max(settings.pool_min, settings.pool_max),
            connect_timeout=settings.connect_timeout_s,
            command_timeout=None if unbounded_commands else settings.command_timeout_s,
            application_name=application_name,
        )
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    return Database(pool, description, applied, seconds, lock, left_running, dsn)
