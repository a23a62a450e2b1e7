"""No Docker engine runs here, so the compose file and Dockerfile are checked by reading them."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_compose_services():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    db, agent = compose["services"]["db"], compose["services"]["agent"]
    assert db["image"] == "pgvector/pgvector:pg17"
    assert db["ports"] == ["5433:5432"]
    assert db["volumes"] == ["pgdata:/var/lib/postgresql/data"]
    assert "pgdata" in compose["volumes"]
    assert db["healthcheck"]["test"][0] == "CMD-SHELL" and "pg_isready" in db["healthcheck"]["test"][1]
    assert agent["build"] == "."
    assert agent["command"] == ["python", "-m", "src.main"]
    assert agent["stdin_open"] is True and agent["tty"] is True
    assert agent["depends_on"] == {"db": {"condition": "service_healthy"}}
    env = agent["environment"]
    assert env["DATABASE_URL"].endswith("@db:5432/moltbot")
    assert set(env) >= {"GEMINI_API_KEY", "ANTHROPIC_API_KEY"}
    # secrets come from the shell, never written into the file
    assert env["GEMINI_API_KEY"] == "${GEMINI_API_KEY:-}"
    assert all(v.endswith(":ro") for v in agent["volumes"])


def test_dockerfile_fetches_reranker_at_build_time_into_configured_dir():
    dockerfile = (ROOT / "Dockerfile").read_text()
    runtime = yaml.safe_load((ROOT / "runtime.yaml").read_text()) or {}
    cache_dir = runtime.get("providers", {}).get("rerank", {}).get("cache_dir", "./data/models/flashrank")
    assert "Ranker(model_name='ms-marco-MiniLM-L-12-v2'" in dockerfile
    assert f"cache_dir='/app/{cache_dir.removeprefix('./')}'" in dockerfile
    assert 'CMD ["python", "-m", "src.main"]' in dockerfile
