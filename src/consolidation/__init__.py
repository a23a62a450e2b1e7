"""Consolidation (plan §4.1–§4.6): the light background ticker and the deep pass."""
