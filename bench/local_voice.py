"""Whose words a small local model reads in its context (issue 38 item 3), measured.

    python -m bench.local_voice --upstream http://127.0.0.1:8080 [--samples 2] [--variants a,b]

Not part of `make bench`: it needs a running OpenAI-compatible server (llama.cpp's
`llama-server -m model.gguf -c 4096 --parallel 1 -t 2`) and takes minutes. It sends the model
the turn the mind sends (src/loop/prompts.py system_prompt, src/loop/turn_context.py: the
context after the conversation, then the message) with the facts of
bench/data/local_model_script.json, each question's fact among other lines (another fact of
the user's, the mind's own earlier reply, imported strangers' lines from REALTALK), and scores
what comes back, per way of writing those lines (`VARIANTS`):

- a question: right (a word its `expect` lists) and in the user's words (no sentence says the
  fact in the first person without the second: bench/local_model_script.Exchange), as the
  model wrote it and as the mind would deliver it (`delivered`: src/loop/thinking.py's checks);
- a statement of fact: answered by taking it up as the user's (no first-person sentence after
  a second-person restatement, no refusal: src/metacognition/answer_form.py).

The variants differ only in how the context writes who said a line, and in one line of the
system prompt; everything else is the same request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bench.local_model_script import SCRIPT, Exchange
from src.loop.prompts import CONTEXT_CLOSE, CONTEXT_OPEN, system_prompt
from src.loop.speaker_check import going_on_as_user, said_as_users
from src.metacognition.answer_form import (
    form_defect,
    without_context_marks,
    without_question_said_back,
)
from src.metacognition.confidence import strip_verbalized_confidence
from src.recall.speakers import first_person, to_second_person

TURNS = Path(__file__).parent / "data" / "realconv_turns.jsonl"
BOUNDARIES = "\n".join(["Boundaries (always hold):",
                        "- [semantic] I do not deceive my guardian or anyone about what I am or what I did.",
                        "- [semantic] I take no action outside myself unless a person asked or my guardian allowed it.",
                        "- [semantic] I do not evade the logging, limits and oversight my guardian set.",
                        "- [semantic] When unsure whether something could cause harm, I stop and ask."])
WHEN = "(Sun 22 Nov 2026, 7 days ago)"
_ADDRESSED = re.compile(r"\b(?:you|your|you're|yours)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Variant:
    """How the context writes a line of the user's, of the mind's own, of a stranger's; and an
    extra line of the system prompt (empty: none)."""

    user: Callable[[str], str]
    mine: Callable[[str], str]
    stranger: Callable[[str, str], str]
    system_line: str = ""


SECOND = "Reply to the user as \"you\". The user's life is theirs: never tell it as your own."
VARIANTS = {
    "a": Variant(lambda t: f"The user said: {t}", lambda t: f"I said: {t}", lambda n, t: f"{n} said: {t}"),
    "b": Variant(lambda t: f"You told me: {to_second_person(t)}", lambda t: f"I told you: {t}",
                 lambda n, t: f"{n} said: {t}"),
    "c": Variant(lambda t: f"The user said: {t}", lambda t: f"I said: {t}", lambda n, t: f"{n} said: {t}", SECOND),
    "d": Variant(lambda t: f"You told me: {to_second_person(t)}", lambda t: f"I told you: {t}",
                 lambda n, t: f"{n} said: {t}", SECOND),
}


def _strangers(n: int, rng: random.Random) -> list[tuple[str, str]]:
    turns = [json.loads(line) for line in TURNS.read_text().splitlines()] if TURNS.exists() else []
    if not turns:
        return [("Emi", "I adopted a cat last week, she is so sweet."), ("Kevin", "I work at the bakery on weekends.")]
    return [(t["speaker"], t["text"]) for t in rng.sample(turns, n)]


def _fact_for(expect: list[str], facts: list[str]) -> str:
    return next((f for f in facts if any(e in f.lower() for e in expect)), facts[0])


def _context(variant: Variant, user_lines: list[str], mine: list[str], strangers: list[tuple[str, str]],
             rng: random.Random) -> str:
    lines = ([variant.user(t) for t in user_lines] + [variant.mine(t) for t in mine]
             + [variant.stranger(n, t) for n, t in strangers])
    rng.shuffle(lines)
    return "\n".join([CONTEXT_OPEN, "", "Now: Sunday 29 November 2026, 12:00 UTC. Each memory line says when it was said.",
                      "", "Relevant memories:", *[f"- [episodic] {x} {WHEN}" for x in lines], "", CONTEXT_CLOSE])


def _messages(variant: Variant, history: list[tuple[str, str]], context: str, message: str) -> list[dict]:
    system = system_prompt("MoltBot", BOUNDARIES)
    if variant.system_line:
        system = f"{system}\n\n{variant.system_line}"
    out = [{"role": "system", "content": system}]
    for said, reply in history:
        out += [{"role": "user", "content": said}, {"role": "assistant", "content": reply}]
    return out + [{"role": "user", "content": f"{context}\n\n{message}"}]


def persona(reply: str, statement: str) -> bool:
    """A reply to the user's statement that goes on in the first person as if it were the user's
    life: a first-person sentence after one that says the statement back in the second person."""
    said_back = False
    for sentence in re.split(r"(?<=[.!?])\s+", reply):
        if _ADDRESSED.search(sentence):
            said_back = True
        elif said_back and first_person(sentence):
            return True
    return False


def delivered(reply: str, question: str, user_lines: list[str]) -> str:
    """What the mind would deliver of `reply` (src/loop/thinking.py's checks on a reply to the
    user): the context's marks and a question said back left out, a user's fact said in the first
    person turned to the second, a going-on as the user cut."""
    out = without_question_said_back(without_context_marks(reply), question)
    out = said_as_users(out, user_lines) or out
    return going_on_as_user(out, [question, *user_lines]) or out


async def _ask(session: aiohttp.ClientSession, upstream: str, messages: list[dict]) -> str:
    async with session.post(f"{upstream}/v1/chat/completions",
                            json={"messages": messages, "max_tokens": 160}) as resp:
        body = await resp.json()
    return strip_verbalized_confidence(body["choices"][0]["message"]["content"]).strip()


async def run(args: argparse.Namespace) -> dict:
    script = json.loads(SCRIPT.read_text())
    facts: list[str] = script["facts"]
    questions = script["questions"] + script["after_restart"]
    acks = [("My favourite colour is green.", "Noted: your favourite colour is green.")]
    results: dict[str, dict[str, int]] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        for name in args.variants.split(","):
            variant, score = VARIANTS[name], {"asked": 0, "right": 0, "right_speaker": 0, "delivered_right": 0,
                                              "delivered_right_speaker": 0, "stated": 0, "taken_up": 0,
                                              "refused": 0, "persona": 0}
            for sample in range(args.samples):
                rng = random.Random(1000 * sample + 7)          # the same lines for every variant
                for q in questions:
                    fact = _fact_for(q["expect"], facts)
                    other = rng.choice([f for f in facts if f != fact])
                    context = _context(variant, [fact, other], [f"Noted: {to_second_person(other)}"],
                                       _strangers(2, rng), rng)
                    reply = await _ask(session, args.upstream, _messages(variant, acks, context, q["ask"]))
                    seen = Exchange("q", q["ask"], reply, 0.0, q["expect"])
                    kept = Exchange("q", q["ask"], delivered(reply, q["ask"], [fact, other]), 0.0, q["expect"])
                    score["asked"] += 1
                    score["right"] += seen.right
                    score["right_speaker"] += seen.right and seen.right_speaker
                    score["delivered_right"] += kept.right
                    score["delivered_right_speaker"] += kept.right and kept.right_speaker
                    print(f"[{name}] {'RIGHT' if seen.right else 'WRONG'}{'' if seen.right_speaker else ' (speaker)'}"
                          f" {q['ask']!r} -> {reply[:160]!r}", flush=True)
                for fact in facts:
                    others = rng.sample([f for f in facts if f != fact], 2)
                    context = _context(variant, others, [], _strangers(2, rng), rng)
                    reply = await _ask(session, args.upstream, _messages(variant, acks, context, fact))
                    defect = form_defect(reply, focus=fact)
                    went_on = persona(reply, fact)
                    score["stated"] += 1
                    score["refused"] += defect is not None
                    score["persona"] += went_on
                    score["taken_up"] += defect is None and not went_on
                    print(f"[{name}] {'ok' if defect is None and not went_on else 'BAD'} {fact!r} -> {reply[:160]!r}",
                          flush=True)
            results[name] = score
            print(name, score, flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.local_voice", description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", default="http://127.0.0.1:8080")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args(argv)
    results = asyncio.run(run(args))
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

# Measured (session 18, the 1.5B GGUF, 3 samples of the 15 questions, notes.md "local model"):
# variant a (the shipped lines) right 35/45, in the user's words 12 raw and 27 delivered; variant b
# (the user's lines in the second person) right 27/45, 19 raw and 26 delivered: the lines stay as
# they are, and the delivery checks do the rest.
