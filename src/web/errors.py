"""The one error a page raises on purpose: a request the guardian can fix (answered 400)."""

from __future__ import annotations


class BadRequest(ValueError):
    """A query parameter the guardian can fix; the message says how."""
