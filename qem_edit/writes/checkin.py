"""Check-in as a library: an edited file in, events appended (or not), an outcome out.

`propose` plans an edit three-way against the store (reconciler.plan decides, this module
reads what it needs); `apply_plan` appends the plan's events in one transaction that first
checks the store has not moved; `check_in` is the one loop that serves every source (a
kept checkout, a file of the user's such as a hand-edited MEMORY.md): plan, refuse or
confirm, ask the reason, apply, plan again if the store moved meanwhile.  Nothing here
prints or reads a terminal: whoever runs the loop answers through an `Asker`, and reads
the `Outcome`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..base import errors, ids
from ..base.decisions import NewNote
from ..base.faults import checkpoint
from ..base.gitconflict import has_markers
from ..base.ids import new_checkin_id
from ..base.records import Record
from ..base.replay import Note
from ..base.vocabulary import LIVE_STATES, MOVE_BY_VERB
from ..mirror.export import MIRROR_BASE, auto_export, export, known_renderings, mirror_base, render_store, rendering
from ..reconciler.parse import LineError
from ..reconciler.plan import Conflict, Op, Plan
from ..reconciler.rebase import rebase, with_errors
from ..renderer import for_editing, render
from ..renderer.render import base_named, rendering_id
from ..storage.secrets import described, scan, strings
from ..storage.store import Store
from ..system.files import read_regular, refuse_link, write_atomic
from ..system.workspace import Workspace
from .acts import late_notice, repeat_notice, repeats
from .checkin_plan import Proposal, propose, whole
from .expiry import born_ended, defaults, ended_notice, shifted
from .forgetting import scrub_again
from .kept_edits import Checkout, keep, kept, requery

if TYPE_CHECKING:
    from ..storage.transaction import Transaction


# -- the words for what went wrong --------------------------------------------------------------


def describe_conflict(conflict: Conflict, shown: str | None = None) -> str:
    mine = ", ".join(MOVE_BY_VERB[op.action].shown for op in conflict.mine) or "changed it"
    if any(op.action == "revoke" and op.line == 0 for op in conflict.mine):
        mine = "deleted it (revoke)"
    return f"conflict on #{ids.shown(conflict.note_id, shown)}: you {mine}; since your base the store saw: {conflict.theirs}"


def problems(proposal: Proposal) -> list[str]:
    """Every reason the proposal cannot be applied, one line each: the file's errors by
    line, then the conflicts."""
    parsed = set(proposal.parsed.errors)  # a set: a file of thousands of bad lines stays linear
    lines = proposal.parsed.errors + [e for e in proposal.plan.errors if e not in parsed]
    shorts = {n.id: short for short, n in proposal.base_notes.items()}
    return [str(e) for e in lines] + [describe_conflict(c, shorts.get(c.note_id)) for c in proposal.plan.conflicts]


def is_conflict(proposal: Proposal) -> bool:
    """Refused for conflicts alone (exit 3), rather than for an edit that cannot be read."""
    return bool(proposal.plan.conflicts) and not proposal.plan.errors


# -- applying -----------------------------------------------------------------------------------


def apply_plan(store: Store, plan: Plan, who: str, reason: str, checkin_id: str | None = None, *,
               allow_secret: bool = False, oids: dict[str, str] | None = None,
               ttls: Mapping[str, int] | None = None,
               reanchored: Mapping[str, tuple[tuple[str, str], ...] | None] | None = None) -> tuple[str, list[str]]:
    """Write every event of the check-in at once (one pack file), or none; `oids`: the
    object id of each path the new notes anchor, as it is now.

    The write first checks that the memory is still as the plan saw it; if it moved (a
    writer here, a pull, a switch of branch), HeadMoved is raised and the caller plans
    again.  `ttls`: the kinds' default times to live (qem_edit.writes.expiry), for new items that
    show no end.  `reanchored`: a reinstated note's anchors as they are now (acts.anchors_now).
    """
    checkin_id = checkin_id or new_checkin_id()
    created: list[str] = []

    def work(tx: Transaction) -> None:
        if tx.generation != plan.generation:
            raise errors.HeadMoved("the memory moved on while the check-in was planned",
                                   moved=max(1, tx.generation - plan.generation))
        checkpoint("apply-begin")
        for op in plan.ops:
            _apply_op(tx, op, who, op.reason or reason, checkin_id, created, oids or {}, ttls or {},
                      (reanchored or {}).get(op.note_id or ""))
        checkpoint("apply-before-commit")

    store.write(work, allow_secret=allow_secret)
    checkpoint("apply-after-commit")
    return checkin_id, created


def _apply_op(tx: Transaction, op: Op, who: str, reason: str, checkin_id: str, created: list[str],
              oids: dict[str, str], ttls: Mapping[str, int], anchors: tuple[tuple[str, str], ...] | None) -> None:
    if op.action in ("create", "supersede"):
        assert op.content is not None
        anchors = tuple((path, oids[path]) for path in op.content.anchors)
        end = op.content.expires
        if end is None and op.action == "create" and op.content.kind in ttls:
            end = shifted(tx.at, ttls[op.content.kind])
        new = NewNote(op.content.kind, op.content.priority, "human", op.content.text, op.note_id,
                      anchors=anchors, expires=end, triggers=op.content.triggers, to=op.content.to,
                      due=op.content.due, answers=op.content.answers,
                      rests_on=_grounded(tx, op))
        created.append(tx.create(new, who, reason, checkin_id).id)
    else:
        assert op.note_id is not None
        event = MOVE_BY_VERB[op.action].event
        tx.emit(op.note_id, event, who, reason, checkin_id, anchors=anchors if event == "reinstated" else None)


def already_landed(store: Store, checkout: Checkout) -> str | None:
    """The check-in of this kept edit that already landed (qem died after its commit)."""
    pending = checkout.pending()
    if not pending:
        return None
    done = sorted({e.checkin for e in store.events_of_checkins(pending) if e.checkin})
    return done[0] if done else None


# -- editing again ------------------------------------------------------------------------------


def rebased(store: Store, proposal: Proposal, messages: list[str]) -> tuple[str, str]:
    """The edit rebased on the store now, conflicts marked; and the store now, rendered
    (the reopened edit's new base)."""
    proposal = whole(store, proposal)
    selection = proposal.parsed.selection
    if selection.notes is not None:  # a query's checkout follows its notes to their successors
        proposal.parsed.selection = selection._replace(notes=selection.notes | set(proposal.now_notes))
    sides = {c.note_id: c.theirs for c in proposal.plan.conflicts}
    new_base = render(list(proposal.now_notes.values()), store.memory_id(), proposal.parsed.selection)
    new_text = rebase(proposal.parsed, proposal.plan, proposal.base_notes, proposal.now_notes, sides, messages,
                      new_base)
    return new_text, for_editing(new_base)


def reopen(store: Store, checkout: Checkout, proposal: Proposal) -> None:
    """Make a refused edit ready to edit again: rebased on the store now with each
    conflict marked, or, for an edit that cannot be read, with qem's error comment under
    its header.  An edit that is not UTF-8 is reopened as it is (rewriting it would lose
    the bytes it holds)."""
    messages = problems(proposal)
    if is_conflict(proposal):
        checkout.replace(*rebased(store, proposal, messages))
        return
    try:
        checkout.replace(with_errors(proposal.text.decode("utf-8"), messages))
    except UnicodeDecodeError:
        pass


def rebase_kept(store: Store, checkout: Checkout) -> int:
    """On resume: a kept edit that conflicts with the store now is rebased on it, each
    conflict between markers; returns the number of conflicts marked (0: left as it is)."""
    text = read_edit(checkout.file)
    if _blank(text):
        return 0
    try:
        proposal = propose(store, text, _base_path(checkout), heads=checkout.base_heads(), moment=checkout.moment(),
                           calm=checkout.calm())
    except errors.QemError:
        return 0  # the check-in round reports it, after the editor
    if not proposal.plan.conflicts or proposal.plan.errors:
        return 0
    checkout.replace(*rebased(store, proposal, problems(proposal)))
    return len(proposal.plan.conflicts)


def read_edit(path: Path) -> bytes:
    """The edited file's bytes (decoded only where the check-in has to read them, and a
    line that is not UTF-8 is named there)."""
    data = read_regular(path)
    if data is None:
        raise errors.BadInput(f"{path} is gone; nothing was checked in")
    return data


def _blank(text: bytes) -> bool:
    """Whether an edit is empty or only whitespace (asked without copying it)."""
    return not text or text.isspace()


def _base_bytes(checkout: Checkout) -> bytes | None:
    return read_edit(checkout.base_file) if checkout.base_file.exists() else None


def _base_path(checkout: Checkout) -> Path | None:
    """A kept edit's base, to be read a chunk at a time as the check-in compares it (it
    is as large as the edit: never held whole)."""
    path = checkout.base_file
    refuse_link(path)
    return path if path.exists() else None


# -- the one loop ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """What is checked in: the edited file, and the kept edit it belongs to (None for a
    file of the user's own, such as a hand-edited MEMORY.md)."""

    path: Path
    place: Workspace
    checkout: Checkout | None = None

    def hint(self) -> str:
        if self.checkout is not None:
            return self.checkout.resume_hint()
        return f"your edit is kept in {self.path}"

    def read(self, store: Store) -> "Read":
        """The edit, and the rendering it was made from where that is known (with its
        moment, whether it is calm, where its headings start: see `propose`)."""
        data = read_regular(self.path)
        if data is None:
            raise errors.BadInput(f"{self.path} does not exist; nothing to check in")
        checkout = self.checkout
        if checkout is not None:
            return Read(data, _base_path(checkout), checkout.moment(), checkout.calm(), checkout.base_heads())
        named = base_named(data)
        if named is not None:  # a copy of a checkout: its base, wherever this clone keeps it
            return Read(data, _named_base(store, self.place, self.path, named))
        if has_markers(data):
            data = _your_side(store, self.path, data)
        kept = mirror_base(store, self.path)
        if kept is None:
            return Read(data, None)
        if not kept.same_as(data) and _is_rendering_now(store, self.path, data):
            return Read(data, data)  # export died between the mirror and its kept copy: nothing to check in
        return Read(data, kept.base, kept.moment, kept.calm, kept.heads)


class Read(Record):
    """What a check-in reads: the edit, its base (bytes, or a file read a chunk at a
    time; None: unknown), and, for a base qem rendered, its moment, whether it is calm and
    where its section headings start."""

    text: bytes
    base: bytes | Path | None
    moment: str | None = None
    calm: bool = False
    heads: list[int] | None = None


def _is_rendering_now(store: Store, path: Path, data: bytes) -> bool:
    """Whether `data`, read from `path`, is the rendering now (compared a chunk at a time)."""
    from ..mirror.export import rendering

    with rendering(store) as (_, chunks):
        at = 0
        for chunk in chunks:
            if data[at:at + len(chunk)] != chunk:
                return False
            at += len(chunk)
    return at == len(data)


def _named_base(store: Store, place: Workspace, path: Path, named: str) -> bytes:
    """The rendering a checkout's help line names: a kept edit's base, or the last export;
    refused (nothing written, the file untouched) when this clone keeps it nowhere, since
    the file's changes could not be told from what others did since."""
    for checkout in kept(place):
        base = _base_bytes(checkout)
        if base is not None and base_named(base) == named:
            return base
    exported = read_regular(Path(store.root, MIRROR_BASE))
    if exported is not None and rendering_id(exported) == named:
        return exported
    raise errors.ConflictError(
        f"{path} was made from a rendering this clone no longer keeps (base={named}), so its changes cannot be"
        " told from what others wrote since; nothing was checked in; check out afresh"
        " (`qem checkout --path FILE`) and make the edits there")


def _your_side(store: Store, path: Path, data: bytes) -> bytes:
    """A file git left with conflict markers, as its writer meant it: in each conflict the
    side with lines no rendering holds (theirs: a person's edits), else the checked-out
    rendering; the three-way check-in then keeps what the log holds now."""
    from ..base import gitconflict

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data  # the check-in names the line that is not UTF-8
    _, rendering = render_store(store)
    try:
        return gitconflict.resolved(text, known_renderings(store, path, rendering)).encode("utf-8")
    except gitconflict.Unbalanced as exc:
        raise errors.BadInput(f"{path}: git's conflict markers do not pair up ({exc}); resolve them by hand") from None
    except gitconflict.BothSides as exc:
        raise errors.ConflictError(
            f"{path}: both sides of git's conflict at line {exc} hold lines no rendering holds; keep the lines"
            f" you mean between the markers, delete the markers, then run `qem checkin --path {path}`"
        ) from None


# A check-in that takes more than this share of the checkout's live notes out of force
# (revoked, superseded or expired), and more than MASS_MIN of them, is confirmed
# explicitly, even under --yes: an editor that saved half the file or a search-and-replace
# gone wrong looks exactly like that.
MASS_SHARE = 0.25
MASS_MIN = 5
_TAKING = frozenset(m.verb for m in MOVE_BY_VERB.values() if m.out_of_force)  # (a check-in never forgets)


@dataclass(frozen=True)
class MassChange:
    taken: int  # live notes the check-in takes out of force
    live: int  # the live notes of the checkout

    def describe(self) -> str:
        return (
            f"this check-in takes {self.taken} of the checkout's {self.live} live notes out of force"
            " (revoked, superseded or expired)"
        )


def mass_change(store: Store, proposal: Proposal) -> MassChange | None:
    """The check-in's reach, when it is past the mass-change threshold (else None)."""
    live_at_base = {n.id for n in proposal.base_notes.values() if n.live}
    taken = {op.note_id for op in proposal.plan.ops if op.action in _TAKING and op.note_id in live_at_base}
    if len(taken) <= MASS_MIN:
        return None
    selection = proposal.parsed.selection
    if selection.notes is not None:  # a query's checkout: its own notes
        live = sum(1 for n in store.notes_by_id(selection.notes).values() if n.live)
    else:  # counted only as far as it matters: past this many, the change is not a mass change
        live = store.count(kinds=selection.kinds, states=LIVE_STATES, limit=int(len(taken) / MASS_SHARE) + 1)
    return MassChange(len(taken), live) if len(taken) > live * MASS_SHARE else None


class Asker(Protocol):
    """Whoever runs a check-in: shown each plan, asked to confirm it and for a reason."""

    def confirm(self, proposal: Proposal, moved: int) -> str:
        """"apply", or what to do instead ("edit": edit again; "keep": stop, keeping the
        edit).  `moved`: events others appended since the last plan was confirmed (the
        plan was made again), 0 for a first plan."""

    def confirm_mass(self, proposal: Proposal, mass: MassChange) -> bool:
        """Explicit consent to a mass change (past the threshold, without
        --allow-mass-change); False keeps the edit."""

    def reason(self) -> str | None:
        """The reason recorded on every event of the check-in (asked once); None when
        the person would not give one (the edit is kept)."""


class Status(StrEnum):
    """What a check-in did; `qem checkin --json` prints the value."""

    APPLIED = "applied"
    UNCHANGED = "unchanged"  # nothing to write
    DRY_RUN = "dry_run"
    REFUSED = "refused"  # conflicts or an unreadable edit; nothing written
    EDIT = "edit"  # edit again
    KEEP = "keep"  # stopped; nothing written
    LANDED_BEFORE = "landed_before"  # applied by an earlier run
    EMPTY = "empty"  # the edit is an empty file; kept


@dataclass
class Outcome:
    """What a check-in did (`status`), and with what."""

    status: Status
    source: Source
    proposal: Proposal | None = None
    checkin_id: str | None = None
    created: list[str] = field(default_factory=list)
    kept: Checkout | None = None  # where a refused edit is kept for `qem edit --resume`
    notices: list[str] = field(default_factory=list)  # from keeping the mirror current
    shown: dict[str, str] = field(default_factory=dict)  # the new notes' short ids
    repeats: dict[str, list[str]] = field(default_factory=dict)  # a new note → the notes in force with its text


def check_in(store: Store, source: Source, asker: Asker, who: str, *,
             dry_run: bool = False, allow_mass_change: bool = False, allow_secret: bool = False) -> Outcome:
    """Plan `source` and, once the asker confirms, apply it; plan again while others
    write meanwhile.  The kept edit is removed once it landed (or had nothing to do); a
    user's file is rendered again at the new head, and the mirror too where the workspace
    keeps it current; a refused user's file is copied to a kept edit so that
    `qem edit --resume` can take it up (not by a dry run, which keeps nothing).  An empty
    edit is never taken for "no changes": it is kept as it is."""
    if source.checkout is not None and not dry_run:
        done = already_landed(store, source.checkout)
        if done is not None:
            source.checkout.discard()
            return Outcome(Status.LANDED_BEFORE, source, checkin_id=done)
    if source.checkout is not None:
        scrub_again(store, source.checkout)  # an editor open during a forget wrote its text back
    read = source.read(store)
    users = source.checkout is None and not dry_run  # a file of the user's: it may come from an incomplete commit
    if users and read.moment is None:
        _refuse_incomplete(store, source.path, None)
    if _blank(read.text):
        return Outcome(Status.EMPTY, source, kept=source.checkout)
    moved = 0
    while True:
        proposal = propose(store, read.text, read.base, moment=read.moment, heads=read.heads, calm=read.calm)
        if users and read.moment is not None and moved == 0:  # (its base is this log's rendering)
            _refuse_incomplete(store, source.path, proposal)
        proposal.plan.errors += _secret_errors(proposal.plan, allow_secret)
        proposal.plan.errors += _anchor_errors(proposal, source.place)
        if not proposal.plan.ok:
            return Outcome(Status.REFUSED, source, proposal, kept=None if dry_run else _keep_refused(source, proposal))
        if not proposal.plan.ops or dry_run:
            notices = [] if dry_run else _settle(store, source, proposal)
            return Outcome(Status.DRY_RUN if dry_run else Status.UNCHANGED, source, proposal, notices=notices)
        choice = _consent(store, proposal, asker, moved, allow_mass_change)
        reason = asker.reason() if choice == "apply" else None
        if reason is None:
            return Outcome(Status.EDIT if choice == "edit" else Status.KEEP, source, proposal)
        try:
            checkin_id, created = _apply(store, source, proposal, reason, who, allow_secret)
        except errors.HeadMoved as exc:
            moved = exc.moved
            continue
        return _landed(store, source, proposal, checkin_id, created)


def _late_already(store: Store, created: list[str]) -> list[str]:
    """The new notes whose deadline, given by this check-in, was past already (as `qem add`
    says of one)."""
    made = [n for n in store.notes_by_id(created).values() if n.due is not None]
    old = store.notes_by_id(n.supersedes for n in made if n.supersedes is not None)
    said = (late_notice(n, old.get(n.supersedes or "")) for n in sorted(made, key=lambda n: n.id))
    return [s for s in said if s]


def _landed(store: Store, source: Source, proposal: Proposal, checkin_id: str, created: list[str]) -> Outcome:
    """A check-in that landed: its file settled, the mirror kept current, its new notes'
    short ids and the notes in force each repeats."""
    _settle(store, source, proposal)
    notices = auto_export(store, source.place)
    made = store.notes_by_id(created)
    shown = {n.id: n.shown for n in made.values()}
    found = _repeats(store, created)
    notices += [repeat_notice(n, same) for n, same in found] + [ended_notice(n) for n in born_ended(made.values())]
    notices += _late_already(store, created)
    return Outcome(Status.APPLIED, source, proposal, checkin_id, created, notices=notices, shown=shown,
                   repeats={n.id: [o.id for o in same] for n, same in found})


def _secret_errors(plan: Plan, allow_secret: bool) -> list[LineError]:
    """A secret in the edit, an error of its line (so the plan, which would print it, is
    not shown, and `qem edit` opens the file again): in any field of an item (every field
    of `Content`, its text, its @when-run and @anchor lines...) or a marker's reason; a
    person's --allow-secret lets one through in a text alone, as every write does
    (qem_edit.storage.secrets, every way in)."""
    out = []
    for op in plan.ops:
        fields = dict(vars(op.content)) if op.content is not None else {}
        fields["reason"] = op.reason
        for name, value in fields.items():
            for found in filter(None, (scan(string) for _, string, _ in strings(value))):
                if allow_secret and name == "text":
                    continue
                why = (", or, as a person who means to commit it, check in with --allow-secret" if name == "text"
                       else " (it would be kept in an event, which stays in the log for good)")
                out.append(LineError(op.line, f"{_content_field(name)} holds a secret ({described(found)}); it"
                                              f" would reach every clone and stay in git history: remove it{why}"))
    return out


def _content_field(name: str) -> str:
    """How a check-in's error names a field of an item (`Content`) holding a secret."""
    names = {"text": "this note's text", "reason": "its reason", "anchors": "its @anchor line",
             "triggers": "its trigger line (@on, @when-path, @when-run)"}
    return names.get(name, f"its {name}")


def _anchored_paths(plan: Plan) -> list[str]:
    return sorted({path for op in plan.ops if op.content is not None for path in op.content.anchors})


def _anchor_errors(proposal: Proposal, place: Workspace) -> list[LineError]:
    """An anchor line naming what is not an anchor (no such file, a link out of the work
    tree...), an error of its line, as a write refuses it (qem_edit.system.anchors)."""
    if not _anchored_paths(proposal.plan):
        return []
    from ..system import anchors

    tree = anchors.place_tree(place)
    lines = {item.line: item.anchors for item in proposal.parsed.items}
    out = []
    for op in proposal.plan.ops:
        for path in op.content.anchors if op.content is not None else ():
            try:
                anchors.checked_path(tree, path, tree.top)
            except errors.BadInput as exc:
                out.append(LineError(lines.get(op.line, {}).get(path, (op.line, ""))[0], str(exc)))
    return out


def _refuse_incomplete(store: Store, path: Path, proposal: Proposal | None) -> None:
    """A file that shows notes (or texts) the log lacks, an incomplete commit's, is not
    checked in: the file rendered again afterwards would lose those lines.  With no
    `proposal`, the file is read whole for them; a file whose base is this log's own
    rendering (export's kept copy, at a moment this index knows) can show them only where
    it differs from it: in the items `proposal` read."""
    from ..reads.incomplete import lacking, message

    shown = None if proposal is None else {i.note_id: i.raw[0] for i in proposal.parsed.items if i.note_id and i.raw}
    found = lacking(store, path, shown)
    if found:
        raise errors.ConflictError(message(store, path, found), hint=f"nothing was checked in; your edits stay in"
                                   f" {path}: check them in once the notes' files are here")


def _consent(store: Store, proposal: Proposal, asker: Asker, moved: int, allow_mass_change: bool) -> str:
    """The asker's answer to the plan ("apply", "edit" or "keep"), with explicit consent
    to a mass change where one is needed."""
    choice = asker.confirm(proposal, moved)
    if choice == "apply" and not allow_mass_change:
        mass = mass_change(store, proposal)
        if mass is not None and not asker.confirm_mass(proposal, mass):
            return "keep"
    return choice


def _repeats(store: Store, created: list[str]) -> list[tuple[Note, list[Note]]]:
    found = repeats(store, created)
    notes = store.notes_by_id(found)
    return [(notes[n], found[n]) for n in created if n in found]


def _apply(store: Store, source: Source, proposal: Proposal, reason: str, who: str,
           allow_secret: bool = False) -> tuple[str, list[str]]:
    from .acts import anchored, anchors_now

    checkin_id = new_checkin_id()
    oids = dict(anchored(source.place, _anchored_paths(proposal.plan)))  # the content as it is at check-in
    again = {op.note_id: anchors_now(source.place, store.note(op.note_id)) for op in proposal.plan.ops
             if op.action == "reinstate" and op.note_id is not None}
    if source.checkout is not None:
        source.checkout.add_pending(checkin_id)
    return apply_plan(store, proposal.plan, who, reason, checkin_id, allow_secret=allow_secret, oids=oids,
                      ttls=defaults(source.place), reanchored=again)


def _settle(store: Store, source: Source, proposal: Proposal) -> list[str]:
    """After a check-in that landed or had nothing to do: a kept edit is done with; a
    recorded checkout file starts again from the store now; a user's file is rendered
    again at the new head, ready for the next edit.  The mirror is rendered again even
    when there was nothing to do: then all it differed by was what qem derives (an
    `answered by`, DISPUTED, PAST ITS END marker...), which no event records, and left as
    it was, `qem export --check` would call it edited by hand for ever; what is said of
    it is returned."""
    checkout = source.checkout
    mirror = checkout is None and source.path.resolve() == source.place.mirror_path().resolve()
    if checkout is not None and checkout.external:
        checkout.refresh(store, requery(store, proposal.parsed.selection))
    elif checkout is not None:
        checkout.discard()
    elif mirror and export(store, source.path, force=True) and not proposal.plan.ops:
        # (with its kept base: the next hand edit reads against it)
        return [f"{source.path.name} rendered again: it differed only in what qem derives from the log (markers"
                " such as `answered by`, DISPUTED, PAST ITS END), which is not edited by hand"]
    elif proposal.plan.ops and not mirror:
        with rendering(store, requery(store, proposal.parsed.selection)) as (_, chunks):
            write_atomic(source.path, chunks, mode=os.stat(source.path).st_mode & 0o777)
    return []


def _keep_refused(source: Source, proposal: Proposal) -> Checkout | None:
    """A refused file of the user's is also kept as a resumable edit (its own base
    preserved); a kept edit stays where it is."""
    if source.checkout is not None:
        return source.checkout
    return keep(source.place, proposal.parsed.selection, proposal.base_bytes() or b"", proposal.text)


# -- the outcome, for scripts -------------------------------------------------------------------


def outcome_data(outcome: Outcome) -> dict[str, object]:
    """What `qem checkin --json` prints: the status, the plan's operations, conflicts and
    errors, and, once applied, the check-in id, the new notes' ids and the notes in force
    each repeats (same text)."""
    data: dict[str, object] = {"status": outcome.status, "checkin": outcome.checkin_id, "created": outcome.created,
                               "repeats": outcome.repeats}
    proposal = outcome.proposal
    if proposal is None:
        return data
    plan = proposal.plan
    parsed = set(proposal.parsed.errors)
    data.update(
        changes=bool(plan.ops),
        operations=[_op_data(op) for op in plan.ops],
        conflicts=[
            {"note": c.note_id, "line": c.line, "yours": [op.action for op in c.mine],
             "theirs": c.theirs, "message": describe_conflict(c)}
            for c in plan.conflicts
        ],
        errors=[{"line": e.line, "message": e.message}
                for e in proposal.parsed.errors + [e for e in plan.errors if e not in parsed]],
        merged=plan.merged,
        agreed=plan.agreed,
    )
    return data


def _grounded(tx: Transaction, op: Op) -> tuple[str, ...]:
    """The notes a new or edited item rests on, each in plain force as this check-in
    leaves it so far (BadInput naming the line otherwise: re-point the marker at what holds
    now, as `qem add --rests-on` refuses such a base)."""
    assert op.content is not None
    for base_id in op.content.rests_on:
        base = tx.note(base_id)
        if base.state != "active":
            now = f" (by #{ids.shown(base.superseded_by)})" if base.superseded_by else ""
            raise errors.BadFile(f"line {op.line}: `rests on #{base.shown}`: that note is {base.state}{now}; a note"
                                  " rests only on a note in force and not flagged stale: name what holds now;"
                                  " nothing was checked in")
    return op.content.rests_on


def _op_data(op: Op) -> dict[str, object]:
    data: dict[str, object] = {"action": op.action, "note": op.note_id, "line": op.line, "reason": op.reason}
    if op.content is not None:
        data.update(kind=op.content.kind, priority=op.content.priority, text=op.content.text,
                    anchors=list(op.content.anchors), expires=op.content.expires,
                    triggers=[list(t) for t in op.content.triggers], to=op.content.to, due=op.content.due,
                    answers=op.content.answers, rests_on=list(op.content.rests_on))
    return data


def summary_of(store: Store, checkout: Checkout) -> str:
    """One line on what checking a kept edit in would do now."""
    try:
        text, base = read_edit(checkout.file), _base_path(checkout)
        if _blank(text):
            return "empty"
        proposal = propose(store, text, base, heads=checkout.base_heads(), moment=checkout.moment(),
                           calm=checkout.calm())
    except errors.QemError as exc:
        return f"cannot be read: {exc}"
    plan = proposal.plan
    if not plan.ok:
        return f"{len(problems(proposal))} problem(s) to resolve"
    return plan.summary() or "no changes"
