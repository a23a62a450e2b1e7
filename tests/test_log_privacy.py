"""Issue 39 item 2: the log file never holds a user's words at INFO or above.

The real service against a local OpenAI-compatible model whose replies quote the user
and whose structured answers are those same words instead of JSON (so a logged reply, a
validation error, a failed repair would show them); then, where a path once logged a
text, that path alone with `caplog`: what INFO and above say, and what DEBUG keeps.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import threading
import traceback
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import asyncpg
import pytest
import yaml

from src.consolidation.deep.deep_pass import DEEP_PHASES, ConsolidationParts, run_deep_pass
from src.consolidation.deep.prompts import Insights
from src.consolidation.settings import ConsolidationSettings
from src.errors import MalformedOutput
from src.loop.inner_life import InnerLife
from src.loop.tool_protocol import ToolProtocol
from src.providers.protocols import ChatMessage
from src.providers.structured import parse_structured
from src.recall.store import MemoryStore, NewMemory
from src.tools.verbs import ToolVerb
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, ids_in, language_model
from tests.fakes import HashEmbedder
from tests.proc import agent_env, noiseless_config, read_until, set_key, spawn_agent, wait_ready
from tests.test_web_pages import served

FACT = "My neighbour Zebulon keeps 4471 quokkas in a barn near Tromsdal."
QUESTION = "How many quokkas does Zebulon keep in the barn near Tromsdal?"
MARKS = ("zebulon", "quokka", "4471", "tromsdal")
ECHO = "You told me: "


def _words_in(records: list[logging.LogRecord], words: tuple[str, ...] = MARKS) -> list[str]:
    return [r.getMessage() for r in records if any(w in r.getMessage().lower() for w in words)]


def _read(path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _at_info_or_above(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.INFO]


class EchoModel:
    """A chat server in a thread: a reply quotes the last user message; a structured answer
    (JSON mode) is the same quote, not JSON, so the repair round and its failure run too."""

    def __init__(self) -> None:
        owner = self
        self.answered = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                return

            def do_GET(self) -> None:              # no /props: the configured window stands
                self.send_error(404)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                said = " ".join(body["messages"][-1]["content"].split())[-300:]
                text = f"{ECHO}{said}" + ("" if "response_format" in body else " Confidence: 0.95")
                owner.answered += 1
                data = json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": text}}],
                                   "usage": {"prompt_tokens": 50, "completion_tokens": 20}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _config(tmp_path, port: int):
    runtime = yaml.safe_load(noiseless_config(tmp_path).read_text(encoding="utf-8"))
    runtime["providers"]["llm"] |= {"provider": "openai_compat", "base_url": f"http://127.0.0.1:{port}/v1",
                                    "openai_model": "echo-local", "request_logprobs": False}
    set_key(runtime, "gates.scratch.flush_every", 1)     # the fact is a memory before the question
    set_key(runtime, "consolidation.deep.enabled", False)
    runtime["web"] = {"enabled": False}
    set_key(runtime, "recall.layers", {"values_path": str(tmp_path / "v.json"),
                                       "goals_path": str(tmp_path / "g.json"), "cache_dir": str(tmp_path / "cache")})
    path = tmp_path / "runtime.yaml"
    path.write_text(yaml.safe_dump(runtime), encoding="utf-8")
    return path


async def test_a_conversation_leaves_no_word_of_it_in_the_log_file_at_info(db_dsn, tmp_path):
    model = EchoModel()
    logged = tmp_path / "moltbot.log"
    env = agent_env(DATABASE_URL=db_dsn, MOLTBOT_LOG_FILE=str(logged), MOLTBOT_LOG_LEVEL="INFO")
    proc = spawn_agent(env, ("--config", str(_config(tmp_path, model.port))))
    try:
        wait_ready(proc)
        for line in (FACT, QUESTION):
            proc.stdin.write(f"{line}\n".encode())
            proc.stdin.flush()
            read_until(proc, lambda shown: ECHO in shown, timeout=120)
            # the fact a memory before the question: the recall of it is milestone 2, whose
            # event holds the question (the line that used to quote it)
            for _ in range(600):
                if line == QUESTION or "readiness milestone 1 reached" in _read(logged):
                    break
                await asyncio.sleep(0.1)
        out, err = proc.communicate(b"/quit\n", timeout=60)
    finally:
        proc.kill()
        model.close()
    assert proc.returncode == 0, err.decode()[-3000:]
    assert model.answered >= 2
    conn = await asyncpg.connect(db_dsn)
    try:
        reached = [r["milestone"] for r in await conn.fetch("SELECT milestone FROM readiness_events")]
        kept = await conn.fetchval("SELECT count(*) FROM memories WHERE content ILIKE '%zebulon%'")
    finally:
        await conn.close()
    text = logged.read_text(encoding="utf-8")
    assert " INFO " in text and kept >= 1        # the words were kept, and the log was written
    assert {1, 2} <= set(reached)
    for number in reached:                       # each milestone said, by its number
        assert f"readiness milestone {number} reached" in text
    leaks = [ln for ln in text.splitlines() if any(w in ln.lower() for w in MARKS)]
    assert leaks == []
    assert not any(w in err.decode().lower() for w in MARKS)     # nor the terminal's WARNING lines


async def test_a_readiness_milestone_says_its_number_and_debug_keeps_the_query(pool, caplog):
    caplog.set_level(logging.DEBUG, logger="src.loop.inner_life")
    life = InnerLife(pool, HashEmbedder(), gut=None, session_id="t")
    await life.milestone(2, {"cycle": 3, "memory_ids": [7], "query": QUESTION})
    assert [r.getMessage() for r in _at_info_or_above(caplog)] == ["readiness milestone 2 reached"]
    assert _words_in(_at_info_or_above(caplog)) == []
    assert _words_in([r for r in caplog.records if r.levelno == logging.DEBUG])


async def test_a_merge_that_drops_names_is_logged_by_kind_and_the_names_stay_at_debug(pool, caplog):
    said = "My neighbour Zebulon moved to Tromsdal in May with 4471 quokkas."
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory(said), NewMemory(said)])
    backend = ConsolidationModel().push("merge", lambda request: json.dumps({"insights": [
        {"cluster": 1, "insight": "A neighbour moved with some animals.",
         "cited_ids": ids_in(request.messages[0].content)}]}))
    caplog.set_level(logging.DEBUG)
    report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=language_model(backend, pool),
                                                    safety=Safety(), settings=ConsolidationSettings()),
                                 trigger="manual", now=datetime(2026, 11, 24, 12, tzinfo=UTC),
                                 rng=random.Random(7), phases=[p for p in DEEP_PHASES if p.name == "merge"])
    assert report.status == "done", report.error
    failure = await pool.fetchval("SELECT error FROM consolidation_failures")
    assert "zebulon" in failure and "tromsdal" in failure       # the row says what was lost
    assert any("skipping an item after repair and split (Rejected" in m for m in caplog.messages)
    assert _words_in(_at_info_or_above(caplog)) == []
    assert _words_in([r for r in caplog.records if r.levelno == logging.DEBUG])


async def test_a_refused_tool_call_is_logged_by_verb_and_size(caplog):
    tools = ToolProtocol(2)
    tools.register(ToolVerb("DECLARE_GOAL", lambda goal: f"error: '{goal}' matches none of your goals",
                            "DECLARE_GOAL: <goal>", "When a goal is met.", lambda _focus: True))
    replies = iter(["DECLARE_GOAL: count the 4471 quokkas of Zebulon", "Done."])

    async def answer(_messages, _system):
        return next(replies)

    caplog.set_level(logging.DEBUG, logger="src.loop.tool_protocol")
    out = await tools.rounds(answer, lambda text: text, [ChatMessage("user", QUESTION)], system="S", focus=QUESTION)
    assert out.answer == "Done." and "quokkas of Zebulon" in out.why
    assert [r.getMessage() for r in _at_info_or_above(caplog)] == [
        "asking once more without tools (DECLARE_GOAL refused, 12 words, 69 characters)"]
    assert _words_in([r for r in caplog.records if r.levelno == logging.DEBUG])


def test_a_structured_reply_that_fails_validation_is_named_without_its_words():
    for reply in (FACT, json.dumps({"insights": FACT}), json.dumps({"insights": [{"insight": 4471,
                                                                                  "cited_ids": [FACT]}]})):
        with pytest.raises(MalformedOutput) as info:
            parse_structured(reply, Insights)
        # nor its traceback, which prints every chained error (pydantic's quotes the input)
        shown = "".join(traceback.format_exception(info.value)).lower()
        assert not any(w in shown for w in MARKS), shown


async def test_a_malformed_web_request_is_logged_without_its_request_line(pool, caplog):
    caplog.set_level(logging.DEBUG)
    async with served(pool) as (_s, base):
        host, port = base.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /memories?q=zebulon quokka 4471 tromsdal HTTP/1.1 extra\r\nHost: x\r\n\r\n")
        await writer.drain()
        status = await reader.readline()
        writer.close()
        await writer.wait_closed()
    assert b" 400 " in status
    refused = [r for r in _at_info_or_above(caplog) if "refused a malformed request (400" in r.getMessage()]
    assert refused and _words_in(_at_info_or_above(caplog)) == []
    assert _words_in([r for r in caplog.records if r.levelno == logging.DEBUG])
