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


def _open(workspace: Path | None, store: Path | None, *, write: bool = False, create: bool | None = None):
    """The workspace and its store.  A command that writes has its config checked first
    (a bad .qem/config.toml is refused before anything is written) and creates a missing
    store, unless `create=False`."""
    from . import workspace as ws

    place = ws.resolve(workspace, store)
    if write:
        place.config()
    create = write if create is None else create
    existed = place.store_path.exists()
    handle = Store.open(place.store_path, create=create)
    if create and not existed:
        print(f"qem: created a new store at {place.store_path}", file=sys.stderr)
    return place, handle


def _write(workspace, store, actor, work, *, create: bool = True) -> object:
    """Open for writing, run `work(tx, actor)` in one transaction, then auto-export.

    `create=False` for moves on an existing note: with no store there is no note, and a
    refused command must not leave a new store behind.
    """
    from . import workspace as ws
    from .export import auto_export

    who = ws.actor(actor)
    place, handle = _open(workspace, store, write=True, create=create)
    with handle:
        result = handle.write(lambda tx: work(tx, who))
        auto_export(handle, place)
    return result


def _text_arg(text: str) -> str:
    try:
        raw = sys.stdin.buffer.read().decode("utf-8") if text == "-" else text
    except UnicodeDecodeError:
        raise errors.Refused("the note text on standard input is not UTF-8") from None
    try:
        raw.encode("utf-8")  # an argument from undecodable bytes holds lone surrogates
    except UnicodeEncodeError:
        raise errors.Refused("the note text is not UTF-8") from None
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

    print(_write(workspace, store, actor, work, create=False).id)
    return 0


def _lifecycle(event_type: str, note_id: int, reason, workspace, store, actor, data=None) -> int:
    def work(tx: Transaction, who: str):
        extra = data(tx.note(note_id)) if data else None
        return tx.emit(note_id, event_type, who, reason, extra)

    event = _write(workspace, store, actor, work, create=False)
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
    event = _write(workspace, store, actor, lambda tx, who: tx.forget(note_id, who, why), create=False)
    print(f"#{note_id} forgotten (seq {event.seq})")
    _warn_stale_mirror(workspace, store, note_id)
    return 0


def _warn_stale_mirror(workspace, store, note_id: int) -> None:
    """A forgotten text must not live on in the mirror (and from there in git)."""
    from . import workspace as ws

    place = ws.resolve(workspace, store)
    mirror = place.mirror_path()
    try:
        stale = not place.auto_export() and mirror.is_file()
    except errors.QemError:
        stale = mirror.is_file()
    if stale:
        print(
            f"qem: warning: {mirror} may still hold note #{note_id}'s text; run `qem export`"
            " (and check what git has already committed)",
            file=sys.stderr,
        )


# -- reading -------------------------------------------------------------------------------


AtOpt = Annotated[
    Optional[str],
    typer.Option("--at", help="As the store was at this seq, or at this UTC date/time (a date means its end).", show_default=False),
]


def _at_seq(handle: Store, at: str) -> int:
    head = handle.head()
    if at.isdigit():
        seq = int(at)
        if seq > head:
            raise errors.BadInput(f"--at {seq} is past the store's head {head}")
        return seq
    from .query import parse_time

    return handle.seq_at(parse_time(at, "--at", end=True))


@app.command()
def show(note_id: IdArg, as_json: JsonOpt = False, at: AtOpt = None, workspace: WorkspaceOpt = None, store: StoreOpt = None) -> int:
    """Show one note (as it is, or as it was --at a seq or date).

    Example: qem show 12 --json
    """
    _, handle = _open(workspace, store)
    with handle:
        if at is None:
            note = handle.note(note_id)
        else:
            seq = _at_seq(handle, at)
            past = handle.state_at(seq)
            if note_id not in past:
                raise errors.NoSuchNote(f"note #{note_id} did not exist at seq {seq}")
            note = past[note_id]
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
    from .resolver import Graph

    _, handle = _open(workspace, store, write=False)
    with handle:
        problems = handle.verify()
        if problems and repair:
            count = handle.rebuild_cache()
            print(f"rebuilt the notes cache from the log: {count} notes")
            problems = handle.verify()
        head = handle.head()
        problems += Graph.of({n.id: n for n in handle.notes()}).problems()
    for problem in problems:
        print(problem)
    if problems:
        print(
            f"verify: {len(problems)} problem(s) at head {head}; `qem verify --repair` rebuilds"
            " the cache; a cycle, dangling pointer or fork came with a loaded log and is"
            " settled by events (revoke, supersede, or `qem dispute` and `qem rule`)",
            file=sys.stderr,
        )
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
    where: list[str] = []
    events = read_dump(raw, str(file), lines=where)
    place, handle = _open(workspace, store, write=True)
    with handle:
        count = load_events(handle, events, where)
        from .export import auto_export

        auto_export(handle, place)
        print(f"loaded {count} events; head is now {handle.head()}")
    return 0


def _read_input(file: Path) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        raise errors.BadInput(f"cannot read {file}: {exc.strerror}") from None


# -- honest answers ------------------------------------------------------------------------


@app.command()
def status(note_id: IdArg, as_json: JsonOpt = False, workspace: WorkspaceOpt = None, store: StoreOpt = None) -> int:
    """Is this note current?  yes, no, or unknown, with the reason.

    Example: qem status 12
    """
    from .resolver import Graph

    _, handle = _open(workspace, store)
    with handle:
        handle.note(note_id)
        answer = Graph.of({n.id: n for n in handle.notes()}).currency(note_id)
    if as_json:
        print(json.dumps(answer.to_json(), ensure_ascii=False))
    else:
        print(f"#{note_id} current: {answer.value} ({answer.reason})")
    return 0


@app.command(context_settings={"ignore_unknown_options": True})
def query(
    filters: Annotated[Optional[list[str]], typer.Argument(help="KEY=VALUE filters (text~SUBSTRING for text).", show_default=False)] = None,
    events: Annotated[bool, typer.Option("--events", help="Filter the event log instead of notes.")] = False,
    as_json: JsonOpt = False,
    count: Annotated[bool, typer.Option("--count", help="Print only the count (after the scope line).")] = False,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
) -> int:
    """Exact filters over headers, answered with the scope that was scanned.

    \b
    Note filters: kind state priority provenance actor since until supersedes
                  current=yes|no|unknown disputed=yes|no text~SUBSTRING
    Event filters (--events): type note actor since until checkin

    Example: qem query --events type=revoked actor=alice since=2026-10-01
    """
    from . import query as q
    from .resolver import Graph

    parsed = q.parse_filters(filters or [], events)
    _, handle = _open(workspace, store)
    with handle, handle.reading():
        head = handle.head()
        notes = {n.id: n for n in handle.notes()}
        all_events = handle.events()
    scope = q.Scope(str(handle.path), head, len(notes), len(all_events))
    if events:
        match = q.event_predicate(parsed)
        results = [e.to_json() for e in all_events if match(e)]
        what = "events"
    else:
        graph = Graph.of(notes)
        match_note = q.note_predicate(parsed, graph, scope)
        results = [
            {**n.to_json(), "current": graph.currency(n.id).value}
            for n in sorted(notes.values(), key=lambda n: n.id) if match_note(n)
        ]
        what = "notes"
    if as_json:
        payload = {"scope": scope.to_json(), "filters": [str(f) for f in parsed], "count": len(results)}
        if not count:
            payload[what] = results
        print(json.dumps(payload, ensure_ascii=False, indent=2))
        return 0
    print(scope.line())
    print(f"{len(results):,} {what} match" + (f" {' '.join(str(f) for f in parsed)}" if parsed else ""))
    if not results:
        print(q.empty_answer(parsed, scope, what))
    elif not count:
        for r in results:
            if events:
                why = f" ({r['reason']})" if r["reason"] else ""
                print(f"{r['seq']}\t{r['at']}\t#{r['note_id']} {r['type']} by {r['actor']}{why}")
            else:
                first = (r["text"] or "(forgotten)").split("\n", 1)[0]
                print(f"#{r['id']}\t{r['kind']}\t{r['state']}\tcurrent={r['current']}\t{first}")
    return 0


@app.command()
def dispute(
    a: Annotated[int, typer.Argument(help="One note.", show_default=False)],
    b: Annotated[int, typer.Argument(help="The note that disagrees with it.", show_default=False)],
    reason: RequiredReasonOpt = "",
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Record that two notes disagree (neither is edited); print the dispute id.

    Example: qem dispute 12 40 -m "they say opposite things about the lock"
    """
    why = _reason(reason, required=True, what="dispute")
    dispute_id = _write(workspace, store, actor, lambda tx, who: tx.dispute(a, b, who, why))
    print(dispute_id)
    return 0


@app.command()
def rule(
    dispute_id: Annotated[int, typer.Argument(metavar="DISPUTE", help="The dispute id.", show_default=False)],
    keep: Annotated[int, typer.Option("--keep", help="The note that stands; the other is revoked in its favour.", show_default=False)],
    reason: RequiredReasonOpt = "",
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Close a dispute: keep one note, revoke the other in its favour.

    Example: qem rule 57 --keep 40 -m "measured: the lock is released after"
    """
    why = _reason(reason, required=True, what="rule")
    _write(workspace, store, actor, lambda tx, who: tx.rule(dispute_id, keep, who, why))
    print(f"dispute {dispute_id} ruled: #{keep} stands")
    return 0


# -- the mirror ----------------------------------------------------------------------------


@app.command("export")
def export_(
    path: Annotated[Optional[Path], typer.Option("--path", help="The mirror file (default: MEMORY.md at the workspace root).", show_default=False)] = None,
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 0 if the file matches, 1 if not, and say why.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Write nothing; print the unified diff export would make (exit 1 if any).")] = False,
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the rendering; write no file.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a MEMORY.md edited by hand (its edits are lost).")] = False,
    at: AtOpt = None,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
) -> int:
    """Render the store to a byte-stable MEMORY.md (untouched when nothing changed).

    Example: qem export --check; qem export --at 2026-08-01 --stdout
    """
    from . import export as mirror

    place, handle = _open(workspace, store)
    target = place.mirror_path(path)
    with handle:
        if at is not None:
            if not stdout or check or diff:
                raise errors.BadInput("--at renders history: use it with --stdout (and without --check/--diff)")
            from renderer import render

            seq = _at_seq(handle, at)
            _write_utf8(render(handle.state_at(seq).values(), seq))
            return 0
        if stdout:
            _write_utf8(mirror.rendered_bytes(handle)[1])  # the file's bytes, never decoded
            return 0
        if check or diff:
            code = 0
            if diff:
                patch = mirror.unified_diff(handle, target)
                _write_utf8(patch)
                code = 1 if patch else 0
            if check:
                verdict = mirror.check(handle, target)
                print(("ok: " if verdict.clean else "qem: ") + verdict.message, file=sys.stderr)
                code = max(code, 0 if verdict.clean else 1)
            return code
        wrote = mirror.export(handle, target, force=force)
    print(f"qem: {'wrote' if wrote else 'unchanged:'} {target}", file=sys.stderr)
    return 0


def _write_utf8(text: str | bytes) -> None:
    """Print a rendering as UTF-8 bytes, whatever the locale: the same bytes as the file."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text if isinstance(text, bytes) else text.encode("utf-8"))
    sys.stdout.buffer.flush()


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

    place, handle = _open(workspace, store, write=True, create=False)
    with handle:
        return run_checkin(handle, place, path, reason, yes, dry_run, actor)


def _kinds(kinds: list[str] | None) -> tuple[str, ...] | None:
    if not kinds:
        return None
    for k in kinds:
        _choice(k, KINDS, "kind")
    return tuple(k for k in KINDS if k in kinds)


# -- the one exit --------------------------------------------------------------------------


def _click_exceptions() -> tuple[type, type, type]:
    """(ClickException, Exit, Abort) of the click that typer runs on.

    typer >= 0.28 vendors click as `typer._click` (with Exit/Abort in `typer.exceptions`);
    catching the real `click`'s classes there misses every usage error, which then
    escapes as a traceback with exit 1 instead of a message with exit 2.
    """
    try:
        from typer._click.exceptions import ClickException
        from typer.exceptions import Abort, Exit
    except ImportError:
        from click.exceptions import Abort, ClickException, Exit
    return ClickException, Exit, Abort


def _command(argv: list[str]):  # type: ignore[no-untyped-def]
    """The click command to run `argv`, and the arguments and name to run it with.

    Building every subcommand costs typer tens of milliseconds (it inspects each
    signature), which a pre-commit hook would pay on every commit; so a run of one known
    subcommand builds only that one.  Anything else (no subcommand, `qem --help`, an
    unknown name) gets the whole group, and its usual messages.
    """
    name = argv[0] if argv else None
    for info in app.registered_commands:
        if name == (info.name or info.callback.__name__.replace("_", "-")):  # type: ignore[union-attr]
            single = typer.Typer(
                add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                context_settings=app.info.context_settings,
            )
            single.registered_commands = [info]
            return typer.main.get_command(single), argv[1:], f"qem {name}"
    return typer.main.get_command(app), argv, "qem"


def main(argv: list[str] | None = None) -> None:
    ClickException, ClickExit, ClickAbort = _click_exceptions()
    command, args, prog = _command(sys.argv[1:] if argv is None else argv)
    try:
        code = command.main(args=args, prog_name=prog, standalone_mode=False)
    except errors.QemError as exc:
        print(f"qem: error: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"qem: {exc.hint}", file=sys.stderr)
        code = exc.exit_code
    except ClickExit as exc:
        code = exc.exit_code
    except ClickAbort:
        print("\nqem: interrupted", file=sys.stderr)
        code = errors.EXIT_INTERRUPTED
    except ClickException as exc:
        exc.show()
        code = errors.EXIT_INPUT
    except KeyboardInterrupt:
        print("\nqem: interrupted", file=sys.stderr)
        code = errors.EXIT_INTERRUPTED
    except BrokenPipeError:
        code = 0
    except OSError as exc:  # a file qem cannot create or write (read-only place, full disk)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"qem: error: {where}{exc.strerror or exc}", file=sys.stderr)
        code = errors.EXIT_INPUT
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
