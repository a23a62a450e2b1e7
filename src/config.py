"""runtime.yaml, validated; the only module that reads the environment.

Precedence: explicit overrides (tests) > environment > runtime.yaml > defaults.
Environment: DATABASE_URL, GEMINI_API_KEY (or GOOGLE_API_KEY), ANTHROPIC_API_KEY,
OPENAI_API_KEY, MOLTBOT_CONFIG (path of the YAML file), MOLTBOT_LOG_LEVEL, MOLTBOT_WEB_TOKEN.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from src.bootstrap.settings import BootstrapSettings
from src.consolidation.settings import ConsolidationSettings
from src.context.settings import ContextSettings, FifoSettings
from src.db.settings import DatabaseSettings
from src.dmn.settings import DmnSettings
from src.errors import ConfigError
from src.gates.settings import GateSettings, MemorySettings
from src.gut.settings import GutSettings
from src.loop.settings import AttentionSettings, LoopSettings
from src.metacognition.settings import EscalationSettings, MetacognitionSettings
from src.providers.settings import ProvidersSettings, Secrets
from src.recall.settings import MATURITY_MEMORIES, LayerSettings, RetrievalSettings
from src.skills.settings import SkillsSettings
from src.tools.settings import DocsToolSettings
from src.web.settings import WebSettings
from src.weights.settings import SafetySettings

DEFAULT_CONFIG_PATH = Path("runtime.yaml")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoggingSettings(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    json_format: bool = False


class AgentSettings(_Section):
    name: str = "MoltBot"
    # Longest accepted input line, in characters; longer lines are refused with a message.
    max_input_chars: int = Field(1_000_000, ge=1)
    shutdown_timeout_s: float = Field(10.0, gt=0)
    # input held while the database is away (one file per database; see input_journal)
    spill_dir: Path = Path("./data/input-spill")
    # The mind's one notion of age (plan §3.5): maturity = min(1, memories / this). Recall's
    # Dirichlet blend, the exit gate's bootstrap floor and the escalation threshold use it.
    maturity_memories: int = Field(MATURITY_MEMORIES, ge=1)



class Settings(_Section):
    database: DatabaseSettings = DatabaseSettings()
    logging: LoggingSettings = LoggingSettings()
    agent: AgentSettings = AgentSettings()
    providers: ProvidersSettings = ProvidersSettings()
    safety: SafetySettings = SafetySettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    gates: GateSettings = GateSettings()
    memory: MemorySettings = MemorySettings()
    skills: SkillsSettings = SkillsSettings()
    attention: AttentionSettings = AttentionSettings()
    metacognition: MetacognitionSettings = MetacognitionSettings()
    escalation: EscalationSettings = EscalationSettings()
    context: ContextSettings = ContextSettings()
    fifo: FifoSettings = FifoSettings()
    loop: LoopSettings = LoopSettings()
    docs_tool: DocsToolSettings = DocsToolSettings()
    layers: LayerSettings = LayerSettings()
    gut: GutSettings = GutSettings()
    dmn: DmnSettings = DmnSettings()
    bootstrap: BootstrapSettings = BootstrapSettings()
    consolidation: ConsolidationSettings = ConsolidationSettings()
    web: WebSettings = WebSettings()
    secrets: Secrets = Secrets()
    config_path: Path | None = None


def _format_validation_error(path: Path | None, err: ValidationError) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "(top level)"
    where = f"{path}: " if path else ""
    got = first.get("input")
    got_text = "" if isinstance(got, dict) else f" (got {got!r})"
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key; remove it or check its spelling"
    more = f" [+{len(err.errors()) - 1} more]" if len(err.errors()) > 1 else ""
    return f"{where}invalid value for '{key}': {msg}{got_text}{more}"


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration file: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{line}: {getattr(exc, 'problem', exc)}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level")
    return data


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    if env.get("DATABASE_URL"):
        out["database"] = {"url": env["DATABASE_URL"]}
    gemini = env.get("GEMINI_API_KEY") or env.get("GOOGLE_API_KEY")
    if gemini:
        secrets["gemini_api_key"] = gemini
    for var, key in (("ANTHROPIC_API_KEY", "anthropic_api_key"), ("OPENAI_API_KEY", "openai_api_key")):
        if env.get(var):
            secrets[key] = env[var]
    if secrets:
        out["secrets"] = secrets
    if env.get("MOLTBOT_WEB_TOKEN"):
        out["web"] = {"token": env["MOLTBOT_WEB_TOKEN"]}
    if env.get("MOLTBOT_LOG_LEVEL"):
        out["logging"] = {"level": env["MOLTBOT_LOG_LEVEL"].upper()}
    return out


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_settings(
    path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Load and validate settings; raise ConfigError with one line naming the bad key."""
    env = os.environ if env is None else env
    if path is None:
        path = Path(env.get("MOLTBOT_CONFIG", DEFAULT_CONFIG_PATH))
    path = Path(path)
    data = _read_yaml(path) if path.exists() or "MOLTBOT_CONFIG" in env else {}
    for forbidden in ("secrets", "config_path"):
        if forbidden in data:
            raise ConfigError(f"{path}: '{forbidden}' cannot be set in the file; "
                              "put API keys in the environment (GEMINI_API_KEY, ANTHROPIC_API_KEY)")
    if isinstance(data.get("database"), dict) and "url" in data["database"]:
        raise ConfigError(f"{path}: 'database.url' cannot be set in the file; "
                          "set the DATABASE_URL environment variable instead")
    if isinstance(data.get("web"), dict) and "token" in data["web"]:
        raise ConfigError(f"{path}: 'web.token' cannot be set in the file; "
                          "set the MOLTBOT_WEB_TOKEN environment variable instead")
    data = _deep_merge(data, _env_overrides(env))
    if overrides:
        data = _deep_merge(data, overrides)
    data["config_path"] = str(path) if path.exists() else None
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(path, exc)) from None
