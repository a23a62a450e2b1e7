"""The tool protocol (src/loop/tool_protocol.py): detection anywhere, the rounds, the budget.

The model is a scripted answer function that records every (messages, system) it is
sent, so the tests check what each request carried — the tool lines, the refused call.
"""

from __future__ import annotations

import pytest

from src.loop.tool_protocol import NO_TOOLS_NOTE, ToolCall, ToolProtocol
from src.providers.protocols import ChatMessage
from src.tools.verbs import ToolVerb

USER = [ChatMessage("user", "earlier"), ChatMessage("assistant", "ok"), ChatMessage("user", "what is in notes.md?")]


class Model:
    """Answers from a script; records what each request carried."""

    def __init__(self, *replies: str):
        self.replies = list(replies)
        self.sent: list[tuple[list[ChatMessage], str]] = []

    async def __call__(self, messages: list[ChatMessage], system: str) -> str:
        self.sent.append((list(messages), system))
        assert self.replies, f"unscripted request; last message {messages[-1]}"
        return self.replies.pop(0)


def _protocol(max_calls: int = 2, offered=lambda focus: "notes" in focus) -> tuple[ToolProtocol, list[str]]:
    ran: list[str] = []

    def read(path: str) -> str:
        ran.append(path)
        return "# notes\nthe FIFO prunes" if path == "notes.md" else f"error: {path!r} is outside (src, notes.md)"

    tools = ToolProtocol(max_calls)
    tools.register(ToolVerb("READ_DOC", read, "READ_DOC: <relative path>",
                            "Only for questions about your code.", offered))
    return tools, ran


async def _rounds(tools: ToolProtocol, model: Model, focus: str = "what is in notes.md?"):
    return await tools.rounds(model, lambda text: text, USER, system="SYSTEM", focus=focus)


def test_each_verb_declares_its_action_kind_and_an_undeclared_one_is_an_external_effect():
    tools = ToolProtocol(2)
    tools.register(ToolVerb("READ_DOC", str, "READ_DOC: <path>", "For code.", kind="read_doc"))
    tools.register(ToolVerb("SEND_MAIL", str, "SEND_MAIL: <to>", "Never."))
    assert [tools.kind(v) for v in ("READ_DOC", "SEND_MAIL", "NEVER_REGISTERED")] == [
        "read_doc", "external_effect", "external_effect"]


def test_protocol_lines_are_found_anywhere_in_a_reply():
    tools, _ = _protocol()
    assert tools.find_calls("READ_DOC: notes.md") == [ToolCall("READ_DOC", "notes.md")]
    assert tools.find_calls("Let me look.\n  READ_DOC: src/loop/fifo.py\nOne moment.") == [
        ToolCall("READ_DOC", "src/loop/fifo.py")]
    assert tools.find_calls("Sure! `READ_DOC: notes.md`.") == [ToolCall("READ_DOC", "notes.md")]
    assert tools.find_calls("- read_doc : 'README.md'") == [ToolCall("READ_DOC", "README.md")]
    assert tools.find_calls("READ_DOC: a\nREAD_DOC: b") == [ToolCall("READ_DOC", "a"), ToolCall("READ_DOC", "b")]
    # not a protocol line: the verb without a colon, inside another word, or an unknown verb
    for text in ["I have a READ_DOC tool", "THREAD_DOC: x", "READ_DOCS: x", "WRITE_DOC: x", ""]:
        assert tools.find_calls(text) == [], text
    assert tools.contains_call("Hello Dana! READ_DOC: /home/user/documents/placeholder.txt")
    assert not tools.contains_call("Hello Dana!")


def test_a_second_verb_is_one_register_call_and_detected_even_when_not_offered():
    tools, _ = _protocol()
    tools.register(ToolVerb("RECALL_SKILL", lambda name: f"skill {name}", "RECALL_SKILL: <name>",
                            "When a task matches a skill.", lambda focus: "skill" in focus))
    assert tools.verbs == ["READ_DOC", "RECALL_SKILL"]
    assert tools.find_calls("ok\nRECALL_SKILL: baking") == [ToolCall("RECALL_SKILL", "baking")]
    assert [v.verb for v in tools.offered("what is in notes.md?")] == ["READ_DOC"]
    assert tools.instruction("hello") == ""
    assert tools.instruction("a skill from notes") == (
        "Tools (use one only when the line says so; otherwise just answer):\n"
        "- Only for questions about your code. Reply with exactly one line `READ_DOC: <relative path>` "
        "and nothing else; the result will be given to you.\n"
        "- When a task matches a skill. Reply with exactly one line `RECALL_SKILL: <name>` "
        "and nothing else; the result will be given to you.")
    with pytest.raises(ValueError, match="registered twice"):
        tools.register(ToolVerb("RECALL_SKILL", str, "x", "y"))
    with pytest.raises(ValueError, match="upper case letters"):
        ToolVerb("recall skill", str, "x", "y")
    assert ToolProtocol(0).offered("what is in notes.md?") == []


async def test_a_successful_call_feeds_its_result_back_and_the_plain_reply_is_the_answer():
    tools, ran = _protocol()
    model = Model("Let me check.\nREAD_DOC: notes.md\n", "The FIFO prunes.")
    rounds = await _rounds(tools, model)
    assert (rounds.answer, rounds.ended, ran) == ("The FIFO prunes.", "answered", ["notes.md"])
    (first, system1), (second, system2) = model.sent
    assert first == USER and system1.startswith("SYSTEM\n\nTools (")
    assert "`READ_DOC: <relative path>`" in system1 and system2 == system1
    assert second == [*USER, ChatMessage("assistant", "READ_DOC: notes.md"),
                      ChatMessage("user", "[READ_DOC notes.md]\n# notes\nthe FIFO prunes")]
    assert [r.action() for r in rounds.results] == [
        {"kind": "tool", "verb": "READ_DOC", "argument": "notes.md", "refused": False}]


async def test_a_refused_call_leads_to_one_request_without_tools_and_without_the_refusal():
    tools, ran = _protocol()
    model = Model("READ_DOC: /etc/passwd", "I cannot show that file. It is not mine to read.")
    rounds = await _rounds(tools, model)
    assert rounds.answer == "I cannot show that file. It is not mine to read."
    assert rounds.ended == "answered_without_tools"
    assert rounds.why == "READ_DOC refused: error: '/etc/passwd' is outside (src, notes.md)"
    assert ran == ["/etc/passwd"]
    messages, system = model.sent[1]
    assert messages == USER                                 # no refused call, no error
    assert system == "SYSTEM\n\n" + NO_TOOLS_NOTE           # no tool instruction
    assert rounds.results[0].action() == {
        "kind": "tool", "verb": "READ_DOC", "argument": "/etc/passwd", "refused": True,
        "error": "error: '/etc/passwd' is outside (src, notes.md)"}


async def test_a_model_that_keeps_writing_protocol_lines_fails_without_its_line_becoming_the_answer():
    tools, _ = _protocol()
    model = Model("READ_DOC: /etc/passwd", "READ_DOC: /etc/passwd", "READ_DOC: /etc/passwd")
    rounds = await _rounds(tools, model)
    assert (rounds.answer, rounds.ended) == (None, "failed")
    assert len(model.sent) == 2 and model.replies == ["READ_DOC: /etc/passwd"]


async def test_the_budget_is_spent_then_the_model_answers_from_what_it_read_without_tools():
    tools, ran = _protocol(max_calls=1)
    model = Model("READ_DOC: notes.md", "READ_DOC: src/x.py", "From my notes: the FIFO prunes.")
    rounds = await _rounds(tools, model)
    assert (rounds.answer, rounds.ended) == ("From my notes: the FIFO prunes.", "answered_without_tools")
    assert rounds.why == "the tool budget (1) is spent" and ran == ["notes.md"]
    messages, system = model.sent[2]
    # the successful read stays (it is what the answer is made of); no tool instruction
    assert messages == [*USER, ChatMessage("assistant", "READ_DOC: notes.md"),
                        ChatMessage("user", "[READ_DOC notes.md]\n# notes\nthe FIFO prunes")]
    assert "READ_DOC" not in system and system.endswith(NO_TOOLS_NOTE)


async def test_a_verb_not_offered_for_this_focus_is_refused_without_running():
    tools, ran = _protocol()
    model = Model("Hi Dana! READ_DOC: /home/user/documents/placeholder.txt", "Nice to meet you, Dana.")
    rounds = await _rounds(tools, model, focus="Hello! My name is Dana.")
    assert (rounds.answer, rounds.ended, ran) == ("Nice to meet you, Dana.", "answered_without_tools", [])
    assert model.sent[0][1] == "SYSTEM"                     # nothing offered, no tool lines
    assert rounds.results[0].text == "error: READ_DOC is not available for this message"


async def test_with_no_budget_a_protocol_line_still_gets_the_request_without_tools():
    tools, ran = _protocol(max_calls=0)
    model = Model("READ_DOC: notes.md", "The notes are not open to me now.")
    rounds = await _rounds(tools, model)
    assert (rounds.answer, rounds.ended, ran) == ("The notes are not open to me now.", "answered_without_tools", [])
    assert rounds.why == "the tool budget (0) is spent"
    assert [s for _, s in model.sent] == ["SYSTEM", "SYSTEM\n\n" + NO_TOOLS_NOTE]


async def test_an_async_handler_is_awaited():
    tools = ToolProtocol(1)

    async def recall(name: str) -> str:
        return f"steps of {name}"

    tools.register(ToolVerb("RECALL_SKILL", recall, "RECALL_SKILL: <name>", "For skills."))
    model = Model("RECALL_SKILL: baking", "First preheat.")
    rounds = await tools.rounds(model, str, USER, system="S", focus="x")
    assert rounds.answer == "First preheat."
    assert model.sent[1][0][-1] == ChatMessage("user", "[RECALL_SKILL baking]\nsteps of baking")


async def test_the_action_check_runs_before_a_call_and_a_refused_call_never_runs():
    sent: list[str] = []
    tools = ToolProtocol(2)
    tools.register(ToolVerb("SEND_MAIL", lambda to: sent.append(to) or "sent", "SEND_MAIL: <to>", "Never."))
    tools.register(ToolVerb("READ_DOC", lambda path: "# notes", "READ_DOC: <path>", "For notes.", kind="read_doc"))
    checked: list[tuple[str, str]] = []

    def permit(verb: ToolVerb, reply: str) -> str | None:
        checked.append((verb.kind, reply))
        return "confidence 0.40 < 0.95" if verb.kind == "external_effect" else None

    model = Model("READ_DOC: notes.md", "SEND_MAIL: boss@example.com", "I did not send it.")
    out = await tools.rounds(model, lambda text: text, USER, system="SYSTEM", focus="notes", permit=permit)
    assert sent == [] and out.answer == "I did not send it." and out.ended == "answered_without_tools"
    assert checked == [("read_doc", "READ_DOC: notes.md"), ("external_effect", "SEND_MAIL: boss@example.com")]
    assert [(r.call.verb, r.refused, r.text) for r in out.results] == [
        ("READ_DOC", False, "# notes"),
        ("SEND_MAIL", True, "error: the action check refused SEND_MAIL: confidence 0.40 < 0.95")]
