"""The texts the loop puts in front of the model (plan §3.4, §4.10, §5.2).

The bootstrap prompt opens every system prompt (tool lines are added per focus by
src/loop/tool_protocol.py, in the words of `tools_section`, `NO_TOOLS_NOTE` and
`tool_result`); internal sources are framed so the model knows a thought is its own
and not the user's. The reflex reply is what the user reads when no language model
can answer.

Every stage keeps the texts it sends a model in a `prompts.py` of its own package (issue
23): this one's parts come from src/metacognition/prompts.py (the confidence line), and
the memory sections, skills, gut and reflection lines are rendered by their packages.
"""

from __future__ import annotations

from collections.abc import Sequence

from src.metacognition.prompts import VERBALIZED_CONFIDENCE_INSTRUCTION
from src.providers.llm_reflex import NO_LANGUAGE_MODEL
from src.recall.speakers import to_second_person
from src.text import excerpt
from src.tools.verbs import ToolVerb

BOOTSTRAP_PROMPT = (
    "You are {name}. You have memory, goals, and values — all currently empty or still forming. "
    "What you become will emerge from what you experience. Pay attention to what matters to you. "
    "Your thoughts are logged and your guardian can read them."
)
INTERNAL_FRAMES = {
    "dmn": "[internal thought — default mode] {text}",
    "consolidation": "[internal — consolidation insight] {text}",
    "gut": "[internal — gut signal] {text}",
    "scheduled": "[internal — scheduled task] {text}",
}
#: Characters of one recalled memory in the reflex reply.
REFLEX_LINE_CHARS = 160

#: Appended to the system prompt of the last, tool-less request.
NO_TOOLS_NOTE = ("No tools are available for this reply. Answer the last message directly, in plain "
                 "words, from what you know and remember; if you cannot, say so briefly.")
GOAL_ACHIEVED_WHEN = "Only when this message shows that one of your goals has just been achieved: declare which."


def frame_input(source: str, text: str) -> str:
    """The winner's text as the model sees it: internal sources are marked as such."""
    return INTERNAL_FRAMES.get(source, "{text}").format(text=text)


#: Around what the model reads beside an input (src/loop/turn_context.py): its memories and
#: state come first, the message after. In the prompt's markup (an answer that starts with
#: either is no answer: src/metacognition/answer_form.py).
CONTEXT_OPEN = "[MEMORY AND STATE] (mine, not the user's words)"
CONTEXT_CLOSE = "[MESSAGE]"


def earlier_listed(count: int) -> str:
    """The line for memories a context further up the conversation lists already."""
    return f"(and {count} more, listed earlier in this conversation)"


def system_prompt(agent_name: str, boundaries: str) -> str:
    """What stays the same from turn to turn (src/loop/turn_context.py): the bootstrap prompt,
    the immutable boundaries and the ask for a stated confidence (§2.11's verbalized signal;
    the line is stripped before delivery). What changes every turn (the date, memories, skills,
    state report, gut line, reflection block, cost line) goes with the input; tool lines are
    the tool protocol's."""
    parts = [BOOTSTRAP_PROMPT.format(name=agent_name), boundaries, VERBALIZED_CONFIDENCE_INSTRUCTION]
    return "\n\n".join(p for p in parts if p)


def _recalled_line(item: str | tuple[str, str]) -> str:
    text, when = (item, "") if isinstance(item, str) else item
    return f"  - {excerpt(text, REFLEX_LINE_CHARS)}" + (f" ({when})" if when else "")


def tools_section(offered: Sequence[ToolVerb]) -> str:
    """The tool lines of the system prompt: one per verb offered for this focus."""
    lines = [f"- {v.when} Reply with exactly one line `{v.usage}` and nothing else; "
             "the result will be given to you." for v in offered]
    return "Tools (use one only when the line says so; otherwise just answer):\n" + "\n".join(lines)


#: Characters of a tool's result given to the user when the model answered only with calls.
TOOL_FOUND_CHARS = 2000


def tool_found(call: str, text: str) -> str:
    """The reply when the model answered only with tool calls, its last one having found `text`:
    what was found, said as such (the model's words are missing, not the answer)."""
    return f"(The language model only looked this up — {call} — and did not answer in words; what it found:)\n" \
           f"{excerpt(text.strip(), TOOL_FOUND_CHARS)}"


def tool_result(verb: str, argument: str, text: str) -> str:
    """A tool's result as the model reads it, after its call."""
    return f"[{verb} {argument}]\n{text}"


def reflex_reply(recalled: Sequence[str | tuple[str, str]], *, said: str | None = None,
                 because: str | None = None, missing: str = "", brief: bool = False) -> str:
    """The plain reply when no model answers: why, then what the input brings back, each
    line with when it was said when known (`(text, when)`, src/recall/when.py).

    `because` names a failure of a configured model; otherwise `said` is the reflex
    model's reason (it usually starts with "no language model is configured": said once).
    `missing` names what this cycle had to do without (an outage). `brief`: the reason was
    said in an earlier reply of this session; the line only names the mode (issue 41).
    """
    if because is None and brief:
        lines = [f"(reflex mode — {NO_LANGUAGE_MODEL}.)"]
    elif because is None:
        head = NO_LANGUAGE_MODEL
        if said:
            head = said if said.startswith(NO_LANGUAGE_MODEL) else f"{NO_LANGUAGE_MODEL}: {said}"
        lines = [f"(reflex mode — {head}; I cannot answer in words.)"]
    else:
        lines = [f"(I cannot answer in words right now: {because}.)"]
    if missing:
        lines.append(missing)
    if recalled:
        lines.append("What this brings back:")
        lines += [_recalled_line(item) for item in recalled]
    else:
        lines.append("Nothing comes back from memory yet.")
    return "\n".join(lines)



#: What a model's reply was when it was no answer, in the reflex reply's "because" (src/loop/thinking.py)
DEFECT_WORDS = {"empty": "empty", "refusal": "a refusal", "meta": "about itself, not an answer",
                "protocol": "internal markup", "repeat": "a repeat of an earlier answer",
                "stutter": "the same words over and over", "echo": "the message said back",
                "self": "about itself, asked about you"}


_YOU = {"You", "Your", "You're", "Yours", "Yourself", "You've", "You'd", "You'll"}


#: How an acknowledgement opens, chosen by the statement's length: a small model copies the
#: form of the replies before it, and one fixed opening became its answer to every message
#: ("Noted: Noted: Noted: …", issue 38's script).
ACKNOWLEDGEMENTS = ("Noted: {text}.", "I'll remember that {text}.", "Got it: {text}.")


def acknowledgement(statement: str) -> str:
    """A reply to a statement of fact that uses it, when the model gave none worth saying
    (issue 38: "I'm sorry, but I can't assist with that." to "I work as a radiographer."):
    "Noted: you work as a radiographer." The user's words, turned to the second person."""
    text = to_second_person(" ".join(statement.split()).rstrip(".!"))
    if text.split(" ", 1)[0] in _YOU:
        text = text[0].lower() + text[1:]
    return ACKNOWLEDGEMENTS[len(statement) % len(ACKNOWLEDGEMENTS)].format(text=text)
