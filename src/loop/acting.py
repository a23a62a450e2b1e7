"""Act (plan §3.4 step 5): the action check on source tags, then delivery — once.

Processing never looks at where an input came from; this step does: the answer is
spoken only when the action check allows it (src/loop/actions.py), and every tool call
of the cycle carries the check's verdict into thought_log. A combined turn's reply
says how many messages it answers. Once the reply is out the turn is settled: a
failure after this point must not re-run the cycle (the user would get the same
reply twice, issue 11).
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
    """What the cycle did with its thought."""

    answer: str
    delivered: bool
    actions: list[dict]        # thought_log's actions: communicate first, then each tool call


class Acting:
    """The action check and delivery."""

    def __init__(self, policy: ActionPolicy, tools: ToolProtocol, intake: Intake, say: Say):
        self.policy = policy
        self.tools = tools
        self.intake = intake
        self.say = say

    async def act(self, attended: Attended, thought: Thought) -> Action:
        """Speak the answer when allowed; settle the turn (delivered once)."""
        winner, answer = attended.winner, thought.answer
        allowed, why = self.policy.allows("communicate", winner.source_tag, winner.source_confidence,
                                          thought.confidence)
        actions = [{"kind": "communicate", "allowed": allowed, "reason": why},
                   *checked_tool_actions(self.policy, thought.tool_actions, self.tools.kind, winner.source_tag,
                                         winner.source_confidence, thought.confidence)]
        if answer and allowed:
            await self.say(attended.turn.frame_reply(answer))
        self.intake.settle(attended.turn)
        return Action(answer, bool(answer and allowed), actions)
