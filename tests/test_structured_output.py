"""Structured output small models can meet (issue 27 item 6): the schema goes with the
request where the endpoint takes one, a refusal of it falls back to JSON mode once per
model, trivial mismatches are coerced before validation, one repair round — and
`/skill save` succeeds when the model answers `procedure` as a list. Fakes only at the
HTTP seam (tests/providers/fakes.py), and they check what they are sent."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Literal

import httpx2
import pydantic
import pytest

from src.errors import MalformedOutput
from src.providers.costs import MemoryLedger
from src.providers.llm import ResilientLanguageModel
from src.providers.llm_gemini import GeminiBackend
from src.providers.llm_openai_compat import OpenAICompatBackend
from src.providers.protocols import ChatMessage
from src.providers.resilience import CircuitBreaker, Resilience, RetryPolicy
from src.providers.settings import LLMSettings, ProvidersSettings
from src.providers.structured import coerce, parse_structured, response_schema, schema_refused
from src.skills import repository as repo
from src.skills.commands import SkillCommands
from src.skills.prompts import SkillDraft
from src.skills.settings import SkillsSettings
from tests.providers.fakes import FakeServer, Sleeps, gemini_client, gemini_generate_ok, openai_ok


class Step(pydantic.BaseModel):
    text: str
    minutes: float


class Plan(pydantic.BaseModel):
    title: str
    steps: list[Step]
    tags: list[str] = []
    level: Literal["KNOWN", "PARTIAL", "UNKNOWN"] = "PARTIAL"
    note: str | None = None
    count: int = 0


class Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    verdict: bool
    reason: str


def local(server: FakeServer, ledger: MemoryLedger | None = None) -> ResilientLanguageModel:
    http = httpx2.AsyncClient(transport=server.transport, base_url="http://127.0.0.1:8080/v1")
    return ResilientLanguageModel(
        OpenAICompatBackend(http, "qwen2.5-coder-1.5b"),
        resilience=Resilience(RetryPolicy(timeout_s=5.0, max_attempts=1), CircuitBreaker("openai_compat", 10, 30.0),
                              sleep=Sleeps(), rng=random.Random(1)),
        ledger=ledger or MemoryLedger(ProvidersSettings().prices, session_id="s1"),
        settings=LLMSettings(max_output_tokens=256))


def schema_refusal() -> httpx2.Response:
    # what an older llama.cpp server answers for a response_format it does not know
    return httpx2.Response(400, json={"error": {"code": 400, "type": "invalid_request_error", "message":
                                                'response_format type must be one of "text" or "json_object", '
                                                "but got: json_schema"}})


# --- the schema goes with the request ------------------------------------------------------------

async def test_openai_compatible_request_carries_the_json_schema():
    server = FakeServer().push(openai_ok('{"verdict": true, "reason": "same claim"}'))
    answer = await local(server).generate_structured([ChatMessage("user", "A vs B?")], Strict, purpose="judge")
    assert answer.value == Strict(verdict=True, reason="same claim")
    body = server.bodies[0]
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "Strict", "schema": Strict.model_json_schema(), "strict": True}}
    assert "logprobs" not in body          # a structured answer's confidence is not read from tokens


def test_strict_only_where_the_schema_meets_it():
    assert response_schema(Strict).strict is True
    # defaults (not every property required) and extra="ignore": OpenAI's strict mode would refuse it
    assert response_schema(SkillDraft).strict is False
    assert response_schema(Plan).strict is False
    assert response_schema(Plan).schema["$defs"]["Step"]["required"] == ["text", "minutes"]


async def test_gemini_request_carries_the_json_schema():
    server = FakeServer().push(gemini_generate_ok('{"verdict": false, "reason": "different"}'))
    llm = ResilientLanguageModel(
        GeminiBackend(gemini_client(server)),
        resilience=Resilience(RetryPolicy(timeout_s=5.0, max_attempts=1), CircuitBreaker("gemini", 10, 30.0),
                              sleep=Sleeps(), rng=random.Random(1)),
        ledger=MemoryLedger(ProvidersSettings().prices, session_id="s1"))
    await llm.generate_structured([ChatMessage("user", "A vs B?")], Strict, purpose="judge")
    config = server.bodies[0]["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == Strict.model_json_schema()


async def test_a_refused_schema_falls_back_to_json_mode_once_per_model():
    ledger = MemoryLedger(ProvidersSettings().prices, session_id="s1")
    server = FakeServer().push(schema_refusal(), openai_ok('{"verdict": true, "reason": "a"}'),
                               openai_ok('{"verdict": false, "reason": "b"}'))
    llm = local(server, ledger)
    first = await llm.generate_structured([ChatMessage("user", "1?")], Strict, purpose="judge")
    second = await llm.generate_structured([ChatMessage("user", "2?")], Strict, purpose="judge")
    assert (first.value.verdict, second.value.verdict) == (True, False)
    assert [b["response_format"]["type"] for b in server.bodies] == ["json_schema", "json_object", "json_object"]
    assert llm.schema_supported is False
    assert [(r.purpose, r.ok) for r in ledger.records] == [("judge", False), ("judge", True), ("judge", True)]


def test_only_a_refusal_that_names_the_schema_counts():
    from src.errors import ProviderRejected, ProviderUnavailable
    assert schema_refused(ProviderRejected("openai_compat answered HTTP 400: Invalid schema for response_format"))
    assert not schema_refused(ProviderRejected("openai_compat answered HTTP 400: context size exceeded"))
    assert not schema_refused(ProviderUnavailable("openai_compat answered HTTP 500: json_schema grammar"))


# --- coercion before validation ------------------------------------------------------------------

def test_coercion_follows_the_field_types():
    raw = {"title": ["Bake", "bread"], "steps": {"text": 5, "minutes": "12.5"}, "tags": "baking",
           "level": "known", "note": None, "count": "3"}
    assert coerce(raw, Plan) == {"title": "Bake\nbread", "steps": [{"text": "5", "minutes": 12.5}],
                                 "tags": ["baking"], "level": "KNOWN", "note": None, "count": 3}
    value = Plan.model_validate(coerce(raw, Plan))
    assert value.steps == [Step(text="5", minutes=12.5)]


@pytest.mark.parametrize(("reply", "expected"), [
    ('[{"verdict": true, "reason": "x"}]', Strict(verdict=True, reason="x")),               # a list of one
    ('{"verdict": "true", "reason": ["a", "b"]}', Strict(verdict=True, reason="a\nb")),
    ('```json\n{"verdict": false, "reason": 42}\n```', Strict(verdict=False, reason="42")),
])
def test_parse_coerces_trivial_mismatches(reply, expected):
    assert parse_structured(reply, Strict) == expected


def test_percent_and_numeric_strings_become_numbers():
    class Fok(pydantic.BaseModel):
        confidence: float = pydantic.Field(ge=0, le=1)

    assert parse_structured('{"confidence": "80%"}', Fok).confidence == pytest.approx(0.8)
    assert parse_structured('{"confidence": " 0.35 "}', Fok).confidence == pytest.approx(0.35)
    with pytest.raises(MalformedOutput, match="confidence: Input should be a valid number"):
        parse_structured('{"confidence": "very"}', Fok)


def test_what_coercion_cannot_fix_is_still_refused():
    with pytest.raises(MalformedOutput, match=r"^reply is not a valid Strict: reason: Field required$"):
        parse_structured('{"verdict": true}', Strict)
    with pytest.raises(MalformedOutput, match=r"\(root\): Invalid JSON"):
        parse_structured("verdict: yes", Strict)


async def test_one_repair_round_with_its_own_purpose():
    ledger = MemoryLedger(ProvidersSettings().prices, session_id="s1")
    server = FakeServer().push(openai_ok('{"verdict": true}'), openai_ok('{"verdict": true, "reason": "fixed"}'))
    answer = await local(server, ledger).generate_structured([ChatMessage("user", "A vs B?")], Strict,
                                                             purpose="judge")
    assert (answer.value.reason, answer.repaired) == ("fixed", True)
    repair = server.bodies[1]
    assert repair["response_format"]["type"] == "json_schema"
    assert repair["messages"][-2] == {"role": "assistant", "content": '{"verdict": true}'}
    assert repair["messages"][-1]["content"].startswith(
        "Your previous reply could not be used: reply is not a valid Strict: reason: Field required")
    assert [r.purpose for r in ledger.records] == ["judge", "judge:repair"]


# --- /skill save with a small model's answer ------------------------------------------------------

@dataclass
class Msg:
    role: str
    content: str


CONVERSATION = [Msg("user", "To get a quick overview of sales.csv: read the header, then count the rows, "
                            "then list the types."),
                Msg("assistant", "Got it.")]


async def test_skill_save_succeeds_when_the_model_answers_the_procedure_as_a_list(pool):
    draft = {"label": "csv_summary", "name": "CSV summary", "when_to_use": "When a CSV file needs an overview.",
             "procedure": ["1. Read the header.", "2. Count the rows.", "3. List the column types."]}
    server = FakeServer().push(openai_ok(json.dumps(draft)))
    commands = SkillCommands(pool, local(server), lambda: CONVERSATION, SkillsSettings(), session_id="s-1")
    reply = await commands.skill("save")
    assert reply.startswith("saved skill 'csv_summary':"), reply
    skill = await repo.get(pool, "csv_summary")
    assert skill.procedure == "1. Read the header.\n2. Count the rows.\n3. List the column types."
    (body,) = server.bodies        # no repair round was needed
    assert body["response_format"]["json_schema"]["name"] == "SavedSkillDraft"
    assert body["response_format"]["json_schema"]["schema"]["properties"]["procedure"]["type"] == "string"
