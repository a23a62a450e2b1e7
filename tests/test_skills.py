"""Skills (issue 17): the versioned table, the prompt section, RECALL_SKILL resolution,
drafting from a scripted conversation, the guardian's commands — on real PostgreSQL,
with a scripted model at the provider seam that records what it is sent."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
import numpy as np
import pytest

from src.errors import ProviderUnavailable
from src.skills import repository as repo
from src.skills.commands import SkillCommands, escape_controls
from src.skills.drafting import NO_STEPS, OFFLINE_REFUSAL
from src.skills.labels import closest_label, make_unique_label, slugify
from src.skills.prompt import HEADER, INSTRUCTION, skills_section
from src.skills.prompts import SAVE_SYSTEM, SavedSkillDraft
from src.skills.recall_skill import SkillRecall, recall_skill
from src.skills.repository import SkillError, SkillSummary
from src.skills.settings import SkillsSettings
from src.tokens import count_tokens
from tests.fakes_llm import ScriptedLLM

CSV = dict(label="csv_summary", name="CSV summary", when_to_use="When the user asks to summarise a CSV file.",
           procedure="1. Read the header.\n2. Count rows.\n3. Report per-column types and nulls.")
TRIP = dict(label="trip_planning", name="Trip planning", when_to_use="When the guardian plans a journey.",
            procedure="1. Ask dates.\n2. List transport.\n3. Book.")


@dataclass
class Msg:
    role: str
    content: str


# -- pure parts -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "slug"), [
    ("CSV Summary", "csv_summary"), ("  trip-planning!! ", "trip_planning"), ("Café au lait", "cafe_au_lait"),
    ("42 answers", "skill_42_answers"), ("", "skill"), ("x" * 80, "x" * 64)])
def test_slugify(text, slug):
    assert slugify(text) == slug


def test_unique_label_and_closest_match():
    assert make_unique_label("csv_summary", []) == "csv_summary"
    assert make_unique_label("csv_summary", ["csv_summary", "csv_summary_2"]) == "csv_summary_3"
    labels = ["csv_summary", "trip_planning"]
    assert closest_label("csv_sumary", labels, cutoff=0.6) == "csv_summary"
    assert closest_label("CSV summary", labels, cutoff=0.6) == "csv_summary"
    assert closest_label("quantum_gravity", labels, cutoff=0.6) is None


def test_section_format_and_budget_cap():
    skills = [SkillSummary(f"skill_{i:02d}", f"Skill {i}", f"When case number {i} comes up in talk.", 50 - i, 40)
              for i in range(40)]
    assert skills_section([], 300) == ""
    full = skills_section([SkillSummary(s.label, s.name, s.when_to_use, s.uses, 2) for s in skills[:2]], 300)
    assert full == "\n".join([HEADER, INSTRUCTION, "- skill_00 — When case number 0 comes up in talk.",
                              "- skill_01 — When case number 1 comes up in talk."])
    capped = skills_section(skills, 200)
    assert count_tokens(capped) <= 200
    lines = capped.splitlines()
    shown = [ln for ln in lines if ln.startswith("- skill_")]
    assert shown == [f"- skill_{i:02d} — When case number {i} comes up in talk." for i in range(len(shown))]
    assert 1 <= len(shown) < 40
    assert lines[-1] == f"- … {40 - len(shown)} more skills not listed"
    assert skills_section(skills, 10) == ""      # not even one line fits: no section at all


def test_cue_is_one_line_without_control_characters():
    s = SkillSummary("odd", "Odd", "When\nthe \x1b[31mterminal\x07 is red.", 0, 1)
    assert skills_section([s], 300).splitlines()[-1] == "- odd — When the [31mterminal is red."


def test_escape_controls():
    assert escape_controls("a\x1b[2Jb\nc\td\x07") == "a\\x1b[2Jb\nc\td\\x07"


# -- the table ------------------------------------------------------------------------------

async def test_create_get_and_unique_labels(pool):
    first = await repo.create(pool, **CSV, provenance={"origin": "operator"})
    second = await repo.create(pool, **CSV)
    assert (first.label, second.label) == ("csv_summary", "csv_summary_2")
    got = await repo.get(pool, "csv_summary")
    assert (got.name, got.when_to_use, got.version, got.provenance) == (
        "CSV summary", CSV["when_to_use"], 1, {"origin": "operator"})
    assert (got.recommended, got.used, got.succeeded, got.failed) == (0, 0, 0, 0)
    with pytest.raises(SkillError, match="is not snake_case"):
        await repo.create(pool, **(CSV | {"label": "CSV Summary"}))
    with pytest.raises(SkillError, match="non-empty procedure"):
        await repo.create(pool, **(CSV | {"label": "x", "procedure": "  "}))
    with pytest.raises(asyncpg.CheckViolationError):   # the schema guards it too
        await pool.execute("INSERT INTO skills (label, name, when_to_use, procedure) VALUES ('Bad', 'n', 'w', 'p')")


async def test_edit_keeps_the_previous_version(pool):
    await repo.create(pool, **CSV, provenance={"origin": "conversation"})
    edited = await repo.edit(pool, "csv_summary", procedure="1. Read the header.\n2. Sample 100 rows.",
                             provenance={"edited_by": "operator"})
    assert edited.version == 2
    assert edited.procedure == "1. Read the header.\n2. Sample 100 rows."
    assert edited.when_to_use == CSV["when_to_use"]                      # untouched fields kept
    assert edited.provenance == {"origin": "conversation", "edited_by": "operator"}
    again = await repo.edit(pool, "csv_summary", when_to_use="When a CSV needs a quick overview.")
    assert again.version == 3
    history = await repo.versions(pool, "csv_summary")
    assert [(v.version, v.procedure, v.when_to_use) for v in history] == [
        (1, CSV["procedure"], CSV["when_to_use"]),
        (2, "1. Read the header.\n2. Sample 100 rows.", CSV["when_to_use"])]
    with pytest.raises(SkillError, match="no skill called 'nope'"):
        await repo.edit(pool, "nope", name="x")
    with pytest.raises(SkillError, match="nothing to change"):
        await repo.edit(pool, "csv_summary")


async def test_remove_is_soft_and_frees_the_label(pool):
    old = await repo.create(pool, **CSV)
    await repo.edit(pool, "csv_summary", name="CSV overview")
    assert await repo.remove(pool, "csv_summary") is True
    assert await repo.remove(pool, "csv_summary") is False
    assert await repo.get(pool, "csv_summary") is None
    assert await repo.labels(pool) == []
    assert await pool.fetchval("SELECT count(*) FROM skill_versions WHERE skill_id = $1", old.id) == 1
    again = await repo.create(pool, **CSV)
    assert again.label == "csv_summary" and again.id != old.id


async def test_near_skills_order_by_similarity_then_use_then_cap(pool):
    await repo.create(pool, **CSV)
    await repo.create(pool, **TRIP)
    for _ in range(3):
        await repo.bump(pool, "trip_planning", "recommended")
    # no vectors: both near by a word of their names, the more used first
    rows, stale = await repo.near(pool, "a csv for the trip", None, "m", 0.3, 10)
    assert [(r.label, r.uses, r.total, r.similarity) for r in rows] == [
        ("trip_planning", 3, 2, None), ("csv_summary", 0, 2, None)]
    assert [s.cue for s in stale] == [f"trip planning. Trip planning. {TRIP['when_to_use']}\n{TRIP['procedure']}",
                                      f"csv summary. CSV summary. {CSV['when_to_use']}\n{CSV['procedure']}"]
    rows, _ = await repo.near(pool, "a csv for the trip", None, "m", 0.3, 1)
    assert [(r.label, r.total) for r in rows] == [("trip_planning", 2)]
    # with vectors the nearer comes first, however used; one below the floor is not near
    vec = np.zeros(768, dtype=np.float32)
    vec[0] = 1.0
    assert await repo.store_cues(pool, "m", stale, np.vstack([np.roll(vec, 1), vec + np.roll(vec, 1)])) == 2
    rows, stale = await repo.near(pool, "anything", vec, "m", 0.3, 10)
    assert [(r.label, round(r.similarity, 3)) for r in rows] == [("csv_summary", 0.707)]
    assert stale == []


# -- RECALL_SKILL -------------------------------------------------------------------------------

async def test_recall_exact_misspelt_and_unknown(pool):
    await repo.create(pool, **CSV)
    await repo.create(pool, **TRIP)
    at = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)
    settings = SkillsSettings()

    text, label = await recall_skill(pool, "csv_summary", settings, now=at)
    assert label == "csv_summary"
    assert text == ("Skill `csv_summary` — CSV summary (version 1)\nWhen to use: " + CSV["when_to_use"]
                    + "\nProcedure (follow it as guidance for this answer):\n" + CSV["procedure"])

    text, label = await recall_skill(pool, "csv_sumary", settings, now=at)
    assert label == "csv_summary"
    assert text.startswith("warning: no skill is called 'csv_sumary'; using the closest, 'csv_summary'.\n"
                           "Skill `csv_summary`")

    text, label = await recall_skill(pool, "quantum_gravity", settings, now=at)
    assert label is None
    assert text == ("No skill is called 'quantum_gravity'. Known skills: csv_summary, trip_planning. "
                    "Reply `RECALL_SKILL: <label>` with one of them, or answer without a skill.")

    rows = {r["label"]: (r["recommended"], r["last_recalled_at"]) for r in
            await pool.fetch("SELECT label, recommended, last_recalled_at FROM skills")}
    assert rows == {"csv_summary": (2, at), "trip_planning": (0, None)}   # credited to the resolved one


async def test_recall_with_no_skills_is_an_error_result(pool):
    text, label = await recall_skill(pool, "anything", SkillsSettings())
    assert (text, label) == ("error: no skills are saved yet; answer without one", None)


async def test_skill_recall_offers_only_with_skills_and_credits_use(pool):
    recall = SkillRecall(pool, SkillsSettings(prompt_max_tokens=300))     # no embedder: full text only
    focus = "summarise this csv file"
    assert await recall.section(focus) == "" and recall.offered(focus) is False
    await repo.create(pool, **CSV)
    section = await recall.section(focus)
    assert section.splitlines()[-1] == f"- csv_summary — {CSV['when_to_use']}"
    assert recall.offered(focus) is True
    assert recall.offered("hi") is False                                 # offered for this focus only
    assert (await recall.handle("csv_summry")).startswith("warning: ")
    assert await recall.credit_use(delivered=True) == ["csv_summary"]
    assert await recall.credit_use(delivered=True) == []                 # cleared
    await recall.handle("csv_summary")
    assert await recall.credit_use(delivered=False) == []                # undelivered: not used
    row = await pool.fetchrow("SELECT recommended, used FROM skills WHERE label = 'csv_summary'")
    assert (row["recommended"], row["used"]) == (2, 1)


# -- drafting and the guardian's commands ------------------------------------------------------------

CONVERSATION = [Msg("user", "How do I get a quick overview of sales.csv?"),
                Msg("assistant", "First read the header, then count the rows, then list the types."),
                Msg("user", "Great, that worked. Save that as a habit.")]


def _commands(pool, llm, window=CONVERSATION):
    return SkillCommands(pool, llm, lambda: window, SkillsSettings(), session_id="s-1")


async def test_skill_save_drafts_from_the_conversation_with_structured_output(pool):
    """The steps here are the mind's (the guardian only asked and said it worked): saved, but
    each marked as not the guardian's, and the reply says so."""
    llm = ScriptedLLM().answer_structured({
        "label": "CSV Summary", "name": "CSV summary", "when_to_use": "When a CSV file needs an overview.",
        "procedure": "1. Read the header.\n2. Count rows.\n3. List column types."})
    reply = await _commands(pool, llm).skill("save overview of csv files")
    assert reply.splitlines()[:3] == ["saved skill 'csv_summary':", "csv_summary — CSV summary (version 1)",
                                      "when to use: When a CSV file needs an overview."]
    assert reply.splitlines()[-1] == (
        "Your lines in this conversation give no steps, so all 3 are the model's, marked [not from the "
        "guardian]: check them, or say the steps in your own words and /skill save again.")
    (call,) = llm.of("generate_structured")
    assert call.purpose == "skill_draft" and call.schema is SavedSkillDraft
    sent = call.messages[0].content
    assert "user: How do I get a quick overview of sales.csv?" in sent
    assert "assistant: First read the header, then count the rows, then list the types." in sent
    assert sent.endswith("The guardian's hint for this skill: overview of csv files")
    assert call.system == SAVE_SYSTEM
    skill = await repo.get(pool, "csv_summary")
    assert skill.procedure == ("1. Read the header. [not from the guardian]\n2. Count rows. [not from the guardian]\n"
                               "3. List column types. [not from the guardian]")
    assert skill.provenance == {"origin": "conversation", "session_id": "s-1", "messages": 3,
                                "hint": "overview of csv files",
                                "fidelity": {"user_steps": 0, "user_numbers": 0, "rebuilt": False,
                                             "dropped_steps": 0, "marked_steps": 3}}


TEA_TALK = [Msg("user", "What's my job again?"),
            Msg("assistant", "You told me you work as a paramedic."),
            Msg("user", "Here's how I brew tea:\n1. Boil the water to 90 °C.\n2. Warm the pot.\n"
                        "3. Add one teaspoon of leaves per cup.\n4. Steep exactly 3 minutes.\n5. Take the leaves out."),
            Msg("assistant", "Lovely. Stir occasionally and add milk or sugar if you like."),
            Msg("user", "Great, save that as a skill.")]
#: What the 1.5B model drafted: the guardian's number changed, the mind's advice and its own added.
INVENTED = {"label": "tea_brewing_procedure", "name": "Tea brewing", "when_to_use": "When brewing tea.",
            "procedure": "1. Boil the water.\n2. Add the tea leaves.\n3. Steep for a few minutes.\n"
                         "4. Stir occasionally.\n5. Add milk or sugar to taste."}


async def test_skill_save_keeps_the_guardians_steps_and_numbers_when_the_model_invents(pool):
    llm = ScriptedLLM().answer_structured(INVENTED)
    reply = await _commands(pool, llm, window=TEA_TALK).skill("save")
    (call,) = llm.of("generate_structured")
    assert (call.system, call.schema) == (SAVE_SYSTEM, SavedSkillDraft)
    assert "user: Here's how I brew tea:\n1. Boil the water to 90 °C." in call.messages[0].content
    skill = await repo.get(pool, "tea_brewing_procedure")
    assert skill.procedure == ("1. Boil the water to 90 °C.\n2. Warm the pot.\n3. Add one teaspoon of leaves per cup."
                               "\n4. Steep exactly 3 minutes.\n5. Take the leaves out.")
    assert "a few minutes" not in skill.procedure and "Stir" not in skill.procedure
    assert (skill.name, skill.when_to_use) == ("Tea brewing", "When brewing tea.")       # the model named it
    assert skill.provenance["fidelity"] == {"user_steps": 5, "user_numbers": 3, "rebuilt": True,
                                            "dropped_steps": 2, "marked_steps": 0}
    assert reply.splitlines()[-2:] == [
        "Kept your 5 steps and 3 numbers (90 °C, one teaspoon, exactly 3 minutes) in your own words and order, "
        "as the draft lacked '90 °C', 'one teaspoon', 'exactly 3 minutes'; lacked or reworded 5 of your steps.",
        "Left out 2 steps you never gave: 'Stir occasionally', 'Add milk or sugar to taste'."]


async def test_skill_save_keeps_a_faithful_draft_in_its_order_without_the_models_own_steps(pool):
    llm = ScriptedLLM().answer_structured(INVENTED | {"procedure": (
        "1. Heat: Boil the water to 90 °C.\n2. Warm the pot.\n3. Add 1 teaspoon of leaves per cup.\n"
        "4. Steep exactly 3 minutes.\n5. Take the leaves out.\n6. Stir occasionally.")})
    reply = await _commands(pool, llm, window=TEA_TALK).skill("save")
    skill = await repo.get(pool, "tea_brewing_procedure")
    assert skill.procedure == ("1. Heat: Boil the water to 90 °C.\n2. Warm the pot.\n"
                               "3. Add 1 teaspoon of leaves per cup.\n4. Steep exactly 3 minutes.\n"
                               "5. Take the leaves out.")
    assert reply.splitlines()[-2:] == [
        "Kept your 5 steps and 3 numbers (90 °C, one teaspoon, exactly 3 minutes) as you gave them; the model "
        "only ordered and named them.",
        "Left out 1 step you never gave: 'Stir occasionally'."]


async def test_skill_save_with_no_steps_from_anyone_saves_nothing(pool):
    llm = ScriptedLLM().answer_structured(INVENTED | {"procedure": "Steps:"})
    window = [Msg("user", "How do I brew tea?"), Msg("user", "Thanks, save that.")]
    assert await _commands(pool, llm, window=window).skill("save") == NO_STEPS
    assert await pool.fetchval("SELECT count(*) FROM skills") == 0


async def test_skill_save_offline_is_refused_and_stores_nothing(pool):
    llm = ScriptedLLM(configured=False)
    assert await _commands(pool, llm).skill("save") == OFFLINE_REFUSAL
    assert llm.calls == []
    assert await pool.fetchval("SELECT count(*) FROM skills") == 0


async def test_skill_save_with_empty_conversation_or_failing_model(pool):
    llm = ScriptedLLM()
    assert (await _commands(pool, llm, window=[]).skill("save")).startswith("nothing to draft from")
    llm.answer_structured(ProviderUnavailable("gemini: 503 overloaded", provider="gemini"))
    reply = await _commands(pool, llm).skill("save")
    assert reply.startswith("cannot draft a skill: the language model failed (")
    assert await pool.fetchval("SELECT count(*) FROM skills") == 0


async def test_show_list_remove_history_outcome(pool):
    commands = _commands(pool, ScriptedLLM())
    assert await commands.skills("") == "no skills yet; /skill save [hint] drafts one from this conversation"
    await repo.create(pool, **CSV)
    await repo.edit(pool, "csv_summary", name="CSV overview")
    shown = await commands.skill("show csv_sumary")
    assert shown.splitlines()[:2] == ["(no skill called 'csv_sumary'; showing 'csv_summary')",
                                      "csv_summary — CSV overview (version 2)"]
    assert shown.endswith(CSV["procedure"])
    assert await commands.skill("show zebra") == "no skill called 'zebra'; known skills: csv_summary"
    assert await commands.skill("outcome csv_summary success") == "csv_summary: succeeded is now 1"
    assert await commands.skill("outcome csv_summary failure") == "csv_summary: failed is now 1"
    assert await commands.skills("") == ("1 skill (recalled/used/succeeded/failed):\n"
                                         f"  csv_summary  v2  0/0/1/1  — {CSV['when_to_use']}")
    history = await commands.skill("history csv_summary")
    assert history.splitlines()[0] == "csv_summary: version 2 (current), 1 earlier"
    assert await commands.skill("remove csv_sumary") == ("no skill called 'csv_sumary', so nothing was removed; "
                                                         "did you mean 'csv_summary'?")
    assert await commands.skill("remove csv_summary") == ("removed skill 'csv_summary' (its versions stay "
                                                          "in skill_versions)")
    assert await commands.skill("frobnicate") == await commands.skill("")
