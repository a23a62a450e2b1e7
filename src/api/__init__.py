"""The mind reached from other programs (issue 41): the HTTP API on the web server
(`routes.py`, `messages.py`, `openapi.py`)."""
