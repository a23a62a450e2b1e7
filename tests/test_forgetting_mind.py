"""Issue 39 item 2's in-process part: what a running mind holds of forgotten words goes at
once (src/loop/forgetting.py) — the window's messages, the replies kept, the queued
messages' text, the active ids, the identity cache; and a forget made by another process
(the CLI, seen by its receipt) empties the window at the next check."""

from __future__ import annotations

from datetime import UTC, datetime

from src.context.assembly import ContextAssembler
from src.context.fifo import AdaptiveFifo
from src.erasure.forget import Forgotten
from src.erasure.placeholder import forgotten_text, needles, parts
from src.gates.copilot import Confirmations
from src.loop.attention_queue import AttentionQueue, Candidate
from src.loop.conversation import Conversation
from src.loop.forgetting import Forgetting

SECRET = "My gym locker code is zebrafish 7419."
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


async def _nothing(_):
    return None


def _mind(pool):
    window = AdaptiveFifo(4000, _nothing)
    window.append("user", SECRET)
    window.append("assistant", "Noted: zebrafish 7419.")
    window.append("user", "My sister lives in Porto.")
    conversation = Conversation(window, recent_limit=3, active_ids=[5, 9], said=["Noted: zebrafish 7419.", "Hello."])
    queue = AttentionQueue()
    queue.push(Candidate.of("user", "and the code again: zebrafish 7419", enqueued_at=NOW))
    queue.push(Candidate.of("user", "what is my sister's name?", enqueued_at=NOW))
    assembler = ContextAssembler(pool)
    return Forgetting(pool, conversation, assembler, Confirmations(), queue), conversation, queue, assembler


async def test_a_forget_drops_the_words_from_what_the_mind_holds(pool):
    forgetting, conversation, queue, assembler = _mind(pool)
    await assembler.identity_cache.candidates(pool)
    found = needles([SECRET, *parts(SECRET)])
    assert forgetting.apply(Forgotten([5], [], found), receipt_id=3) == 2
    assert len(conversation.window) == 1 and "Porto" in conversation.window.messages[0].content
    assert conversation.said == ["Hello."] and conversation.active_ids == [9]
    texts = [c.text for c in queue.pending()]
    assert texts == [forgotten_text("and the code again: zebrafish 7419"), "what is my sister's name?"]
    assert assembler.identity_cache.entries == []          # re-scanned at the next cycle
    assert forgetting.seen == 3


async def test_a_forget_by_another_process_empties_the_window_at_the_next_check(pool):
    forgetting, conversation, _, _ = _mind(pool)
    assert await forgetting.check() is False                # the first check: what came before is done
    assert len(conversation.window) == 3
    await pool.execute("INSERT INTO forget_receipts (who, memories, counts) VALUES ('cli', 1, '{}')")
    assert await forgetting.check() is True
    assert len(conversation.window) == 0 and conversation.said == [] and conversation.active_ids == []
    assert await forgetting.check() is False                # once
