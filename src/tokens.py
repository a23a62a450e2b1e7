"""Approximate token counts for context budgets (plan §2.10).

The plan's fast method is ``word_count * 1.3``, and the usual guard for text
without spaces is ``max(words * 1.3, chars / 4)``. Both hold for running prose
on average but miss the plan's own 20% on single strings with digits and
punctuation: "It's 2024 and I'm still learning." is 11 cl100k tokens and they
give 8; "The meeting was moved to Tuesday, 3:30 PM, in room 204." is 18 and
they give 14. For scripts written without spaces (Chinese, Japanese) a whole
paragraph is one "word" and chars/4 counts a quarter of it.

So the count follows how cl100k-style tokenisers actually split text, in one
regex pass and with no vocabulary:

- The text is cut into pieces with a pattern modelled on cl100k's
  pre-tokeniser: a word with its leading space, a contraction ('s, 'll),
  a group of at most three digits, a run of punctuation, a run of whitespace.
- A word costs 1 token (a non-ASCII character before it, such as a CJK
  comma, one more); letters beyond ``LONG_WORD_UNITS`` cost one more token
  per ``UNITS_PER_EXTRA_TOKEN`` (long words are split by BPE). A letter
  outside ASCII counts as its UTF-8 byte length, since byte-level BPE has fewer
  merges for other scripts. So a megabyte of one repeated letter is about a
  quarter of a million tokens, like the chars/4 rule of thumb, never 1.3.
- A CJK ideograph, kana or hangul syllable costs ``WIDE_CHAR_TOKENS`` (common
  ones are single tokens in cl100k).
- An ASCII punctuation run costs one token per two characters, any other
  symbol (emoji, CJK punctuation) one token each; a whitespace run one token
  per ``SPACES_PER_TOKEN`` characters.

Known limit: a word the vocabulary has never seen ("tiktoken") is split into
several tokens that no rule without the vocabulary can predict; such words are
undercounted.
"""

from __future__ import annotations

import asyncio
import functools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

LONG_WORD_UNITS = 10
UNITS_PER_EXTRA_TOKEN = 4.0
WIDE_CHAR_TOKENS = 1.0
PUNCT_CHARS_PER_TOKEN = 2.0
SPACES_PER_TOKEN = 8.0

#: Chat framing per message (<|start|>role ... <|end|>) and the priming of the
#: reply, as in OpenAI's published counting recipe for cl100k chat models.
#: Other providers frame messages differently; the difference is a few tokens
#: per message, well inside a context budget's margin.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3

_LETTER = r"[^\W\d_]"
_PUNCT = r"(?:[^\s\w]|_)"
_PIECE = re.compile(
    rf"""
      (?P<contraction>'(?:[sdmt]|ll|ve|re))
    | (?P<prefix>[^\r\n\w]|_)?(?P<letters>{_LETTER}+)
    | (?P<digits>\d{{1,3}})
    | \ ?(?P<punct>{_PUNCT}+)[\r\n]*
    | (?P<space>\s*[\r\n]+|\s+(?!\S)|\s+)
    """,
    re.VERBOSE | re.IGNORECASE,
)
_WIDE = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f]"
)


def _letters_cost(run: str) -> float:
    if run.isascii():
        wide, units = 0, len(run)
    else:
        wide = len(_WIDE.findall(run))
        units = len(_WIDE.sub("", run).encode("utf-8"))
    cost = wide * WIDE_CHAR_TOKENS
    if units:
        cost += 1.0 + max(0, units - LONG_WORD_UNITS) / UNITS_PER_EXTRA_TOKEN
    return cost


def _punct_cost(run: str) -> float:
    if run.isascii():
        return math.ceil(len(run) / PUNCT_CHARS_PER_TOKEN)
    # Emoji and CJK punctuation: common ones are single tokens, and they rarely
    # merge with their neighbours.
    ascii_chars = sum(1 for c in run if c.isascii())
    return math.ceil(ascii_chars / PUNCT_CHARS_PER_TOKEN) + len(run) - ascii_chars


def _piece_cost(match: re.Match[str]) -> float:
    kind = match.lastgroup
    piece = match.group(kind)
    if kind == "letters":
        cost = _letters_cost(piece)
        prefix = match.group("prefix")
        if prefix is not None and not prefix.isascii():
            # " word", "(a", "@example" are single tokens; a CJK comma
            # before a word is not merged with it.
            cost += 1.0
        return cost
    if kind == "punct":
        return _punct_cost(piece)
    if kind == "space":
        return math.ceil(len(piece) / SPACES_PER_TOKEN)
    return 1.0  # a contraction or a digit group is one token


#: The same pieces as `_PIECE`, without its groups, so that ``findall`` returns the piece
#: strings themselves (in C, without a match object per piece).
_PIECES = re.compile(re.sub(r"\(\?P<\w+>", "(?:", _PIECE.pattern), _PIECE.flags)

#: Pieces up to this long have their cost remembered, at most `PIECE_TABLE_SIZE` of them:
#: " the", ".", " user" recur in every prompt, and looking a piece up costs far less than
#: pricing it through a match object. Longer pieces are priced each time.
PIECE_TABLE_CHARS, PIECE_TABLE_SIZE = 24, 100_000


class _PieceCosts(dict[str, float]):
    """Cost of a piece string. A piece's cost depends only on its kind and its text, and a
    piece matched alone is matched as the same kind (tests/test_cognition_tokens.py checks
    the sum against pricing each match of the whole text, on generated text)."""

    def __missing__(self, piece: str) -> float:
        match = _PIECE.match(piece)
        cost = _piece_cost(match) if match is not None else 0.0
        if len(piece) <= PIECE_TABLE_CHARS and len(self) < PIECE_TABLE_SIZE:
            self[piece] = cost
        return cost


_PIECE_COSTS = _PieceCosts()


def count_tokens(text: str) -> int:
    """Estimated number of cl100k-style tokens in ``text`` (0 for "")."""
    if CACHED_MIN_CHARS <= len(text) <= CACHED_MAX_CHARS:
        return _count_cached(text)
    return _count(text)


def _count(text: str) -> int:
    # every cost is a multiple of 1/4, so the float sum is exact in any order
    if len(text) < LINES_MIN_CHARS:
        return math.ceil(_cost(text))
    return math.ceil(sum(map(_line_cost, _LINE_STARTS.split(text))))


def _cost(text: str) -> float:
    return sum(map(_PIECE_COSTS.__getitem__, _PIECES.findall(text)))


#: A long text is priced line by line, each line's cost remembered: the system prompt is
#: new every cycle, but most of its lines (instructions, identity, recurring memories) are
#: not. Cut only after a newline that a non-space follows: no piece spans such a point
#: (a piece takes a newline only at its end, and never the non-space after it) and the
#: pieces after it match as in the whole text, so the sum is the whole text's
#: (tests/test_cognition_tokens.py compares both on generated text).
_LINE_STARTS = re.compile(r"(?<=\n)(?=\S)")
LINES_MIN_CHARS, LINE_CACHED_MAX_CHARS = 2_000, 2_000
_line_cost_cached = functools.lru_cache(maxsize=4096)(_cost)


def _line_cost(line: str) -> float:
    return _line_cost_cached(line) if len(line) <= LINE_CACHED_MAX_CHARS else _cost(line)


#: A cycle counts the same request several times (the turn's fit, the window's check of
#: each call, the provider's last-line guard) and the same conversation turns every
#: cycle, and the regex pass is the cost (bench/bench_scale.py, notes.md). Texts in this
#: range are remembered (at most 256 of them); shorter ones are cheaper to count than to look up.
CACHED_MIN_CHARS, CACHED_MAX_CHARS = 200, 200_000
_count_cached = functools.lru_cache(maxsize=256)(_count)


def cut_to_tokens(text: str, tokens: int, *, keep: str = "head") -> str:
    """The longest start (``keep="head"``) or end (``"tail"``) of ``text`` that counts at
    most ``tokens``, cut between pieces (never inside a word); ``text`` itself when it fits.
    One pass over the text, like `count_tokens`."""
    if keep not in ("head", "tail"):
        raise ValueError(f"keep must be 'head' or 'tail', got {keep!r}")
    if tokens <= 0:
        return ""
    pieces = [(m.start(), m.end(), _piece_cost(m)) for m in _PIECE.finditer(text)]
    if math.ceil(sum(c for _, _, c in pieces)) <= tokens:
        return text
    total = 0.0
    if keep == "head":
        end = 0
        for _, stop, cost in pieces:
            if math.ceil(total + cost) > tokens:
                break
            total, end = total + cost, stop
        return text[:end]
    start = len(text)
    for begin, _, cost in reversed(pieces):
        if math.ceil(total + cost) > tokens:
            break
        total, start = total + cost, begin
    return text[start:]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for block in content:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                raise TypeError(
                    f"cannot count tokens of content block {block!r}: "
                    "only text blocks ({'text': str}) are counted"
                )
        return "\n".join(parts)
    raise TypeError(
        f"message content must be a str or a list of text blocks, got {type(content).__name__}"
    )


def count_message_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Tokens of a chat request: each message's role and content plus framing.

    Each message is a mapping with ``role`` and ``content`` (a string or a list
    of ``{"text": ...}`` blocks) and an optional ``name``. Every request is
    primed for the reply, so even an empty list costs ``REPLY_PRIMING_TOKENS``.
    """
    total = REPLY_PRIMING_TOKENS
    for i, message in enumerate(messages):
        if "role" not in message or "content" not in message:
            raise ValueError(f"message {i} needs 'role' and 'content' keys, has {sorted(message)}")
        total += TOKENS_PER_MESSAGE
        total += count_tokens(message["role"])
        total += count_tokens(_content_text(message["content"]))
        if message.get("name"):
            total += TOKENS_PER_NAME + count_tokens(message["name"])
    return total


#: Above this many characters a count runs in a worker thread: a pasted log must not stall
#: the event loop the gates and the REPL share.
OFF_LOOP_CHARS = 50_000


async def count_message_tokens_off_loop(messages: Sequence[Mapping[str, Any]]) -> int:
    """count_message_tokens, in a thread when the text is large (issue 11 item 7)."""
    size = sum(len(_content_text(m.get("content"))) for m in messages)
    if size <= OFF_LOOP_CHARS:
        return count_message_tokens(messages)
    return await asyncio.to_thread(count_message_tokens, messages)
