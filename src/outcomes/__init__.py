"""What the mind's decisions came to (plan §5.2 milestones 9–10, §5.3 outcome tracking).

    tracking.py   outcomes (corrections, explicit feedback, goals achieved, tensions
                  resolved) linked back to the gate decisions, gut deltas and promotions
                  before them
    goals.py      a declared goal matched against the held ones (`GOAL_ACHIEVED:`)
    alignment.py  autonomous decisions aligned with self-formed values

Read by the loop's inner life and by consolidation; the gut's axes read the links.
Settings stay in runtime.yaml `bootstrap:` (src/bootstrap/settings.py), as before.
(Not recall's outcomes, src/recall/outcomes.py: whether a recalled memory was used.)
"""
