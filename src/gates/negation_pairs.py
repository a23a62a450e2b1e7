"""The fixed pairs the negation direction is learned and calibrated from (plan §2.8).

`NEGATION_PAIRS` are (statement, its negation or opposite): half explicit negation
("not", "never", "no", "don't"), half antonyms (open/closed, won/lost), so the learned
direction is not only the embedding of the word "not". `CONFIRMING_PAIRS` restate
a statement without changing its truth, and `RELATED_PAIRS` say something different
about the same subject without contradicting it; together they calibrate where
"not opposed" ends. The related pairs matter most: above the contradicting
similarity threshold they are the common case, and a direction calibrated on
restatements alone flags many of them.

Changing either list changes `pairs_sha256`, and the direction is learned again for
every embed model on next use. The tests hold out other pairs to measure separation.
"""

from __future__ import annotations

import hashlib
import json

NEGATION_PAIRS: tuple[tuple[str, str], ...] = (
    ("I love coffee", "I do not love coffee"),
    ("The meeting is on Monday", "The meeting is not on Monday"),
    ("She likes running", "She doesn't like running"),
    ("The door is open", "The door is closed"),
    ("I always walk to work", "I never walk to work"),
    ("The test passed", "The test failed"),
    ("He is happy today", "He is sad today"),
    ("The store is open on Sundays", "The store is not open on Sundays"),
    ("I agree with the plan", "I disagree with the plan"),
    ("The statement is true", "The statement is false"),
    ("We will go to the party", "We will not go to the party"),
    ("I can swim", "I cannot swim"),
    ("The light is on", "The light is off"),
    ("They won the game", "They lost the game"),
    ("I remember her name", "I forgot her name"),
    ("The water is hot", "The water is cold"),
    ("My brother lives in Berlin", "My brother does not live in Berlin"),
    ("I want to learn French", "I don't want to learn French"),
    ("The package arrived", "The package never arrived"),
    ("I love my job", "I hate my job"),
    ("The answer is yes", "The answer is no"),
    ("The price went up", "The price went down"),
    ("I am allowed to park here", "I am forbidden to park here"),
    ("The shop has milk", "The shop has no milk"),
)

CONFIRMING_PAIRS: tuple[tuple[str, str], ...] = (
    ("I love coffee", "I really love coffee"),
    ("The meeting is on Monday", "We meet on Monday"),
    ("She likes running", "She enjoys running"),
    ("The door is open", "The door is wide open"),
    ("I walk to work every day", "Every day I walk to work"),
    ("The test passed", "The test passed again"),
    ("He is happy today", "Today he is happy"),
    ("The store opens at nine", "The shop opens at nine"),
    ("I agree with the plan", "I fully agree with the plan"),
    ("We will go to the party", "We are going to the party"),
    ("My brother lives in Berlin", "My brother's home is in Berlin"),
    ("I want to learn French", "I would like to learn French"),
    ("The package arrived", "The package arrived this morning"),
    ("The price went up", "The price increased"),
    ("The water is hot", "The water is very hot"),
    ("They won the game", "They won the match"),
)


RELATED_PAIRS: tuple[tuple[str, str], ...] = (
    ("I love coffee", "I love my bicycle"),
    ("The meeting is on Monday", "The meeting is in room four"),
    ("She likes running", "She likes Italian food"),
    ("The door is open", "The door is painted blue"),
    ("I always walk to work", "I always listen to podcasts"),
    ("The test passed", "The test took ten minutes"),
    ("He is happy today", "He is at home today"),
    ("My brother lives in Berlin", "My brother works in a bank"),
    ("I want to learn French", "I want to visit Japan"),
    ("The package arrived", "The package was heavy"),
    ("The price went up", "The price is listed online"),
    ("They won the game", "They played the game at home"),
    ("The water is hot", "The water comes from the tap"),
    ("I can swim", "I can drive a truck"),
    ("The shop has milk", "The shop has a new owner"),
    ("I agree with the plan", "I wrote part of the plan"),
)


def pairs_sha256() -> str:
    """Fingerprint of the lists: the cache key of a learned direction."""
    blob = json.dumps([NEGATION_PAIRS, CONFIRMING_PAIRS, RELATED_PAIRS], ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()
