"""The errors a page raises on purpose, each answered with the styled error page."""

from __future__ import annotations


class BadRequest(ValueError):
    """A query parameter the guardian can fix; the message says how (answered 400)."""


class Refused(Exception):
    """A request the view will not carry out (a chat message from another site: 403); the
    message says why and what to do instead."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
