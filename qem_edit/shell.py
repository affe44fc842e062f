"""What the command line's ways in share, without the command-line framework.

`qem`'s commands are parsed by typer (qem_edit.cli), except the few that a hook or an
agent runs on every turn, which qem_edit.quick parses first; both run the same bodies
here: the memory opened with its notices said (`open_memory`), an act run as the actor
(`act`), the note text argument (`text_arg`), what a new note prints (`written_note`), and
`guarded`, one command run as every command is run (a failure's words and exit code, a
closed pipe, Ctrl-C).  Importing this module costs no framework.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

from . import db, errors
from .shown import say, tolerant_streams


class PipeClosed(Exception):
    """Standard output was closed by its reader."""


def open_memory(workspace_dir: Path | None, store_dir: Path | None, *, write: bool = False,
                create: bool | None = None, name_set_aside: bool = True):  # type: ignore[no-untyped-def]
    """The workspace and its store.  A command that writes has its config checked first
    (a bad .qem/config.toml is refused before anything is written) and creates a missing
    store, unless `create=False` (a move on an existing note: with no store there is no
    note, and a refused command must not leave a new store behind)."""
    from .opening import open_memory as opened

    place, store, notices = opened(workspace_dir, store_dir, write=write, create=write if create is None else create,
                                   name_set_aside=name_set_aside)
    for notice in notices:
        say(notice)
    return place, store


def act(workspace_dir, store_dir, actor, run, *, create: bool = True):  # type: ignore[no-untyped-def]
    """Run one of qem_edit.acts on the workspace's store as the actor; say its notices."""
    from . import workspace as ws

    from .opening import open_memory as opened, unmade

    who = ws.actor(actor)
    place, store, notices = opened(workspace_dir, store_dir, write=True, create=create)
    try:
        with store:
            written = run(store, place, who)
    except BaseException:
        unmade(store)  # a refused first write leaves no memory behind
        raise
    for notice in notices + written.notices:  # "created a new memory" only once the write stands
        say(notice)
    return written


def text_arg(text: str) -> str:
    """The note text argument, or standard input for `-`."""
    if text != "-":
        return text
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError:
        raise errors.Refused("the note text on standard input is not UTF-8") from None


def written_note(written, as_json: bool) -> int:  # type: ignore[no-untyped-def]
    """A new note's id, or as JSON with the notes in force it repeats."""
    note = written.note
    if as_json:
        import json

        repeats = [{"id": n.id, "short": n.shown} for n in written.repeats]
        print(json.dumps({"id": note.id, "short": note.shown, "repeats": repeats}, ensure_ascii=False))
    else:
        print(note.shown)
    return 0


def add(text: str, kind: str, priority: str = "medium", provenance: str = "agent", as_json: bool = False,
        allow_secret: bool = False, anchor: list[str] | None = None, expires: str | None = None,
        ttl: str | None = None, on: list[str] | None = None, when_path: list[str] | None = None,
        when_run: list[str] | None = None, workspace_dir: Path | None = None, store_dir: Path | None = None,
        actor: str | None = None, to: str | None = None, due: str | None = None, answers: str | None = None) -> int:
    """`qem add` (and `qem answer`): a note written, its id printed (qem_edit.cli holds the
    options' help)."""
    from . import acts

    body = text_arg(text)
    triggers = acts.declared(on, when_path, when_run)
    request = acts.Request(to, due, answers)
    written = act(workspace_dir, store_dir, actor, lambda h, p, who: acts.add(
        h, p, body, kind, priority, provenance, who, allow_secret=allow_secret, anchors=anchor, cwd=Path.cwd(),
        expires=expires, ttl=ttl, triggers=triggers, request=request))
    return written_note(written, as_json)


def checkin(path: Path | None = None, reason: str | None = None, yes: bool = False, dry_run: bool = False,
            as_json: bool = False, mass: bool = False, allow_secret: bool = False, workspace_dir: Path | None = None,
            store_dir: Path | None = None, actor: str | None = None) -> int:
    """`qem checkin`: an edited file checked in (qem_edit.cli holds the options' help)."""
    from . import workspace as ws
    from .terminal import run_checkin

    place, store = open_memory(workspace_dir, store_dir, write=True, create=False)
    with store:
        outcome = run_checkin(store, place, path, reason, yes, dry_run, ws.actor(actor),
                              as_json=as_json, allow_mass_change=mass, allow_secret=allow_secret)
        return checked_in(outcome)


def checked_in(outcome) -> int:  # type: ignore[no-untyped-def]
    """A check-in's exit status: 1 for a dry run that found changes (as `export --check`),
    2 for an empty or unreadable edit, 3 for conflicts."""
    from .checkin import Status, is_conflict

    if outcome.status is Status.REFUSED:
        return errors.EXIT_CONFLICT if is_conflict(outcome.proposal) else errors.EXIT_INPUT
    if outcome.status is Status.EMPTY:
        return errors.EXIT_INPUT
    if outcome.status is Status.DRY_RUN and outcome.proposal.plan.ops:
        return errors.EXIT_DIFFERENT
    return errors.EXIT_OK


def guarded(run: Callable[[], object]) -> int:
    """Run one command as every command runs: its exit status; a failure (errors.QemError,
    or an OSError: a file qem cannot create or write) said in its words with its code; a
    closed standard output ends it quietly (`qem log | head`), as git does; Ctrl-C is 130."""
    catch_interrupts()
    tolerant_streams()  # a note's é on an ASCII stream is written `\xe9`, not a traceback
    said = False  # that the command was interrupted
    try:
        code = run()
    except (PipeClosed, BrokenPipeError):
        silence_stdout()
        code = errors.EXIT_OK
    except (errors.QemError, OSError) as exc:
        from .secrets import withheld  # a refused value is named, a secret in it never shown

        for line in errors.words(exc):
            say(withheld(line))
        code = exc.exit_code if isinstance(exc, errors.QemError) else errors.EXIT_INPUT
        said = isinstance(exc, errors.Interrupted)
    except KeyboardInterrupt:
        print("\nqem: interrupted", file=sys.stderr)
        code, said = errors.EXIT_INTERRUPTED, True
    if db.interrupted() and not said:  # a Ctrl-C that ended an SQLite statement, or that typer took as its exit 130
        print("\nqem: interrupted", file=sys.stderr)
        code = errors.EXIT_INTERRUPTED
    return code if isinstance(code, int) else 0


def silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def catch_interrupts() -> None:
    """Ctrl-C ends long SQLite work too (qem_edit.db.on_interrupt), where Python's own
    handler is in place (the main thread of a process that did not ignore SIGINT)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, db.on_interrupt)
