"""The configuration a guardian reads (issue 36 item 5): a short shipped runtime.yaml, a
reference generated from the settings models, a settings tree that follows the code tree,
and old files that still load."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from pydantic import BaseModel

from src.config import MOVED, NOT_IN_FILE, Settings, load_settings
from src.config_reference import keys, reference
from src.errors import ConfigError
from tests.proc import ROOT, agent_env

REFERENCE = ROOT / "docs" / "configuration.md"
#: Top-level sections owned by the process itself (src/config.py), not by a package.
PROCESS_SECTIONS = {"agent", "logging"}
#: A section named otherwise than its package.
PACKAGE_OF = {"database": "db"}
#: A subsection another package defines, because that package's code runs as part of this
#: section's work: the deep pass's skill-proposal phase lives in src/skills/consolidation.py.
BORROWED = {"SkillProposalSettings"}


def _paths(data: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict):
            out += _paths(value, f"{prefix}{key}.")
        out.append(f"{prefix}{key}")
    return out


def test_the_reference_is_what_the_models_say():
    assert REFERENCE.read_text(encoding="utf-8") == reference(Settings, NOT_IN_FILE), (
        "docs/configuration.md drifted: run `python -m src.config reference > docs/configuration.md`")


def test_the_reference_command_prints_it():
    out = subprocess.run([sys.executable, "-m", "src.config", "reference"], cwd=ROOT, capture_output=True,
                         timeout=60, check=True).stdout.decode()
    assert out == REFERENCE.read_text(encoding="utf-8")
    assert "`LoggingSettings` in src/config.py" in out      # the classes' own module, not __main__


def test_the_shipped_file_is_short_and_names_only_documented_keys():
    text = (ROOT / "runtime.yaml").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 60
    documented = {k.path for k in keys(Settings, skip=NOT_IN_FILE)}
    sections = {p.rsplit(".", 1)[0] for p in documented}
    shipped = _paths(yaml.safe_load(text))
    unknown = [p for p in shipped if p not in documented and p not in sections]
    assert unknown == []
    # and it changes no default: every value it shows is the built-in one
    assert load_settings(ROOT / "runtime.yaml", env={}).model_dump(exclude={"config_path"}) == \
        Settings().model_dump(exclude={"config_path"})


def test_every_key_is_explained_by_its_model_where_the_shipped_file_names_it():
    text = {k.path: k.text for k in keys(Settings, skip=NOT_IN_FILE)}
    shipped = [p for p in _paths(yaml.safe_load((ROOT / "runtime.yaml").read_text(encoding="utf-8")))
               if p in text and p not in ("agent.name", "web.enabled")]
    assert [p for p in shipped if not text[p]] == []


def _section_models(model: type[BaseModel]) -> list[type[BaseModel]]:
    out = []
    for info in model.model_fields.values():
        inner = info.annotation
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            out += [inner, *_section_models(inner)]
    return out


def test_the_settings_tree_follows_the_code_tree():
    """Each top-level section, and every section inside it, is defined by the package it names."""
    wrong = []
    for name, info in Settings.model_fields.items():
        model = info.annotation
        if name in NOT_IN_FILE or not (isinstance(model, type) and issubclass(model, BaseModel)):
            continue
        expected = "src.config" if name in PROCESS_SECTIONS else f"src.{PACKAGE_OF.get(name, name)}.settings"
        wrong += [f"{name}: {m.__name__} in {m.__module__}" for m in (model, *_section_models(model))
                  if m.__module__ != expected and m.__name__ not in BORROWED
                  and not m.__module__.startswith(expected.rsplit(".", 1)[0] + ".")]
    assert wrong == []


@pytest.mark.parametrize(("old", "new", "value"), [
    ("retrieval.keep", "recall.retrieval.keep", 7),
    ("memory.mode", "gates.memory.mode", "copilot"),
    ("fifo.min_keep", "context.fifo.min_keep", 3),
    ("bootstrap.outcome_lookback_s", "outcomes.lookback_s", 60.0),
    ("docs_tool.enabled", "tools.docs.enabled", False),
])
def test_a_key_under_its_old_name_still_loads_and_says_the_new_one(tmp_path, old, new, value):
    parts = old.split(".")
    data: dict = {}
    holder = data
    for part in parts[:-1]:
        holder = holder.setdefault(part, {})
    holder[parts[-1]] = value
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    settings = load_settings(path, env={})
    got = settings
    for part in new.split("."):
        got = getattr(got, part)
    assert got == value
    moved_key = next(k for k in MOVED if old == k or old.startswith(k + "."))
    assert settings.notices == (f"{path}: '{moved_key}' is now '{MOVED[moved_key]}' (read as such; "
                                "rename it in the file)",)


def test_a_key_under_both_names_is_refused(tmp_path):
    path = tmp_path / "both.yaml"
    path.write_text("retrieval: {keep: 7}\nrecall: {retrieval: {keep: 8}}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="'retrieval' and 'recall.retrieval' are the same setting"):
        load_settings(path, env={})


def test_a_current_file_gives_no_notice_and_cannot_write_one(tmp_path):
    assert load_settings(ROOT / "runtime.yaml", env={}).notices == ()
    path = tmp_path / "r.yaml"
    path.write_text("notices: [hello]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="'notices' cannot be set in the file"):
        load_settings(path, env={})


def test_the_memory_cli_says_when_a_key_has_moved(tmp_path):
    """The operator's CLI prints the notice where the command was typed (it keeps no log file);
    an unreachable database then ends the command, after the notice."""
    path = tmp_path / "old.yaml"
    path.write_text("retrieval: {keep: 7}\n", encoding="utf-8")
    env = agent_env(DATABASE_URL="postgresql://nobody@127.0.0.1:1/none")
    result = subprocess.run([sys.executable, "-m", "src.memory", "--config", str(path), "search", "x"], cwd=ROOT,
                            capture_output=True, timeout=120, env=env)
    err = result.stderr.decode()
    assert "configuration: " in err and "'retrieval' is now 'recall.retrieval'" in err
