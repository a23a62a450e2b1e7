"""Act (plan §3.4 step 5): the action check on source tags, then delivery — once.

Processing never looks at where an input came from; this step does: the answer is
spoken only when the action check allows it (src/loop/actions.py), and every tool call
of the cycle carries the check's verdict into thought_log. A combined turn's reply
says how many messages it answers.

The check (`check`) and the printing (`deliver`) are two calls because the cycle's
row goes between them: the input journal's "answered" mark is committed with it
before the reply is printed (src/loop/backlog.py), so a SIGKILL can never leave a
printed reply whose messages the next start answers again (issue 26; the reverse
window, between the commit and the write to stdout, keeps the reply in thought_log).
Once `deliver` starts, the turn is settled: a failure after this point must not
re-run the cycle (the user would get the same reply twice, issue 11).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from src.loop.actions import ActionPolicy, checked_tool_actions
from src.loop.attending import Attended
from src.loop.intake import Intake
from src.loop.thinking import Thought
from src.loop.tool_protocol import ToolProtocol

Say = Callable[[str], Awaitable[None]]      # one line to the user (the loop's `deliver`, awaited)


@dataclass(frozen=True)
class Action:
    """What the cycle does with its thought."""

    answer: str
    delivered: bool            # the answer is spoken (printed once its row is written)
    actions: list[dict]        # thought_log's actions: communicate first, then each tool call


class Acting:
    """The action check and delivery."""

    def __init__(self, policy: ActionPolicy, tools: ToolProtocol, intake: Intake, say: Say):
        self.policy = policy
        self.tools = tools
        self.intake = intake
        self.say = say

    def check(self, attended: Attended, thought: Thought) -> Action:
        """Whether the answer may be spoken, and the verdict on each tool call."""
        winner, answer = attended.winner, thought.answer
        allowed, why = self.policy.allows("communicate", winner.source_tag, winner.source_confidence,
                                          thought.confidence)
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
                await self.say(attended.turn.frame_reply(action.answer))
        finally:
            self.intake.settle(attended.turn)
