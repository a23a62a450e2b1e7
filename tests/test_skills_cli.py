"""`python -m src.memory skills …` against the real database; System 1 is a scripted fake."""

from __future__ import annotations

import io
from types import SimpleNamespace

from src.memory.__main__ import run_cli
from src.skills import repository as repo
from src.skills.drafting import OFFLINE_REFUSAL
from tests.fakes_llm import ScriptedLLM


async def _run(dsn, tmp_path, *argv, llm=None):
    """`python -m src.memory skills …` in-process on database `dsn`; System 1 scripted."""
    out, err = io.StringIO(), io.StringIO()
    providers = SimpleNamespace(system1=llm or ScriptedLLM(configured=False))
    code = await run_cli(["--config", str(tmp_path / "none.yaml"), *argv], out=out, err=err,
                         providers=providers, env={"DATABASE_URL": dsn})
    return code, out.getvalue(), err.getvalue()


async def test_add_edit_history_show_outcome_remove(pool, db_dsn, tmp_path):
    steps = tmp_path / "steps.txt"
    steps.write_text("1. Read the header.\n2. Count rows.\n", encoding="utf-8")
    code, out, _ = await _run(db_dsn, tmp_path, "skills", "add", "--name", "CSV Summary", "--when",
                              "When a CSV needs an overview.", "--procedure-file", str(steps))
    assert code == 0 and out.splitlines()[:2] == ["saved skill 'csv_summary':", "csv_summary — CSV Summary (version 1)"]
    steps.write_text("1. Read the header.\n2. Sample 100 rows.\n", encoding="utf-8")
    assert await _run(db_dsn, tmp_path, "skills", "edit", "csv_summary", "--procedure-file", str(steps)) == (
        0, "csv_summary is now version 2 (version 1 kept)\n", "")
    code, out, _ = await _run(db_dsn, tmp_path, "skills", "history", "csv_sumary")
    assert out.splitlines()[0] == "csv_summary: version 2 (current)"
    assert out.splitlines()[3:5] == ["1. Read the header.", "2. Count rows."]
    assert (await repo.get(pool, "csv_summary")).procedure == "1. Read the header.\n2. Sample 100 rows."
    assert await _run(db_dsn, tmp_path, "skills", "outcome", "csv_summary", "success") == (
        0, "csv_summary: succeeded is now 1\n", "")
    code, out, _ = await _run(db_dsn, tmp_path, "skills", "list")
    assert out == "1 skill (recalled/used/succeeded/failed):\n  csv_summary  v2  0/0/1/0  — When a CSV needs an overview.\n"
    assert await _run(db_dsn, tmp_path, "skills", "remove", "csv_summry") == (
        1, "", "skills remove: no skill called 'csv_summry', so nothing was removed\n")
    assert await _run(db_dsn, tmp_path, "skills", "remove", "csv_summary") == (
        0, "removed skill 'csv_summary' (its versions stay in skill_versions)\n", "")
    assert await _run(db_dsn, tmp_path, "skills", "show", "csv_summary") == (
        1, "", "skills show: no skill called 'csv_summary'; known skills: none yet\n")


async def test_draft_from_a_transcript_and_offline_refusal(pool, db_dsn, tmp_path):
    transcript = tmp_path / "talk.txt"
    transcript.write_text("user: how do I back up the photos?\nassistant: copy to the NAS, then verify.\n",
                          encoding="utf-8")
    assert await _run(db_dsn, tmp_path, "skills", "draft", str(transcript)) == (
        1, "", f"skills draft: {OFFLINE_REFUSAL}\n")
    llm = ScriptedLLM().answer_structured({"label": "photo_backup", "name": "Photo backup",
                                           "when_to_use": "When photos need backing up.",
                                           "procedure": "1. Copy to the NAS.\n2. Verify checksums."})
    code, out, _ = await _run(db_dsn, tmp_path, "skills", "draft", str(transcript), "--hint", "photos", llm=llm)
    assert code == 0 and out.startswith("saved skill 'photo_backup':\n")
    (call,) = llm.of("generate_structured")
    assert "user: how do I back up the photos?" in call.messages[0].content
    assert (await repo.get(pool, "photo_backup")).provenance == {
        "origin": "transcript", "file": str(transcript), "hint": "photos"}
    assert await _run(db_dsn, tmp_path, "skills", "draft", str(tmp_path / "missing.txt")) == (
        1, "", f"skills draft: {tmp_path / 'missing.txt'}: no such file\n")
