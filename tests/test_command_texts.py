"""Issue 26's text bugs: what the prompt's and the CLIs' commands say, in plain sentences."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from src.consolidation.__main__ import main as consolidation_main
from src.memory.__main__ import build_parser
from src.memory.jsonl import LineError, parse_line
from src.skills.commands import SkillCommands
from src.skills.settings import SkillsSettings
from tests.fakes_llm import ScriptedLLM
from tests.proc import ROOT, agent_env
from tests.test_skills_cli import _run as skills_cli


def _commands(pool, configured: bool = True) -> SkillCommands:
    return SkillCommands(pool, ScriptedLLM(configured=configured), lambda: [], SkillsSettings(), session_id="s")


async def test_skill_history_without_a_label_says_how_to_ask(pool):
    assert await _commands(pool).skill("history") == "usage: /skill history <label>"   # was "no skill called ''"


async def test_removing_an_unknown_skill_is_one_sentence(pool):
    assert await _commands(pool).skill("remove beekeeping") == (
        "no skill called 'beekeeping', so nothing was removed")      # was "…'beekeeping' Nothing was removed."


async def test_an_empty_skill_list_suggests_what_works_where_it_is_read(pool, db_dsn, tmp_path):
    assert await _commands(pool, configured=True).skills("") == (
        "no skills yet; /skill save [hint] drafts one from this conversation")
    reflex = await _commands(pool, configured=False).skills("")
    assert reflex == ("no skills yet; /skill save needs a language model (none is configured); "
                      "python -m src.memory skills add writes one")
    code, out, _ = await skills_cli(db_dsn, tmp_path, "skills", "list")
    assert (code, out) == (0, "no skills yet; skills add writes one by hand; skills draft TRANSCRIPT drafts "
                              "one with a language model\n")


def test_memory_cli_help_names_every_skills_action():
    text = " ".join(build_parser().format_help().split())
    assert "the mind's skills (procedural memory): list, show, history, remove, add, edit, outcome, draft" in text


@pytest.mark.parametrize(("line", "message"), [
    ('{"content": 42}', "'content' must be text, got a number"),
    ('{"content": ["a"]}', "'content' must be text, got a list"),
    ('{"memory_type": "semantic"}', "'content' is missing"),
    ('{"content": ""}', "'content' is empty"),
    ('{"content": "tab\tinside"}', "not valid JSON (Invalid control character at column 17)"),
])
def test_import_names_what_is_wrong_with_a_line(line, message):
    with pytest.raises(LineError) as err:
        parse_line(line, 1)
    assert str(err.value) == message


@pytest.mark.parametrize(("command", "says"), [
    ("run", "One light tick (every operation, now), or with --deep one deep pass"),
    ("why", "Why do I believe memory ID: the memories it was consolidated from"),
    ("history", "The weight history of memory ID: every change, newest first"),
    ("pending", "The changes waiting for the operator's approval"),
    ("approve", "Apply the pending change ID"),
    ("reject", "Refuse the pending change ID"),
])
def test_each_consolidation_command_describes_itself(capsys, command, says):
    with pytest.raises(SystemExit):
        consolidation_main([command, "--help"])
    assert says in " ".join(capsys.readouterr().out.split())


async def test_export_into_a_closed_pipe_stops_quietly(pool, db_dsn):
    # ~1.5 MB of export: more than a pipe holds, so the writer meets the closed end
    await pool.execute("INSERT INTO memories (content) SELECT repeat('lemon tree ', 40) || g "
                       "FROM generate_series(1, 3000) g")
    result = await asyncio.to_thread(
        subprocess.run, ["bash", "-c", f"'{sys.executable}' -m src.memory export - | head -1"], cwd=ROOT,
        env=agent_env(DATABASE_URL=db_dsn), capture_output=True, timeout=120)
    err = result.stderr.decode()
    assert result.stdout.decode().count("\n") == 1 and '"content": "lemon tree' in result.stdout.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
