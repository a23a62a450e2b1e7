"""What the mind's decisions came to (plan §5.2 milestones 9–10, §5.3 outcome tracking).

    tracking.py   outcomes (corrections, explicit feedback, goals achieved, tensions
                  resolved) linked back to the gate decisions, gut deltas and promotions
                  before them
    goals.py      a declared goal matched against the held ones (`GOAL_ACHIEVED:`)
    alignment.py  autonomous decisions aligned with self-formed values
    use.py        which memories an answer drew on (or the user said again), and the
                  user's plain feedback on them: usefulness from outside recall (issue 25)
    feedback.py   the guardian's /good and /bad
    uses_repository.py   the `memory_uses` table both write

Read by the loop's inner life and by consolidation; the gut's axes read the links.
Settings stay in runtime.yaml `bootstrap:` (src/bootstrap/settings.py), as before.
(Not recall's outcomes, src/recall/outcomes.py: whether a recalled memory was used.)
"""
