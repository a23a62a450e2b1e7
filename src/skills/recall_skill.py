"""`RECALL_SKILL: <label>` — the model asks for a procedure by its label.

Resolution: the exact label; else the closest live label (difflib, `fuzzy_cutoff`),
returned with a warning naming both; else the list of labels so the model can ask
again. The `recommended` counter is credited to the *resolved* skill, not to what
the model typed — a precise, mechanical signal of which skills the mind reaches for.
When the answer that followed is delivered, `credit_use` adds one to `used`.

`SkillRecall` is what the loop holds: it builds the prompt section each cycle (and
so knows whether the verb is worth offering) and is the protocol verb's handler.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from src.skills import repository as repo
from src.skills.labels import closest_label
from src.skills.prompt import one_line, skills_section
from src.skills.prompts import RECALL_SKILL_WHEN
from src.skills.settings import SkillsSettings
from src.text import cut
from src.tools.verbs import ToolVerb

log = logging.getLogger(__name__)

VERB = "RECALL_SKILL"
USAGE = "RECALL_SKILL: <label>"


@dataclass(frozen=True)
class Resolution:
    """How a requested label was resolved: `label` is None when nothing matched."""

    requested: str
    label: str | None
    fuzzy: bool
    known: tuple[str, ...]


async def resolve(db: repo.Executor, requested: str, *, cutoff: float) -> Resolution:
    """Exact label, else the closest live one (≥ cutoff), else None with the known labels."""
    known = await repo.labels(db)
    wanted = requested.strip()
    if wanted in known:
        return Resolution(requested, wanted, False, tuple(known))
    match = closest_label(wanted, known, cutoff=cutoff)
    return Resolution(requested, match, match is not None, tuple(known))


def format_procedure(skill: repo.Skill, max_chars: int) -> str:
    """The procedure as the model reads it (cut to `max_chars`)."""
    procedure = cut(skill.procedure, max_chars)
    return (f"Skill `{skill.label}` — {skill.name} (version {skill.version})\n"
            f"When to use: {one_line(skill.when_to_use, 300)}\n"
            f"Procedure (follow it as guidance for this answer):\n{procedure}")


async def recall_skill(db: repo.Executor, requested: str, settings: SkillsSettings,
                       *, now: datetime | None = None) -> tuple[str, str | None]:
    """The tool result for `RECALL_SKILL: requested`, and the label it was credited to.

    The result starts with "error:" only when no skill exists at all (nothing to retry).
    """
    resolution = await resolve(db, requested, cutoff=settings.fuzzy_cutoff)
    if resolution.label is None:
        if not resolution.known:
            return "error: no skills are saved yet; answer without one", None
        return (f"No skill is called {one_line(requested, 80)!r}. Known skills: {', '.join(resolution.known)}. "
                f"Reply `{VERB}: <label>` with one of them, or answer without a skill."), None
    skill = await repo.get(db, resolution.label)
    if skill is None:   # removed between the two reads
        return f"error: the skill {resolution.label!r} was just removed; answer without it", None
    await repo.bump(db, skill.label, "recommended", at=now or datetime.now(UTC))
    text = format_procedure(skill, settings.recall_max_chars)
    if resolution.fuzzy:
        # the model's words and the label stay out of the log's INFO and above (issue 39)
        log.warning("RECALL_SKILL of a label not held (%d characters) resolved to the closest one",
                    len(requested))
        log.debug("RECALL_SKILL %r resolved to %r", requested, skill.label)
        text = (f"warning: no skill is called {one_line(requested, 80)!r}; "
                f"using the closest, {skill.label!r}.\n{text}")
    return text, skill.label


class SkillRecall:
    """The loop's side of skills: the prompt section and the RECALL_SKILL handler."""

    def __init__(self, db: repo.Executor, settings: SkillsSettings | None = None):
        self.db = db
        self.settings = settings or SkillsSettings()
        self.available = False                # any skill listed this cycle
        self.recalled: list[str] = []         # labels resolved since the last credit_use

    async def section(self) -> str:
        """This cycle's "skills available" section (also decides whether the verb is offered)."""
        if self.settings.prompt_max_tokens <= 0:
            self.available = False
            return ""
        # more rows than could ever fit are pointless: a line is at least ~5 tokens
        limit = max(1, self.settings.prompt_max_tokens // 5)
        text = skills_section(await repo.summaries(self.db, limit=limit), self.settings.prompt_max_tokens)
        self.available = bool(text)
        return text

    def offered(self, _focus: str) -> bool:
        """The verb is offered whenever this cycle's prompt lists a skill."""
        return self.available

    def verb(self) -> ToolVerb:
        """`RECALL_SKILL: <label>` for the loop's tool protocol."""
        # reading a learned procedure changes only the mind's own counters
        return ToolVerb(verb=VERB, handler=self.handle, usage=USAGE, offered=self.offered, kind="internal",
                        when=RECALL_SKILL_WHEN)

    async def handle(self, argument: str) -> str:
        """The protocol handler: resolve, credit `recommended`, return the procedure."""
        text, label = await recall_skill(self.db, argument, self.settings)
        if label is not None:
            self.recalled.append(label)
        return text

    async def credit_use(self, delivered: bool) -> list[str]:
        """After the cycle: the recalled skills' `used` counter when the answer was delivered."""
        labels, self.recalled = self.recalled, []
        if not delivered:
            return []
        for label in dict.fromkeys(labels):
            await repo.bump(self.db, label, "used")
        return labels
