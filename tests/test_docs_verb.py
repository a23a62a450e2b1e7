"""When the docs tool is offered (src/tools/docs_verb.py), measured on a labelled set.

The set mixes what a user asks about the mind itself or its code (the tool should be
offered) with ordinary conversation, including the traps: "my code", "my notes",
"how are you?", and the message that started issue 18.
"""

from __future__ import annotations

from pathlib import Path

from src.tools.docs_verb import about_self_or_code, docs_verbs, list_docs_verb, read_doc_verb
from src.tools.read_docs import DocsTool, DocsToolSettings

ABOUT_SELF = [
    "How does your memory work?",
    "What does your README say?",
    "what are you, according to your README?",
    "Can you read src/loop/cognitive_loop.py and explain the cycle?",
    "How are you built?",
    "Explain your architecture to me",
    "Which of your modules implements the entry gate?",
    "What do your notes say about the FIFO?",
    "how do you decide what to remember?",
    "Show me your source code for recall",
    "How do you actually work?",
    "What's in notes.md?",
    "Is MoltBot open source?",
    "Where is the attention queue in your code?",
    "How were you designed?",
    "Tell me about your own gates",
    "Look at gates/entry.py please",
    "what does your documentation say about consolidation?",
    "How does your context window get pruned?",
    "How do you store new memories?",
    "How can you remember so much?",
    "How did you learn that about me?",
]
ORDINARY = [
    "Hello! My name is Dana, nice to meet you.",
    "What's the weather like today?",
    "Can you help me fix my Python code?",
    "I took notes at the meeting yesterday",
    "Do you remember my name?",
    "What should I cook tonight?",
    "I drink earl grey tea every morning",
    "Tell me a story about a lighthouse",
    "How are you?",
    "How do you do?",
    "Can you read this article for me?",
    "My memory is getting worse with age",
    "What do you think about jazz?",
    "Please summarise my notes from the lecture",
    "How do you say 'hello' in French?",
    "I keep my bicycle in the garage",
    "what tea do I drink in the morning?",
    "Could you design a garden plan with me?",
    "How can you tell if bread is done?",
    "I'm writing a program for my class",
    "How do you think I should cook rice?",
    "How would you decide between two job offers?",
]


def test_the_labelled_set_is_classified_as_labelled():
    offered = [m for m in ABOUT_SELF if about_self_or_code(m)]
    false_offers = [m for m in ORDINARY if about_self_or_code(m)]
    assert (len(ABOUT_SELF), len(ORDINARY)) == (22, 22)
    assert [m for m in ABOUT_SELF if m not in offered] == []     # recall 22/22
    assert false_offers == []                                    # no offer on ordinary talk


def test_the_instruction_says_when_and_names_the_readable_roots(tmp_path: Path):
    verb = read_doc_verb(DocsTool(DocsToolSettings(roots=["src", "notes.md"]), tmp_path))
    assert verb.verb == "READ_DOC" and verb.usage == "READ_DOC: <relative path>"
    assert verb.when == ("Only when the message asks how you work or about your own code or notes: read "
                         "one of your files (read-only). Readable: src, notes.md.")
    assert verb.offered("How does your memory work?") and not verb.offered("Hello! My name is Dana.")
    (tmp_path / "notes.md").write_text("# n\n")
    assert verb.handler("notes.md") == "# n\n"
    assert verb.handler("/home/user/documents/placeholder.txt") == (
        "error: '/home/user/documents/placeholder.txt' is outside the readable documents (src, notes.md)")


def test_without_a_docs_tool_the_verb_is_never_offered_and_refuses():
    for docs in (None, DocsTool(DocsToolSettings(enabled=False))):
        verb = read_doc_verb(docs)
        assert not verb.offered("What does your README say?")
        assert verb.handler("README.md") == "error: the docs tool is disabled (tools.docs.enabled: false)"


def test_list_docs_lists_what_read_doc_may_read(tmp_path: Path):
    (tmp_path / "src" / "loop").mkdir(parents=True)
    (tmp_path / "src" / "loop" / "fifo.py").write_text("x = 1\n")
    (tmp_path / "notes.md").write_text("# n\n")
    docs = DocsTool(DocsToolSettings(roots=["src", "notes.md"]), tmp_path)
    verb = list_docs_verb(docs)
    assert (verb.verb, verb.usage, verb.kind) == ("LIST_DOCS", "LIST_DOCS: <relative directory, or . for all>",
                                                  "read_doc")
    assert verb.offered("Which files hold your memory code?") and not verb.offered("Hello! I am Dana.")
    assert verb.handler(".") == verb.handler("") == "src/loop/fifo.py (6 bytes)\nnotes.md (4 bytes)"
    assert verb.handler("src/loop") == "src/loop/fifo.py (6 bytes)"
    assert verb.handler("../") .startswith("error: '..' is not allowed")
    # READ_DOC on a directory points at LIST_DOCS, which now exists
    assert read_doc_verb(docs).handler("src") == "error: 'src' is a directory (LIST_DOCS shows what it holds)"
    assert [v.verb for v in docs_verbs(docs)] == ["READ_DOC", "LIST_DOCS"]
    assert [v.kind for v in docs_verbs(None)] == ["read_doc", "read_doc"]
    assert not list_docs_verb(None).offered("What does your README say?")
    assert list_docs_verb(None).handler(".") == "error: the docs tool is disabled (tools.docs.enabled: false)"
