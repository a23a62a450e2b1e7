"""runtime.yaml, validated; the only module that reads the environment.

Precedence: explicit overrides (tests) > environment > runtime.yaml > defaults.
Environment: DATABASE_URL, GEMINI_API_KEY (or GOOGLE_API_KEY), ANTHROPIC_API_KEY,
OPENAI_API_KEY, MOLTBOT_CONFIG (path of the YAML file), MOLTBOT_LOG_LEVEL, MOLTBOT_LOG_FILE
("-": no log file), MOLTBOT_WEB_TOKEN,
MOLTBOT_WEB_HOST (web.host: a container binds 0.0.0.0 without editing the file), MOLTBOT_STDIN
(agent.stdin: src/detached.py). An empty
variable counts as unset: docker compose passes `${VAR:-}` through as "".
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
from src.context.settings import ContextSettings
from src.db.settings import DatabaseSettings
from src.dmn.settings import DmnSettings
from src.errors import ConfigError
from src.gates.settings import GateSettings
from src.gut.settings import GutSettings
from src.loop.settings import LoopSettings
from src.metacognition.settings import MetacognitionSettings
from src.outcomes.settings import OutcomeSettings
from src.providers.settings import ProvidersSettings, Secrets
from src.recall.settings import MATURITY_MEMORIES, RecallSettings
from src.skills.settings import SkillsSettings
from src.tools.settings import ToolsSettings
from src.web.settings import WebSettings
from src.weights.settings import WeightsSettings

DEFAULT_CONFIG_PATH = Path("runtime.yaml")
#: Settings fields that are not keys of the file (the environment's and the loader's).
NOT_IN_FILE = frozenset({"secrets", "config_path", "notices"})

#: Keys that moved when the settings tree came to follow the code tree (issue 36): the old
#: dotted path → the new one. A file with an old key still loads (one notice at start says
#: the new name); a file with both is refused.
MOVED = {
    "retrieval": "recall.retrieval",
    "layers": "recall.layers",
    "safety": "weights.safety",
    "budget": "providers.budget",
    "memory": "gates.memory",
    "fifo": "context.fifo",
    "escalation": "metacognition.escalation",
    "attention": "loop.attention",
    "docs_tool": "tools.docs",
    "bootstrap.outcome_lookback_s": "outcomes.lookback_s",
    "bootstrap.outcome_max_links": "outcomes.max_links",
    "bootstrap.use": "outcomes.use",
}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


class LoggingSettings(_Section):
    """Where the log goes (issue 26): the terminal is the conversation, so the log is a file
    and the terminal (stderr) shows only what needs the operator now."""

    level: LogLevel = "INFO"               # what the log records (env MOLTBOT_LOG_LEVEL)
    json_format: bool = False
    # the log file (rotated at 5 MB, 3 old files kept); None: no file, every line at `level`
    # on stderr (env MOLTBOT_LOG_FILE, "-" for none)
    file: Path | None = Path("./data/moltbot.log")
    terminal_level: LogLevel = "WARNING"   # with a file, stderr shows this and above
    # with a file, the conversation screen (a person typing at a terminal) shows this and above:
    # a warning is the log's, not the conversation's (issue 38 item 6)
    screen_level: LogLevel = "ERROR"


class AgentSettings(_Section):
    name: str = "MoltBot"
    # Longest accepted input line, in characters; longer lines are refused with a message.
    max_input_chars: int = Field(1_000_000, ge=1)
    shutdown_timeout_s: float = Field(10.0, gt=0)
    # stdin as the conversation (src/detached.py): auto (not when it is /dev/null: `docker compose
    # up -d`), read, or ignore (detached: runs until SIGTERM); env MOLTBOT_STDIN
    stdin: Literal["auto", "read", "ignore"] = "auto"
    # input held while the database is away (one file per database; see input_journal)
    spill_dir: Path = Path("./data/input-spill")
    # the prompt's history at a terminal: slash commands without arguments (src/line_editor.py); null: none
    history_file: Path | None = Path("./data/history")
    # The mind's one notion of age (plan §3.5): maturity = min(1, memories / this). Recall's
    # Dirichlet blend, the exit gate's bootstrap floor and the escalation threshold use it.
    maturity_memories: int = Field(MATURITY_MEMORIES, ge=1)



class Settings(_Section):
    """The whole runtime.yaml. Each section is the settings of the package of src/ it names
    (`recall:` is src/recall/settings.py), in the order of the layers (docs/architecture.md);
    `agent:` and `logging:` belong to the process itself (this module)."""

    database: DatabaseSettings = DatabaseSettings()
    logging: LoggingSettings = LoggingSettings()
    agent: AgentSettings = AgentSettings()
    providers: ProvidersSettings = ProvidersSettings()
    weights: WeightsSettings = WeightsSettings()
    recall: RecallSettings = RecallSettings()
    gates: GateSettings = GateSettings()
    context: ContextSettings = ContextSettings()
    bootstrap: BootstrapSettings = BootstrapSettings()
    outcomes: OutcomeSettings = OutcomeSettings()
    metacognition: MetacognitionSettings = MetacognitionSettings()
    skills: SkillsSettings = SkillsSettings()
    tools: ToolsSettings = ToolsSettings()
    gut: GutSettings = GutSettings()
    dmn: DmnSettings = DmnSettings()
    consolidation: ConsolidationSettings = ConsolidationSettings()
    loop: LoopSettings = LoopSettings()
    web: WebSettings = WebSettings()
    secrets: Secrets = Secrets()
    config_path: Path | None = None
    # what loading said about the file (a key under its old name): logged at start
    notices: tuple[str, ...] = ()


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


class _DuplicateKey(yaml.YAMLError):
    """A key given twice in one mapping (lines are 1-based)."""

    def __init__(self, key: str, line: int, first_line: int) -> None:
        super().__init__(f"duplicate key {key!r} at line {line} (first at line {first_line})")
        self.key, self.line, self.first_line = key, line, first_line


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping.

    PyYAML keeps the last value silently: a second `web:` once replaced the first, and the
    service bound port 1. Merge keys (`<<`) are exempt: overriding them is their purpose.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _DuplicateKey(str(key), line, seen[key])
                seen[key] = line
            except TypeError:   # an unhashable key: SafeConstructor names it below
                continue
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration file: {exc}") from exc
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as exc:
        raise ConfigError(f"{path}: line {exc.line}: duplicate key {exc.key!r} (first at line "
                          f"{exc.first_line}); keep one of them") from None
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
    web = {key: env[var] for var, key in (("MOLTBOT_WEB_TOKEN", "token"), ("MOLTBOT_WEB_HOST", "host"))
           if env.get(var)}
    if web:
        out["web"] = web
    if env.get("MOLTBOT_STDIN"):
        out["agent"] = {"stdin": env["MOLTBOT_STDIN"].strip().lower()}
    log_cfg: dict[str, Any] = {}
    if env.get("MOLTBOT_LOG_LEVEL"):
        log_cfg["level"] = env["MOLTBOT_LOG_LEVEL"].upper()
    if env.get("MOLTBOT_LOG_FILE"):
        log_cfg["file"] = None if env["MOLTBOT_LOG_FILE"] == "-" else env["MOLTBOT_LOG_FILE"]
    if log_cfg:
        out["logging"] = log_cfg
    return out


def _moved(path: Path, data: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`data` with every key of MOVED at its new path, and a notice for each."""
    notices = []
    for old, new in MOVED.items():
        *old_parents, old_key = old.split(".")
        holder = data
        for part in old_parents:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if not isinstance(holder, dict) or old_key not in holder:
            continue
        *new_parents, new_key = new.split(".")
        target = data
        for part in new_parents:
            if not isinstance(target.get(part, {}), dict):
                raise ConfigError(f"{path}: '{part}' must be a mapping (it holds '{new}')")
            target = target.setdefault(part, {})
        if new_key in target:
            raise ConfigError(f"{path}: '{old}' and '{new}' are the same setting; keep only '{new}'")
        target[new_key] = holder.pop(old_key)
        notices.append(f"{path}: '{old}' is now '{new}' (read as such; rename it in the file)")
    return data, tuple(notices)


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
    named = env.get("MOLTBOT_CONFIG") or None   # "" (compose's `${MOLTBOT_CONFIG:-}`) means unset
    if path is None:
        path = Path(named or DEFAULT_CONFIG_PATH)
    path = Path(path)
    data = _read_yaml(path) if path.exists() or named else {}
    for forbidden in sorted(NOT_IN_FILE):
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
    data, notices = _moved(path, data)
    data["config_path"] = str(path) if path.exists() else None
    data["notices"] = notices
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(path, exc)) from None


def api_url(settings: Settings, env: Mapping[str, str] | None = None) -> str:
    """Where a client of the running mind (`python -m src.mcp`) finds its web server:
    MOLTBOT_API_URL, or the loopback address of `web.port`."""
    env = os.environ if env is None else env
    return env.get("MOLTBOT_API_URL") or f"http://127.0.0.1:{settings.web.port}/"


def main(argv: list[str] | None = None) -> int:
    """`python -m src.config reference`: print the configuration reference (docs/configuration.md)."""
    import sys

    import src.config as named  # run as __main__, this module's classes would say "__main__"
    from src.config_reference import reference

    args = sys.argv[1:] if argv is None else argv
    if args != ["reference"]:
        print("usage: python -m src.config reference   (prints docs/configuration.md)", file=sys.stderr)
        return 2
    sys.stdout.write(reference(named.Settings, named.NOT_IN_FILE))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
