"""The guardian's skill commands at the prompt: /skills and /skill save|show|remove|history|outcome.

The same operations back the CLI (src/memory/skills_cli.py). Text coming from the
database or a model is shown with control characters escaped, so a stored escape
sequence cannot repaint the operator's terminal.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from src.providers.protocols import LanguageModel
from src.skills import repository as repo
from src.skills.drafting import save_from_conversation
from src.skills.labels import closest_label
from src.skills.repository import SkillError
from src.skills.settings import SkillsSettings

USAGE = ("usage: /skill save [hint] | /skill show <label> | /skill remove <label> | /skill history <label> "
         "| /skill outcome <label> success|failure | /skills")


def escape_controls(text: str) -> str:
    """Control characters (ESC, BEL, CR, …) as \\xNN; newlines and tabs kept."""
    return "".join(ch if ch in "\n\t" or unicodedata.category(ch) != "Cc" else f"\\x{ord(ch):02x}"
                   for ch in text)


#: How to get a first skill, by where the list is read: at the prompt with a model, at the
#: prompt in reflex mode (drafting needs a model), in the operator CLI.
EMPTY_HINTS = {
    "prompt": "/skill save [hint] drafts one from this conversation",
    "reflex": "/skill save needs a language model (none is configured); python -m src.memory skills add writes one",
    "cli": "skills add writes one by hand; skills draft TRANSCRIPT drafts one with a language model",
}


def quoted(text: str) -> str:
    """A typed label in quotes, control characters escaped: 'label', not a Python repr."""
    return f"'{escape_controls(text)}'"


def format_list(skills: Sequence[repo.Skill], empty_hint: str = EMPTY_HINTS["cli"]) -> str:
    """One line per skill with its counters (for /skills and `skills list`); with none, how
    to make the first one where the reader is (`EMPTY_HINTS`)."""
    if not skills:
        return f"no skills yet; {empty_hint}"
    lines = [f"{len(skills)} skill{'s' if len(skills) != 1 else ''} (recalled/used/succeeded/failed):"]
    for s in skills:
        lines.append(f"  {s.label}  v{s.version}  {s.recommended}/{s.used}/{s.succeeded}/{s.failed}  "
                     f"— {escape_controls(' '.join(s.when_to_use.split()))}")
    return "\n".join(lines)


def format_skill(skill: repo.Skill, note: str = "") -> str:
    """A skill in full: fields, counters, provenance and procedure."""
    origin = ", ".join(f"{k}={v}" for k, v in skill.provenance.items() if v not in (None, "", []))
    return escape_controls("\n".join(filter(None, [
        note,
        f"{skill.label} — {skill.name} (version {skill.version})",
        f"when to use: {skill.when_to_use}",
        f"recalled {skill.recommended}, used {skill.used}, succeeded {skill.succeeded}, "
        f"failed {skill.failed}; created {skill.created_at:%Y-%m-%d %H:%M}, "
        f"updated {skill.updated_at:%Y-%m-%d %H:%M}",
        f"provenance: {origin or 'none recorded'}",
        "procedure:",
        skill.procedure,
    ])))


async def find(db: repo.Executor, label: str, cutoff: float) -> tuple[repo.Skill | None, str]:
    """The skill for a typed label (typo-tolerant) and a note when it was not exact."""
    skill = await repo.get(db, label)
    if skill is not None:
        return skill, ""
    known = await repo.labels(db)
    match = closest_label(label, known, cutoff=cutoff)
    if match is None:
        listing = ", ".join(known) if known else "none yet"
        return None, f"no skill called {quoted(label)}; known skills: {listing}"
    return await repo.get(db, match), f"(no skill called {quoted(label)}; showing {quoted(match)})"


class SkillCommands:
    """Handlers for the prompt's /skills and /skill; `window` gives the recent conversation."""

    def __init__(self, db: repo.Executor, llm: LanguageModel, window: Callable[[], Sequence[Any]],
                 settings: SkillsSettings | None = None, session_id: str | None = None):
        self.db = db
        self.llm = llm
        self.window = window
        self.settings = settings or SkillsSettings()
        self.session_id = session_id

    async def skills(self, _args: str) -> str:
        """/skills — every skill with its counters."""
        hint = EMPTY_HINTS["prompt" if getattr(self.llm, "configured", False) else "reflex"]
        return format_list(await repo.list_all(self.db), hint)

    async def skill(self, args: str) -> str:
        """/skill <subcommand> …"""
        sub, _, rest = args.strip().partition(" ")
        rest = rest.strip()
        handlers = {"save": self._save, "show": self._show, "remove": self._remove,
                    "history": self._history, "outcome": self._outcome, "list": self.skills}
        handler = handlers.get(sub.lower())
        if handler is None:
            return USAGE
        try:
            return await handler(rest)
        except SkillError as exc:
            return escape_controls(str(exc))

    async def _save(self, hint: str) -> str:
        s = self.settings
        skill, kept = await save_from_conversation(
            self.db, self.llm, self.window(), hint=hint, session_id=self.session_id,
            max_messages=s.draft_messages, message_chars=s.draft_message_chars, max_tokens=s.draft_max_tokens)
        # what became of the guardian's steps and the draft's comes after the skill itself
        return f"{format_skill(skill, note=f'saved skill {quoted(skill.label)}:')}\n{escape_controls(kept.note())}"

    async def _show(self, label: str) -> str:
        if not label:
            return "usage: /skill show <label>"
        skill, note = await find(self.db, label, self.settings.fuzzy_cutoff)
        return format_skill(skill, note) if skill is not None else note

    async def _remove(self, label: str) -> str:
        if not label:
            return "usage: /skill remove <label>"
        # removal is exact on purpose: a typo must not remove the wrong skill
        if await repo.remove(self.db, label.strip()):
            return f"removed skill {quoted(label.strip())} (its versions stay in skill_versions)"
        known = await repo.labels(self.db)
        match = closest_label(label, known, cutoff=self.settings.fuzzy_cutoff)
        hint = f"; did you mean {quoted(match)}?" if match else ""
        return f"no skill called {quoted(label)}, so nothing was removed{hint}"

    async def _history(self, label: str) -> str:
        if not label:
            return "usage: /skill history <label>"
        skill, note = await find(self.db, label, self.settings.fuzzy_cutoff)
        if skill is None:
            return note
        older = await repo.versions(self.db, skill.label)
        lines = [note] if note else []
        lines.append(f"{skill.label}: version {skill.version} (current), {len(older)} earlier")
        lines += [f"  v{v.version}  written {v.written_at:%Y-%m-%d %H:%M}, replaced "
                  f"{v.replaced_at:%Y-%m-%d %H:%M}: {' '.join(v.when_to_use.split())}" for v in older]
        return escape_controls("\n".join(lines))

    async def _outcome(self, args: str) -> str:
        label, _, result = args.partition(" ")
        counter = {"success": "succeeded", "failure": "failed"}.get(result.strip().lower())
        if not label or counter is None:
            return "usage: /skill outcome <label> success|failure"
        value = await repo.bump(self.db, label, counter)
        if value is None:
            return f"no skill called {quoted(label)}, so nothing was recorded"
        return f"{label}: {counter} is now {value}"
