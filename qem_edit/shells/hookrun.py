"""`qem hook HARNESS EVENT`: one harness hook, answered by the harness's contract.

It reads the hook's JSON input on stdin, finds the memory from the input's working
directory, works out the moment (qem_edit.base.harness), gives the notes it triggers that the
session was not given yet (qem_edit.reads.delivery, qem_edit.system.ledger), and prints exactly what
the harness reads as context.  A hook never blocks the agent: on any failure (no memory,
an unreadable one, a merge in progress, bad input) it prints what the harness reads as "no
context", exits 0, and says why in `.qem/sessions/hooks.log` (and on stderr, which the
harnesses keep out of the model's context).  Started without the command-line framework:
it runs before every file edit, so its start-up is the floor's.

Before means before.  What a hook gives before a tool reaches the model only after the
tool ran (the harnesses send it beside the tool's result); a deny is the one answer the
model reads before the action.  So before an edit or a command, when a note due there was
not given whole in this context window (at the start, with a prompt, at a read of the
file), the call is held: denied through the harness's own contract, the reason carrying
the notes and saying the same call may be made again; the ledger records them given and
the call held, so the call made again passes.  A read is never held, nor a call on any
failure (the notes then go as context, or nothing does), nor where `.qem/config.toml`
says `[delivery] hold = false`.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

from ..base.harness import (
    COMPACTING,
    END,
    GUESTS,
    HARNESSES,
    HOLD,
    PROMPT,
    START,
    STOP,
    SUBAGENT,
    TOOL,
    Asked,
    Harness,
    asked,
)

MAX_INPUT = 16 << 20  # bytes of hook input read (a prompt, a patch)
LOG_NAME = "hooks.log"
LOG_LIMIT = 256 << 10
USAGE = ("usage: qem hook HARNESS EVENT [-w WORKSPACE]  (reads the harness's hook input on stdin)\n"
         "  HARNESS: " + ", ".join(HARNESSES) + "; EVENT: the harness's own event name (SessionStart, PreToolUse, ...).\n"
         "  `qem setup HARNESS` writes these hooks into the project's settings.")
HELD = ("qem held this call, before it ran, so that you read the notes below first (this is not an error"
        " in the call). Take them into account, then make the same call again now, or the call they lead you to:"
        " it goes through.")
HOLDS_AT = ("edit", "shell")  # the moments whose notes a call is held for (never a read)
ASK_TO_RECORD = (
    "Before you stop: did this session learn something a future session on this project needs "
    "(a rule the user gave, a trap in the code, a decision and its reason, a finding)? If so, record it now "
    "with the qem MCP tool `add` (or `qem add TEXT --kind KIND`), kind one of directive, task, gotcha, finding, "
    "reference, decision, operational, and `anchors` naming the files it is about. If nothing is worth keeping, stop.")


def main(argv: list[str]) -> int:
    workspace = None
    if len(argv) == 4 and argv[2] in ("-w", "--workspace"):
        argv, workspace = argv[:2], argv[3]
    if len(argv) != 2 or argv[0] not in HARNESSES:
        if argv[:1] in (["-h"], ["--help"]):
            print(USAGE)
            return 0
        print(f"qem: error: {' '.join(argv) or 'nothing'}: not a hook qem answers\n{USAGE}", file=sys.stderr)
        return 2
    harness, event = HARNESSES[argv[0]], argv[1]
    try:
        raw = sys.stdin.buffer.read(MAX_INPUT + 1) if sys.stdin is not None else b""
    except (OSError, ValueError):
        raw = b""  # no input to read: what bad input gets
    out, code = run(harness, event, raw, workspace)
    if out:  # JSON is UTF-8 to its reader, whatever this process's locale says
        sys.stdout.buffer.write((out + "\n").encode("utf-8", "surrogateescape"))
        sys.stdout.flush()
    return code


def run(harness: Harness, event: str, raw: bytes, workspace: str | None = None) -> tuple[str, int]:
    """The hook's stdout and exit code; never an exception.  `workspace`: the memory's
    workspace (`-w`, a folder from the top of the work tree) where it is not found from
    the hook's working directory."""
    where: Path | None = None
    try:
        if len(raw) > MAX_INPUT:
            raise ValueError(f"hook input over {MAX_INPUT >> 20} MiB")
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError("hook input is not a JSON object")
        ask = asked(harness, event, data)
        where = _state_dir(ask, workspace)
        guest = GUESTS.get(ask.guest)
        if guest is not None and ask.does not in guest.takes:
            raise Said(f"{guest.title} reads no context at {event} ({guest.page}): nothing given", where)
        return _answer(harness, event, ask, where), 0
    except Said as exc:
        _log(exc.near, harness, event, exc)
        return harness.no_context, 0
    except Exception as exc:  # noqa: BLE001 - a hook that fails must not stop the agent
        _log(where, harness, event, exc)
        return harness.no_context, 0


class Said(Exception):
    """Why a hook gives nothing, said as it is (on stderr, and in the hooks log of the
    memory `near`, where there is one), never an error for the harness."""

    def __init__(self, message: str, near: Path | None = None) -> None:
        super().__init__(message)
        self.near = near


class NoMemory(Said):
    """No memory where the hook looked."""


def _state_dir(ask: Asked, workspace: str | None = None) -> Path:
    """The memory's folder.  `-w` (what `qem setup` writes for a memory in a subfolder)
    is a folder from the top of the git work tree holding the hook's working directory,
    so a hook fired from anywhere in the tree finds it; without it, the memory is found
    from the working directory up.  Where the input's working directory holds none (the
    agent went outside the tree), the project's is tried (`CLAUDE_PROJECT_DIR`, which
    Claude Code sets for its hooks).  NoMemory when there is none."""
    from ..system.workspace import STATE_DIR, find_workspace

    cwd = Path(ask.cwd) if ask.cwd else Path.cwd()
    project = os.environ.get("CLAUDE_PROJECT_DIR")
    for start in dict.fromkeys([cwd, *([Path(project)] if project else [])]):
        store = _memory_from(start, workspace)
        if (store / "config.toml").is_file():
            return store
    near = find_workspace(cwd) / STATE_DIR
    named = f" (-w {workspace} from the work tree's top {_tree_top(cwd)})" if workspace else ""
    raise NoMemory(f"no memory at {_memory_from(cwd, workspace)}{named}; hook's working directory {cwd}:"
                   " nothing given", near if (near / "config.toml").is_file() else None)


def _memory_from(start: Path, workspace: str | None) -> Path:
    """Where the memory is, found from `start` (it may not be there)."""
    from ..system.workspace import find_workspace, resolve

    if workspace:
        root = _tree_top(start) / workspace  # an absolute `-w` stays itself
    else:
        env = os.environ.get("QEM_WORKSPACE")
        root = start / env if env else find_workspace(start)
    return resolve(root, None).store_path


def _tree_top(cwd: Path) -> Path:
    """The top of the git work tree holding `cwd` (its nearest ancestor holding `.git`),
    else `cwd` itself."""
    from ..system.workspace import git_top

    return git_top(cwd) or cwd.resolve()


def _answer(harness: Harness, event: str, ask: Asked, state: Path) -> str:
    """The reply: the ledger of the session's context window (the main thread's, or a
    subagent's: `agent_id` marks a hook fired inside one) is read and written in two
    short holds of its lock (what the moment is; then what was given), the memory read
    between them, so hooks of one session running side by side wait on each other for
    milliseconds, not a read."""
    from ..system import ledger

    key = f"{harness.name}:{ask.session}"  # a session of one harness
    window = f"{harness.name}:agent:{ask.agent}" if ask.agent else key  # a subagent's, by its own id
    if ask.does == END:
        if ask.session:
            ledger.end(state, key)
            _end_session_notes(state, lambda session: session == ask.session)
        return harness.no_context
    if ask.does in (TOOL, HOLD) and not ask.moment:
        return harness.no_context
    if not ask.session:
        raise ValueError("hook input without a session id"
                         " (session_id, VS Code's sessionId, Cursor's conversation_id)")
    if ask.does == START:
        _started(state, ask, harness, event)
    with ledger.session(state, window) as book:
        if ask.does == COMPACTING:
            book.compacted()
            return harness.no_context
        if ask.does == STOP:
            return _stop(harness, ask, state, book)
        moments = _moments(ask, book, state)
        given = {n: entry for n, entry in book.given.items() if entry[0] == book.epoch}
        counted = book.notes_then >= 0
    found, texts, changed, notes, due_here, standings = _read(state, moments, given, counted, ask.session)
    if window != key and ask.does == SUBAGENT:
        with ledger.session(state, key) as book:
            book.started(window)
    with ledger.session(state, window) as book:
        if book.notes_then < 0:
            book.notes_then = notes
        holding = _holds(ask, found, due_here, book, state, harness, event)
        if ask.does == HOLD and not holding:
            return harness.no_context  # no context goes before this tool: the hook after it gives it
        budget = harness.budget - (harness.measure(HELD) + 2 if holding else 0)
        text = _given(harness, moments, found, texts, changed, book, budget, ask.does in (TOOL, HOLD), standings)
        if holding and text:
            book.hold(_about(ask))
            return harness.deny(event, f"{HELD}\n\n{text}")
    return harness.reply(event, text, ask.guest) if ask.does != HOLD else harness.no_context


def _about(ask: Asked) -> str:
    """What a tool call is about, as the ledger remembers a held one: the same call made
    again is about the same."""
    return "\0".join([ask.moment, ask.command, *ask.paths])


def _holds(ask: Asked, found: list, due_here: set, book, state: Path, harness: Harness,  # type: ignore[no-untyped-def]
           event: str) -> bool:
    """Whether this call is held: it runs before its tool, a note due at its edit or
    command was not given whole in this epoch, the ledger knows what the epoch gave, the
    same call was not held already, and the project did not turn holding off."""
    if not ask.holds or not book.may_hold() or book.was_held(_about(ask)):
        return False
    if not any(e.due.id in due_here and not book.was_given(e.due.id, e.due.full) for e in found):
        return False
    return _hold_setting(state, harness, event)


def _hold_setting(state: Path, harness: Harness, event: str) -> bool:
    """`[delivery] hold` in the memory's config.toml (default true), read only when a call
    would be held; a file that cannot be read, or a value that is not true or false, holds
    nothing (said in the hooks log)."""
    try:
        text = (state / "config.toml").read_text("utf-8")
        value = _plain_hold(text)
        if value is None:  # written some other way: read as TOML (tomllib costs a hook ~10 ms to import)
            import tomllib

            value = tomllib.loads(text).get("delivery", {}).get("hold", True)
        if not isinstance(value, bool):
            raise ValueError(f"[delivery] hold in {state / 'config.toml'} is {value!r}, not true or false;"
                             " no call is held")
        return value
    except (OSError, ValueError, AttributeError) as exc:
        _log(state, harness, event, exc)
        return False


_TABLE_RE = re.compile(r"\s*\[\s*([A-Za-z0-9_-]+)\s*\]\s*(?:#.*)?")
_HOLD_RE = re.compile(r"\s*hold\s*=\s*(true|false)\s*(?:#.*)?")


def _plain_hold(text: str) -> bool | None:
    """`[delivery] hold` where config.toml says it plainly, as qem writes it (a `[delivery]`
    table, a `hold = true|false` line, or neither); None where anything else there names
    them (an inline table, a dotted key, a multi-line string): TOML must read it."""
    if '"""' in text or "'''" in text:
        return None
    table, value = "", True
    for line in text.splitlines():
        header = _TABLE_RE.fullmatch(line)
        if header is not None or line.lstrip().startswith("["):
            table = header[1] if header is not None else "?"
            continue
        hold = _HOLD_RE.fullmatch(line) if table == "delivery" else None
        if hold is not None:
            value = hold[1] == "true"
        elif "delivery" in line or (table in ("delivery", "?") and "hold" in line):
            return None
    return value


def _moments(ask: Asked, book, state: Path) -> list:  # type: ignore[no-untyped-def]
    """The moments this hook gives (a compaction's first, where one is pending)."""
    from ..reads import delivery
    from ..system import ledger

    if ask.does == START:
        if ask.source in ("clear", "compact"):
            book.compacted()
    if ask.does == PROMPT:
        book.heard(ask.prompt)
    top = delivery.work_top(state)
    moments = []
    if book.pending_compact and ask.does in (START, PROMPT):
        moments.append(delivery.Moment("compact", top=str(top)))
        book.pending_compact = False
    if (ask.does == START and ask.source != "compact") or ask.does == SUBAGENT:
        moments.append(delivery.Moment("start", top=str(top)))
    elif ask.does == PROMPT:
        moments.append(delivery.Moment("prompt", prompt=ask.prompt, top=str(top)))
    elif ask.does in (TOOL, HOLD):  # the call's own moment first (its heading), then a command's edits and reads
        for event, named in ((ask.moment, ask.paths), *ask.also):
            paths = delivery.from_cwd(named, ask.cwd or str(top), top)
            if paths or event == ask.moment:
                command = ask.command if event == ask.moment else ""
                moments.append(delivery.Moment(event, paths=paths, command=command, top=str(top)))
    return moments


def _started(state: Path, ask: Asked, harness: Harness, event: str) -> None:
    """A session starts: where the harness lets a hook set its shell's environment
    (Claude Code's CLAUDE_ENV_FILE), QEM_SESSION is set to the session's id, so a `qem add
    --scope session` the agent runs knows its session; on a fresh start, the session notes
    of sessions whose ledgers are gone (ended, or swept as stale) are ended.  Either
    failing is logged and the start's context given all the same."""
    from ..system import ledger

    env_file = os.environ.get("CLAUDE_ENV_FILE")
    try:
        if env_file and re.fullmatch(r"[A-Za-z0-9._:-]{1,200}", ask.session):  # (a word the shell takes as it is)
            with open(env_file, "a", encoding="utf-8") as handle:
                handle.write(f"export QEM_SESSION={ask.session}\n")
        if ask.source == "startup":
            ledger.sweep(state)
            _end_session_notes(state, lambda session: session != ask.session and not any(
                ledger.exists(state, f"{name}:{session}") for name in HARNESSES))
    except Exception as exc:  # noqa: BLE001 - a start gives its notes whatever else fails
        _log(state, harness, event, exc)


def _end_session_notes(state: Path, ended) -> None:  # type: ignore[no-untyped-def]
    """The session notes in force whose session `ended` says is over, ended (an `expired`
    event each, qem_edit.writes.expiry); nothing opened where this clone holds no private folder."""
    from ..storage.logtree import LOCAL

    if not (state / LOCAL).is_dir():
        return
    from ..storage.store import Store
    from ..system.workspace import actor, resolve
    from ..writes.expiry import end_sessions

    store = Store.open(state, create=False, write=True)
    try:
        end_sessions(store, resolve(state.parent, state), ended, actor())
    finally:
        store.close()


READ_AHEAD = 420  # texts read for a reply: more than a budget's worth of the shortest lines (24 characters)


def _read(state: Path, moments: list, given: dict[str, list], counted: bool,  # type: ignore[no-untyped-def]
          session: str | None = None):
    """From the memory: what the moments trigger (each note once, the first moment's),
    the texts of the first of them the session was not given (`given`: this epoch's
    ledger entries), the changes of the notes given this epoch, how many notes it holds
    (-1 where the session's ledger has counted them already: `counted`), and the notes
    due at an edit or a command among them, in force (what a call is held for), and the
    notes' standing (past their end, in dispute: qem_edit.reads.standing).  Read for `session`:
    another session's session notes are not given."""
    from ..base.times import utc_now
    from ..reads import delivery
    from ..reads.standing import Standings
    from ..storage.store import Store
    from ..system.ledger import tip

    store = Store.open(state, create=False, write=False)
    store.session = session
    try:
        with store.reading():
            entries, seen, due_here = [], set(), set()
            for moment in moments:
                for entry in delivery.ranked(moment, delivery.hits(store, moment)):
                    if moment.event in HOLDS_AT:
                        due_here.add(entry.due.id)
                    if entry.due.id not in seen:
                        seen.add(entry.due.id)
                        entries.append(entry)
            fresh = [e.due.id for e in entries if e.due.id not in given or (e.due.full and not given[e.due.id][1])
                     or (e.due.late and e.due.id + LATE_MARK not in given)]
            texts = store.notes_by_id(fresh[:READ_AHEAD])
            standings = Standings.read(store, utc_now(), texts.values())
            due_here -= {n for n, note in texts.items() if standings.of(note).past_end}  # not in force: holds nothing
            recorded = {n: entry[2] for n, entry in given.items()}
            now = store.last_changes(recorded)
            moved = [n for n, last in recorded.items() if now.get(n, "") != last]
            notes = store.notes_by_id(moved)
            after = store.notes_by_id(n.superseded_by for n in notes.values() if n.superseded_by)
            changed = {n: delivery.Change(notes[n], after.get(notes[n].superseded_by or "")) if n in notes else None
                       for n in moved}
            count = -1 if counted else store.count()
            return (entries, texts, {n: (c, tip(c.note) if c else "") for n, c in changed.items()}, count,
                    due_here, standings)
    finally:
        store.close()


def _given(harness: Harness, moments: list, found: list, texts: dict, changed: dict,  # type: ignore[no-untyped-def]
           book, budget: int, tool: bool = False, standings=None) -> str:
    """The reply's context, from what the ledger says was not given yet, within `budget`
    (the harness's unit); what it gives, recorded.  Its heading is a tool call's own
    moment (the first), else the last (a start's after a compaction's)."""
    from ..reads import tiers
    from ..system.ledger import tip

    entries = [e for e in found if not book.was_given(e.due.id, e.due.full)
               or (e.due.late and not book.was_given(e.due.id + LATE_MARK, True))]
    changes = []
    for n, (change, last) in changed.items():
        entry = book.given.get(n)
        if entry is None or entry[0] != book.epoch or entry[2] == last:
            continue  # given in another epoch since, or its change said by a hook beside this one
        if change is None:
            book.given.pop(n)  # gone from the index (a forget purged it past reading)
        else:
            changes.append(change)
    out = tiers.fitter(moments)(moments[0] if tool else moments[-1], entries, changes, budget,
                                lambda ids: {n: texts[n] for n in ids if n in texts}, measure=harness.measure,
                                standings=standings)
    for change in out.changes:
        book.give(change.note.id, book.given[change.note.id][1], tip(change.note))
    late = {e.due.id for e in entries if e.due.late}
    for h in out.given:
        book.give(h.note.id, h.full, tip(h.note))
        if h.note.id in late:  # given as late: not again this epoch (given before it was late: again now)
            book.give(h.note.id + LATE_MARK, True, "")
    return out.text()


LATE_MARK = "@late"  # a ledger entry beside a request's: given as late (its last change "", which no note's is)


def _stop(harness: Harness, ask: Asked, state: Path, book) -> str:  # type: ignore[no-untyped-def]
    """The opt-in Stop hook: once a session, and only when it recorded no note, ask the
    agent to record what a future session needs; never when the harness says the agent
    is already going on because of a stop hook."""
    from ..storage.store import Store

    if ask.stop_hook_active or book.stop_asked:
        return harness.no_context
    store = Store.open(state, create=False, write=False)
    try:
        now = store.count()
    finally:
        store.close()
    if book.notes_then < 0:
        book.notes_then = now
    if now > book.notes_then:  # a note was created since the session began
        return harness.no_context
    book.stop_asked = True
    return harness.stop_reply(ASK_TO_RECORD)


def _withheld(said: str) -> str:
    """What the failure says, its secrets withheld (a hook's input may hold one, and the
    log outlives the session); if that check itself fails, the failure's name alone."""
    try:
        from ..storage.secrets import withheld

        return withheld(said)
    except Exception:  # noqa: BLE001 - a hook never fails for its log
        return said.partition(":")[0]


def _log(state: Path | None, harness: Harness, event: str, exc: BaseException) -> None:
    """Why a hook said nothing: a line on stderr, and in `.qem/sessions/hooks.log`."""
    from ..base.errors import QemError, words

    said = "; ".join(words(exc)) if isinstance(exc, (QemError, OSError)) else (
        str(exc) if isinstance(exc, Said) else f"{type(exc).__name__}: {exc}")
    said = _withheld(said)
    line = _withheld(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {harness.name} {event}: {said}")
    try:
        print(f"qem hook: {said}", file=sys.stderr)
    except OSError:
        pass
    if state is None:
        return
    try:
        from ..system.ledger import prepared

        log = prepared(state) / LOG_NAME  # the ledgers' own folder (never a link's), ignored by git
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        if log.exists() and log.stat().st_size > LOG_LIMIT:
            flags |= os.O_TRUNC  # the log starts again past its limit
        fd = os.open(log, flags, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(line.replace("\n", " ") + "\n")
    except (OSError, QemError):
        pass
