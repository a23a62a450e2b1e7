"""Consolidation (plan §4.1–§4.6): the mind's background metabolism, laid out by stage.

    light/         the light ticker (§4.1): decay nudge, co-access upkeep, contradiction
                   scan, emerging themes; its findings
    deep/          the deep pass (§4.2, §4.4, §4.6): the pass and its checkpoints, the phase
                   template and structured calls, the phases that derive and reconsolidate
    evolution/     what the deep pass changes over time (§4.3–§4.5): promotion and the
                   approval queue, decay and demotion, utility, Dirichlet evolution, gate tuning
    service.py     light ticker and deep scheduler as background tasks of the running mind
    monitors.py    the Phase B and C safety monitors both stages run (§3.9)
    clustering.py  the pure clustering both stages (and skill proposals) use
    settings.py    runtime.yaml `consolidation:`
    __main__.py    `python -m src.consolidation`

State other packages read is theirs and written through their functions: co-access and
recall outcomes and the Dirichlet factors in src/recall, tuned gate values in src/gates,
outcomes (§5.3) in src/outcomes.
"""
