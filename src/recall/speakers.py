"""Who said a memory (issue 27): the user, the mind itself, its own thoughts, or a named person.

A small model that reads `- [episodic] Hi! My name is Priya Raman, I am a marine
biologist` among its own memories takes it for its own words and answers "I am Priya
Raman". So every text that reaches a model from memory carries its speaker in words:

    The user said: Hi! My name is Priya Raman, I am a marine biologist.
    I said: Nice to meet you, Priya.
    I thought: This comes back to me, from today: ...
    I concluded: The user is a marine biologist.
    Priya said: I am a marine biologist.          (an imported conversation)

Nothing new is stored for it: the store already knows. `source_tag` says where a row
came from — `external_user` the user, `internal_self` what the mind said to the user,
`internal_thought` what it answered to a thought of its own without saying it (the
loop's aftermath), `internal_dmn` / `internal_gut` / `internal_scheduled` the thoughts
themselves, `internal_consolidation` what consolidation concluded, `internal_system2`
a correction. `metadata.speaker` overrides the tag: an imported conversation names each
turn's speaker there (`python -m src.memory import`, a REALTALK turn's "Emi"), and a
merge of one speaker's words keeps that speaker (the offline merge restates them word
for word). The reserved labels `user`, `self`, `thought`, `conclusion` and `correction`
name the kinds; any other label is a person's name. A memory with neither (a boundary
seed, an import without a speaker) is shown as it is.

`claims_as_own` is the check a consolidation answer can be held to: a text in the first
person that rests only on what the user (or another person) said states their words as
the mind's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["user", "self", "thought", "conclusion", "correction", "person"]


@dataclass(frozen=True)
class Speaker:
    """Who said a memory; `name` only for a person other than the user and the mind."""

    kind: Kind
    name: str | None = None

    @property
    def mind(self) -> bool:
        """The mind's own words: said, thought, concluded or corrected."""
        return self.kind in ("self", "thought", "conclusion", "correction")

    @property
    def label(self) -> str:
        """What `metadata.speaker` holds for this speaker (`from_label` reads it back)."""
        return self.name if self.kind == "person" and self.name else self.kind


USER = Speaker("user")
SELF = Speaker("self")
THOUGHT = Speaker("thought")
CONCLUSION = Speaker("conclusion")
CORRECTION = Speaker("correction")

#: The tag of what the mind said to the user; of an answer it gave only to itself.
SAID_TAG = "internal_self"
THOUGHT_TAG = "internal_thought"

TAG_SPEAKERS: Mapping[str, Speaker] = {
    "external_user": USER,
    SAID_TAG: SELF,
    THOUGHT_TAG: THOUGHT,
    "internal_dmn": THOUGHT,
    "internal_gut": THOUGHT,
    "internal_scheduled": THOUGHT,
    "internal_consolidation": CONCLUSION,
    "internal_system2": CORRECTION,
}
_KINDS: Mapping[str, Speaker] = {s.kind: s for s in (USER, SELF, THOUGHT, CONCLUSION, CORRECTION)}

#: The words before a memory's text, by speaker kind (they reach the model).
SAID_AS: Mapping[str, str] = {
    "user": "The user said: ",
    "self": "I said: ",
    "thought": "I thought: ",
    "conclusion": "I concluded: ",
    "correction": "I corrected myself: ",
    "person": "{name} said: ",
}
#: The longest name kept from `metadata.speaker` (a name, not a text).
MAX_NAME_CHARS = 80


def from_label(label: str) -> Speaker | None:
    """A `metadata.speaker` label as a speaker: a reserved kind, else a person's name."""
    name = " ".join(label.split())[:MAX_NAME_CHARS]
    if not name:
        return None
    return _KINDS.get(name.lower(), Speaker("person", name))


def speaker_of(source_tag: str | None, metadata: Mapping[str, Any] | str | None = None) -> Speaker | None:
    """The speaker of a memory or scratch row: `metadata.speaker` when it names one, else
    its source tag's; None when neither says (shown without a speaker). `metadata` may be
    the JSON text a query returns."""
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            metadata = None
    named = metadata.get("speaker") if isinstance(metadata, Mapping) else None
    if isinstance(named, str) and (speaker := from_label(named)) is not None:
        return speaker
    return TAG_SPEAKERS.get(source_tag or "")


def words_of(text: str, speaker: Speaker | None) -> str:
    """What `speaker` said in `text`: a person's turn stored as "Priya: I am …" (the import
    convention) without the leading name, so the name said beside it is not said twice."""
    if speaker is None or speaker.kind != "person":
        return text
    name = speaker.name or ""
    stripped = text.lstrip()
    if stripped[:len(name) + 1].lower() == f"{name}:".lower():
        return stripped[len(name) + 1:].lstrip()
    return text


def attributed(text: str, speaker: Speaker | None) -> str:
    """`text` with its speaker in words ("The user said: …"); as it is without one.

    A person's turn stored as "Priya: I am …" (the import convention) is not named twice."""
    if speaker is None:
        return text
    if speaker.kind == "person":
        return SAID_AS["person"].format(name=speaker.name or "") + words_of(text, speaker)
    return SAID_AS[speaker.kind] + text


def common_speaker(speakers: Iterable[Speaker | None]) -> Speaker | None:
    """The one speaker all of `speakers` share; None when they differ or one has none."""
    found = set(speakers)
    return found.pop() if len(found) == 1 else None


#: "I", "my", "mine", "myself" and I's contractions: the mind speaking of itself. Not "me": "the
#: user told me they are a nurse" speaks of the user.
_FIRST_PERSON = re.compile(r"(?<![\w'’])(?:I|I['’](?:m|ve|d|ll)|[Mm]y|[Mm]ine|[Mm]yself)(?![\w'’/])")
#: What someone is quoted as saying is theirs, not the writer's: "… said: …" to the end of
#: its line, and text in double quotes.
_QUOTED = re.compile(r"\bsaid:.*$|\"[^\"\n]*\"|“[^”\n]*”", re.MULTILINE)


def first_person(text: str) -> bool:
    """Whether `text` speaks in the first person singular (I, my, mine, myself, I'm …), outside
    what it quotes others as saying."""
    return _FIRST_PERSON.search(_QUOTED.sub(" ", text)) is not None


# first person → second: the user's "I" as the mind says it back
_SECOND_PERSON = {"i": "you", "i'm": "you're", "me": "you", "my": "your", "mine": "yours", "myself": "yourself",
                  "am": "are", "i've": "you've", "i'd": "you'd", "i'll": "you'll"}
_TOKEN = re.compile(r"[A-Za-z'’]+|[^A-Za-z'’]+")


def to_second_person(text: str) -> str:
    """`text` with its first person singular turned to the second ("My sister lives in Gdansk"
    → "your sister lives in Gdansk"; "I was" → "you were"), words and punctuation otherwise kept."""
    out: list[str] = []
    previous = "."                   # the text starts a sentence
    for token in _TOKEN.findall(text):
        low = token.lower().replace("’", "'")
        if low in _SECOND_PERSON:
            token = _SECOND_PERSON[low]
            if previous.rstrip()[-1:] in ".!?":        # a sentence's first word
                token = token.capitalize()
        elif low == "was" and previous == "i":
            token = "were"
        if token.strip():
            previous = low
        out.append(token)
    return "".join(out)


def claims_as_own(text: str, sources: Iterable[Speaker | None]) -> bool:
    """Whether `text`, written by the mind, states in the first person what only others said:
    it speaks as "I" and rests on the words of the user or another person, none of the mind's
    own. A source without a speaker (a boundary seed) counts for neither side."""
    known = [s for s in sources if s is not None]
    return bool(known) and not any(s.mind for s in known) and first_person(text)


__all__ = ["CONCLUSION", "CORRECTION", "SAID_AS", "SAID_TAG", "SELF", "TAG_SPEAKERS", "THOUGHT", "THOUGHT_TAG",
           "USER", "Speaker", "attributed", "claims_as_own", "common_speaker", "first_person", "from_label",
           "speaker_of", "to_second_person", "words_of"]
