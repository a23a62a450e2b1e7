"""The deep pass (plan §4.2, §4.4, §4.6): resumable, one at a time, an ordered list of phases.

    deep_pass.py     trigger, the advisory lock, the phase list (`DEEP_PHASES`), hooks
    phase.py         a phase's context, budget and result (the template every phase follows)
    structured.py    model output the pass can trust: validation, repair, halving
    checkpoints.py   pass rows, phase checkpoints, units of work, failures (resume)
    failures.py      a failed phase: the pass backs off and resumes there; given up after N
    integrity.py     what an insight may rest on: statements only, no copies, boundaries
                     only as their subject, relevant citations; the prior without seeds
    insights.py, merge.py, narrative.py, tension.py, recompress.py, derived.py   §4.2
    reconsolidation.py, temporal_replay.py   §4.4
    contextual.py    §4.6
    why.py           `why_do_i_believe`: supersedes links back to the experiences
    *_repository.py  the SQL, one module per table it writes: `memory_supersedes`,
                     `consolidation_clusters`, `productive_contradictions`, and the
                     columns of `memories` the pass writes outside the choke point

The evolution phases the pass also runs are in ../evolution/.
"""
