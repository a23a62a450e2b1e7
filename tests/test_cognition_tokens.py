"""Token estimates against cl100k reference counts.

tiktoken is not installed, so the references are counted by hand, applying
cl100k's pre-tokeniser pattern (words take their leading space; digits go in
groups of three with the space before them a token of its own; punctuation
runs carry a trailing newline) and assuming every common English word is one
token. "China is great!" (4 tokens) and "tiktoken is great!" (6) are the
published examples of OpenAI's tiktoken cookbook.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from src.tokens import _PIECE, LINES_MIN_CHARS, _piece_cost, count_message_tokens, count_tokens

REFERENCE = [
    # "Hello" "," " world" "!"
    ("Hello, world!", 4),
    # nine words and "."
    ("The quick brown fox jumps over the lazy dog.", 10),
    ("I love programming in Python.", 6),
    ("What did we talk about yesterday?", 7),
    ("Memory consolidation runs in the background while the agent is idle.", 12),
    # ... " at" " " "6" " pm" " tomorrow" "."
    ("Please remind me to call my mother at 6 pm tomorrow.", 13),
    # "It" "'s" " " "202" "4" " and" " I" "'m" " still" " learning" "."
    ("It's 2024 and I'm still learning.", 11),
    # "def" " add" "(a" "," " b" "):\n" "   " " return" " a" " +" " b"
    ("def add(a, b):\n    return a + b", 11),
    # "Email" " me" " at" " alice" "@example" ".com" " by" " Friday" "."
    ("Email me at alice@example.com by Friday.", 9),
    # ... "," " " "3" ":" "30" " PM" "," " in" " room" " " "204" "."
    ("The meeting was moved to Tuesday, 3:30 PM, in room 204.", 18),
    # "Shopping" " list" ":\n" "-" " eggs" "\n" "-" " milk" "\n" "-" " bread"
    ("Shopping list:\n- eggs\n- milk\n- bread", 11),
    ("China is great!", 4),
]


@pytest.mark.parametrize(("text", "reference"), REFERENCE)
def test_within_twenty_percent_of_cl100k(text: str, reference: int) -> None:
    assert abs(count_tokens(text) - reference) <= 0.2 * reference


def test_exact_estimates_of_the_reference_strings() -> None:
    # Pins the estimator: any change to it shows up here with its new values.
    assert [count_tokens(text) for text, _ in REFERENCE] == [
        4,
        10,
        7,
        7,
        13,
        13,
        11,
        11,
        9,
        18,
        11,
        4,
    ]


@pytest.mark.parametrize(
    ("text", "reference"),
    [
        ("It's 2024 and I'm still learning.", 11),
        ("The meeting was moved to Tuesday, 3:30 PM, in room 204.", 18),
    ],
)
def test_words_times_1_3_alone_would_miss_digits_and_punctuation(text: str, reference: int) -> None:
    # Why the plan's word_count * 1.3 (even guarded by chars / 4) is not used.
    rule_of_thumb = max(len(text.split()) * 1.3, len(text) / 4)
    assert abs(rule_of_thumb - reference) > 0.2 * reference
    assert abs(count_tokens(text) - reference) <= 0.2 * reference


def test_invented_words_are_undercounted() -> None:
    # Known limit: cl100k splits "tiktoken" into "t" "ik" "token" (6 tokens in
    # all); without the vocabulary the estimate sees one word.
    assert count_tokens("tiktoken is great!") == 4


def test_text_without_spaces_is_counted_per_character() -> None:
    # Common CJK characters are one cl100k token each; the sentence is one
    # "word" to a whitespace split. 9 ideographs + 2 punctuation marks.
    assert count_tokens("你好，今天过得怎么样？") == 11
    assert count_tokens("日本語のテキスト") == 8


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a" * 1_000_000, 249_999),  # 1 + (1e6 - 10) / 4: the chars/4 rule of thumb
        ("1" * 999, 333),  # digits go in groups of three
        ("a b " * 1000, 2001),  # "a" " b" " a" ... and the trailing " "
        ("=" * 1000, 500),
        (" " * 800, 100),
        ("你" * 1000, 1000),
    ],
)
def test_degenerate_inputs(text: str, expected: int) -> None:
    assert count_tokens(text) == expected


@given(st.text(max_size=300))
def test_count_is_between_word_count_and_character_count(text: str) -> None:
    n = count_tokens(text)
    assert len(text.split()) <= n <= len(text)


# words, digits, contractions, ASCII and other punctuation, every kind of whitespace, CJK,
# accented letters and emoji: the pieces the counter prices differently
_MIXED = st.text(alphabet=st.sampled_from(list("ab Zé'sdtlmvr019 _.,!-(:)\n\r\t\u3000你好，😀ß")) , max_size=400)


@given(_MIXED)
def test_count_equals_pricing_each_match_of_the_whole_text(text: str) -> None:
    # count_tokens prices piece strings from a table (each matched alone): the same sum
    by_match = math.ceil(sum(_piece_cost(m) for m in _PIECE.finditer(text)))
    assert count_tokens(text) == by_match
    assert count_tokens(text + text) == math.ceil(sum(_piece_cost(m) for m in _PIECE.finditer(text + text)))


@given(st.lists(_MIXED, min_size=1, max_size=12))
def test_a_long_text_priced_line_by_line_equals_pricing_the_whole(parts: list[str]) -> None:
    # past LINES_MIN_CHARS the count is a sum of remembered line costs (src/tokens.py): the
    # cut points must be piece boundaries, whatever whitespace and punctuation meet there
    text = "\n".join(parts) * (LINES_MIN_CHARS // max(1, len("\n".join(parts))) + 1)
    assert len(text) >= LINES_MIN_CHARS or not text
    by_match = math.ceil(sum(_piece_cost(m) for m in _PIECE.finditer(text)))
    assert count_tokens(text) == by_match
    assert count_tokens(text) == by_match   # again, from the remembered lines


def test_message_tokens_add_framing() -> None:
    # 3 framing + "user" (1) + "Hello, world!" (4), then 3 to prime the reply
    assert count_message_tokens([{"role": "user", "content": "Hello, world!"}]) == 11
    assert count_message_tokens([]) == 3
    two = [
        {"role": "system", "content": "Be brief."},  # 3 + 1 + 3
        {"role": "user", "content": "Hi", "name": "anna"},  # 3 + 1 + 1 + (1 + 1)
    ]
    assert count_message_tokens(two) == 7 + 7 + 3


def test_message_content_may_be_text_blocks() -> None:
    blocks = [{"role": "user", "content": [{"type": "text", "text": "Hello,"}, {"text": "world!"}]}]
    # joined by a newline: "Hello" ",\n" "world" "!" = 4
    assert count_message_tokens(blocks) == 3 + 1 + 4 + 3


def test_message_errors_say_what_is_wrong() -> None:
    with pytest.raises(
        ValueError, match=r"message 0 needs 'role' and 'content' keys, has \['text'\]"
    ):
        count_message_tokens([{"text": "hi"}])
    with pytest.raises(TypeError, match="only text blocks"):
        count_message_tokens([{"role": "user", "content": [{"type": "image", "data": "..."}]}])
