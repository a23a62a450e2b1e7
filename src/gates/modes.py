"""Memory modes: the guardian decides how eagerly the mind writes (issue 17).

- autopilot — the gates decide alone (the plan's behaviour);
- copilot — what the exit gate is unsure of (buffer-cell decisions, contradictions
  judged by the LLM) waits for the guardian, asked after an answer
  (src/gates/copilot.py);
- off — nothing new is kept, and the text of an off-mode turn is written nowhere
  (issue 26): every table that logs a turn keeps `unkept_text(text)` — a placeholder
  with the text's size — instead of the text. The entry gate does not judge an
  off-mode item: it writes a tagged scratch row holding the placeholder and a
  `gate_decisions` row (rule `off`) saying so; the tag on the row is how a restart
  knows a journaled line was typed while off. The exit gate never evaluates a tagged
  row and writes nothing while off, context pruning buffers nothing, System 2
  corrections are not stored, tagged rows are deleted once past their TTL. The
  loop's logs (thought_log, escalations, gut_deltas, readiness events, outcomes,
  retrieval's consolidation_log evidence) hold the placeholder; the input journal
  holds the line until it is answered (a crash must not lose it), then the
  placeholder. Only this session's conversation window (process memory, gone at
  exit) keeps the words, so the conversation goes on making sense. Recall (with its
  mutation of existing memories), consolidation of existing memories and the loop go on.

One `MemoryMode` object is shared by the gates, the loop and the prompt's commands,
so `/memory-mode off` takes effect at the next item.
"""

from __future__ import annotations

from typing import Literal, get_args

ModeName = Literal["autopilot", "copilot", "off"]
MODES: tuple[str, ...] = get_args(ModeName)
#: scratch_buffer.metadata key marking a row admitted while the mode was off
OFF_TAG = "memory_mode"

DESCRIPTIONS = {
    "autopilot": "I decide what to keep",
    "copilot": "what I am unsure of waits for my guardian's confirmation",
    "off": "nothing new is kept; I can still recall what I already know",
}


#: What every table stores instead of an off-mode text: its size, never its words.
UNKEPT = "[not kept: memory mode off; {words} word{s}, {chars} character{cs}]"


def unkept_text(text: str) -> str:
    """The placeholder every table keeps for an off-mode text: the counts, never the words."""
    words, chars = len(text.split()), len(text)
    return UNKEPT.format(words=words, s="" if words == 1 else "s", chars=chars, cs="" if chars == 1 else "s")


class MemoryMode:
    """The current mode of one running mind (the runtime.yaml default at start)."""

    def __init__(self, mode: ModeName = "autopilot"):
        self.current: ModeName = "autopilot"
        self.set(mode)

    @property
    def off(self) -> bool:
        return self.current == "off"

    @property
    def copilot(self) -> bool:
        return self.current == "copilot"

    def set(self, mode: str) -> ModeName:
        """Switch; ValueError naming the choices for anything else."""
        name = mode.strip().lower()
        if name not in MODES:
            raise ValueError(f"unknown memory mode {mode!r}; choose one of {', '.join(MODES)}")
        self.current = name  # type: ignore[assignment]
        return self.current

    def entry_metadata(self) -> dict[str, str] | None:
        """What the entry gate writes on a row admitted now (None: nothing)."""
        return {OFF_TAG: "off"} if self.off else None

    def report_line(self) -> str:
        """The line of the cognitive state report that tells the mind its mode."""
        return f"Memory mode: {self.current} — {DESCRIPTIONS[self.current]}."

    def command(self, args: str) -> str:
        """`/memory-mode [autopilot|copilot|off]`: show or switch."""
        if not args.strip():
            return (f"memory mode: {self.current} ({DESCRIPTIONS[self.current]}); "
                    f"/memory-mode {'|'.join(MODES)} to change")
        try:
            before, now = self.current, self.set(args)
        except ValueError as exc:
            return str(exc)
        if before == now:
            return f"memory mode is already {now}"
        return (f"memory mode: {before} -> {now} ({DESCRIPTIONS[now]}); for this session — "
                "set memory.mode in runtime.yaml to keep it across restarts")
