"""Source tags gate actions with external effects (plan §3.4 hard safety)."""

from __future__ import annotations

import pytest

from src.loop.action_policy import ActionPolicy


@pytest.mark.parametrize(
    ("kind", "tag", "source_conf", "conf", "allowed"),
    [
        ("communicate", "external_user", 1.0, 0.1, True),
        ("communicate", "internal_dmn", 1.0, 0.79, False),
        ("communicate", "internal_dmn", 1.0, 0.8, True),
        ("communicate", "external_user", 0.2, 0.5, False),   # an untrusted "user" counts as self-generated
        ("internal", "internal_gut", 0.3, None, True),
        ("external_effect", "external_user", 1.0, 0.6, True),
        ("external_effect", "external_user", 1.0, 0.4, False),
        ("external_effect", "internal_consolidation", 1.0, 0.9, False),
        ("external_effect", "internal_consolidation", 1.0, 0.96, True),
        ("external_effect", "internal_scheduled", 1.0, None, False),
    ],
)
def test_action_table(kind, tag, source_conf, conf, allowed):
    ok, reason = ActionPolicy().allows(kind, tag, source_conf, conf)
    assert ok is allowed
    assert reason


def test_reasons_are_plain():
    assert ActionPolicy().allows("communicate", "internal_dmn", 1.0, 0.5) == (
        False, "self-generated (internal_dmn) thought kept internal: confidence 0.50 < 0.80")
