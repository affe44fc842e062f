"""`qem hook HARNESS EVENT`: one harness hook, answered by the harness's contract.

It reads the hook's JSON input on stdin, finds the memory from the input's working
directory, works out the moment (qem_edit.harness), gives the notes it triggers that the
session was not given yet (qem_edit.delivery, qem_edit.ledger), and prints exactly what
the harness reads as context.  A hook never blocks the agent: on any failure (no memory,
an unreadable one, a merge in progress, bad input) it prints what the harness reads as "no
context", exits 0, and says why in `.qem/sessions/hooks.log` (and on stderr, which the
harnesses keep out of the model's context).  Started without the command-line framework:
it runs before every file edit, so its start-up is the floor's.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from .harness import (COMPACTING, END, GUESTS, HARNESSES, PROMPT, START, STOP, SUBAGENT, TOOL, Asked, Harness,
                      asked)

MAX_INPUT = 16 << 20  # bytes of hook input read (a prompt, a patch)
LOG_NAME = "hooks.log"
LOG_LIMIT = 256 << 10
USAGE = ("usage: qem hook HARNESS EVENT [-w WORKSPACE]  (reads the harness's hook input on stdin)\n"
         "  HARNESS: " + ", ".join(HARNESSES) + "; EVENT: the harness's own event name (SessionStart, PreToolUse, ...).\n"
         "  `qem setup HARNESS` writes these hooks into the project's settings.")
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
    if out:
        sys.stdout.write(out + "\n")
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
    from the working directory up.  NoMemory when there is none."""
    from .workspace import STATE_DIR, find_workspace, resolve

    cwd = Path(ask.cwd) if ask.cwd else Path.cwd()
    if workspace:
        root = _tree_top(cwd) / workspace  # an absolute `-w` stays itself
    else:
        env = os.environ.get("QEM_WORKSPACE")
        root = cwd / env if env else find_workspace(cwd)
    place = resolve(root, None)
    if (place.store_path / "config.toml").is_file():
        return place.store_path
    near = find_workspace(cwd) / STATE_DIR
    named = f" (-w {workspace} from the work tree's top {_tree_top(cwd)})" if workspace else ""
    raise NoMemory(f"no memory at {place.store_path}{named}; hook's working directory {cwd}: nothing given",
                   near if (near / "config.toml").is_file() else None)


def _tree_top(cwd: Path) -> Path:
    """The top of the git work tree holding `cwd` (its nearest ancestor holding `.git`),
    else `cwd` itself."""
    start = cwd.resolve()
    return next((d for d in (start, *start.parents) if (d / ".git").exists()), start)


def _answer(harness: Harness, event: str, ask: Asked, state: Path) -> str:
    """The reply: the ledger of the session's context window (the main thread's, or a
    subagent's: `agent_id` marks a hook fired inside one) is read and written in two
    short holds of its lock (what the moment is; then what was given), the memory read
    between them, so hooks of one session running side by side wait on each other for
    milliseconds, not a read."""
    from . import ledger

    key = f"{harness.name}:{ask.session}"  # a session of one harness (and `ask.agent`, a subagent of it)
    if ask.does == END:
        if ask.session:
            ledger.end(state, key)
        return harness.no_context
    if ask.does == TOOL and not ask.moment:
        return harness.no_context
    if not ask.session:
        raise ValueError("hook input without a session id (session_id, VS Code's sessionId, Cursor's conversation_id)")
    with ledger.session(state, key, ask.agent) as book:
        if ask.does == COMPACTING:
            book.compacted()
            return harness.no_context
        if ask.does == STOP:
            return _stop(harness, ask, state, book)
        moments = _moments(ask, book, state)
        given = {n: entry for n, entry in book.given.items() if entry[0] == book.epoch}
        counted = book.notes_then >= 0
    found, texts, changed, notes = _read(state, moments, given, counted)
    with ledger.session(state, key, ask.agent) as book:
        if book.notes_then < 0:
            book.notes_then = notes
        text = _given(harness, moments, found, texts, changed, book)
    return harness.reply(event, text, ask.guest)


def _moments(ask: Asked, book, state: Path) -> list:  # type: ignore[no-untyped-def]
    """The moments this hook gives (a compaction's first, where one is pending)."""
    from . import delivery, ledger

    if ask.does == START:
        if ask.source in ("clear", "compact"):
            book.compacted()
        if ask.source == "startup":
            ledger.sweep(state)
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
    elif ask.does == TOOL:
        paths = delivery.from_cwd(ask.paths, ask.cwd or str(top), top)
        moments.append(delivery.Moment(ask.moment, paths=paths, command=ask.command, top=str(top)))
    return moments


READ_AHEAD = 420  # texts read for a reply: more than a budget's worth of the shortest lines (24 characters)


def _read(state: Path, moments: list, given: dict[str, list], counted: bool):  # type: ignore[no-untyped-def]
    """From the memory: what the moments trigger (each note once, the first moment's),
    the texts of the first of them the session was not given (`given`: this epoch's
    ledger entries), the changes of the notes given this epoch, and how many notes it
    holds (-1 where the session's ledger has counted them already: `counted`)."""
    from . import delivery
    from .ledger import tip
    from .store import Store

    store = Store.open(state, create=False, write=False)
    try:
        with store.reading():
            entries, seen = [], set()
            for moment in moments:
                for entry in delivery.ranked(moment, delivery.hits(store, moment)):
                    if entry.due.id not in seen:
                        seen.add(entry.due.id)
                        entries.append(entry)
            fresh = [e.due.id for e in entries if e.due.id not in given or (e.due.full and not given[e.due.id][1])
                     or (e.due.late and e.due.id + LATE_MARK not in given)]
            texts = store.notes_by_id(fresh[:READ_AHEAD])
            recorded = {n: entry[2] for n, entry in given.items()}
            now = store.last_changes(recorded)
            moved = [n for n, last in recorded.items() if now.get(n, "") != last]
            notes = store.notes_by_id(moved)
            after = store.notes_by_id(n.superseded_by for n in notes.values() if n.superseded_by)
            changed = {n: delivery.Change(notes[n], after.get(notes[n].superseded_by or "")) if n in notes else None
                       for n in moved}
            count = -1 if counted else store.count()
            return entries, texts, {n: (c, tip(c.note) if c else "") for n, c in changed.items()}, count
    finally:
        store.close()


def _given(harness: Harness, moments: list, found: list, texts: dict, changed: dict,  # type: ignore[no-untyped-def]
           book) -> str:
    """The reply's context, from what the ledger says was not given yet; what it gives,
    recorded."""
    from . import tiers
    from .ledger import tip

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
    out = tiers.fitter(moments)(moments[-1], entries, changes, harness.budget,
                                lambda ids: {n: texts[n] for n in ids if n in texts}, measure=harness.measure)
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
    from .store import Store

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
        from .secrets import withheld

        return withheld(said)
    except Exception:  # noqa: BLE001 - a hook never fails for its log
        return said.partition(":")[0]


def _log(state: Path | None, harness: Harness, event: str, exc: BaseException) -> None:
    """Why a hook said nothing: a line on stderr, and in `.qem/sessions/hooks.log`."""
    from .errors import QemError, words

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
        from .ledger import prepared

        log = prepared(state) / LOG_NAME  # the ledgers' own folder (never a link's), ignored by git
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        if log.exists() and log.stat().st_size > LOG_LIMIT:
            flags |= os.O_TRUNC  # the log starts again past its limit
        fd = os.open(log, flags, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(line.replace("\n", " ") + "\n")
    except (OSError, QemError):
        pass
