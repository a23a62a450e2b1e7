"""python -m src.db stop [--tests]|status — the embedded PostgreSQL servers, by hand (`make stop`).

The server outlives the mind on purpose (the next start takes milliseconds, not a
second; notes.md "db"), so stopping it is an explicit act. `stop` refuses while a mind
holds the data directory's instance lock: ending the server under it would be an outage.
The tests and `make e2e` run their own server (data/test-pg): `stop` says when it is
still running, and `stop --tests` stops it too (a test run using it ends).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from src.config import Settings, load_settings
from src.db.embedded import embedded_pid, stop_embedded
from src.db.instance_lock import InstanceLock
from src.errors import ConfigError, InstanceLocked

#: The tests' and `make e2e`'s own embedded server (tests/conftest.py).
TESTS_DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "test-pg"


def _status(settings: Settings) -> int:
    data_dir = settings.database.data_dir
    pid = embedded_pid(data_dir)
    print(f"the embedded PostgreSQL in {data_dir} is "
          + (f"running (pid {pid})" if pid is not None else "not running"))
    return 0


def _tests_server(stop: bool) -> int:
    """Stop the tests' server (`--tests`), or say that it is left running."""
    pid = embedded_pid(TESTS_DATA_DIR)
    if pid is None:
        return 0
    if not stop:
        print(f"left running: the tests' PostgreSQL in {TESTS_DATA_DIR} (pid {pid}); "
              "`python -m src.db stop --tests` stops it", file=sys.stderr)   # an aside, not the answer
        return 0
    ok, line = stop_embedded(TESTS_DATA_DIR)
    print(line, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def _stop(settings: Settings) -> int:
    data_dir = settings.database.data_dir
    lock = InstanceLock(data_dir.expanduser().resolve().parent)
    try:
        lock.acquire()   # held while stopping: no mind starts on a server going down
    except InstanceLocked as exc:
        print(f"not stopped: {exc} (end it with /quit first)", file=sys.stderr)
        return 1
    try:
        ok, line = stop_embedded(data_dir)
    finally:
        lock.release()
    print(line, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.db",
                                     description="The embedded PostgreSQL server of runtime.yaml's "
                                                 "database.data_dir (not used when DATABASE_URL is set).")
    parser.add_argument("--config", help="path of runtime.yaml (default: $MOLTBOT_CONFIG or ./runtime.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    stop = sub.add_parser("stop", help="stop the server (refused while a mind is using it)")
    stop.add_argument("--tests", action="store_true", help="also stop the tests' server (data/test-pg)")
    sub.add_parser("status", help="say whether it runs, and its pid")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    if settings.database.url is not None:
        print("DATABASE_URL is set: that server is not the embedded one and is not stopped from here",
              file=sys.stderr)
        if args.command != "stop":
            return 0
        return max(1, _tests_server(True)) if args.tests else 1
    return max(_stop(settings), _tests_server(args.tests)) if args.command == "stop" else _status(settings)


if __name__ == "__main__":
    sys.exit(main())
