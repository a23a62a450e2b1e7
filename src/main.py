"""python -m src.main — wiring: settings → database → providers → prompt; signals.

Exit codes: 0 clean shutdown, 1 cannot start (database, instance lock, migrations),
2 invalid configuration. Expected start-up failures print one line, no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import asyncpg

from src.cli_runner import run_entry
from src.commands.command_context import CommandContext
from src.commands.registry import build_commands
from src.config import Settings
from src.db.database import Database, open_database
from src.db.manifest import record_start
from src.detached import check_reachable, reads_stdin
from src.erasure.matches import previous_line
from src.erasure.question import ForgetQuestion
from src.gates.forget_request import USER as USER_SOURCE
from src.gates.forget_request import forget_request
from src.line_editor import LineEditor
from src.logging_setup import log_file
from src.loop.input_journal import InputJournal, Line
from src.loop.intake import TYPED, Origin
from src.loop.outage import DB_ERRORS, Outage, describe
from src.mind import Mind, Stoppable, build_mind, shut_down
from src.providers.factory import Providers, build_providers
from src.recall.hnsw import index_state, rebuild_concurrently
from src.repl import EOF_MARK, Screen, interactive, start_stdin_reader, start_terminal_reader
from src.web.app import is_loopback
from src.web.serve import start_beside_mind

log = logging.getLogger("src.main")


@dataclass(frozen=True)
class Running:
    """What one run is made of before its prompt opens: the mind, the durable input it marks
    answered turns in, and the guardian's window (src/web) when enabled."""

    mind: Mind
    journal: InputJournal | None = None
    web: Stoppable | None = None


class Agent:
    """The process around one mind: its prompt (the commands it dispatches: src/commands) and shutdown."""

    def __init__(self, settings: Settings, db: Database, providers: Providers, session_id: str,
                 out: TextIO, *, running: Running | None = None, stop: asyncio.Event | None = None,
                 screen: Screen | None = None):
        self.settings = settings
        self.db = db
        self.providers = providers
        self.out = out
        # replies, command output, notices; the prompt at a terminal
        self.screen = screen if screen is not None else Screen(out)
        self.session_id = session_id
        self.mind: Mind | None = running.mind if running is not None else None
        self.journal: InputJournal | None = running.journal if running is not None else None
        self.web = running.web if running is not None else None
        self.stop = stop if stop is not None else asyncio.Event()   # SIGTERM/SIGINT set it
        self.quitting = asyncio.Event()   # /quit or end of input: answer what was said, then stop
        self.inputs: asyncio.Queue = asyncio.Queue()
        self.thinking: asyncio.Task | None = None   # the cognitive loop, while `serve` runs it
        # forgetting (src/erasure): /forget, /correct and a request in conversation open its question
        self.erasure = (ForgetQuestion(db.pool, providers.embedder, settings.agent.spill_dir,
                                       on_forgotten=self.mind.loop.forgetting.apply,
                                       between_turns=self.mind.loop.turn_lock)
                        if self.mind is not None and db is not None else None)
        # the guardian's slash commands (src/commands), each bound to this process's parts
        self.commands = build_commands(CommandContext(
            settings=settings, db=db, providers=providers, session_id=session_id, say=self.screen.say,
            quitting=self.quitting, mind=self.mind, erasure=self.erasure))

    async def handle_message(self, text: str, origin: Origin = TYPED, unkept: bool = False) -> str | None:
        """Plain input: entry gate (kept in scratch_buffer before anything else), then attention.

        The reply comes from the loop when the message wins a cycle.
        """
        candidate = await self.mind.loop.submit("user", text, origin=origin, unkept=unkept)
        return None if candidate is not None else "(not attended to)"

    async def journal_lines(self, batch: list) -> list:
        """The reader's chunk: decoded, and journaled in one statement before it reads on."""
        out = [Line.decode(item) if isinstance(item, bytes) else item for item in batch]
        lines = [x for x in out if isinstance(x, Line) and x.text.strip()]
        if self.journal is not None:
            await self.journal.append(lines)
        return out

    async def handle_line(self, item: object) -> str | None:
        """One item from the reader → the text to print (None: print nothing)."""
        if isinstance(item, tuple) and item[0] == "oversize":
            return (f"input refused: the line has {item[1]:,} bytes, more than the "
                    f"{self.settings.agent.max_input_chars:,} allowed (agent.max_input_chars); "
                    "nothing was stored")
        line = item if isinstance(item, Line) else Line.decode(item)
        prefix = "".join(f"note: {n}\n" for n in line.notes)
        if not line.text.strip():
            return prefix.rstrip() or None
        if self.journal is not None and not await self.journal.persisted(line, self.stop):
            return None   # stopping while the database is away: the line stays in the spill file
        try:
            if line.kind == "command":
                if self.commands.in_order(line.text.strip()):
                    await self.after_earlier_messages()
                reply = await self.commands.dispatch(line.text.strip())
                if line.id is not None and self.journal is not None:
                    await self.journal.done(line.id)
            elif (reply := await self.forget_line(line)) is not None:
                # "Forget these N?" answered, or a forget request: listed and asked, not a message
                if line.id is not None and self.journal is not None:
                    await self.journal.done(line.id)
            elif (reply := await self.mind.gates.answer_confirmation(line.text)) is not None:
                # copilot: the line right after "Keep these?" answered it; it is not a message
                if line.id is not None and self.journal is not None:
                    await self.journal.done(line.id)
            else:
                reply = await self.handle_message(line.text, Origin(ref=line.id))
        except DB_ERRORS as exc:   # expected during an outage: say so, no traceback
            self.mind.loop.outage.down("command", exc)
            reply = f"error: the database is unavailable ({describe(exc)}); try again when it is back"
        return (prefix + reply) if reply else (prefix.rstrip() or None)

    async def after_earlier_messages(self, recheck_s: float = 1.0) -> None:
        """Before a command: the messages typed before it are answered, so its output comes
        after their answers, as they were typed (issue 41: `/cost` printed before the answer to
        the line above it). Not while the database is away: the loop waits for it without end,
        and the command says what it can now. Not past a stop, nor without a running loop."""
        if self.mind is None or self.thinking is None:
            return
        answered = asyncio.create_task(self.mind.loop.intake.until_answered("terminal"))
        try:
            while not (answered.done() or self.stop.is_set() or self.thinking.done()
                       or self.mind.loop.outage.active):
                await asyncio.wait({answered, self.thinking}, timeout=recheck_s,
                                   return_when=asyncio.FIRST_COMPLETED)
        finally:
            answered.cancel()

    async def forget_line(self, line: Line) -> str | None:
        """The answer to an open "Forget these N?", or the listing for a forget request typed
        at the prompt (src/erasure/request.py); None: the line is an ordinary message."""
        if self.erasure is None:
            return None
        if (reply := await self.erasure.answer(line.text)) is not None:
            return reply
        request = forget_request(line.text, USER_SOURCE)
        if request is None:
            return None
        words = request.about or await previous_line(self.db.pool, line.id)
        if not words:
            return "there is nothing before this to forget"
        return await self.erasure.ask(words=words, who="conversation", each_word=not request.last,
                                      request=(line.id, line.text))

    async def serve(self) -> None:
        """Read the prompt while the loop thinks; at end of input, finish what is queued."""
        loop = asyncio.get_running_loop()
        if not reads_stdin(self.settings.agent.stdin):   # detached (src/detached.py): no end of input; SIGTERM ends it
            self.screen.note("no terminal input (detached): running until stopped (SIGTERM, `docker compose "
                            "stop`); talk to the mind on the web view's chat page, the HTTP API or MCP")
        elif self.screen.editor is not None:     # a person at a terminal: editing keys, history
            start_terminal_reader(loop, self.inputs, self.screen.editor,
                                  max_chars=self.settings.agent.max_input_chars, persist=self.journal_lines)
        else:
            start_stdin_reader(loop, self.inputs, max_chars=self.settings.agent.max_input_chars,
                               persist=self.journal_lines)
        drain = asyncio.Event()
        thinking = asyncio.create_task(self.mind.loop.run(stop=self.stop, drain=drain), name="cognitive-loop")
        self.thinking = thinking
        dmn = (asyncio.create_task(self.mind.dmn.run(self.stop), name="dmn")
               if self.mind.dmn is not None else None)
        self.mind.consolidation.start()
        stop_wait = asyncio.create_task(self.stop.wait())
        try:
            while not self.stop.is_set() and not self.quitting.is_set():
                get = asyncio.create_task(self.inputs.get())
                await asyncio.wait({get, stop_wait, thinking}, return_when=asyncio.FIRST_COMPLETED)
                if not get.done():
                    get.cancel()
                    break
                item = get.result()
                if item is EOF_MARK:
                    break
                self.screen.typed()      # the terminal moved to a fresh line: no prompt showing
                try:
                    reply = await self.handle_line(item)
                except Exception:  # one bad line must not end the mind
                    log.exception("input could not be handled")
                    reply = "error: that input could not be handled (details in the log); nothing else was affected"
                if reply:
                    self.screen.say(reply)
                else:
                    self.screen.show_prompt()
            # /quit or end of input: answer everything said before it, then stop; the mind's
            # own model calls end now (issue 27: a background call held /quit past 10 s)
            self.providers.endpoints.close_internal()
            drain.set()
            self.mind.loop.wake.set()
            await asyncio.wait({thinking, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_wait.cancel()
            self.stop.set()
            self.providers.endpoints.close_internal()
            await _finish(thinking)
            if dmn is not None:
                await _finish(dmn)
            self.screen.last("shutting down")   # last: every answer to what came before is out


async def _finish(task: asyncio.Task) -> None:
    """Let the current cycle end (it stops at the next check of `stop`)."""
    try:
        await asyncio.wait_for(task, timeout=5)
    except TimeoutError:
        log.warning("the cognitive loop did not stop within 5 s; cancelling its cycle")
    except Exception:
        log.exception("the cognitive loop ended with an error")


async def _rebuild_index(dsn: str, say) -> None:
    try:
        seconds = await rebuild_concurrently(dsn)
    except (OSError, asyncpg.PostgresError) as exc:
        log.warning("the vector index could not be rebuilt: %s", type(exc).__name__)
        say("the vector index could not be rebuilt (details in the log); "
            "`python -m src.memory import` of any file rebuilds it")
        return
    say(f"the vector index is rebuilt ({seconds:.1f} s)")


async def run(settings: Settings, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    session_id = uuid.uuid4().hex[:12]
    if not reads_stdin(settings.agent.stdin):   # before the database starts: nothing left behind
        token = settings.web.token.get_secret_value() if settings.web.token else None
        check_reachable(web_enabled=settings.web.enabled, api=settings.web.api,
                        web_host_ok=is_loopback(settings.web.host) or bool(token))
    db = await open_database(settings.database)
    try:
        providers = build_providers(settings.providers, settings.secrets, db.pool, session_id)
    except BaseException:
        await db.close()
        raise
    screen = _screen(settings, out)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    mind: Mind | None = None
    web: Stoppable | None = None
    try:
        manifest = await record_start(db.pool, session_id, providers.embedder.model_name)
        await providers.probe_context_windows()      # before the report says each model's window
        screen.note(f"database: {db.description}"
                    + (f"; applied {', '.join(db.applied_migrations)}" if db.applied_migrations else ""))
        for line in providers.report:
            screen.note(line)
        journal = InputJournal(db.pool, session_id, settings.agent.spill_dir, outage=Outage(), notify=screen.say,
                           max_chars=settings.agent.max_input_chars)
        mind = await build_mind(settings, db.pool, providers, session_id=session_id, manifest=manifest,
                                deliver=screen.say, journal=journal)
        if mind.stale_at_start:
            screen.note(f"{mind.stale_at_start} memories need re-embedding with "
                        f"{providers.embedder.model_name}; running in the background "
                        "(until then only keyword search finds them)")
        index = await index_state(db.pool)
        if index != "valid":     # an import killed mid-rebuild: vector search is an exact scan until it is back
            screen.note(f"the vector index is {index}; rebuilding it in the background (until then vector "
                        "search reads every row)")
            mind.background.append(asyncio.create_task(_rebuild_index(db.dsn, screen.say), name="index-rebuild"))
        web, web_line = await start_beside_mind(settings, mind, session_id, dsn=db.dsn, journal=journal, stop=stop,
                                                say=screen.say)
        agent = Agent(settings, db, providers, session_id, out, running=Running(mind, journal, web), stop=stop,
                      screen=screen)
        await _recover_scratch(agent, screen)
        await _open_journal(agent, screen)
        if web_line:
            screen.note(web_line)
        screen.note(f"{settings.agent.name} session {session_id}: age {manifest.age_days:.2f} days, "
                    f"restart #{manifest.times_restarted}{_log_note()}. Type /help for commands.")
        await agent.serve()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await shut_down(db, providers, mind, web, session_id, timeout_s=settings.agent.shutdown_timeout_s)
        if db.left_running:   # after "shutting down": the server outlives us on purpose
            screen.note(db.left_running)
        screen.close()
    return 0


def _screen(settings: Settings, out: TextIO) -> Screen:
    """The conversation's screen; a person typing at a terminal gets the line editor."""
    editor = (LineEditor(settings.agent.history_file)
              if interactive(out) and reads_stdin(settings.agent.stdin) else None)
    screen = Screen(out, editor=editor)
    if editor is not None and sys.stderr.isatty():     # the log's lines share the typed line's terminal
        # with a log file, only errors: a warning goes to the file, not into the conversation
        screen.take_terminal_log(settings.logging.screen_level if log_file() is not None else None)
    return screen


def _log_note() -> str:
    """Where the log is, for the ready line: the terminal shows only warnings (issue 26)."""
    path = log_file()
    if path is None:
        return ""
    with contextlib.suppress(ValueError):
        path = path.relative_to(Path.cwd())
    return f"; log in {path}"


async def _recover_scratch(agent: Agent, screen: Screen) -> None:
    """Crash recovery: what a previous run buffered but never flushed goes through the gate."""
    try:
        report = await agent.mind.gates.recover()
    except Exception:  # the items stay buffered; the next flush retries them
        log.exception("scratch recovery failed; buffered items stay for the next flush")
        report = None
    if report is not None and report.evaluated:
        screen.note(f"recovered {report.evaluated} buffered item(s) from the last run: {report.summary()}")
    if (notice := agent.mind.gates.held_notice()) is not None:
        screen.note(notice)


async def _open_journal(agent: Agent, screen: Screen) -> None:
    """Durable input; messages earlier runs never answered go back to the loop first."""
    replay = await agent.journal.open()
    for line in replay:
        await agent.handle_message(line.text, Origin(ref=line.id, gated=line.gated, channel=line.channel),
                                   unkept=line.unkept)
    agent.journal.replay_submitted()
    if replay:
        screen.note(f"{len(replay)} message(s) from an earlier run were never answered; answering them now")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.main", description="Run the MoltBot mind.")
    parser.add_argument("--config", help="path of runtime.yaml (default: $MOLTBOT_CONFIG or ./runtime.yaml)")
    args = parser.parse_args(argv)
    return run_entry(run, config=args.config)

if __name__ == "__main__":
    sys.exit(main())
