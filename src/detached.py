"""Whether stdin is a conversation, and what a mind without one needs (issue 41 item 4).

`make run` and `docker compose run` give the mind a terminal; a pipe gives it a scripted
conversation whose end is the end of input (the tests, `printf … | make run`). A container
started with `docker compose up -d` gets neither: its stdin is /dev/null, which reads as end
of input at once, and the mind used to shut down the moment it was ready. Such a mind is
*detached*: it does not read stdin, runs until SIGTERM (`docker compose stop`), and is
reached through the web view's chat page, the HTTP API and MCP.

`agent.stdin` decides (env MOLTBOT_STDIN): `read` (always), `ignore` (never: detached), or
`auto` — detached when stdin is closed or is /dev/null, read otherwise. A pipe that is
closed at once is still a conversation (an empty one): only /dev/null, which nothing can
write into, says nobody is there.

A detached mind that nothing can reach would run for nobody: with the web view off (a
public bind without MOLTBOT_WEB_TOKEN, or `web.enabled: false`) it refuses to start, before
the database is opened (the embedded server is never started and no lock is left).
"""

from __future__ import annotations

import os
import stat
from typing import Literal

from src.errors import ConfigError

StdinMode = Literal["auto", "read", "ignore"]


def _is_dev_null(fd: int) -> bool:
    try:
        here, null = os.fstat(fd), os.stat(os.devnull)
    except OSError:          # closed (EBADF) or not there: nobody can type into it either
        return True
    return stat.S_ISCHR(here.st_mode) and (here.st_rdev, here.st_ino) == (null.st_rdev, null.st_ino)


def reads_stdin(mode: StdinMode, fd: int = 0) -> bool:
    """True when stdin is the conversation (its end ends the mind)."""
    if mode == "read":
        return True
    if mode == "ignore":
        return False
    return not _is_dev_null(fd)


def check_reachable(*, web_enabled: bool, web_host_ok: bool, api: bool) -> None:
    """A detached mind must be reachable: the web view (and its HTTP API) must start."""
    if not web_enabled:
        raise ConfigError("no terminal input (stdin is /dev/null, or agent.stdin: ignore) and web.enabled is "
                          "false: nothing could reach the mind. Enable the web view, or give it a terminal "
                          "(`docker compose run --rm --service-ports moltbot`, or agent.stdin: read)")
    if not web_host_ok:
        raise ConfigError("no terminal input (stdin is /dev/null, or agent.stdin: ignore) and the web view would "
                          "stay off (its host is not loopback and MOLTBOT_WEB_TOKEN is not set): nothing could "
                          "reach the mind. Set MOLTBOT_WEB_TOKEN (then open http://127.0.0.1:8765/?token=…)")
    if not api:
        raise ConfigError("no terminal input (stdin is /dev/null, or agent.stdin: ignore) and web.api is false: "
                          "the view only reads, so nobody could talk to the mind. Set web.api: true")
