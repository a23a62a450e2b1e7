"""`/skill save` keeps the guardian's steps and numbers (src/skills/fidelity.py, issue 38 item 5).

Pure: the guardian's lines and a drafted procedure in, the procedure to save and what was
kept and dropped out. The save itself, against the database with a scripted model, is in
tests/test_skills.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from src.skills.fidelity import MARK, keep_users_steps, quantities_of, steps_of, users_lines

TEA = ("Here's how I brew tea:\n1. Boil the water to 90 °C.\n2. Warm the pot.\n"
       "3. Add one teaspoon of leaves per cup.\n4. Steep exactly 3 minutes.\n5. Take the leaves out.")
TEA_STEPS = ["Boil the water to 90 °C.", "Warm the pot.", "Add one teaspoon of leaves per cup.",
             "Steep exactly 3 minutes.", "Take the leaves out."]
ABOUT = "Tea brewing. When the guardian wants to brew tea."


@pytest.mark.parametrize(("text", "found"), [
    ("Steep exactly 3 minutes.", [("exactly 3 minutes", ("exactly", "3", "minute"))]),
    ("Boil the water to 90 °C", [("90 °C", ("", "90", "°c"))]),
    ("Boil the water to 90°C", [("90°C", ("", "90", "°c"))]),
    ("Add one teaspoon per cup", [("one teaspoon", ("", "1", "teaspoon"))]),
    ("Add 1 teaspoon per cup", [("1 teaspoon", ("", "1", "teaspoon"))]),
    ("Pick one of them", []),                                       # a number word counts before a unit only
    ("Step 2: add 200g flour", [("200g", ("", "200", "g"))]),       # "step 2" is an order, not a number
    ("Wait 3-4 mins", [("3-4 mins", ("", "3-4", "min"))]),
    ("Wait 3 to 4 mins", [("3 to 4 mins", ("", "3-4", "min"))]),
    ("Add 1/2 cup of milk", [("1/2 cup", ("", "1/2", "cup"))]),
    ("Inflate to at least 4 bar", [("at least 4 bar", ("at least", "4", "bar"))]),
    ("Keep 3 of them", [("3", ("", "3", ""))]),
    ("Play it on the mp3 player", []),
])
def test_numbers_with_their_qualifier_and_unit(text, found):
    assert [(q.text, q.key) for q in quantities_of(text)] == found


@pytest.mark.parametrize(("message", "steps"), [
    (TEA, TEA_STEPS),
    ("1. Boil the water. 2. Warm the pot. 3. Pour.", ["Boil the water.", "Warm the pot.", "Pour."]),
    ("First boil the water, then warm the pot and then steep it for 3 minutes. After that, pour.",
     ["boil the water", "warm the pot", "steep it for 3 minutes.", "pour."]),
    ("If it's green tea, then use 80 °C; otherwise boiling water.",
     ["If it's green tea, then use 80 °C", "otherwise boiling water."]),
    ("Here's how I do it:", []),
    ("Let me teach you how I brew my tea. First I heat the water to exactly 90 degrees.",
     ["I heat the water to exactly 90 degrees."]),
    ("I'll show you how I fix a flat. Take the wheel off.", ["Take the wheel off."]),
    ("This is how I do it. Boil the water.", ["Boil the water."]),
    ("Tell the barista you want oat milk.", ["Tell the barista you want oat milk."]),
    ("Thanks, that worked! Save that as a habit.", []),
    ("How long do I steep it?", []),
    ("- Plug in the drive\n- Copy DCIM\n* Check the count matches", ["Plug in the drive", "Copy DCIM",
                                                                    "Check the count matches"]),
])
def test_the_steps_of_a_guardians_message(message, steps):
    assert steps_of(message) == steps


@dataclass(frozen=True)
class Said:
    role: str
    content: str
    source_tag: str = "external_user"
    words: str | None = None


def test_only_the_guardians_own_lines_are_the_source():
    messages = [Said("user", "Boil the water."), Said("assistant", "Then stir it.", "internal_self"),
                Said("user", "[internal thought — default mode] stir it", "internal_dmn"),
                Said("user", "[2 messages from the user, taken together as one turn]\n1. a\n2. b",
                     words="Warm the pot.")]
    assert users_lines(messages) == ["Boil the water.", "Warm the pot."]


def test_a_faithful_draft_keeps_its_order_and_labels_and_loses_the_models_steps():
    lines = ["My name is Dana and I'm 34 years old.", TEA, "Great, that worked. Save that as a skill."]
    draft = ("1. Warm the pot.\n2. Heat: boil the water to 90 °C.\n3. Add 1 teaspoon of leaves per cup.\n"
             "4. Steep exactly 3 minutes.\n5. Take the leaves out.\n6. Add milk or sugar to taste.")
    kept = keep_users_steps(lines, draft, ABOUT)
    assert kept.procedure == ("1. Warm the pot.\n2. Heat: boil the water to 90 °C.\n"
                              "3. Add 1 teaspoon of leaves per cup.\n4. Steep exactly 3 minutes.\n"
                              "5. Take the leaves out.")
    assert (kept.user_steps, kept.numbers) == (tuple(TEA_STEPS), ("90 °C", "one teaspoon", "exactly 3 minutes"))
    assert (kept.rebuilt, kept.dropped) == (False, ("Add milk or sugar to taste.",))   # "34 years" is no step


@pytest.mark.parametrize(("changed", "why"), [
    ("Steep 3 minutes.", ("missing_numbers", ("exactly 3 minutes",))),       # the qualifier is the guardian's
    ("Steep for a few minutes.", ("missing_numbers", ("exactly 3 minutes",))),
    ("Steep exactly 3 minutes, stirring every 30 seconds.", ("invented", ("30 seconds",))),
])
def test_a_changed_number_rebuilds_the_procedure_from_the_guardians_lines(changed, why):
    draft = "\n".join(TEA_STEPS).replace("Steep exactly 3 minutes.", changed)
    kept = keep_users_steps([TEA], draft, ABOUT)
    assert kept.rebuilt and getattr(kept, why[0]) == why[1]
    assert kept.procedure == "\n".join(f"{i}. {s}" for i, s in enumerate(TEA_STEPS, 1))


def test_a_step_the_draft_drops_rebuilds_the_procedure():
    kept = keep_users_steps([TEA], "\n".join(s for s in TEA_STEPS if s != "Warm the pot."), ABOUT)
    assert kept.missing_steps == ("Warm the pot.",)
    assert "2. Warm the pot." in kept.procedure


def test_without_steps_of_the_guardian_the_drafts_are_marked():
    kept = keep_users_steps(["How do I get an overview of sales.csv?", "Great, that worked."],
                            "1. Read the header.\n2. Count rows.", "CSV summary. When a CSV file needs an overview.")
    assert kept.procedure == f"1. Read the header. {MARK}\n2. Count rows. {MARK}"
    assert (kept.user_steps, kept.marked) == ((), ("Read the header.", "Count rows."))


INVENTED = ["Stir occasionally.", "Add milk or sugar to taste.", "Serve with 2 biscuits.",
            "Let it rest for 10 minutes.", "Rinse the cups with cold water."]


@settings(max_examples=150, deadline=None)
@given(order=st.permutations(range(len(TEA_STEPS))), keep=st.lists(st.booleans(), min_size=5, max_size=5),
       added=st.lists(st.sampled_from(INVENTED), max_size=3, unique=True),
       vague=st.booleans())
def test_whatever_the_draft_the_saved_steps_are_the_guardians(order, keep, added, vague):
    """However the model orders, drops, changes or adds steps: every number and step the
    guardian gave is in the procedure saved, and no step they never gave."""
    draft_steps = [TEA_STEPS[i] for i in order if keep[i]] + added
    draft = "\n".join(f"{n}. {s}" for n, s in enumerate(draft_steps, 1))
    if vague:
        draft = draft.replace("exactly 3 minutes", "a few minutes")
    kept = keep_users_steps(["What's my job?", TEA, "Great, save that."], draft, ABOUT)
    for number in ("90 °C", "one teaspoon", "exactly 3 minutes"):
        assert number in kept.procedure
    for step in TEA_STEPS:
        assert step.rstrip(".").lower() in kept.procedure.lower()
    for step in INVENTED:
        assert step not in kept.procedure
