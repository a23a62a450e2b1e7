"""Tools the model can call. Each returns text and never raises into the loop.

    read_docs.py   the read-only docs tool (plan §4.10)
    settings.py    its runtime.yaml section

Import from the submodules; this package imports nothing so config stays light.
"""
