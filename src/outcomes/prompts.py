"""What the outcomes put in front of a model (plan §5.2 milestone 9).

A goal declared achieved queues a reflection on it as the mind's own thought (DMN
input, src/outcomes/goals.py): a later cycle answers it.
"""

from __future__ import annotations

from src.text import excerpt


def goal_reflection_prompt(goal: str) -> str:
    """The reflection queued after `goal` was achieved."""
    return f"I achieved my goal '{excerpt(goal, 200)}'. Looking back: what did it take, and what does it teach me?"
