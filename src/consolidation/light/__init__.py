"""Light consolidation (plan §4.1): one cheap, rate-limited ticker and what it finds.

    ticker.py                  the ticker and its operations
    findings_repository.py     `consolidation_findings` (contradicting pairs, themes)
    decay_marks_repository.py  `memory_decay_marks` (the decay nudge's side table)
"""
