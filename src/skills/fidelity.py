"""`/skill save` keeps the guardian's steps and numbers as they gave them (issue 38 item 5). Pure.

Measured with a 1.5B model: the skill saved from "steep exactly 3 minutes" said "a few
minutes", and held steps nobody gave ("stir occasionally", "milk or sugar"). The drafting
model is asked only to order the guardian's steps and name the skill
(src/skills/prompts.py); `keep_users_steps` then holds its draft against the guardian's own
lines, the only source (never the mind's replies):

- the guardian's steps: their lines cut at list markers, sentence ends and "then"
  (`steps_of`), leaving out questions, lines that introduce a list ("Here's how:") and
  thanks or asks to save; only lines of messages that share words with the draft count
  (`procedure_lines`), so the rest of the conversation ("My name is Dana") is no step;
- their numbers, each with its qualifier and unit as written ("exactly 3 minutes",
  "90 °C"; `quantities_of`).

A draft that lacks one of the guardian's numbers or steps, or holds a number they never
gave, is not saved: the procedure is rebuilt from the guardian's own steps, their words in
their order. Otherwise the draft is kept (its order, its labels) without the steps the
guardian never gave. When the guardian's lines hold no steps at all, nothing can be held
against them: the draft's steps are kept, each marked as not the guardian's, and the
reply says so. `Fidelity.note` is what the save's reply says was kept and dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from src.consolidation.clustering import STOP_WORDS, words

#: A user step is in the draft when this share of its content words is in the draft's steps
#: (so labels, a reordering, a step cut in two are allowed; a dropped or changed word is not).
COVERED = 0.8
#: A draft step is the guardian's when at least this share of its content words is in one of
#: their steps.
THEIRS = 0.5
#: A user message is part of the procedure when it shares this many content words with
#: the draft (or half of its own).
SHARED_WORDS = 2
MARK = "[not from the guardian]"

#: Words of order and of asking to keep: they say where a step goes, not what it is.
_ORDER = frozenset({"first", "firstly", "second", "secondly", "next", "after", "afterwards", "finally",
                    "lastly", "now", "step", "steps", "then", "once"})
_CHATTER_WORDS = """thanks thank great ok okay good nice perfect cool awesome worked works work save saved
remember skill habit please yes no sure right fine time later again always way how procedure exactly done
got""".split()
_LINE_MARKER = re.compile(r"^\s*(?:(?:step\s+)?\d{1,2}[.):]|[-*•])\s+", re.IGNORECASE)
#: A list marker after a sentence ends, on the same line ("Boil it. 2. Warm the pot").
_INLINE_MARKER = re.compile(r"(?<=[.:;!?])\s+(?=(?:step\s+)?\d{1,2}[.)]\s)", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")
#: "…, then …", "… and then …", "…, after that …": one step ends, the next begins. Not the
#: "then" of "if …, then …", which belongs to its condition (`_CONDITION`).
_THEN = re.compile(r"(,?\s+(?:and\s+)?(?:then|after\s+that|afterwards|and\s+finally|finally)\b[,:]?\s+)",
                   re.IGNORECASE)
_CONDITION = re.compile(r"^\s*(?:if|when|unless|in case)\b", re.IGNORECASE)
#: A sentence that announces the procedure instead of giving a step: "Let me teach you how I
#: brew my tea.", "I'll show you how…", "This is how I do it." (the 1.5B run's skill kept
#: "Let me teach you how I brew my tea" as its first step: it shares the skill's words).
_INTRO = re.compile(r"^\s*(?:(?:ok(?:ay)?|so|now|right)[,!]?\s+)?(?:(?:let\s+me|let's|i'?ll|i\s+will|i\s+want\s+to|"
                    r"i'?d\s+like\s+to|i\s+can)\s+(?:teach|show|tell|explain|walk)\b|"
                    r"(?:here'?s|here\s+is|this\s+is|that'?s|that\s+is)\s+how\b)", re.IGNORECASE)
_LEADING = re.compile(r"^(?:(?:and|so)\s+)?(?:first(?:ly)?|second(?:ly)?|then|next|after\s+that|afterwards|"
                      r"finally|lastly|now)\b[,:]?\s*", re.IGNORECASE)

_NUMBER_WORDS = {"one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
                 "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12"}
_QUALIFIER = (r"exactly|precisely|about|around|approximately|approx\.?|roughly|at\s+least|at\s+most|"
              r"no\s+more\s+than|no\s+less\s+than|up\s+to|under|over|less\s+than|more\s+than|nearly|almost")
_NUMBER = (r"\d+(?:[.,]\d+)?(?:\s*(?:-|–|to)\s*\d+(?:[.,]\d+)?)?|\d+/\d+|[½¼¾]|"
           rf"(?:{'|'.join(_NUMBER_WORDS)})\b")
_QUANTITY = re.compile(
    rf"(?<![\w.])(?<!step )(?:(?P<qualifier>{_QUALIFIER})\s+)?(?P<number>{_NUMBER})(?![\w.,/]\d)"
    r"(?:\s*(?P<unit>°\s?[CF]\b|°|%|[^\W\d_]+(?:-[^\W\d_]+)?))?",
    re.IGNORECASE)


@dataclass(frozen=True)
class Quantity:
    """A number as the guardian wrote it (`text`), and the form two numbers are compared in."""

    text: str
    key: tuple[str, str, str]          # (qualifier, number, unit), normalised


def quantities_of(text: str) -> list[Quantity]:
    """The numbers in `text` with their qualifier and unit ("exactly 3 minutes", "90 °C").

    A number word counts only before a unit ("one teaspoon"); a word after a number that is
    a function word ("3 of them") is no unit.
    """
    found = []
    for m in _QUANTITY.finditer(text):
        number = m.group("number").lower()
        unit = (m.group("unit") or "").lower()
        if unit and unit in STOP_WORDS | _ORDER | {"and", "or", "not", "per", "x"}:
            unit = ""
        if number in _NUMBER_WORDS and not unit:
            continue
        qualifier = " ".join((m.group("qualifier") or "").lower().rstrip(".").split())
        digits = re.sub(r"\s*(?:-|–|to)\s*", "-", _NUMBER_WORDS.get(number, number)).replace(",", ".")
        unit = unit.replace(" ", "")
        unit = unit[:-1] if len(unit) > 2 and unit.endswith("s") else unit
        end = m.end("unit") if unit else m.end("number")
        found.append(Quantity(text[m.start():end].strip(), (qualifier, digits, unit)))
    return found


def stems(text: str) -> frozenset[str]:
    """The content words of `text`, crudely stemmed ("steeping", "steeps" → "steep")."""
    out = set()
    for word in words(text):
        if word in STOP_WORDS or word in _ORDER or (len(word) < 2 and not word.isdigit()):
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        out.add(word[:-1] if len(word) > 3 and word.endswith("e") else word)
    return frozenset(out)


_CHATTER = frozenset().union(*map(stems, _CHATTER_WORDS))


def _cut_at_then(piece: str) -> list[str]:
    parts = _THEN.split(piece)               # text, separator, text, …
    out = [parts[0]]
    for separator, part in zip(parts[1::2], parts[2::2], strict=True):
        if _CONDITION.match(out[-1]):         # "if it's green, then use 80 °C": one step
            out[-1] += separator + part
        else:
            out.append(part)
    return out


def _clean(piece: str) -> str:
    piece = _LEADING.sub("", _LINE_MARKER.sub("", piece.strip())).strip()
    return re.sub(r"(?:,|;|\s+and)$", "", piece).strip()


def steps_of(text: str) -> list[str]:
    """The steps a guardian's message gives, in their words and order: cut at lines, list
    markers, sentence ends and "then"; without the questions, the lines that introduce a
    list ("Here's how I do it:", "Let me teach you how I brew my tea.") and thanks or asks
    to save."""
    out = []
    for line in text.splitlines():
        for item in _INLINE_MARKER.split(line):
            for sentence in _SENTENCE_END.split(_LINE_MARKER.sub("", item.strip())):
                for piece in _cut_at_then(sentence):
                    step = _clean(piece)
                    content = stems(step)
                    if not content or step.endswith(("?", ":")) or content <= _CHATTER or _INTRO.match(step):
                        continue
                    out.append(step)
    return out


def draft_steps(procedure: str) -> list[str]:
    """The steps of a drafted procedure: one per line or list item, markers removed, headings
    ("Steps:") left out."""
    out = []
    for line in procedure.splitlines():
        for item in _INLINE_MARKER.split(line.replace("**", "")):
            step = _LINE_MARKER.sub("", item.strip().lstrip("#").strip()).strip()
            if stems(step) and not step.endswith(":"):
                out.append(step)
    return out


def users_lines(messages: Sequence[Any]) -> list[str]:
    """The guardian's own words in `messages` (objects with role and content, as the
    conversation window holds them): their messages only, not the mind's replies nor its
    framed thoughts."""
    return [getattr(m, "words", None) or m.content for m in messages
            if m.role == "user" and getattr(m, "source_tag", "external_user") == "external_user"]


def procedure_lines(lines: Sequence[str], draft: str) -> list[str]:
    """The guardian's messages the procedure is in: those sharing `SHARED_WORDS` content words
    with the draft (its name, when-to-use and steps), or half of their own."""
    drafted = stems(draft)
    out = []
    for line in lines:
        own = stems(line)
        shared = len(own & drafted)
        if own and (shared >= SHARED_WORDS or shared >= len(own) / 2):
            out.append(line)
    return out


@dataclass(frozen=True)
class Fidelity:
    """What `/skill save` saves as the procedure, and what it kept and dropped of the draft."""

    procedure: str
    user_steps: tuple[str, ...]       # the guardian's steps, in their order
    numbers: tuple[str, ...]          # the guardian's numbers, as written
    missing_numbers: tuple[str, ...]  # the guardian's numbers the draft lacked (or changed)
    missing_steps: tuple[str, ...]    # the guardian's steps the draft lacked (or reworded)
    invented: tuple[str, ...]         # numbers in the draft the guardian never gave
    dropped: tuple[str, ...]          # the draft's steps the guardian never gave, left out
    marked: tuple[str, ...]           # the draft's steps kept with MARK (the guardian gave none)

    @property
    def rebuilt(self) -> bool:
        """The draft changed the guardian's steps or numbers: the procedure is their own lines."""
        return bool(self.missing_numbers or self.missing_steps or self.invented)

    def provenance(self) -> dict[str, Any]:
        """The counts kept with the skill (provenance.fidelity)."""
        return {"user_steps": len(self.user_steps), "user_numbers": len(self.numbers), "rebuilt": self.rebuilt,
                "dropped_steps": len(self.dropped), "marked_steps": len(self.marked)}

    def note(self) -> str:
        """What the save's reply says about the guardian's steps and the draft's."""
        if not self.user_steps:
            return (f"Your lines in this conversation give no steps, so all {len(self.marked)} are the model's, "
                    f"marked {MARK}: check them, or say the steps in your own words and /skill save again.")
        steps = _count(len(self.user_steps), "step")
        numbers = f" and {_count(len(self.numbers), 'number')} ({', '.join(self.numbers)})" if self.numbers else ""
        if self.rebuilt:
            wrong = [f"lacked {_quoted(self.missing_numbers)}"] if self.missing_numbers else []
            if self.missing_steps:
                wrong.append(f"lacked or reworded {len(self.missing_steps)} of your steps")
            if self.invented:
                wrong.append(f"gave numbers you never did ({_quoted(self.invented)})")
            lines = [f"Kept your {steps}{numbers} in your own words and order, as the draft "
                     f"{'; '.join(wrong)}."]
        else:
            lines = [f"Kept your {steps}{numbers} as you gave them; the model only ordered and named them."]
        if self.dropped:
            lines.append(f"Left out {_count(len(self.dropped), 'step')} you never gave: {_quoted(self.dropped)}.")
        return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _quoted(texts: Sequence[str]) -> str:
    return ", ".join(f"'{t.rstrip('.')}'" for t in texts)


def _numbered(steps: Sequence[str]) -> str:
    return "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))


def _covered(step: str, kept: frozenset[str]) -> bool:
    own = stems(step)
    return len(own & kept) >= COVERED * len(own)


def keep_users_steps(lines: Sequence[str], procedure: str, about: str = "") -> Fidelity:
    """Hold a drafted `procedure` against the guardian's `lines` (see the module doc).

    `about`: the draft's name and when-to-use, which also tell which of the guardian's
    messages the procedure is in."""
    drafted = draft_steps(procedure)
    user_steps = [s for line in procedure_lines(lines, f"{about}\n{procedure}") for s in steps_of(line)]
    if not user_steps:
        return Fidelity(_numbered([f"{s} {MARK}" for s in drafted]), (), (), (), (), (), (), tuple(drafted))
    # one of their steps must hold it: against all their words together, "Rinse the cups with cold
    # water" passed as theirs ("cup" from one step, "water" from another)
    user_stems = [stems(s) for s in user_steps]
    added = tuple(s for s in drafted
                  if max(len(stems(s) & own) for own in user_stems) < THEIRS * len(stems(s)))
    kept = [s for s in drafted if s not in added]
    numbers = {q.key: q.text for s in user_steps for q in quantities_of(s)}
    in_kept = {q.key: q.text for s in kept for q in quantities_of(s)}
    kept_stems = frozenset().union(*(stems(s) for s in kept))
    missing_numbers = tuple(text for key, text in numbers.items() if key not in in_kept)
    missing_steps = tuple(s for s in user_steps if not _covered(s, kept_stems))
    invented = tuple(text for key, text in in_kept.items() if key not in numbers)
    found = Fidelity("", tuple(user_steps), tuple(numbers.values()), missing_numbers, missing_steps, invented,
                     added, ())
    return replace(found, procedure=_numbered(user_steps if found.rebuilt else kept))
