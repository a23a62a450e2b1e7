"""What every subcommand runs in: settings, the database (no instance lock), providers.

The CLI works beside a running service: it never takes the instance lock (a
read-only search must not wait for, or keep out, the mind), its connections are
named `moltbot-cli` in pg_stat_activity (the service's are `moltbot`), and its
statements have no timeout (an index rebuild outlasts the service's 30 s).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TextIO

import asyncpg

from src.config import Settings
from src.db.database import open_database
from src.providers.factory import Providers, build_providers

CLI_APPLICATION = "moltbot-cli"


@dataclass
class Session:
    settings: Settings
    pool: asyncpg.Pool
    providers: Providers
    out: TextIO
    err: TextIO
    description: str = ""


@asynccontextmanager
async def open_session(settings: Settings, out: TextIO, err: TextIO,
                       providers: Providers | None = None) -> AsyncIterator[Session]:
    """Open the database of `settings` (DATABASE_URL or the embedded server) and providers.

    `providers` is for tests (fakes at the provider seam); otherwise they are built
    from runtime.yaml, with the cost ledger in the database.
    """
    db = await open_database(settings.database, take_lock=False, application_name=CLI_APPLICATION,
                             unbounded_commands=True)
    built = providers is None
    try:
        if providers is None:
            providers = build_providers(settings.providers, settings.secrets, db.pool,
                                        f"cli-{uuid.uuid4().hex[:8]}")
        yield Session(settings, db.pool, providers, out, err, db.description)
    finally:
        try:
            if built and providers is not None:
                await providers.aclose()
        finally:
            await db.close()
