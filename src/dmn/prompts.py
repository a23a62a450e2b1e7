"""What the DMN says to the loop (plan §4.7): the self-prompts, the mind's own thoughts.

The one DMN item of a tick that is queued as input (`loop.submit("dmn", …)`, framed as
an internal thought by src/loop/prompts.py) is a self-prompt (channel 1: a memory that
reaches a goal, or with no goal in reach a spontaneous one) or a review of the last
attention choice. Channels 2 and 3 (creative pairs, identity signals) are records the
next deep pass turns into questions for its insights (src/consolidation/deep/dmn_inputs.py):
`association_question` and `value_question` below; their record texts stay in channels.py.
"""

from __future__ import annotations

from src.text import excerpt


def goal_self_prompt(memory: str, goal: str, chars: int) -> str:
    """Channel 1: a sampled memory that reaches a goal."""
    return (f"'{excerpt(memory, chars)}' connects to my goal "
            f"'{excerpt(goal, chars)}'. What does it suggest I do next?")


def spontaneous_self_prompt(memory: str, days_ago: float, chars: int) -> str:
    """Channel 1 without a goal in reach: the memory itself, and why it might matter."""
    when = "today" if days_ago < 1 else f"{days_ago:.0f} days ago"
    return (f"This comes back to me, from {when}: '{excerpt(memory, chars)}'. "
            "Why does it matter now?")


def review_self_prompt(winner: str, loser: str, loser_source: str, chars: int) -> str:
    """The metacognitive review: the last cycle's choice, and whether it was right."""
    return (f"Last cycle I prioritised '{excerpt(winner, chars)}' over "
            f"'{excerpt(loser, chars)}' ({loser_source}). "
            "Was that right? Should I revisit it?")


def association_question(first: str, second: str, days_apart: float, chars: int) -> str:
    """Channel 2 for the deep pass: what connects two memories far apart in time."""
    return (f"What connects '{excerpt(first, chars)}' and '{excerpt(second, chars)}', "
            f"{days_apart:.0f} days apart, and what does the connection show?")


def value_question(memory: str, value: str, chars: int) -> str:
    """Channel 3 for the deep pass: whether a memory confirms, refines or challenges a value."""
    return (f"Does '{excerpt(memory, chars)}' confirm, refine or challenge my value "
            f"'{excerpt(value, chars)}'?")
