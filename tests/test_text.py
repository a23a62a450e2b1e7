"""Cleaning outside bytes into text PostgreSQL accepts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from src.text import clean_text, cut, excerpt, first_sentence, storable, without_controls


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


@pytest.mark.parametrize(("text", "limit", "expected"), [
    ("short", 10, "short"),
    ("  many\n\tspaces   here ", 40, "many spaces here"),
    ("exactly ten", 11, "exactly ten"),
    ("one two three four", 9, "one two…"),          # the space before the cut is dropped
    ("abcdefghij", 5, "abcd…"),
    ("abc", 1, "…"),
])
def test_excerpt_collapses_cuts_and_marks_the_cut(text, limit, expected):
    assert excerpt(text, limit) == expected
    assert len(excerpt(text, limit)) <= limit


def test_excerpt_refuses_a_limit_below_one():
    with pytest.raises(ValueError, match="limit must be >= 1, got 0"):
        excerpt("x", 0)


def test_storable_removes_only_what_postgres_refuses():
    notes: list[str] = []
    assert storable("a\x00b\ud800c\r\n", notes) == "ab?c\r\n"
    assert notes == ["NUL bytes were removed", "unpaired surrogates were replaced"]
    assert storable("e\u0301 plain") == "e\u0301 plain"      # no NFC, no stripping: only the refused


@pytest.mark.parametrize(("text", "limit", "expected"), [
    ("line one\nline two", 40, "line one\nline two"),         # lines are kept
    ("line one\nline two", 10, "line one…"),                  # the newline before the cut is dropped
    ("abcdef", 6, "abcdef"),
    ("abcdef", 4, "abc…"),
])
def test_cut_keeps_lines_and_marks_the_cut(text, limit, expected):
    assert cut(text, limit) == expected
    assert len(cut(text, limit)) <= limit


def test_without_controls_drops_escapes_and_bidi_but_keeps_whitespace():
    assert without_controls("a\x1b[31mb\x07\tc\nd\u202ee\u00e9") == "a[31mb\tc\nde\u00e9"


@given(st.text(max_size=300), st.integers(min_value=1, max_value=120))
def test_first_sentence_is_one_line_within_the_limit(text, limit):
    out = first_sentence(text, limit)
    assert len(out) <= limit and "\n" not in out
    assert out == " ".join(out.split())
