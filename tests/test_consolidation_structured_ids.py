"""A reply must answer exactly the input's ids: invented ones and missing ones are refused."""

import pytest

from src.consolidation.deep.structured import Rejected, check_one_each


@pytest.mark.parametrize(("wanted", "got", "message"), [
    ({1, 2}, {1, 2, 9}, "narratives name insight ids not in the input: [9]"),
    ({1, 2}, {1}, "no narrative for insight id(s) [2]"),
])
def test_check_one_each_refuses_invented_and_missing_ids(wanted, got, message):
    with pytest.raises(Rejected) as err:
        check_one_each(wanted, got, answers="narratives", answer="narrative", noun="insight")
    assert str(err.value) == message


def test_check_one_each_accepts_an_exact_answer():
    assert check_one_each({3, 4}, {4, 3}, answers="summaries", answer="summary", noun="memory") is None
