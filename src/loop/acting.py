"""Act (plan §3.4 step 5): the action check on source tags, then delivery — once.

Processing never looks at where an input came from; this step does: the answer is
spoken only when the action check allows it (src/loop/action_policy.py), and every tool call
of the cycle carries the check's verdict into thought_log. A combined turn's reply
says how many messages it answers; a reply to a message that other lines followed
quotes it (`typed_after`, src/loop/turns.py), on the terminal only: the API's caller asked
about that one message (the reply board gets it without the reference).

The check (`check`) and the printing (`deliver`) are two calls because the cycle's
row goes between them: the input journal's "answered" mark is committed with it
before the reply is printed (src/loop/cycle_log.py), so a SIGKILL can never leave a
printed reply whose messages the next start answers again (issue 26; the reverse
window, between the commit and the write to stdout, keeps the reply in thought_log).
Once `deliver` starts, the turn is settled: a failure after this point must not
re-run the cycle (the user would get the same reply twice, issue 11).

Unprompted speech (issue 27). An answer to a thought of the mind's own (DMN,
consolidation, gut, scheduled) reaches the user only past a stated bar
(`loop.unprompted`, `unprompted_verdict`): confident (the action check's
`internal_communicate_confidence`), never a failure notice (src/loop/degraded.py), not a
repeat of anything said in the window, of the last replies said to the user or of the
thought itself (one earlier text holding `repeat_overlap` of its content words), and new
(at least `min_new_words` content words none of those hold). A small model once spoke a
copy of an earlier failure reply and restatements of the user's own facts unprompted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from src.consolidation.clustering import content_words
from src.loop.action_policy import ActionPolicy, checked_tool_actions
from src.loop.attending import Attended
from src.loop.conversation import Conversation
from src.loop.degraded import is_failure_notice
from src.loop.intake import Intake
from src.loop.replies import ReplyBoard, quiet_line
from src.loop.settings import UnpromptedSettings
from src.loop.thinking import Thought
from src.loop.tool_protocol import ToolProtocol
from src.text import excerpt

Say = Callable[[str], Awaitable[None]]      # one line to the user (the loop's `deliver`, awaited)


@dataclass(frozen=True)
class Action:
    """What the cycle does with its thought."""

    answer: str
    delivered: bool            # the answer is spoken (printed once its row is written)
    actions: list[dict]        # thought_log's actions: communicate first, then each tool call


def unprompted_verdict(answer: str, *, failed: bool, earlier: Sequence[str], thought: str,
                       settings: UnpromptedSettings) -> tuple[bool, str]:
    """(said, why) for an answer the user did not ask for, past the confidence floor: never
    a failure, never a repeat of one of the `earlier` texts or of the `thought` that raised
    it, and at least `min_new_words` content words none of them holds."""
    if failed or is_failure_notice(answer):
        return False, "a failure notice is never said unprompted"
    words = content_words(answer)
    if not words:
        return False, "nothing to say"
    for text in [thought, *earlier]:
        held = len(words & content_words(text)) / len(words)
        if held >= settings.repeat_overlap:
            return False, (f"kept internal: a repeat ({held:.0%} of its words are in "
                           f"{excerpt(' '.join(text.split()), 60)!r})")
    new = words.difference(content_words(thought), *(content_words(t) for t in earlier))
    if len(new) < settings.min_new_words:
        return False, (f"kept internal: nothing new ({len(new)} word(s) not said before, "
                       f"fewer than {settings.min_new_words})")
    return True, f"new ({len(new)} words not said before) and not a repeat"


class Acting:
    """The action check and delivery."""

    def __init__(self, policy: ActionPolicy, tools: ToolProtocol, intake: Intake, say: Say, *,
                 conversation: Conversation | None = None, unprompted: UnpromptedSettings | None = None,
                 replies: ReplyBoard | None = None, newest_line: Callable[[], int | None] | None = None):
        self.policy = policy
        # the journal id of the newest line typed (src/loop/input_journal.py): a reply to an
        # older message names the message it answers
        self.newest_line = newest_line
        # the delivered replies by the journal ids they answer (src/loop/replies.py): the API's
        self.replies = replies
        self.tools = tools
        self.intake = intake
        self.say = say
        self.conversation = conversation
        self.unprompted = unprompted or UnpromptedSettings()

    def check(self, attended: Attended, thought: Thought) -> Action:
        """Whether the answer may be spoken, and the verdict on each tool call."""
        winner, answer = attended.winner, thought.answer
        allowed, why = self.policy.allows("communicate", winner.source_tag, winner.source_confidence,
                                          thought.confidence)
        if allowed and winner.source != "user":      # unprompted: past the bar too
            allowed, bar = unprompted_verdict(
                answer, failed=thought.outcome is None, thought=winner.text, settings=self.unprompted,
                earlier=self.conversation.earlier() if self.conversation is not None else ())
            why = f"{why}; {bar}"
        actions = [{"kind": "communicate", "allowed": allowed, "reason": why},
                   *checked_tool_actions(self.policy, thought.tool_actions, self.tools.kind, winner.source_tag,
                                         winner.source_confidence, thought.confidence)]
        return Action(answer, bool(answer and allowed), actions)

    async def deliver(self, attended: Attended, action: Action) -> None:
        """The cycle's row is written: print the reply and settle the turn — also when
        printing fails (a closed stdout): its row says it is answered, so it must not be
        put back. While the reply is printed the turn still counts as waiting (/quit's count)."""
        try:
            if action.delivered:
                if self.conversation is not None:
                    self.conversation.said_to_user(action.answer, self.unprompted.recent_said)
                reply = attended.turn.frame_reply(action.answer)
                channel = attended.turn.candidate.channel
                if channel == "terminal" or not attended.inputs.refs:
                    await self.say(attended.turn.frame_reply(
                        action.answer, typed_after=self._typed_after(attended.inputs.refs)))
                else:       # its reply goes back to the channel that asked; the terminal gets a quiet line
                    await self.say(quiet_line("answered on", channel, attended.inputs.refs, reply))
                if self.replies is not None and attended.inputs.refs:
                    self.replies.post(attended.inputs.refs, reply, datetime.now(UTC))
        finally:
            self.intake.settle(attended.turn)

    def _typed_after(self, refs: Sequence[int]) -> bool:
        """Lines were stored after the turn's last message (a turn without one: no)."""
        newest = self.newest_line() if self.newest_line is not None else None
        return bool(refs) and newest is not None and newest > max(refs)
