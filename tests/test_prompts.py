"""Every text the mind sends a model sits in a `prompts.py` of its stage (issue 23, item 4).

Two checks. First, each prompts module renders: every str constant (a template filled
with sample fields), every function (called once with the sample arguments listed here:
a new prompt function without a sample fails) and every answer schema (as the JSON
instruction the model reads) gives non-empty text with no unfilled `{placeholder}`,
and each sample string handed to a function shows up in what it renders. Second, a
layout check reads src (ast): no call to a model outside the prompts modules is handed a
written text of its own, and no other module holds a string literal of
`LONG_LITERAL_CHARS` or more unless what surrounds it says it is no prompt (a docstring,
SQL, a regular expression, an error raised, a log line, a word list) or it is listed in
`NOT_PROMPTS` with its reader.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic
import pytest

from src.providers.prompts import schema_instruction
from src.recall.speakers import USER, Speaker
from src.tools.verbs import ToolVerb

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
#: The prompts modules, one per stage that talks to a model. A new one is found by its name.
PROMPT_MODULES = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts) for p in SRC.rglob("prompts.py"))
#: A `{name}`, `{name!r}` or `{name:.2f}` left in a rendered text: a variable never filled.
UNFILLED = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*(?:![rsa])?(?::[^{}\s]*)?\}")
#: The fields of the module-level templates (`BOOTSTRAP_PROMPT`, `FOK_PROMPT`, `INTERNAL_FRAMES`).
TEMPLATE_FIELDS = {"name": "SAMPLE-NAME", "question": "SAMPLE-QUESTION", "text": "SAMPLE-TEXT", "key": "SAMPLE-KEY"}


@dataclass(frozen=True)
class _Confidence:
    composite: float
    verbalized: float | None
    signals: dict
    fok_unknown: bool


@dataclass(frozen=True)
class _Correction:
    trigger: str
    error_type: str
    original_reasoning: str
    correction: str


@dataclass(frozen=True)
class _Cluster:
    index: int
    ids: list[int]
    texts: list[str]


@dataclass(frozen=True)
class _Hit:
    id: int
    content: str


_WEAK = _Confidence(0.21, 0.3, {"hedge_phrases": ["maybe", "I think"], "correction_markers": ["wait"],
                                "question_rate": 0.5, "length_anomaly": 0.8, "words": 0,
                                "fok_judgement": "UNKNOWN", "logprob_confidence": 0.2}, True)
_VERB = ToolVerb(verb="SAMPLE_VERB", handler=lambda a: a, usage="SAMPLE_VERB: <SAMPLE-ARG>", when="SAMPLE-WHEN.")
_AT = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)

#: "module:function" -> (args, kwargs): one rendering of every prompt function.
SAMPLES: dict[str, tuple[tuple, dict]] = {
    "src.providers.prompts:schema_instruction": ((pydantic.create_model("SampleAnswer", verdict=(str, ...)),), {}),
    "src.providers.prompts:repair_prompt": (("SAMPLE-ERROR",), {}),
    "src.gates.prompts:contradiction_question": (("SAMPLE-A", "SAMPLE-B"), {}),
    "src.gates.prompts:relations_question": (("SAMPLE-A", ["SAMPLE-B1", "SAMPLE-B2"]), {}),
    "src.metacognition.prompts:weaknesses": ((_WEAK,), {}),
    "src.metacognition.prompts:retry_feedback": (("SAMPLE-FOCUS", _WEAK, 0.55), {}),
    "src.metacognition.prompts:system2_brief": (("SAMPLE-FOCUS", "SAMPLE-REASONS", _WEAK), {}),
    "src.metacognition.prompts:reflection_block": (
        ([_Correction("SAMPLE-TRIGGER", "SAMPLE-ERROR", "SAMPLE-DID", "SAMPLE-INSTEAD")],), {"field_chars": 80}),
    "src.skills.prompts:conversation_material": (("SAMPLE-TRANSCRIPT",), {}),
    "src.skills.prompts:procedures_material": (([{"id": 7, "content": "SAMPLE-PROCEDURE"}], 1500), {}),
    "src.skills.prompts:draft_request": (("SAMPLE-MATERIAL", "SAMPLE-HINT"), {}),
    "src.skills.prompts:isolated_draft_question": (("SAMPLE-REQUEST",), {}),
    "src.skills.prompts:more_skills_line": ((3,), {}),
    "src.dmn.prompts:recalled": (("SAMPLE-MEMORY", Speaker("person", "SAMPLE-NAME"), 200), {}),
    "src.dmn.prompts:goal_self_prompt": (("SAMPLE-MEMORY", "SAMPLE-GOAL", 200), {"speaker": USER}),
    "src.dmn.prompts:spontaneous_self_prompt": (("SAMPLE-MEMORY", 3.0, 200),
                                                {"speaker": Speaker("person", "SAMPLE-NAME"), "imported": True}),
    "src.dmn.prompts:review_self_prompt": (("SAMPLE-WINNER", "SAMPLE-LOSER", "SAMPLE-SOURCE", 200), {}),
    "src.dmn.prompts:association_question": (("SAMPLE-FIRST", "SAMPLE-SECOND", 40.0, 200), {}),
    "src.dmn.prompts:value_question": (("SAMPLE-MEMORY", "SAMPLE-VALUE", 200), {}),
    "src.gut.prompts:gut_signal": (("SAMPLE-FEELING", 0.8, "user"), {}),
    "src.outcomes.prompts:goal_reflection_prompt": (("SAMPLE-GOAL",), {}),
    "src.tools.prompts:read_doc_when": (("SAMPLE-FILES",), {}),
    "src.loop.prompts:frame_input": (("dmn", "SAMPLE-THOUGHT"), {}),
    "src.loop.prompts:system_prompt": (("SAMPLE-NAME", "SAMPLE-BOUNDARIES"), {}),
    "src.loop.prompts:earlier_listed": ((3,), {}),
    "src.loop.prompts:tools_section": (([_VERB],), {}),
    "src.loop.prompts:tool_result": (("SAMPLE_VERB", "SAMPLE-ARG", "SAMPLE-RESULT"), {}),
    "src.loop.prompts:tool_found": (("SAMPLE_VERB: SAMPLE-ARG", "SAMPLE-RESULT"), {}),
    "src.loop.prompts:reflex_reply": ((["SAMPLE-RECALLED"],), {"because": "SAMPLE-BECAUSE", "missing": "SAMPLE-MISSING"}),
    "src.loop.prompts:acknowledgement": (("SAMPLE-STATEMENT",), {}),
    "src.consolidation.deep.prompts:merge_question": (([_Cluster(1, [10, 11], ["SAMPLE-ONE", "SAMPLE-TWO"])],), {}),
    "src.consolidation.deep.prompts:questions_prompt": (
        ([{"id": 2, "content": "SAMPLE-NEWER"}, {"id": 1, "content": "SAMPLE-OLDER"}], ["SAMPLE-THEME"], 3), {}),
    "src.consolidation.deep.prompts:insights_prompt": (("SAMPLE-QUESTION", [_Hit(5, "SAMPLE-EVIDENCE")], 5), {}),
    "src.consolidation.deep.prompts:narrative_prompt": (
        ([{"id": 4, "content": "SAMPLE-INSIGHT", "sources": ["SAMPLE-EXPERIENCE"]}],), {}),
    "src.consolidation.deep.prompts:recompress_prompt": (
        ([{"id": 4, "content": "SAMPLE-MEMORY", "compressed": "SAMPLE-LINE", "related": ["SAMPLE-RELATED"]}],), {}),
    "src.consolidation.deep.prompts:context_prompt": (
        ([{"id": 9, "memory_type": "episodic", "source_tag": "external_user", "created_at": _AT,
           "content": "SAMPLE-MEMORY", "before": ["SAMPLE-BEFORE"]}], 2000), {}),
    "src.consolidation.deep.prompts:conflict_prompt": (("SAMPLE-INSIGHT", "SAMPLE-MEMORY"), {}),
    "src.consolidation.deep.prompts:reevaluation_prompt": (("SAMPLE-INSIGHT", [("SAMPLE-SOURCE", 0.42, True)]), {}),
    "src.consolidation.deep.prompts:tension_question": (("SAMPLE-VALUE", [{"id": 3, "content": "SAMPLE-BEHAVIOUR"}]), {}),
}


def _defined(module: str) -> list[str]:
    """The public names a module defines itself (assigned, def, class), in source order."""
    tree = ast.parse((ROOT / Path(*module.split("."))).with_suffix(".py").read_text(encoding="utf-8"))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [n for n in names if not n.startswith("_")]


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _texts(v)]
    return []


def _samples_in(args: tuple, kwargs: dict) -> list[str]:
    """The SAMPLE-… strings handed to a function (directly, or inside lists and dicts)."""
    found = _texts(list(args) + list(kwargs.values()))
    found += [t for a in [*args, *kwargs.values()] if isinstance(a, (list, tuple))
              for x in a if hasattr(x, "__dataclass_fields__") for t in _texts(list(vars(x).values()))]
    return [t for t in found if t.startswith("SAMPLE-")]


def _renderings(module: str) -> list[tuple[str, str, list[str]]]:
    """(name, rendered text, sample strings it must show) for every prompt the module defines."""
    mod = importlib.import_module(module)
    out = []
    for name in _defined(module):
        value = getattr(mod, name)
        key = f"{module}:{name}"
        if isinstance(value, bool | int | float) or getattr(value, "__origin__", None) is not None:
            continue                                # a size, or a type alias (Literal)
        if inspect.isclass(value) and issubclass(value, pydantic.BaseModel):
            out.append((name, schema_instruction(value), []))
        elif inspect.isclass(value) and getattr(value, "_is_protocol", False):
            continue                                # what a prompt function reads of its argument
        elif inspect.isfunction(value):
            assert key in SAMPLES, f"{key}: a prompt function without a sample rendering in SAMPLES"
            args, kwargs = SAMPLES[key]
            rendered = value(*args, **kwargs)
            text = "\n".join(rendered) if isinstance(rendered, list) else rendered
            out.append((name, text, _samples_in(args, kwargs)))
        else:
            texts = _texts(value)
            assert texts, f"{key}: a prompts module holds texts, not {type(value).__name__}"
            out += [(name, t.format(**TEMPLATE_FIELDS) if UNFILLED.search(t) else t, []) for t in texts]
    return out


def test_every_stage_that_talks_to_a_model_has_its_prompts_module():
    assert PROMPT_MODULES == sorted([
        "src.consolidation.deep.prompts", "src.context.prompts", "src.dmn.prompts", "src.gates.prompts",
        "src.gut.prompts", "src.loop.prompts", "src.mcp.prompts", "src.metacognition.prompts", "src.outcomes.prompts",
        "src.providers.prompts", "src.skills.prompts", "src.tools.prompts"])


@pytest.mark.parametrize("module", PROMPT_MODULES)
def test_every_prompt_renders_whole(module: str):
    rendered = _renderings(module)
    assert rendered, f"{module} holds no prompt"
    for name, text, samples in rendered:
        assert text.strip(), f"{module}:{name} renders empty"
        assert not UNFILLED.search(text), f"{module}:{name} leaves {UNFILLED.search(text).group()} unfilled"
        missing = [s for s in samples if s not in text]
        assert not missing, f"{module}:{name} does not show its argument(s) {missing}"


def test_every_sample_names_a_prompt_function():
    known = {f"{m}:{n}" for m in PROMPT_MODULES for n in _defined(m)}
    assert sorted(set(SAMPLES) - known) == []


def test_the_templates_render_as_the_callers_fill_them():
    from src.loop.prompts import BOOTSTRAP_PROMPT, INTERNAL_FRAMES
    from src.metacognition.prompts import FOK_PROMPT
    assert BOOTSTRAP_PROMPT.format(name="Molt").startswith("You are Molt.")
    assert FOK_PROMPT.format(question="Is it?").endswith("<<<\nIs it?\n>>>")
    assert {f.format(text="x").endswith("x") for f in INTERNAL_FRAMES.values()} == {True}


# --- the layout check ------------------------------------------------------------------------

#: A string literal this long outside the prompts modules must say why it is no prompt.
LONG_LITERAL_CHARS = 120
#: Text written into the arguments of a model call this long is a prompt out of place.
SINK_LITERAL_CHARS = 25
#: The calls that send text to a model, and which of their arguments carry it (None: all but
#: `purpose`, the ledger's tag).
MODEL_CALLS: dict[str, set[str] | None] = {
    "generate": None, "generate_structured": None, "meta_call": None, "meta_call_structured": None,
    "ChatMessage": None, "BatchQuestion": {"question"}, "ToolVerb": {"when"},
}
#: Long literals outside the prompts modules that no model reads, each with its reader.
NOT_PROMPTS: dict[tuple[str, str], str] = {
    ("src/gates/memory_gate.py", "memory mode is off, so nothing is written now"): "the guardian",
    ("src/commands/session.py", "session: "): "the guardian (/status)",
    ("src/weights/self_kinds.py", "no values or goals yet"): "the guardian (/kind, python -m src.memory kind)",
    ("src/api/", ""): "another program (the HTTP API's answers and its OpenAPI document)",
    ("src/main.py", "no terminal input (detached)"): "the guardian (the detached mind's start-up line)",
    ("src/skills/commands.py", "usage: /skill save"): "the guardian (/skill usage)",
    ("src/skills/drafting.py", "cannot draft a skill: no language model"): "the guardian (SkillError)",
    ("src/skills/drafting.py", "nothing to save: the draft holds no steps"): "the guardian (SkillError)",
    ("src/skills/fidelity.py", "Your lines in this conversation give no steps"): "the guardian (/skill save's reply)",
    ("src/memory/importer.py", " One JSON object per line"): "the operator (--help)",
    ("src/memory/calibrate.py", "# thresholds for "): "the operator (calibrate's YAML, a comment in runtime.yaml)",
    ("src/memory/importer.py", "imported "): "the operator (import summary)",
    ("src/web/", ""): "the guardian's browser: HTML, CSS and SVG of the read-only web view",
    ("src/config_reference.py", "# Configuration reference"): "the guardian (docs/configuration.md)",
    ("src/commands/erasure.py", "/forget ID"): "the guardian (/help)",
    ("src/memory/importer.py", "import: "): "the operator (import summary)",
}
_SQL = re.compile(r"\b(?:SELECT|FROM|WHERE|JOIN|INSERT|UPDATE|DELETE|CREATE|AS|CASE|END)\b|\$\d|::")
_COLUMNS = re.compile(r"^\s*[\w.]+(?:,\s*[\w.]+){4,}\s*$")      # an SQL column list
_REGEX = re.compile(r"\(\?|\\[bswd]")
_NOT_PROMPT_CALLS = {"debug", "info", "warning", "error", "exception", "critical", "print",
                     "add_argument", "ArgumentParser", "add_parser", "compile", "split"}


def _literal(node: ast.AST) -> str | None:
    """A str constant, or an f-string's written parts (each `{…}` as `{}`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _source_files() -> list[tuple[str, ast.Module]]:
    return [(p.relative_to(ROOT).as_posix(), ast.parse(p.read_text(encoding="utf-8")))
            for p in sorted(SRC.rglob("*.py")) if p.name != "prompts.py"]


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _sink_texts(tree: ast.Module) -> list[tuple[int, str]]:
    """Written text of SINK_LITERAL_CHARS or more in the arguments of a model call."""
    found = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        name = _call_name(call)
        if name not in MODEL_CALLS:
            continue
        wanted = MODEL_CALLS[name]
        carried = [*([] if wanted else call.args),
                   *(k.value for k in call.keywords if (k.arg in wanted if wanted else k.arg != "purpose"))]
        for arg in carried:
            nodes = list(ast.walk(arg))
            parts = {id(v) for n in nodes if isinstance(n, ast.JoinedStr) for v in n.values}
            for node in nodes:
                text = _literal(node)
                if text is not None and id(node) not in parts and len(text) >= SINK_LITERAL_CHARS:
                    found.append((node.lineno, text))
    return sorted(found)


def _excused(tree: ast.Module) -> set[int]:
    """ids of the literal nodes whose surroundings say they are no prompt."""
    excused: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and _literal(body[0].value) is not None:
            excused.add(id(body[0].value))                     # a docstring
        inside = None
        if isinstance(node, ast.Raise):
            inside = node                                      # an error raised
        elif isinstance(node, ast.Call) and _call_name(node) in _NOT_PROMPT_CALLS:
            inside = node                                      # a log line, help text, regex, word list
        if inside is not None:
            excused |= {id(n) for n in ast.walk(inside)}
        if isinstance(node, ast.JoinedStr):
            excused |= {id(v) for v in node.values}            # judged as the whole f-string
    return excused


def _long_literals() -> list[str]:
    found = []
    for path, tree in _source_files():
        excused = _excused(tree)
        for node in ast.walk(tree):
            text = _literal(node)
            if text is None or id(node) in excused or len(text) < LONG_LITERAL_CHARS:
                continue
            if _SQL.search(text) or _COLUMNS.match(text) or _REGEX.search(text) or text.count("|") >= 5:
                continue
            if any(path.startswith(p) and text.startswith(t) for p, t in NOT_PROMPTS):
                continue
            found.append(f"{path}:{node.lineno}: {text[:70]!r}")
    return found


def test_no_model_call_outside_the_prompts_modules_is_handed_written_text():
    found = [f"{path}:{line}: {text[:70]!r}" for path, tree in _source_files() for line, text in _sink_texts(tree)]
    assert found == [], "move these texts to the stage's prompts.py"


def test_the_sink_check_finds_a_prompt_written_at_the_call():
    tree = ast.parse('async def f(llm):\n'
                     '    await llm.meta_call_structured(f"Is {x} true? Answer yes or no, briefly.", S)\n'
                     '    ToolVerb(verb="X", when="Only when the user asks for it: do it.", usage="X: <y>")\n')
    assert [line for line, _ in _sink_texts(tree)] == [2, 3]


def test_no_long_text_outside_the_prompts_modules_but_what_no_model_reads():
    assert _long_literals() == [], ("move these texts to the stage's prompts.py, or list them in "
                                    "NOT_PROMPTS with who reads them")


def test_every_not_prompts_entry_still_matches_a_literal():
    """The list only shrinks: an entry whose text moved or went fails here."""
    literals = [(path, _literal(n)) for path, tree in _source_files() for n in ast.walk(tree)
                if _literal(n) is not None]
    stale = [key for key in NOT_PROMPTS
             if not any(path.startswith(key[0]) and text.startswith(key[1]) for path, text in literals)]
    assert stale == []


def test_the_long_literal_check_excuses_only_by_surroundings():
    prompt = "Summarise the memories below in one sentence, keeping every name and number they state; " * 2
    tree = ast.parse(f"X = {prompt!r}\nraise ValueError({prompt!r})\nlog.info({prompt!r})\n")
    excused = _excused(tree)
    flagged = [n.lineno for n in ast.walk(tree) if _literal(n) == prompt and id(n) not in excused]
    assert flagged == [1]
