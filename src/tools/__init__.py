"""Tools the model can call. Each returns text and never raises into the loop.

    verbs.py       what a protocol verb is (`ToolVerb`): below the tools and the loop
    read_docs.py   the read-only docs tool (plan §4.10)
    docs_verb.py   its `READ_DOC:` and `LIST_DOCS:` verbs
    settings.py    its runtime.yaml section

Import from the submodules; this package imports nothing so config stays light.
"""
