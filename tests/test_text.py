"""Cleaning outside bytes into text PostgreSQL accepts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from src.text import clean_text


def test_clean_text_table():
    assert clean_text(b"plain\n").text == "plain"
    assert clean_text(b"a\x00b").text == "ab"
    assert clean_text(b"a\x00b").notes == ["NUL bytes were removed"]
    assert clean_text(b"\xff ok").text == "\ufffd ok"
    assert clean_text(b"\xff ok").notes == ["invalid UTF-8 bytes were replaced with U+FFFD"]
    assert clean_text("caf\u0065\u0301").text == "caf\u00e9"  # NFC
    assert clean_text("x\ud800y").text == "x?y"
    assert clean_text("\ufffd already").notes == []
    assert clean_text(b"   ").empty


@given(st.binary(max_size=200))
def test_any_bytes_become_encodable_text_without_nul(raw):
    out = clean_text(raw).text
    assert "\x00" not in out
    out.encode("utf-8")
