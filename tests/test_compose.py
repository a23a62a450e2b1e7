"""No Docker engine runs here, so the compose file, the Dockerfile and the Makefile are
checked by reading them: what issue 26 found missing (a terminal, the web view published
with its token, a volume for /app/data, every environment variable) stays there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
IMAGE_WORKDIR = "/app"
FETCH = "python -m src.providers fetch-models"


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _runtime() -> dict:
    return yaml.safe_load((ROOT / "runtime.yaml").read_text()) or {}


def _environment_read_by_config() -> set[str]:
    """Every environment variable src/config.py (the only reader of the environment) names."""
    tree = ast.parse((ROOT / "src" / "config.py").read_text())
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and re.fullmatch(r"(MOLTBOT|DATABASE|GEMINI|GOOGLE|ANTHROPIC|OPENAI)_[A-Z_]+", node.value)}


def test_database_service():
    compose = _compose()
    db = compose["services"]["db"]
    assert db["image"] == "pgvector/pgvector:pg17"
    # published on the host's loopback only: the password has a default
    assert db["ports"] == ["127.0.0.1:5433:5432"]
    assert db["volumes"] == ["pgdata:/var/lib/postgresql/data"]
    assert "pgdata" in compose["volumes"]
    assert db["healthcheck"]["test"][0] == "CMD-SHELL" and "pg_isready" in db["healthcheck"]["test"][1]


def test_the_mind_runs_detached_with_a_health_check_and_waits_for_the_database():
    mind = _compose()["services"]["moltbot"]
    assert mind["build"] == "."
    assert mind["command"] == ["python", "-m", "src.main"]
    # `up -d` gives it no terminal: stdin is /dev/null, which it does not read (src/detached.py);
    # `compose run` gives it one
    assert "stdin_open" not in mind and "tty" not in mind
    assert mind["healthcheck"]["test"] == ["CMD", "python", "-m", "src.health"]
    assert 'CMD ["python", "-m", "src.health"]' in (ROOT / "Dockerfile").read_text()
    assert mind["depends_on"] == {"db": {"condition": "service_healthy"}}


def test_every_environment_variable_is_passed_through():
    env = _compose()["services"]["moltbot"]["environment"]
    read = _environment_read_by_config()
    assert read >= {"DATABASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
                    "MOLTBOT_CONFIG", "MOLTBOT_LOG_LEVEL", "MOLTBOT_WEB_TOKEN", "MOLTBOT_WEB_HOST"}
    assert sorted(read - set(env)) == []
    assert env["DATABASE_URL"] == "postgresql://moltbot:${POSTGRES_PASSWORD:-moltbot}@db:5432/moltbot"
    # secrets and choices come from the shell, never written into the file
    for name in read - {"DATABASE_URL", "MOLTBOT_WEB_HOST"}:
        assert env[name] == f"${{{name}:-}}", name


def test_the_web_view_is_published_with_a_token():
    compose = _compose()
    mind = compose["services"]["moltbot"]
    port = _runtime()["web"]["port"]
    # inside the container it must listen beyond loopback, which the service allows only
    # with a token (src/web/app.py check_bind): the token is passed, the port published
    assert mind["environment"]["MOLTBOT_WEB_HOST"] == "0.0.0.0"
    assert mind["environment"]["MOLTBOT_WEB_TOKEN"] == "${MOLTBOT_WEB_TOKEN:-}"
    assert mind["ports"] == [f"127.0.0.1:{port}:{port}"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"EXPOSE {port}" in dockerfile and "MOLTBOT_WEB_HOST=0.0.0.0" in dockerfile


def test_data_lives_in_a_named_volume_and_the_code_is_read_only():
    compose = _compose()
    volumes = compose["services"]["moltbot"]["volumes"]
    named = [v for v in volumes if v.split(":")[1] == f"{IMAGE_WORKDIR}/data"]
    assert named == ["moltbot-data:/app/data"] and "moltbot-data" in compose["volumes"]
    assert all(v.endswith(":ro") for v in volumes if v not in named)
    assert "./runtime.yaml:/app/runtime.yaml:ro" in volumes


def test_dockerfile_fetches_the_reranker_with_make_models_command_into_the_configured_dir():
    dockerfile = (ROOT / "Dockerfile").read_text()
    cache_dir = _runtime()["providers"]["rerank"]["cache_dir"]
    # the command reads cache_dir from runtime.yaml, relative to WORKDIR: inside /app/data
    assert f"WORKDIR {IMAGE_WORKDIR}" in dockerfile
    assert cache_dir.startswith("./data/")
    assert dockerfile.index("COPY runtime.yaml") < dockerfile.index(f"RUN {FETCH}")
    assert 'CMD ["python", "-m", "src.main"]' in dockerfile
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^models: .*\n\t@\$\(PY\) -m src\.providers fetch-models$", makefile, re.M)
    assert re.search(r"^stop: .*\n\t@\$\(PY\) -m src\.db stop --tests$", makefile, re.M)


def test_readme_says_how_to_talk_to_the_container():
    readme = (ROOT / "README.md").read_text()
    docker = readme[readme.index("## Docker"):]
    docker = docker[:docker.index("\n## ", 1)]
    for said in ("docker compose run --rm --service-ports moltbot", "docker compose up -d", "MOLTBOT_WEB_TOKEN",
                 "moltbot-data", "make models"):
        assert said in docker, said
