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
import sys
from dataclasses import dataclass
from pathlib import Path

from reconciler.blocks import EditDiff, diff_edit
from reconciler.parse import ParsedFile, parse
from reconciler.plan import EVENT_OF_ACTION, Conflict, Op, Plan, make_plan
from renderer import Scope, render
from renderer.format import HEADER_RE

from . import errors
from .export import auto_export, fill_forgotten_texts, rendered_at_base, rendered_bytes
from .faults import checkpoint
from .files import private_dir, read_regular, write_atomic
from .model import Event, Note
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

    def discard(self) -> None:
        """Remove the checkout: its edit landed, or there was nothing to check in."""
        import shutil

        shutil.rmtree(self.directory, ignore_errors=True)

    def resume_hint(self) -> str:
        return f"your edit is kept in {self.file}; continue with `qem edit --resume {self.id}`"

    def _session(self) -> dict:
        try:
            return json.loads((self.directory / SESSION_FILE).read_text("utf-8"))
        except (OSError, ValueError):
            return {}

    def pending(self) -> tuple[int, list[str]]:
        """The checkout's first base, and the check-in ids it started applying."""
        data = self._session()
        return int(data.get("base") or 0), list(data.get("pending") or [])

    def add_pending(self, checkin_id: str) -> None:
        """Note `checkin_id` before applying it: if qem dies after the commit, the kept
        edit must not be checked in a second time (its new notes would be created twice)."""
        data = self._session()
        data["pending"] = [*data.get("pending", []), checkin_id]
        write_atomic(self.directory / SESSION_FILE, json.dumps(data).encode("utf-8"), mode=0o600)


# -- checking out ----------------------------------------------------------------------------


def new_checkout(store: Store, place: Workspace, scope: Scope) -> Checkout:
    base, rendered = rendered_bytes(store, scope)
    return _make_checkout(place, base, scope, rendered, rendered)


def _make_checkout(
    place: Workspace, base: int, scope: Scope, base_text: str | bytes, text: str | bytes
) -> Checkout:
    root = private_dir(place.checkouts)
    directory = root / f"{base}-{os.urandom(4).hex()}"
    directory.mkdir(mode=0o700)
    checkout = Checkout(directory)
    write_atomic(checkout.base_file, _utf8(base_text), mode=0o600)
    write_atomic(checkout.file, _utf8(text), mode=0o600)
    session = json.dumps({"base": base, "scope": _scope_json(scope)}).encode("utf-8")
    write_atomic(directory / SESSION_FILE, session, mode=0o600)
    return checkout


def _utf8(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8")


def _scope_json(scope: Scope) -> dict:
    return {"kinds": list(scope.kinds) if scope.kinds else None, "active": scope.active_only}


def find_checkout(place: Workspace, which: str | None) -> Checkout:
    root = place.checkouts
    if root.is_symlink():
        raise errors.BadInput(f"{root} is a symbolic link; qem keeps edits only in a private directory of its own")
    candidates = sorted(
        (d for d in root.glob("*") if not d.is_symlink() and (d / SESSION_FILE).is_file()),
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
    write_atomic(path, rendered_bytes(store, scope)[1], mode=0o600)
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
    import signal
    import subprocess

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
    text: bytes = b""
    base_text: bytes | None = None
    partial: bool = False  # only the changed blocks parsed, only the notes they name read


def plan_checkin(store: Store, text: str | bytes, base_text: str | bytes | None = None) -> Planned:
    """Plan checking `text` (the edited file) in.  With the base rendering at hand (a
    checkout's base.md, or the mirror's base rebuilt from the cache), only the blocks the
    edit changed are parsed and only the notes they, and the events since the base, name
    are read."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    base = base_text.encode("utf-8") if isinstance(base_text, str) else base_text
    if base is not None and _header_line(base) == _header_line(data):
        diff = diff_edit(base, data)
        if diff is not None and diff.parsed.base is not None:
            return _plan_changed(store, diff, data, base)
    return _plan_whole(store, data, base)


def _header_line(data: bytes) -> bytes:
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    end = data.find(b"\n", start)
    return data[start : end if end >= 0 else len(data)].rstrip()


def _decoded(data: bytes, what: str = "the file") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise errors.BadInput(f"{what} line {line}: not UTF-8 text; nothing was checked in") from None


def _plan_changed(store: Store, diff: EditDiff, text: bytes, base_text: bytes) -> Planned:
    parsed = diff.parsed
    assert parsed.base is not None
    with store.reading():
        head = _head_within(store, parsed.base)
        since, past = store.rewind(parsed.base)
        mine = {i.note_id for i in parsed.items if i.note_id is not None} | diff.removed
        now_notes = store.notes_by_id(mine | set(past))
        successors = {n.superseded_by for n in now_notes.values() if n.superseded_by is not None}
        now_notes.update(store.notes_by_id(successors - set(now_notes)))
    base_notes = _at_base({n: now_notes[n] for n in mine if n in now_notes}, past, base_text)
    plan = make_plan(parsed, base_notes, now_notes, since, head, removed=diff.removed)
    return Planned(parsed, plan, base_notes, now_notes, since, text, base_text, partial=True)


def _head_within(store: Store, base: int) -> int:
    head = store.head()
    if base > head:
        raise errors.BadInput(
            f"the file names base {base}, past this store's head {head}:"
            " it was rendered from another store"
        )
    return head


def _plan_whole(store: Store, text: bytes, base_text: bytes | None) -> Planned:
    parsed = parse(_decoded(text))
    if parsed.base is None:
        if not parsed.errors:
            raise errors.BadInput("the file holds nothing to check in")
        raise errors.BadInput(f"this is not a qem file: {parsed.errors[0]}")
    with store.reading():
        head = _head_within(store, parsed.base)
        now_notes = {n.id: n for n in store.notes()}
        since, past = store.rewind(parsed.base)
    base_notes = _at_base(dict(now_notes), past, base_text)
    plan = make_plan(parsed, base_notes, now_notes, since, head)
    return Planned(parsed, plan, base_notes, now_notes, since, text, base_text)


def _base_rendering(store: Store, text: bytes) -> bytes | None:
    """A hand-edited export's base rendering, rebuilt from the store's cached items (None
    where that is not possible, and the check-in parses the whole file instead)."""
    match = HEADER_RE.match(_header_line(text).decode("utf-8", "replace"))
    if not match or match["kinds"] or match["active"]:
        return None
    base = int(match["base"])
    if base > store.head():
        return None
    return rendered_at_base(store, base)


def whole(store: Store, planned: Planned) -> Planned:
    """`planned` with the whole file parsed and every note read (for the rebase)."""
    return _plan_whole(store, planned.text, planned.base_text) if planned.partial else planned


def _at_base(notes: dict[int, Note], past: dict[int, Note | None], base_text: bytes | None) -> dict[int, Note]:
    """`notes` (as they are now) as of the base: those touched since (`past`, from
    Store.rewind) as they were, those created since left out, and texts forgotten since
    taken from the base rendering where it is at hand."""
    for note_id, note in past.items():
        if note is None:
            notes.pop(note_id, None)
        else:
            notes[note_id] = note
    if base_text is not None:
        fill_forgotten_texts(notes, base_text)
    return notes


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
    summary = _summary(plan)
    out.append(f"Plan: {summary or 'nothing to write'} (base seq {plan.base}, store head {plan.head})")
    if plan.merged:
        out.append(f"Kept others' changes since your base to {_ids(plan.merged)}")
    if plan.agreed:
        out.append(f"Already done in the store, nothing to write: {_ids(plan.agreed)}")
    return "\n".join(out)


_SIGN = {"revoke": "-", "flag_stale": "!", "reinstate": "^", "expire": "x", "promote": "*"}
_ORDER = ("create", "supersede", "revoke", "flag_stale", "reinstate", "expire", "promote")


def _summary(plan: Plan) -> str:
    """"1 create, 2 supersede, 1 revoke": the plan's counts, in a fixed order."""
    counts = plan.counts()
    return ", ".join(f"{counts[a]} {a.replace('_', ' ')}" for a in _ORDER if a in counts)


def _ids(ids: list[int]) -> str:
    return ", ".join(f"#{i}" for i in ids)


def describe_conflict(conflict: Conflict) -> str:
    mine = ", ".join(op.action.replace("_", " ") for op in conflict.mine) or "changed it"
    if any(op.action == "revoke" and op.line == 0 for op in conflict.mine):
        mine = "deleted it (revoke)"
    theirs = "; ".join(f"{e.type} by {e.actor} at {e.at}" + (f" ({e.reason})" if e.reason else "") for e in conflict.theirs)
    return f"conflict on #{conflict.note_id}: you {mine}; since your base the store saw: {theirs}"


def problems(planned: Planned) -> list[str]:
    parsed = set(planned.parsed.errors)  # a set: a file of thousands of bad lines stays linear
    return [str(e) for e in planned.parsed.errors + [e for e in planned.plan.errors if e not in parsed]] + [
        describe_conflict(c) for c in planned.plan.conflicts
    ]


# -- applying -----------------------------------------------------------------------------------


def new_checkin_id(plan: Plan) -> str:
    return f"ci-{plan.base}-{os.urandom(4).hex()}"


def apply_plan(store: Store, plan: Plan, who: str, reason: str, checkin_id: str | None = None) -> tuple[str, list[int]]:
    """Append every event of the check-in in one transaction, or none.

    The transaction first checks that the store head is still the one the plan was made
    against; if it moved, HeadMoved is raised and the caller plans again.
    """
    checkin_id = checkin_id or new_checkin_id(plan)
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
    """Crash here when QEM_FAULT names this point (or QEM_FAULT_AFTER_N counts down to
    it): crash-consistency tests kill qem at chosen moments (qem_edit/faults.py)."""
    checkpoint(point)


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
        if _landed(store, session):
            return 0
        _rebase_kept(store, session)
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
    text = _read_edit(session.file)
    if not text.strip():
        print("qem: the file is empty; no changes, nothing written", file=sys.stderr)
        session.discard()
        return 0
    base_text = _read_edit(session.base_file) if session.base_file.exists() else None
    while True:
        try:
            planned = plan_checkin(store, text, base_text)
        except errors.QemError as exc:
            exc.hint = exc.hint or session.resume_hint()
            raise
        plan = planned.plan
        if not plan.ok:
            return _not_ok(store, session, text, planned)
        if not plan.ops:
            print("qem: no changes; nothing written", file=sys.stderr)
            _report_merged(planned)
            session.discard()
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
            checkin_id = new_checkin_id(plan)
            session.add_pending(checkin_id)
            checkin_id, created = apply_plan(store, plan, who, why, checkin_id)
        except errors.HeadMoved:
            continue  # someone wrote meanwhile: plan again against the new head
        except BaseException as exc:
            if isinstance(exc, errors.QemError):
                exc.hint = session.resume_hint()
            raise
        _report_applied(plan, checkin_id, created)
        session.discard()
        auto_export(store, place)
        return 0


def _read_edit(path: Path) -> bytes:
    """The file's bytes: decoded only where the check-in has to read them (and a line
    that is not UTF-8 is named there)."""
    data = read_regular(path)
    if data is None:
        raise errors.BadInput(f"{path} is gone; nothing was checked in")
    return data


def _not_ok(store: Store, session: Checkout, text: bytes, planned: Planned) -> int | None:
    messages = problems(planned)
    conflict = bool(planned.plan.conflicts) and not planned.plan.errors
    heading = "conflicts with changes made since your base" if conflict else "the edit cannot be checked in"
    print(f"qem: {heading}:", file=sys.stderr)
    for message in messages:
        print(f"  {message}", file=sys.stderr)
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
    if conflict:
        new_text, new_base = _rebased(store, planned, messages)
    else:
        from reconciler.rebase import with_errors

        try:
            new_text, new_base = with_errors(text.decode("utf-8"), messages), None
        except UnicodeDecodeError:
            return None  # reopened as it is: rewriting it would lose the bytes it holds
    if new_base is not None:
        write_atomic(session.base_file, new_base.encode("utf-8"), mode=0o600)
    write_atomic(session.file, new_text.encode("utf-8"), mode=0o600)
    return None


def _rebased(store: Store, planned: Planned, messages: list[str]) -> tuple[str, str]:
    """The edit rebased on the store now, conflicts marked; and the store now, rendered."""
    from reconciler.rebase import rebase
    planned = whole(store, planned)
    new_text = rebase(
        planned.parsed, planned.plan, planned.base_notes, planned.now_notes,
        _store_sides(planned), messages,
    )
    new_base = render(list(planned.now_notes.values()), planned.plan.head, planned.parsed.scope)
    return new_text, new_base


def _rebase_kept(store: Store, session: Checkout) -> None:
    """On resume, a kept edit that conflicts with the store now is reopened rebased on it,
    each conflict between markers, as `[e]dit again` would have offered."""
    text = _read_edit(session.file)
    if not text.strip():
        return
    base_text = _read_edit(session.base_file) if session.base_file.exists() else None
    try:
        planned = plan_checkin(store, text, base_text)
    except errors.QemError:
        return  # the check-in round reports it, after the editor
    if not planned.plan.conflicts or planned.plan.errors:
        return
    new_text, new_base = _rebased(store, planned, problems(planned))
    write_atomic(session.base_file, new_base.encode("utf-8"), mode=0o600)
    write_atomic(session.file, new_text.encode("utf-8"), mode=0o600)
    print(
        f"qem: the store changed since this edit's base; {len(planned.plan.conflicts)} conflict(s)"
        " are marked in the file (keep one side of each, delete the other and the marker lines)",
        file=sys.stderr,
    )


def _landed(store: Store, session: Checkout) -> bool:
    """Whether a check-in of this kept edit already landed (qem died after its commit)."""
    base, pending = session.pending()
    if not pending:
        return False
    with store.reading():
        done = sorted({e.checkin for e in store.events(after=base) if e.checkin in pending})
    if not done:
        return False
    print(
        f"qem: this edit was already checked in as {done[0]}; nothing more to write"
        f" (see `qem log`); removing the kept edit {session.id}",
        file=sys.stderr,
    )
    session.discard()
    return True


def _store_sides(planned: Planned) -> dict[int, str]:
    out: dict[int, str] = {}
    for conflict in planned.plan.conflicts:
        out[conflict.note_id] = "; ".join(f"{e.type} by {e.actor} at {e.at}" for e in conflict.theirs)
    return out


def _report_applied(plan: Plan, checkin_id: str, created: list[int]) -> None:
    summary = _summary(plan)
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
        session = _default_checkin(store, place)
        path = session.file if session is not None else place.mirror_path()
    elif path.resolve().parent.parent == place.checkouts.resolve() and not place.checkouts.is_symlink():
        session = Checkout(path.resolve().parent)
    if session is not None and not dry_run and _landed(store, session):
        return 0
    data = read_regular(path)
    if data is None:
        raise errors.BadInput(f"{path} does not exist; nothing to check in")
    text = data  # decoded only where the check-in has to read it
    base_text = None
    if session is not None and session.base_file.exists():
        base_text = session.base_file.read_bytes()
    elif session is None:
        base_text = _base_rendering(store, text)
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
                session.discard()
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
            checkin_id = new_checkin_id(plan)
            if session is not None:
                session.add_pending(checkin_id)
            checkin_id, created = apply_plan(store, plan, who, why, checkin_id)
        except errors.HeadMoved:
            continue
        _report_applied(plan, checkin_id, created)
        break
    if session is not None:
        session.discard()
    else:
        # the checked-in file is rendered again at the new head, ready for the next edit
        fresh = rendered_bytes(store, planned.parsed.scope)[1]
        write_atomic(path, fresh, mode=os.stat(path).st_mode & 0o777)
    auto_export(store, place)
    return 0


def _default_checkin(store: Store, place: Workspace) -> Checkout | None:
    """What `qem checkin` without --path means: the latest kept edit, else MEMORY.md.
    When both a kept edit and a hand-edited MEMORY.md are there, it could mean either, and
    guessing could check in the wrong one: refuse, and name them."""
    try:
        latest = find_checkout(place, "last")
    except errors.BadInput:
        return None
    from .export import check

    mirror = place.mirror_path()
    if mirror.is_file() and check(store, mirror).precious:
        raise errors.BadInput(
            f"both {mirror} (edited by hand) and the kept edit {latest.id} could be checked in;"
            f" name one: `qem checkin --path {mirror}` or `qem checkin --path {latest.file}`"
        )
    return latest


def new_checkout_from_text(place: Workspace, planned: Planned, text: str) -> Checkout:
    """Keep a failed check-in's file as a resumable edit (its own base preserved)."""
    scope, base = planned.parsed.scope, planned.plan.base
    if planned.base_text is not None:
        base_render = planned.base_text.decode("utf-8")
    else:  # a whole-file plan read every note
        base_render = render(planned.base_notes.values(), base, scope)
    return _make_checkout(place, base, scope, base_render, text)
