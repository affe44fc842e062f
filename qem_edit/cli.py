"""The `qem` command line: each command parses its options, calls the core, returns a code.

Exit codes (also in `qem --help` and README.md):
  0  ok
  1  a check found a difference (`export --check`, `export --diff`, `verify`)
  2  bad usage or bad input; nothing was written
  3  a conflict; nothing was written
  130 interrupted

Errors are raised as `errors.QemError` anywhere below and turned into one message and one
exit status in `main`, the only place that exits.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import errors
from .model import CLAIMABLE_PROVENANCES, KINDS, PRIORITIES, STATES, TextError, normalize_text
from .store import NewNote, Store, Transaction

HELP = """qem: an agent's memory as an append-only event log, legible and editable as MEMORY.md.

Notes are never overwritten: every change is an event, and a note's state is the replay
of its events. `qem export` renders the store to a byte-stable MEMORY.md; `qem edit`
lets a person change it in $EDITOR and checks the edit back in as events.

\b
Exit codes:
  0    ok
  1    a check found a difference (export --check/--diff, verify)
  2    bad usage or bad input; nothing was written
  3    a conflict; nothing was written
  130  interrupted
"""

app = typer.Typer(
    help=HELP,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

WorkspaceOpt = Annotated[
    Optional[Path],
    typer.Option("--workspace", "-w", help="Workspace directory (default: QEM_WORKSPACE, the nearest ancestor holding .qem/, or the current directory).", show_default=False),
]
StoreOpt = Annotated[
    Optional[Path],
    typer.Option("--store", help="Store file (default: QEM_STORE, or <workspace>/.qem/memory.db).", show_default=False),
]
ActorOpt = Annotated[
    Optional[str],
    typer.Option("--actor", help="Who writes (default: QEM_ACTOR, or the login name).", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
IdArg = Annotated[int, typer.Argument(help="The note id.", show_default=False)]
ReasonOpt = Annotated[Optional[str], typer.Option("--message", "-m", help="Why.", show_default=False)]
RequiredReasonOpt = Annotated[str, typer.Option("--message", "-m", help="Why (required).", show_default=False)]


def _choice(value: str | None, allowed: tuple[str, ...], what: str) -> str | None:
    if value is None or value in allowed:
        return value
    raise errors.BadInput(f"unknown {what} {value!r}; use one of: {', '.join(allowed)}")


def _open(workspace: Path | None, store: Path | None, *, write: bool = False):
    from . import workspace as ws

    place = ws.resolve(workspace, store)
    existed = place.store_path.exists()
    handle = Store.open(place.store_path, create=write)
    if write and not existed:
        print(f"qem: created a new store at {place.store_path}", file=sys.stderr)
    return place, handle


def _write(workspace, store, actor, work) -> object:
    """Open for writing, run `work(tx, actor)` in one transaction, then auto-export."""
    from . import workspace as ws
    from .export import auto_export

    who = ws.actor(actor)
    place, handle = _open(workspace, store, write=True)
    with handle:
        result = handle.write(lambda tx: work(tx, who))
        auto_export(handle, place)
    return result


def _text_arg(text: str) -> str:
    raw = sys.stdin.read() if text == "-" else text
    try:
        return normalize_text(raw)
    except TextError as exc:
        raise errors.Refused(str(exc)) from None


def _reason(reason: str | None, *, required: bool = False, what: str = "") -> str | None:
    if reason is not None and not reason.strip():
        reason = None
    if required and reason is None:
        raise errors.BadInput(f"{what} needs a reason: -m REASON")
    return reason


# -- store ---------------------------------------------------------------------------------


@app.command()
def init(workspace: WorkspaceOpt = None, store: StoreOpt = None) -> int:
    """Create the store (idempotent).

    Example: qem init --workspace ~/project
    """
    from . import workspace as ws

    place = ws.resolve(workspace, store)
    existed = place.store_path.exists()
    Store.open(place.store_path, create=True).close()
    print(f"{'store already exists' if existed else 'created store'}: {place.store_path}")
    return 0


@app.command()
def add(
    text: Annotated[str, typer.Argument(help="The note's text; - reads it from standard input.", show_default=False)],
    kind: Annotated[str, typer.Option("--kind", "-k", help="One of: " + ", ".join(KINDS), show_default=False)],
    priority: Annotated[str, typer.Option("--priority", "-p", help="high, medium or low.")] = "medium",
    provenance: Annotated[str, typer.Option("--provenance", help="auto, agent or user-stated (human takes `qem promote`).")] = "agent",
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Add a note and print its id.

    Example: qem add "Run tests inside the venv" --kind directive --priority high
    """
    _choice(kind, KINDS, "kind")
    _choice(priority, PRIORITIES, "priority")
    if provenance == "human":
        raise errors.BadInput("provenance human is reached only by a person's act: `qem promote ID`")
    _choice(provenance, CLAIMABLE_PROVENANCES, "provenance")
    new = NewNote(kind, priority, provenance, _text_arg(text))
    note = _write(workspace, store, actor, lambda tx, who: tx.create(new, who))
    print(note.id)
    return 0


@app.command()
def supersede(
    note_id: IdArg,
    text: Annotated[str, typer.Argument(help="The successor's text; - reads standard input.", show_default=False)],
    reason: ReasonOpt = None,
    kind: Annotated[Optional[str], typer.Option("--kind", "-k", help="The successor's kind (default: the old note's).", show_default=False)] = None,
    priority: Annotated[Optional[str], typer.Option("--priority", "-p", help="The successor's priority (default: the old note's).", show_default=False)] = None,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Replace a note with a successor (the old text stays in the log); print the new id.

    Example: qem supersede 12 "Release the lock after the restart" -m "order was wrong"
    """
    _choice(kind, KINDS, "kind")
    _choice(priority, PRIORITIES, "priority")
    body = _text_arg(text)

    def work(tx: Transaction, who: str):
        old = tx.note(note_id)
        new = NewNote(kind or old.kind, priority or old.priority, old.provenance, body, note_id)
        return tx.create(new, who, _reason(reason))

    print(_write(workspace, store, actor, work).id)
    return 0


def _lifecycle(event_type: str, note_id: int, reason, workspace, store, actor, data=None) -> int:
    def work(tx: Transaction, who: str):
        extra = data(tx.note(note_id)) if data else None
        return tx.emit(note_id, event_type, who, reason, extra)

    event = _write(workspace, store, actor, work)
    print(f"#{note_id} {event_type} (seq {event.seq})")
    return 0


@app.command()
def revoke(note_id: IdArg, reason: RequiredReasonOpt = "", workspace: WorkspaceOpt = None, store: StoreOpt = None, actor: ActorOpt = None) -> int:
    """Revoke a note: it no longer holds (a reason is required).

    Example: qem revoke 412 -m "wrong lock order"
    """
    return _lifecycle("revoked", note_id, _reason(reason, required=True, what="revoke"), workspace, store, actor)


@app.command("flag-stale")
def flag_stale(note_id: IdArg, reason: RequiredReasonOpt = "", workspace: WorkspaceOpt = None, store: StoreOpt = None, actor: ActorOpt = None) -> int:
    """Flag a note as possibly out of date (a reason is required).

    Example: qem flag-stale 398 -m "the cache was rewritten in v2"
    """
    return _lifecycle("stale_flagged", note_id, _reason(reason, required=True, what="flag-stale"), workspace, store, actor)


@app.command()
def reinstate(note_id: IdArg, reason: ReasonOpt = None, workspace: WorkspaceOpt = None, store: StoreOpt = None, actor: ActorOpt = None) -> int:
    """Put a revoked, stale or expired note back in force.

    Example: qem reinstate 412 -m "the order was right after all"
    """
    return _lifecycle("reinstated", note_id, _reason(reason), workspace, store, actor)


@app.command()
def promote(note_id: IdArg, reason: ReasonOpt = None, workspace: WorkspaceOpt = None, store: StoreOpt = None, actor: ActorOpt = None) -> int:
    """Raise a note's provenance to human: a person stands behind it.

    Example: qem promote 4 -m "I said this"
    """
    return _lifecycle("promoted", note_id, _reason(reason), workspace, store, actor, data=lambda n: {"from": n.provenance})


@app.command()
def expire(note_id: IdArg, reason: ReasonOpt = None, workspace: WorkspaceOpt = None, store: StoreOpt = None, actor: ActorOpt = None) -> int:
    """Mark a note expired (expiry is an event; reading never consults the clock).

    Example: qem expire 77 -m "sprint over"
    """
    return _lifecycle("expired", note_id, _reason(reason), workspace, store, actor)


@app.command()
def forget(
    note_id: IdArg,
    reason: RequiredReasonOpt = "",
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: the text is erased for good.")] = False,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Erase a note's text from every event for good, leaving a content-free tombstone.

    Example: qem forget 77 -m "contained a credential" --yes
    """
    why = _reason(reason, required=True, what="forget")
    if not yes:
        raise errors.BadInput(f"forget erases note #{note_id}'s text for good; add --yes to confirm")
    event = _write(workspace, store, actor, lambda tx, who: tx.forget(note_id, who, why))
    print(f"#{note_id} forgotten (seq {event.seq})")
    return 0


# -- reading -------------------------------------------------------------------------------


@app.command()
def show(note_id: IdArg, as_json: JsonOpt = False, workspace: WorkspaceOpt = None, store: StoreOpt = None) -> int:
    """Show one note.

    Example: qem show 12 --json
    """
    _, handle = _open(workspace, store)
    with handle:
        note = handle.note(note_id)
    if as_json:
        print(json.dumps(note.to_json(), ensure_ascii=False, indent=2))
        return 0
    print(f"#{note.id} {note.kind} · {note.priority} · {note.provenance} · {note.state}")
    print(f"created {note.created_at} by {note.actor}")
    if note.supersedes is not None:
        print(f"supersedes #{note.supersedes}")
    if note.state != "active" and note.state_at:
        by = f" by #{note.superseded_by}" if note.superseded_by is not None else ""
        why = f": {note.state_reason}" if note.state_reason else ""
        print(f"{note.state}{by} at {note.state_at}{why}")
    print()
    print(note.text if note.text is not None else "(forgotten: the text was erased)")
    return 0


@app.command("list")
def list_(
    kind: Annotated[Optional[str], typer.Option("--kind", "-k", help="Only this kind.", show_default=False)] = None,
    state: Annotated[Optional[str], typer.Option("--state", "-s", help="Only this state: " + ", ".join(STATES), show_default=False)] = None,
    as_json: JsonOpt = False,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
) -> int:
    """List notes in the projection's order (kind, then id).

    Example: qem list --kind gotcha --state active
    """
    _choice(kind, KINDS, "kind")
    _choice(state, STATES, "state")
    _, handle = _open(workspace, store)
    with handle:
        notes = handle.notes(kinds=[kind] if kind else None, states=[state] if state else None)
    if as_json:
        print(json.dumps([n.to_json() for n in notes], ensure_ascii=False, indent=2))
        return 0
    for note in notes:
        first = (note.text or "(forgotten)").split("\n", 1)[0]
        print(f"#{note.id}\t{note.kind}\t{note.priority}\t{note.provenance}\t{note.state}\t{first}")
    if not notes:
        print("no notes match", file=sys.stderr)
    return 0


@app.command()
def log(
    note_id: Annotated[Optional[int], typer.Argument(help="Only this note's events.", show_default=False)] = None,
    as_json: JsonOpt = False,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
) -> int:
    """Show the event log (all of it, or one note's), in seq order.

    Example: qem log 12
    """
    _, handle = _open(workspace, store)
    with handle:
        if note_id is not None:
            handle.note(note_id)  # an unknown id is an error, not an empty log
        events = handle.events(note_id)
    if as_json:
        print(json.dumps([e.to_json() for e in events], ensure_ascii=False, indent=2))
        return 0
    for e in events:
        extra = ""
        if e.type == "superseded":
            extra = f" by #{e.data.get('by')}"
        elif e.type == "created" and e.data.get("supersedes") is not None:
            extra = f" superseding #{e.data['supersedes']}"
        why = f" ({e.reason})" if e.reason else ""
        checkin = f" [checkin {e.checkin}]" if e.checkin else ""
        print(f"{e.seq}\t{e.at}\t#{e.note_id} {e.type}{extra} by {e.actor}{why}{checkin}")
    return 0


@app.command()
def verify(
    repair: Annotated[bool, typer.Option("--repair", help="Rebuild the notes cache from the log.")] = False,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
) -> int:
    """Replay the log and prove the notes cache equal to it (exit 1 when it is not).

    Example: qem verify
    """
    _, handle = _open(workspace, store, write=False)
    with handle:
        problems = handle.verify()
        if problems and repair:
            count = handle.rebuild_cache()
            print(f"rebuilt the notes cache from the log: {count} notes")
            problems = handle.verify()
        head = handle.head()
    for problem in problems:
        print(problem)
    if problems:
        print(f"verify: {len(problems)} problem(s) at head {head}; `qem verify --repair` rebuilds the cache", file=sys.stderr)
        return errors.EXIT_DIFFERENT
    print(f"ok: the notes cache equals a replay of {head} events")
    return 0


@app.command()
def dump(
    file: Annotated[Optional[Path], typer.Argument(help="Where to write (default: standard output).", show_default=False)] = None,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
) -> int:
    """Write the whole log as JSON Lines, one event a line, in seq order (docs/DUMP.md).

    Example: qem dump backup.jsonl
    """
    from .dump import dump_lines
    from .files import write_atomic

    _, handle = _open(workspace, store)
    with handle:
        data = "".join(dump_lines(handle)).encode("utf-8")
    if file is None or str(file) == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        write_atomic(file, data)
    return 0


@app.command()
def load(
    file: Annotated[Path, typer.Argument(help="A JSON Lines log written by `qem dump` (- for standard input).", show_default=False)],
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
) -> int:
    """Append a dumped log to the store, checking every line first (all or nothing).

    Example: qem load fixtures/corpus-749.jsonl
    """
    from .dump import load_events, read_dump

    raw = sys.stdin.buffer.read() if str(file) == "-" else _read_input(file)
    events = read_dump(raw, str(file))
    place, handle = _open(workspace, store, write=True)
    with handle:
        count = load_events(handle, events)
        from .export import auto_export

        auto_export(handle, place)
        print(f"loaded {count} events; head is now {handle.head()}")
    return 0


def _read_input(file: Path) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        raise errors.BadInput(f"cannot read {file}: {exc.strerror}") from None


# -- the mirror ----------------------------------------------------------------------------


@app.command("export")
def export_(
    path: Annotated[Optional[Path], typer.Option("--path", help="The mirror file (default: MEMORY.md at the workspace root).", show_default=False)] = None,
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 0 if the file matches, 1 if not, and say why.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Write nothing; print the unified diff export would make (exit 1 if any).")] = False,
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the rendering; write no file.")] = False,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
) -> int:
    """Render the store to a byte-stable MEMORY.md (untouched when nothing changed).

    Example: qem export --check
    """
    from . import export as mirror

    place, handle = _open(workspace, store)
    target = place.mirror_path(path)
    with handle:
        if stdout:
            sys.stdout.write(mirror.rendering(handle)[1])
            return 0
        if check or diff:
            code = 0
            if diff:
                patch = mirror.unified_diff(handle, target)
                sys.stdout.write(patch)
                code = 1 if patch else 0
            if check:
                verdict = mirror.check(handle, target)
                print(("ok: " if verdict.clean else "qem: ") + verdict.message, file=sys.stderr)
                code = max(code, 0 if verdict.clean else 1)
            return code
        wrote = mirror.export(handle, target)
    print(f"qem: {'wrote' if wrote else 'unchanged:'} {target}", file=sys.stderr)
    return 0


# -- editing -------------------------------------------------------------------------------

KindsOpt = Annotated[Optional[list[str]], typer.Option("--kind", "-k", help="Only this kind (repeatable).", show_default=False)]
ActiveOpt = Annotated[bool, typer.Option("--active", help="Only notes in force (active or stale).")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Apply without asking.")]


@app.command()
def edit(
    kind: KindsOpt = None,
    active: ActiveOpt = False,
    reason: ReasonOpt = None,
    yes: YesOpt = False,
    resume: Annotated[Optional[str], typer.Option("--resume", help="Reopen a kept edit (its id, or `last`).", show_default=False)] = None,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Edit memory in $EDITOR; the edit is checked in as events, three-way.

    Example: qem edit --kind gotcha -m "cleanup after the v2 migration"
    """
    from .session import run_edit

    place, handle = _open(workspace, store, write=True)
    with handle:
        return run_edit(handle, place, _kinds(kind), active, reason, yes, resume, actor)


@app.command()
def checkout(
    path: Annotated[Optional[Path], typer.Option("--path", help="Write the checkout here (default: a private directory under .qem/checkouts/).", show_default=False)] = None,
    kind: KindsOpt = None,
    active: ActiveOpt = False,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
) -> int:
    """Write an editable checkout and print its path; check it in with `qem checkin`.

    Example: qem checkout --kind directive --path /tmp/directives.md
    """
    from .session import checkout as do_checkout

    place, handle = _open(workspace, store)
    with handle:
        print(do_checkout(handle, place, _kinds(kind), active, path))
    return 0


@app.command()
def checkin(
    path: Annotated[Optional[Path], typer.Option("--path", help="The edited file (default: the latest checkout, else MEMORY.md).", show_default=False)] = None,
    reason: ReasonOpt = None,
    yes: YesOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; write nothing.")] = False,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Check an edited checkout (or a hand-edited MEMORY.md) in as events.

    Example: qem checkin --path MEMORY.md -m "fixed the lock note" --yes
    """
    from .session import run_checkin

    place, handle = _open(workspace, store)
    with handle:
        return run_checkin(handle, place, path, reason, yes, dry_run, actor)


def _kinds(kinds: list[str] | None) -> tuple[str, ...] | None:
    if not kinds:
        return None
    for k in kinds:
        _choice(k, KINDS, "kind")
    return tuple(k for k in KINDS if k in kinds)


# -- the one exit --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    import click

    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="qem", standalone_mode=False)
    except errors.QemError as exc:
        print(f"qem: error: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"qem: {exc.hint}", file=sys.stderr)
        code = exc.exit_code
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.Abort:
        print("\nqem: interrupted", file=sys.stderr)
        code = errors.EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        code = errors.EXIT_INPUT
    except KeyboardInterrupt:
        print("\nqem: interrupted", file=sys.stderr)
        code = errors.EXIT_INTERRUPTED
    except BrokenPipeError:
        code = 0
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
