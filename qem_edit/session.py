"""The edit session: check out, run the editor, plan three-way, confirm, apply.

A checkout lives in a private directory `.qem/checkouts/<id>/` (0700): `MEMORY.md` (the
file you edit, 0600), `base.md` (the rendering as checked out, so a later `forget` cannot
hide what you changed) and `session.json` (base seq and scope).  Nothing here locks the
store: others keep writing, and the check-in reconciles.  The user's edit is never
deleted on a failure path; only a check-in that landed (or had nothing to do) removes its
checkout.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from reconciler.parse import ParsedFile, parse
from reconciler.plan import EVENT_OF_ACTION, Conflict, Op, Plan, make_plan
from reconciler.rebase import rebase, with_errors
from renderer import Scope, render

from . import errors
from .export import auto_export, rendering
from .files import private_dir, read_regular, write_atomic
from .model import Event, Note, replay
from .store import NewNote, Store, Transaction
from .workspace import Workspace, actor as resolve_actor

SESSION_FILE = "session.json"
EDIT_FILE = "MEMORY.md"
BASE_FILE = "base.md"


@dataclass
class Checkout:
    directory: Path

    @property
    def id(self) -> str:
        return self.directory.name

    @property
    def file(self) -> Path:
        return self.directory / EDIT_FILE

    @property
    def base_file(self) -> Path:
        return self.directory / BASE_FILE

    def resume_hint(self) -> str:
        return f"your edit is kept in {self.file}; continue with `qem edit --resume {self.id}`"


# -- checking out ----------------------------------------------------------------------------


def new_checkout(store: Store, place: Workspace, scope: Scope) -> Checkout:
    base, rendered = rendering(store, scope)
    return _make_checkout(place, base, scope, rendered, rendered)


def _make_checkout(place: Workspace, base: int, scope: Scope, base_text: str, text: str) -> Checkout:
    root = private_dir(place.checkouts)
    directory = root / f"{base}-{secrets.token_hex(4)}"
    directory.mkdir(mode=0o700)
    checkout = Checkout(directory)
    write_atomic(checkout.base_file, base_text.encode("utf-8"), mode=0o600)
    write_atomic(checkout.file, text.encode("utf-8"), mode=0o600)
    (directory / SESSION_FILE).write_text(json.dumps({"base": base, "scope": _scope_json(scope)}))
    return checkout


def _scope_json(scope: Scope) -> dict:
    return {"kinds": list(scope.kinds) if scope.kinds else None, "active": scope.active_only}


def find_checkout(place: Workspace, which: str | None) -> Checkout:
    root = place.checkouts
    candidates = sorted(
        (d for d in root.glob("*") if (d / SESSION_FILE).is_file()),
        key=lambda d: (d / SESSION_FILE).stat().st_mtime,
    ) if root.is_dir() else []
    if which in (None, "last"):
        if not candidates:
            raise errors.BadInput("no kept edit to resume; start one with `qem edit`")
        return Checkout(candidates[-1])
    for d in candidates:
        if d.name == which:
            return Checkout(d)
    kept = ", ".join(d.name for d in candidates) or "none"
    raise errors.BadInput(f"no kept edit {which!r} (kept edits: {kept})")


def checkout(store: Store, place: Workspace, kinds, active: bool, path: Path | None) -> Path:
    scope = Scope(kinds=kinds, active_only=active)
    if path is None:
        return new_checkout(store, place, scope).file
    _, text = rendering(store, scope)
    write_atomic(path, text.encode("utf-8"), mode=0o600)
    return path


# -- the editor ------------------------------------------------------------------------------


def editor_command() -> str:
    for name in ("QEM_EDITOR", "VISUAL", "EDITOR"):
        value = os.environ.get(name)
        if name == "VISUAL" and os.environ.get("TERM") == "dumb":
            continue
        if value and value.strip():
            return value
    return "vi"


def run_editor(path: Path) -> int:
    """Run the editor on `path` the way git does: through the shell, path as "$1"."""
    editor = editor_command()
    print(f"qem: waiting for your editor ({editor}) to close {path} ...", file=sys.stderr, flush=True)
    previous = signal.signal(signal.SIGINT, _ignore)  # the editor owns Ctrl-C while it runs
    try:
        return subprocess.run(["sh", "-c", f'{editor} "$@"', editor, str(path)]).returncode
    except OSError as exc:
        raise errors.BadInput(f"cannot run the editor {editor!r}: {exc.strerror}") from None
    finally:
        signal.signal(signal.SIGINT, previous)


def _ignore(signum, frame) -> None:  # a Python handler, unlike SIG_IGN, is not inherited
    pass


# -- planning ---------------------------------------------------------------------------------


@dataclass
class Planned:
    parsed: ParsedFile
    plan: Plan
    base_notes: dict[int, Note]
    now_notes: dict[int, Note]
    since: list[Event]


def plan_checkin(store: Store, text: str, base_text: str | None = None) -> Planned:
    parsed = parse(text)
    if parsed.base is None:
        if not parsed.errors:
            raise errors.BadInput("the file holds nothing to check in")
        raise errors.BadInput(f"this is not a qem file: {parsed.errors[0]}")
    with store.reading():
        head = store.head()
        if parsed.base > head:
            raise errors.BadInput(
                f"the file names base {parsed.base}, past this store's head {head}:"
                " it was rendered from another store"
            )
        now_notes = {n.id: n for n in store.notes()}
        since = store.events(after=parsed.base)
        base_notes = _notes_at_base(store, now_notes, since, parsed.base)
    if base_text is not None:
        _fill_forgotten_texts(base_notes, base_text)
    plan = make_plan(parsed, base_notes, now_notes, since, head)
    return Planned(parsed, plan, base_notes, now_notes, since)


def _notes_at_base(store: Store, now: dict[int, Note], since: list[Event], base: int) -> dict[int, Note]:
    """The notes as of `base`: the notes now, with only those touched since replayed back."""
    notes = dict(now)
    for note_id in {e.note_id for e in since}:
        past = replay(store.events(note_id=note_id, upto=base))
        if note_id in past:
            notes[note_id] = past[note_id]
        else:
            notes.pop(note_id, None)  # created after the base
    return notes


def _fill_forgotten_texts(base_notes: dict[int, Note], base_text: str) -> None:
    """Texts forgotten since the base are gone from the log; base.md still knows them."""
    missing = [n for n in base_notes.values() if n.text is None and n.state != "forgotten"]
    if not missing:
        return
    from dataclasses import replace

    known = {i.note_id: i.text for i in parse(base_text).items if i.note_id is not None}
    for note in missing:
        if known.get(note.id) is not None:
            base_notes[note.id] = replace(note, text=known[note.id])


# -- showing -------------------------------------------------------------------------------------


def describe_plan(planned: Planned) -> str:
    plan, base = planned.plan, planned.base_notes
    out: list[str] = []
    for op in plan.ops:
        old = base.get(op.note_id) if op.note_id is not None else None
        if op.action == "create":
            assert op.content
            out.append(f"  + create {op.content.kind} · {op.content.priority} · human")
            out.extend(f"      {line}" for line in op.content.text.split("\n"))
        elif op.action == "supersede" and op.content and old:
            out.append(
                f"  ~ supersede #{op.note_id} ({old.kind} · {old.priority}) with a new"
                f" {op.content.kind} · {op.content.priority} · human note"
            )
            out.extend(f"    - {line}" for line in (old.text or "").split("\n"))
            out.extend(f"    + {line}" for line in op.content.text.split("\n"))
        else:
            first = ((old.text if old else None) or "").split("\n")[0]
            why = f" ({op.reason})" if op.reason else ""
            out.append(f"  {_SIGN[op.action]} {op.action.replace('_', ' ')} #{op.note_id}{why}: {first}")
    counts = plan.counts()
    summary = ", ".join(f"{counts[a]} {a.replace('_', ' ')}" for a in _ORDER if a in counts)
    out.append(f"Plan: {summary or 'nothing to write'} (base seq {plan.base}, store head {plan.head})")
    if plan.merged:
        out.append(f"Kept others' changes since your base to {_ids(plan.merged)}")
    if plan.agreed:
        out.append(f"Already done in the store, nothing to write: {_ids(plan.agreed)}")
    return "\n".join(out)


_SIGN = {"revoke": "-", "flag_stale": "!", "reinstate": "^", "expire": "x", "promote": "*"}
_ORDER = ("create", "supersede", "revoke", "flag_stale", "reinstate", "expire", "promote")


def _ids(ids: list[int]) -> str:
    return ", ".join(f"#{i}" for i in ids)


def describe_conflict(conflict: Conflict) -> str:
    mine = ", ".join(op.action.replace("_", " ") for op in conflict.mine) or "changed it"
    if any(op.action == "revoke" and op.line == 0 for op in conflict.mine):
        mine = "deleted it (revoke)"
    theirs = "; ".join(f"{e.type} by {e.actor} at {e.at}" + (f" ({e.reason})" if e.reason else "") for e in conflict.theirs)
    return f"conflict on #{conflict.note_id}: you {mine}; since your base the store saw: {theirs}"


def problems(planned: Planned) -> list[str]:
    return [str(e) for e in planned.parsed.errors + [e for e in planned.plan.errors if e not in planned.parsed.errors]] + [
        describe_conflict(c) for c in planned.plan.conflicts
    ]


# -- applying -----------------------------------------------------------------------------------


def apply_plan(store: Store, plan: Plan, who: str, reason: str) -> tuple[str, list[int]]:
    """Append every event of the check-in in one transaction, or none.

    The transaction first checks that the store head is still the one the plan was made
    against; if it moved, HeadMoved is raised and the caller plans again.
    """
    checkin_id = f"ci-{plan.base}-{secrets.token_hex(4)}"
    created: list[int] = []

    def work(tx: Transaction) -> None:
        if tx.head != plan.head:
            raise errors.HeadMoved(f"the store moved from seq {plan.head} to {tx.head} while planning")
        _fault("apply-begin")
        for op in plan.ops:
            _apply_op(tx, op, who, op.reason or reason, checkin_id, created)
        _fault("apply-before-commit")

    store.write(work)
    _fault("apply-after-commit")
    return checkin_id, created


def _apply_op(tx: Transaction, op: Op, who: str, reason: str, checkin_id: str, created: list[int]) -> None:
    if op.action in ("create", "supersede"):
        assert op.content is not None
        new = NewNote(op.content.kind, op.content.priority, "human", op.content.text, op.note_id)
        created.append(tx.create(new, who, reason, checkin_id).id)
    elif op.action == "promote":
        assert op.note_id is not None
        tx.emit(op.note_id, "promoted", who, reason, {"from": tx.note(op.note_id).provenance}, checkin_id)
    else:
        assert op.note_id is not None
        tx.emit(op.note_id, EVENT_OF_ACTION[op.action], who, reason, {}, checkin_id)


def _fault(point: str) -> None:
    """Crash here when QEM_FAULT names this point: crash-consistency tests kill qem at
    chosen moments to prove that a check-in lands whole or not at all."""
    if os.environ.get("QEM_FAULT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


# -- the interactive loop ------------------------------------------------------------------------


def _interactive() -> bool:
    return sys.stdin.isatty()


def _ask(prompt: str) -> str:
    print(prompt, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    if not line:
        return ""  # end of input: the safe choice
    return line.strip()


def _get_reason(reason: str | None) -> str:
    if reason and reason.strip():
        return reason.strip()
    if not _interactive():
        raise errors.BadInput("no terminal to ask for the check-in's reason: pass -m REASON")
    while True:
        answer = _ask("Reason for this check-in (recorded on each event): ")
        if answer:
            return answer
        if not sys.stdin.isatty():
            raise errors.BadInput("a check-in needs a reason")


def run_edit(store: Store, place: Workspace, kinds, active: bool, reason, yes: bool, resume, actor) -> int:
    who = resolve_actor(actor)
    if resume is not None:
        session = find_checkout(place, resume)
    else:
        session = new_checkout(store, place, Scope(kinds=kinds, active_only=active))
    while True:
        status = run_editor(session.file)
        if status != 0:
            print(f"qem: the editor exited with status {status}; nothing was checked in", file=sys.stderr)
            raise errors.BadInput("the editor failed", hint=session.resume_hint())
        outcome = _checkin_round(store, place, session, reason, yes, who)
        if outcome is not None:
            return outcome


def _checkin_round(store: Store, place: Workspace, session: Checkout, reason, yes: bool, who: str) -> int | None:
    """One check-in attempt of `session`.  None: the user chose to edit again."""
    text = _read_edit(session.file, session)
    if not text.strip():
        print("qem: the file is empty; no changes, nothing written", file=sys.stderr)
        shutil.rmtree(session.directory, ignore_errors=True)
        return 0
    base_text = _read_edit(session.base_file, session) if session.base_file.exists() else None
    while True:
        planned = plan_checkin(store, text, base_text)
        plan = planned.plan
        if not plan.ok:
            return _not_ok(store, session, text, planned)
        if not plan.ops:
            print("qem: no changes; nothing written", file=sys.stderr)
            _report_merged(planned)
            shutil.rmtree(session.directory, ignore_errors=True)
            return 0
        print(describe_plan(planned), file=sys.stderr)
        if not yes:
            if not _interactive():
                raise errors.BadInput(
                    "no terminal to confirm the plan: pass --yes (and -m REASON)", hint=session.resume_hint()
                )
            answer = _ask("Apply these changes? [y]es / [e]dit again / [N]o, keep the edit: ").lower()
            if answer in ("e", "edit"):
                return None
            if answer not in ("y", "yes"):
                print(f"qem: nothing written; {session.resume_hint()}", file=sys.stderr)
                return 0
        try:
            why = _get_reason(reason)
        except errors.QemError as exc:
            exc.hint = session.resume_hint()
            raise
        try:
            checkin_id, created = apply_plan(store, plan, who, why)
        except errors.HeadMoved:
            continue  # someone wrote meanwhile: plan again against the new head
        except BaseException as exc:
            if isinstance(exc, errors.QemError):
                exc.hint = session.resume_hint()
            raise
        _report_applied(plan, checkin_id, created)
        shutil.rmtree(session.directory, ignore_errors=True)
        auto_export(store, place)
        return 0


def _read_edit(path: Path, session: Checkout) -> str:
    data = read_regular(path)
    if data is None:
        raise errors.BadInput(f"{path} is gone; nothing was checked in")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise errors.BadInput(f"{path} line {line}: not UTF-8 text; nothing was checked in", hint=session.resume_hint()) from None


def _not_ok(store: Store, session: Checkout, text: str, planned: Planned) -> int | None:
    messages = problems(planned)
    conflict = bool(planned.plan.conflicts) and not planned.plan.errors
    heading = "conflicts with changes made since your base" if conflict else "the edit cannot be checked in"
    print(f"qem: {heading}:", file=sys.stderr)
    for message in messages:
        print(f"  {message}", file=sys.stderr)
    if conflict:
        new_text = rebase(
            planned.parsed, planned.plan, planned.base_notes, planned.now_notes,
            _store_sides(planned), messages,
        )
        new_base = render(
            [n for n in planned.now_notes.values()], planned.plan.head, planned.parsed.scope
        )
    else:
        new_text, new_base = with_errors(text, messages), None
    if not _interactive():
        # keep the user's text as it was; the rebased version is offered on resume
        exc_type = errors.ConflictError if conflict else errors.BadInput
        raise exc_type(
            f"{len(messages)} problem(s); nothing was written", hint=session.resume_hint()
        )
    answer = _ask("What now? [e]dit again / e[x]it keeping the edit: ").lower()
    if answer not in ("e", "edit"):
        print(f"qem: nothing written; {session.resume_hint()}", file=sys.stderr)
        return errors.EXIT_CONFLICT if conflict else errors.EXIT_INPUT
    if new_base is not None:
        write_atomic(session.base_file, new_base.encode("utf-8"), mode=0o600)
    write_atomic(session.file, new_text.encode("utf-8"), mode=0o600)
    return None


def _store_sides(planned: Planned) -> dict[int, str]:
    out: dict[int, str] = {}
    for conflict in planned.plan.conflicts:
        out[conflict.note_id] = "; ".join(f"{e.type} by {e.actor} at {e.at}" for e in conflict.theirs)
    return out


def _report_applied(plan: Plan, checkin_id: str, created: list[int]) -> None:
    counts = plan.counts()
    summary = ", ".join(f"{counts[a]} {a.replace('_', ' ')}" for a in _ORDER if a in counts)
    new = f"; new notes {_ids(created)}" if created else ""
    print(f"qem: checked in {checkin_id}: {summary}{new}", file=sys.stderr)


def _report_merged(planned: Planned) -> None:
    if planned.plan.merged:
        print(f"qem: others changed {_ids(planned.plan.merged)} since your base; kept", file=sys.stderr)


# -- `qem checkin` ----------------------------------------------------------------------------


def run_checkin(store: Store, place: Workspace, path: Path | None, reason, yes: bool, dry_run: bool, actor) -> int:
    who = resolve_actor(actor)
    session: Checkout | None = None
    if path is None:
        try:
            session = find_checkout(place, "last")
            path = session.file
        except errors.BadInput:
            path = place.mirror_path()
    elif path.resolve().parent.parent == place.checkouts.resolve():
        session = Checkout(path.resolve().parent)
    data = read_regular(path)
    if data is None:
        raise errors.BadInput(f"{path} does not exist; nothing to check in")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise errors.BadInput(f"{path} line {line}: not UTF-8 text; nothing was checked in") from None
    base_text = None
    if session is not None and session.base_file.exists():
        base_text = session.base_file.read_text("utf-8")
    kept = f"your edit is kept in {path}"
    while True:
        planned = plan_checkin(store, text, base_text)
        plan = planned.plan
        if not plan.ok:
            messages = problems(planned)
            conflict = bool(plan.conflicts) and not plan.errors
            for message in messages:
                print(f"  {message}", file=sys.stderr)
            if session is None:
                keep = new_checkout_from_text(place, planned, text)
                hint = f"{kept}, and copied to {keep.file}; resolve it with `qem edit --resume {keep.id}`"
            else:
                hint = session.resume_hint()
            exc_type = errors.ConflictError if conflict else errors.BadInput
            raise exc_type(f"{len(messages)} problem(s); nothing was written", hint=hint)
        if not plan.ops:
            print("qem: no changes; nothing written", file=sys.stderr)
            _report_merged(planned)
            if session is not None and not dry_run:
                shutil.rmtree(session.directory, ignore_errors=True)
            return 0
        print(describe_plan(planned), file=sys.stderr)
        if dry_run:
            print("qem: dry run; nothing written", file=sys.stderr)
            return 0
        if not yes:
            if not _interactive():
                raise errors.BadInput("no terminal to confirm the plan: pass --yes", hint=kept)
            if _ask("Apply these changes? [y/N]: ").lower() not in ("y", "yes"):
                print(f"qem: nothing written; {kept}", file=sys.stderr)
                return 0
        why = _get_reason(reason)
        try:
            checkin_id, created = apply_plan(store, plan, who, why)
        except errors.HeadMoved:
            continue
        _report_applied(plan, checkin_id, created)
        break
    if session is not None:
        shutil.rmtree(session.directory, ignore_errors=True)
    else:
        # the checked-in file is rendered again at the new head, ready for the next edit
        _, fresh = rendering(store, planned.parsed.scope)
        write_atomic(path, fresh.encode("utf-8"), mode=os.stat(path).st_mode & 0o777)
    auto_export(store, place)
    return 0


def new_checkout_from_text(place: Workspace, planned: Planned, text: str) -> Checkout:
    """Keep a failed check-in's file as a resumable edit (its own base preserved)."""
    scope, base = planned.parsed.scope, planned.plan.base
    return _make_checkout(place, base, scope, render(planned.base_notes.values(), base, scope), text)
