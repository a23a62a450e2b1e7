"""runtime.yaml validation and environment overrides."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from src.config import load_settings
from src.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_runtime_yaml_is_valid():
    settings = load_settings(ROOT / "runtime.yaml", env={})
    assert settings.database.data_dir == Path("./data/pg")
    assert settings.database.url is None
    assert settings.agent.shutdown_timeout_s == 10


def test_missing_default_file_means_defaults(tmp_path):
    settings = load_settings(tmp_path / "runtime.yaml", env={})
    assert settings.config_path is None
    assert settings.database.pool_max == 8


def test_explicit_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match=r"runtime\.yaml: configuration file not found$"):
        load_settings(tmp_path / "runtime.yaml", env={"MOLTBOT_CONFIG": str(tmp_path / "runtime.yaml")})


def test_environment_overrides_file_and_secrets_stay_secret(tmp_path):
    cfg = tmp_path / "r.yaml"
    cfg.write_text("logging:\n  level: WARNING\n")
    settings = load_settings(cfg, env={
        "DATABASE_URL": "postgresql://u:pw-very-secret@h/db",
        "GEMINI_API_KEY": "g-key-123456", "ANTHROPIC_API_KEY": "a-key-654321",
        "MOLTBOT_LOG_LEVEL": "debug",
    })
    assert settings.database.url.get_secret_value() == "postgresql://u:pw-very-secret@h/db"
    assert settings.secrets.gemini_api_key.get_secret_value() == "g-key-123456"
    assert settings.logging.level == "DEBUG"
    dumped = repr(settings) + str(settings.model_dump())
    for secret in ("pw-very-secret", "g-key-123456", "a-key-654321"):
        assert secret not in dumped


def test_google_api_key_is_accepted_as_gemini_key(tmp_path):
    settings = load_settings(tmp_path / "none.yaml", env={"GOOGLE_API_KEY": "gk"})
    assert settings.secrets.gemini_api_key.get_secret_value() == "gk"


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("database:\n  pool_min: 0\n", "invalid value for 'database.pool_min': Input should be greater than or equal to 1 (got 0)"),
        ("databse:\n  pool_min: 2\n", "invalid value for 'databse': unknown key; remove it or check its spelling"),
        ("logging:\n  level: LOUD\n", "invalid value for 'logging.level': Input should be 'DEBUG', 'INFO', 'WARNING' or 'ERROR' (got 'LOUD')"),
        ("- a\n- b\n", "expected a mapping of sections at the top level"),
        ("database: [unclosed\n", "not valid YAML at line 2"),
        ("database:\n  url: postgresql://x\n", "'database.url' cannot be set in the file; set the DATABASE_URL environment variable instead"),
        ("secrets:\n  gemini_api_key: x\n", "'secrets' cannot be set in the file"),
    ],
)
def test_invalid_file_names_the_key(tmp_path, yaml_text, message):
    cfg = tmp_path / "r.yaml"
    cfg.write_text(yaml_text)
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, env={})
    assert str(err.value).startswith(f"{cfg}: {message}")
    assert "\n" not in str(err.value)


def test_pricing_one_model_keeps_the_other_defaults(tmp_path):
    cfg = tmp_path / "r.yaml"
    cfg.write_text("providers:\n  prices:\n    my-local-model:\n      input_per_mtok: 0.5\n      output_per_mtok: 1.0\n")
    prices = load_settings(cfg, env={}).providers.prices
    assert prices["my-local-model"].input_per_mtok == 0.5
    assert prices["claude-sonnet-4-5"].output_per_mtok == 15.0
    assert prices["gemini-2.5-flash-lite"].input_per_mtok == 0.10


def test_embedding_width_is_fixed_by_the_schema(tmp_path):
    cfg = tmp_path / "r.yaml"
    cfg.write_text("providers:\n  embeddings:\n    dimensions: 1024\n")
    with pytest.raises(ConfigError, match=r"invalid value for 'providers\.embeddings\.dimensions': Input should be 768"):
        load_settings(cfg, env={})


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        # issue 26: a second `web:` replaced the first and the service bound port 1
        ("web:\n  port: 8765\nlogging:\n  level: INFO\nweb:\n  port: 1\n",
         "line 5: duplicate key 'web' (first at line 1); keep one of them"),
        ("web:\n  port: 8765\n  host: 127.0.0.1\n  port: 1\n",
         "line 4: duplicate key 'port' (first at line 2); keep one of them"),
        ("gates: {seed: 1, seed: 2}\n", "line 1: duplicate key 'seed' (first at line 1); keep one of them"),
    ],
)
def test_a_key_written_twice_is_refused_with_its_line(tmp_path, yaml_text, message):
    cfg = tmp_path / "r.yaml"
    cfg.write_text(yaml_text)
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, env={})
    assert str(err.value) == f"{cfg}: {message}"


def test_yaml_merge_keys_may_still_override(tmp_path):
    cfg = tmp_path / "r.yaml"
    cfg.write_text("logging: &log {level: WARNING, json_format: true}\n"
                   "agent: {name: A}\n"
                   "web: {<<: {port: 9000, host: 127.0.0.1}, port: 9001}\n")
    settings = load_settings(cfg, env={})
    assert settings.web.port == 9001 and settings.logging.level == "WARNING"


def test_shipped_runtime_yaml_has_the_web_section_the_readme_names():
    runtime = (ROOT / "runtime.yaml").read_text()
    assert re.search(r"^web: ", runtime, re.M)
    settings = load_settings(ROOT / "runtime.yaml", env={})
    assert (settings.web.host, settings.web.port, settings.web.enabled) == ("127.0.0.1", 8765, True)
    assert set(yaml.safe_load(runtime)["web"]) >= {"host", "port", "enabled"}


def test_an_empty_environment_variable_counts_as_unset(tmp_path, monkeypatch):
    # docker compose passes `${MOLTBOT_CONFIG:-}` through as "" when the shell has none
    monkeypatch.chdir(tmp_path)
    settings = load_settings(env={"MOLTBOT_CONFIG": "", "MOLTBOT_LOG_LEVEL": "", "MOLTBOT_WEB_TOKEN": "",
                                  "OPENAI_API_KEY": "", "DATABASE_URL": ""})
    assert settings.config_path is None and settings.logging.level == "INFO"
    assert settings.web.token is None and settings.secrets.openai_api_key is None
    assert settings.database.url is None


def test_web_host_from_the_environment_for_containers(tmp_path):
    settings = load_settings(tmp_path / "none.yaml", env={"MOLTBOT_WEB_HOST": "0.0.0.0", "MOLTBOT_WEB_TOKEN": "t"})
    assert settings.web.host == "0.0.0.0" and settings.web.token.get_secret_value() == "t"
