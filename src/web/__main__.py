"""python -m src.web — the guardian's window on a mind that is not running here.

Reads the same database as `python -m src.main` (embedded data dir or DATABASE_URL)
without taking the instance lock, applying migrations or running the mind; every
page query runs in a READ ONLY transaction. Stops on Ctrl-C / SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import uuid

from src.cli_runner import run_entry
from src.config import Settings
from src.db.embedded import start_embedded
from src.db.pool import redact_dsn
from src.errors import StartupError
from src.providers.budget import BackgroundBudget, BudgetLeft
from src.providers.factory import build_providers
from src.recall.layers import LayerEmbeddings, identity_vectors
from src.recall.retrieval import Retriever
from src.web.app import WebServer
from src.web.serve import open_view_pool
from src.web.view import View
from src.weights.approval import ApprovalLine
from src.weights.safety import Safety


def _dsn(settings: Settings) -> tuple[str, str]:
    if settings.database.url is not None:
        dsn = settings.database.url.get_secret_value()
        return dsn, f"PostgreSQL at {redact_dsn(dsn)} (DATABASE_URL)"
    # Attach to (or start) the embedded server; no instance lock: this viewer only reads.
    dsn, _ = start_embedded(settings.database.data_dir)
    return dsn, f"embedded PostgreSQL in {settings.database.data_dir}"


def _budget_from_ledger(settings: Settings, pool):
    """The background budget as the ledger tells it (the mind's running count is not here)."""
    async def left() -> BudgetLeft:
        budget = BackgroundBudget(settings.providers.budget)
        await budget.seed(pool)
        return budget.left()
    return left


async def serve(settings: Settings, *, announce=print) -> int:
    """Serve until a signal; the first line printed is the URL."""
    dsn, description = _dsn(settings)
    pool = await open_view_pool(settings, dsn, read_only=False)   # web.pool_size, statement timeout
    session_id = f"web-{uuid.uuid4().hex[:8]}"
    providers = None
    server = None
    try:
        if await pool.fetchval("SELECT to_regclass('memories') IS NULL"):
            raise StartupError(f"no mind in {description}: the tables are missing; "
                               "run python -m src.main once to create them")
        providers = build_providers(settings.providers, settings.secrets, pool, session_id)
        layers = LayerEmbeddings(providers.embedder, values_path=settings.recall.layers.values_path,
                                 goals_path=settings.recall.layers.goals_path, cache_dir=settings.recall.layers.cache_dir)
        layer_vecs, _ = await identity_vectors(layers)
        safety = Safety(settings.weights.safety,
                        approval=ApprovalLine.of(settings.consolidation.evolution.promotion))
        retriever = Retriever(pool, providers.embedder, providers.reranker, safety, settings.recall.retrieval,
                              layer_vecs=layer_vecs)
        view = View(pool=pool, settings=settings.web, mode="standalone viewer (the mind is not run here)",
                    session_id=None, providers_report=providers.report, safety_modes=safety.phase_modes(),
                    retriever=retriever, budget=_budget_from_ledger(settings, pool))
        server = WebServer(view, busy_hint="choose another port with --port")
        url = await server.start()
        announce(f"web view (read-only) of {description}: {url}")
        announce("Ctrl-C stops it.")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        return 0
    finally:
        if server is not None:
            await server.stop()
        if providers is not None:
            await providers.aclose()
        await pool.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.web",
                                     description="Serve the read-only web view of a mind's database.")
    parser.add_argument("--config", help="path of runtime.yaml (default: $MOLTBOT_CONFIG or ./runtime.yaml)")
    parser.add_argument("--host", help="override web.host")
    parser.add_argument("--port", type=int, help="override web.port")
    args = parser.parse_args(argv)
    over = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    return run_entry(lambda settings: serve(settings, announce=lambda line: print(line, flush=True)),
                     config=args.config, overrides={"web": over} if over else None)

if __name__ == "__main__":
    sys.exit(main())
