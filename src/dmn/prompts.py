"""What the DMN says to the loop (plan §4.7): the self-prompts, the mind's own thoughts.

The one DMN item of a tick that is queued as input (`loop.submit("dmn", …)`, framed as
an internal thought by src/loop/prompts.py) is a self-prompt (channel 1: a memory that
reaches a goal, or with no goal in reach a spontaneous one) or a review of the last
attention choice. Channels 2 and 3 (creative pairs, identity signals) are records for
consolidation and the web view, never sent to a model: their texts stay in channels.py.
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
