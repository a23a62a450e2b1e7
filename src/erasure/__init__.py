"""The guardian's right to erase (issue 39): forget a memory and every trace of its words.

Decay forgets by weight and never deletes (plan §4.4); this package is the other
forgetting, which the plan does not cover and which outranks consolidation: what the
guardian asks to forget is removed — the memory, what was derived from it, and its words
in every table — in one transaction, with a receipt that names no word of it.

    placeholder  what a scrubbed text becomes: "[forgotten: N words]"
    matches      what a forget would take: memories by id, or everything holding some words
    derived      the memories built from a forgotten one: re-derived without it, or removed
    scrub        the words removed from every other table, read from the catalogue
    forget       one forget, one transaction: delete, re-derive, scrub, receipt
    receipt      the audit row and its printed form
    question     "Forget these N? (y/n/numbers)" at the prompt
    correct      the guardian's correction: a new memory supersedes the old (via 'correction')
    spill        the words out of the input spill files

A request said in conversation ("forget that my locker code is 7731") is recognised by the
gates (src/gates/forget_request.py) and answered here.
"""
