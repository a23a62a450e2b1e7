-- Where a journaled line came from (issue 41 item 3): the terminal, the HTTP API, the chat
-- page or an MCP client. Each reply goes back to the channel that asked, and a turn only
-- takes together messages of one channel (src/loop/turns.py).
ALTER TABLE input_journal ADD COLUMN channel TEXT NOT NULL DEFAULT 'terminal'
    CHECK (channel IN ('terminal', 'api', 'page', 'mcp'));
