"""The mind as an MCP server (issue 41 item 2): tools a desktop model client can call.

One server (`tools.py`: remember, recall, ask, reply, forget, status), over two transports,
one design: every tool does what the HTTP API's route does (src/api), never more.

- stdio, `python -m src.mcp` (`__main__.py`): a separate process a desktop client starts;
  it attaches to the RUNNING mind through its HTTP API (`over_http.py`), so it holds no
  database connection, no instance lock, and the mind stays one process.
- streamable HTTP at `/mcp` on the mind's own web server (`endpoint.py`): the same tools
  call the in-process objects the API's routes call (`in_process.py`), not the API over
  HTTP; the SDK's ASGI transport is served from aiohttp by `asgi.py`.

The official SDK (`mcp`), not fastmcp: it is the protocol's reference implementation, its
`MCPServer` already gives typed tools with schemas from annotations, and fastmcp would pull
a larger tree on top of it (it depends on `mcp` itself) for features this server does not use.
"""
