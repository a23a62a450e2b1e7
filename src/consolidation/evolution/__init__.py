"""What the deep pass changes over time (plan §4.3–§4.5): tiers, forgetting, learned parameters.

    promotion.py, promotions_repository.py    promotion toward goal and identity weight (§4.3)
    approvals.py, approval_kinds.py, approvals_repository.py   the operator's approval queue
    forgetting.py                             decay (§4.4) and demotion (§4.3)
    utility.py                                Q-value utility from recall outcomes (§4.3)
    dirichlet_evolution.py                    the relevance blend's factors (§4.5)
    gate_tuning.py                            the gates' parameters (§4.5)
    memories_repository.py                    the memories these phases select; utility_score
    settings.py                               runtime.yaml `consolidation.evolution:`

The state recall and the gates read is theirs (src/recall/outcomes.py, src/recall/dirichlet.py,
src/gates/tuning.py): these phases write it through those modules.
"""
