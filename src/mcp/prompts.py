"""What a client's model reads of the MCP server (src/mcp/tools.py): the server's
instructions and each tool's description. Like every text a model reads, here beside its
stage (notes.md "### layout")."""

INSTRUCTIONS = (
    "MoltBot is a running mind with a long-term memory. `ask` talks to it (it answers as in a "
    "conversation and may remember what you say); `remember` stores a statement without a reply; "
    "`recall` searches its memories without changing anything; `forget` removes memories (it lists "
    "first and changes nothing unless confirm is true); `status` says how it is.")

REMEMBER = (
    "Store a statement in the mind's memory as something the user said, without starting a "
    "conversation turn and without calling any model. It passes the entry gate now (a short or "
    "machine-like line may be dropped: the answer says 'buffered' or 'dropped'); the exit gate "
    "decides at its next flush whether it is kept as a memory. Write one plain, self-contained "
    "statement, e.g. 'My sister Maren lives in Lisbon.'")
RECALL = (
    "Search the mind's memories, read-only: nothing is changed, no model is called. Returns the "
    "best `k` memories with their content, when each was said, and every score of the ranking "
    "(`results`), plus what is in working memory (`working`). Phrase the query as a question or "
    "the words the memory would contain.")
ASK = (
    "Send a message to the mind and get its reply, as if the user typed it: it goes through the "
    "mind's input journal, is answered exactly once, and may be remembered. Waits up to `wait_s` "
    "seconds; if the reply is not ready by then the answer has state 'pending' and the message's "
    "`id`: call `reply` with that id to get the answer later (do not send the message again). A "
    "line starting with '/' is refused: use the other tools instead of commands.")
REPLY = (
    "Get the reply to an earlier `ask` that came back 'pending', by its message id, waiting up to "
    "`wait_s` seconds. State 'answered' carries the reply; 'pending' means not yet (call again).")
FORGET = (
    "Forget memories, by memory ids (`ids`, e.g. from `recall`) or every trace of some words "
    "(`match`); give exactly one of the two. Without confirm=true it only lists what would go and "
    "counts it, changing nothing: show that to the user and ask before confirming. With "
    "confirm=true the forgetting is done and cannot be undone; the answer holds its receipt.")
STATUS = "The mind's session id, how many memories it holds, messages waiting for an answer, the memory mode."

#: The note on an `ask` held while the mind's database is away.
HELD = ("the mind's database is away: the message is held, and answered once it is back "
        "(its reply is then at GET /api/v1/messages?key={key}); do not send it again")


__all__ = ["ASK", "FORGET", "HELD", "INSTRUCTIONS", "RECALL", "REMEMBER", "REPLY", "STATUS"]
