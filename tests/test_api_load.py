"""Four HTTP API clients and the terminal at once, a SIGKILL in the middle, a restart: nothing
lost, nothing answered twice, each client's messages answered in the order it sent them
(issue 41 item 8, at a small size; `python -m bench api_load` runs 20 clients, 1,000 messages)."""

from __future__ import annotations

from tests.api_load import run_load


async def test_clients_and_the_terminal_survive_a_sigkill_answered_once_in_order(db_dsn, tmp_path):
    result = await run_load(db_dsn, tmp_path, clients=4, per_client=8, terminal=6)
    assert result.messages == 4 * 8 + 6
    assert result.lost == []
    assert result.twice == []
    assert result.out_of_order == []
    before, after = result.runs
    assert any("message(s) from an earlier run were never answered" in line for line in after) or \
        not any(line.startswith("(answered on") for line in after), after[-20:]
