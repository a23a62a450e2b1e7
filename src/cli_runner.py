"""One way for every command-line entry point to load settings and run, with one set of
exit codes: 2 for a configuration error, 1 when the process cannot start, 0 on Ctrl-C.

`python -m src.main`, `python -m src.web` and `python -m src.consolidation` share it so an
error reads the same everywhere and never arrives as a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from src.config import Settings, load_settings
from src.errors import ConfigError, StartupError
from src.logging_setup import configure_logging

log = logging.getLogger(__name__)


def run_entry(run: Callable[[Settings], Awaitable[int]], *, config: str | None = None,
              overrides: dict[str, Any] | None = None) -> int:
    """Load settings, configure logging, `asyncio.run(run(settings))`; map expected errors."""
    try:
        settings = load_settings(config, overrides=overrides)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.logging)
    for notice in settings.notices:
        log.warning("configuration: %s", notice)
    try:
        return asyncio.run(run(settings))
    except ConfigError as exc:   # e.g. an explicit provider choice that cannot be honoured
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    except StartupError as exc:
        print(f"cannot start: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
