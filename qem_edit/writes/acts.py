"""The writes a writer can make, validated once for every way in.

Each act takes an open store and its workspace, checks its arguments (choices, text, the
reason a move needs), appends its events in one transaction, keeps the mirror current
where the workspace asks for it, and returns what it wrote with what the writer should be
told.  Nothing here prints; the CLI (and any other shell) only parses, calls and shows.

Every act takes `agent`: True when the writer is an agent (an MCP client), False for a
person, None for what `QEM_ACTOR_KIND` says.  An agent's move that takes a note of a
protected kind out of force is refused (qem_edit.storage.protect).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..base import errors, ids, resting
from ..base.decisions import NewNote
from ..base.records import Record
from ..base.replay import Event, Note
from ..base.stored_form import REST_LIMIT, normalize_text, scope_problem, seat_problem
from ..base.times import parse_time, utc_now
from ..base.triggers import TRIGGER_LIMIT, trigger_problem
from ..base.vocabulary import (
    CLAIMABLE_PROVENANCES,
    KINDS,
    MOVE_BY_EVENT,
    PRIORITIES,
    SCOPES,
    TRIGGER_ATTRIBUTES,
    TRIGGER_NAMES,
    TextError,
    Trigger,
)
from ..mirror.export import auto_export
from ..storage import protect
from ..storage.store import Store
from ..system.workspace import Workspace
from . import expiry

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..reads import drift
    from ..storage.transaction import Transaction


class Written:
    """What an act wrote: the note it made (add, supersede), the event it appended (a
    move, forget), or the dispute it opened; and notices from keeping the mirror current."""

    def __init__(self, note: Note | None = None, event: Event | None = None, dispute: str | None = None) -> None:
        self.note, self.event, self.dispute = note, event, dispute
        self.notices: list[str] = []
        self.repeats: list[Note] = []  # notes in force with the new note's very text


def note_text(raw: str) -> str:
    """A note's text as every write stores it; refused when empty, NUL-bearing or not
    UTF-8 (an argument made of undecodable bytes holds lone surrogates)."""
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise errors.Refused("the note text is not UTF-8") from None
    try:
        return normalize_text(raw)
    except TextError as exc:
        raise errors.Refused(str(exc)) from None


def reason_for(event_type: str, reason: str | None) -> str | None:
    """The reason, blank meaning none; refused where the move needs one."""
    if reason is not None and not reason.strip():
        reason = None
    move = MOVE_BY_EVENT[event_type]
    if move.needs_reason and reason is None:
        raise errors.BadInput(f"{move.command} needs a reason: -m REASON")
    return reason


def _written(store: Store, place: Workspace, result: Written) -> Written:
    result.notices = auto_export(store, place)
    return result


def anchored(place: Workspace, paths: list[str] | None, cwd: Path | None = None) -> tuple[tuple[str, str], ...]:
    """The anchors a write names, checked and with their content's object ids now (paths
    from `cwd` where it is in the work tree, else from its top: see qem_edit.system.anchors)."""
    if not paths:
        return ()
    from ..system import anchors  # only a write that names anchors asks git about the work tree

    tree = anchors.place_tree(place)
    return anchors.anchored(tree, paths, cwd or tree.top)


def declared(on: list[str] | None = None, when_path: list[str] | None = None,
             when_run: list[str] | None = None) -> tuple[Trigger, ...]:
    """The triggers a write declares (qem_edit.base.triggers), each checked as the log's reader
    checks it; BadInput naming the first that is not one."""
    given = [("on", v) for v in on or ()] + [("path", v) for v in when_path or ()] + [("run", v) for v in when_run or ()]
    for name, value in given:
        problem = trigger_problem(name, value)
        if problem:
            raise errors.BadInput(f"--{TRIGGER_ATTRIBUTES[name]} {value!r}: {problem}")
    out = tuple(sorted(set(given)))
    for name in TRIGGER_NAMES:
        if sum(1 for n, _ in out if n == name) > TRIGGER_LIMIT:
            raise errors.BadInput(f"more than {TRIGGER_LIMIT} --{TRIGGER_ATTRIBUTES[name]} values on one note")
    return out


def add(store: Store, place: Workspace, text: str, kind: str, priority: str, provenance: str, actor: str,
        agent: bool | None = None, allow_secret: bool = False, anchors: list[str] | None = None,
        cwd: Path | None = None, expires: str | None = None, ttl: str | None = None,
        triggers: tuple[Trigger, ...] = (), request: Request | None = None,
        scope: str | None = None, session: str | None = None, rests_on: list[str] | None = None) -> Written:
    """A new note; `anchors`: the files and folders it is about; its end as `expires` (a
    date or UTC time) or `ttl` (30d) ask, else its kind's default (qem_edit.writes.expiry), fixed
    from the event's own time; `request`: who owes it, by when, and what it answers;
    `scope` and `session`: where it holds (`scoped`); `rests_on`: the notes it rests on
    (qem_edit.base.resting)."""
    errors.choice(kind, KINDS, "kind")
    errors.choice(priority, PRIORITIES, "priority")
    if provenance == "human":
        raise errors.BadInput("provenance human is reached only by a person's act: `qem promote ID`")
    errors.choice(provenance, CLAIMABLE_PROVENANCES, "provenance")
    body, wish, ttls = note_text(text), expiry.asked(expires, ttl), expiry.defaults(place)
    anchoring = anchored(place, anchors, cwd)
    to, due, answers = requested(store, request)
    where, session = scoped(scope, session)
    if session is not None:
        store.session = session  # the writer reads as the session it writes for
    resting = bases(store, rests_on or [])

    def work(tx: Transaction) -> Note:
        return tx.create(NewNote(kind, priority, provenance, body, anchors=anchoring,
                                 expires=expiry.new_end(tx, kind, wish, ttls), triggers=triggers,
                                 to=to, due=due, answers=answers, scope=where, session=session, rests_on=resting), actor)

    note = store.write(work, agent=agent, allow_secret=allow_secret)
    written = _repeating(store, _written(store, place, Written(note=store.note(note.id))))
    written.notices += filter(None, [late_notice(written.note)])
    return written


def late_notice(note: Note | None, old: Note | None = None) -> str | None:
    """What a write says of a request whose deadline it gives and which is past already: it
    is recorded (a debt found late is still owed; the deadline is a fact, not a wish), and
    it is late from the start.  None where it is not, or keeps its predecessor's deadline."""
    from ..base.owing import duration, late_by

    late = None if note is None or (old is not None and old.due == note.due) else late_by(note, note.created_at)
    if late is None or note is None:
        return None
    return (f"note #{note.shown} is late already: due {note.due}, {duration(late)} before it was recorded;"
            " it is owed and late (`qem owed --late` lists it)")


SESSION_ENV = "QEM_SESSION"  # the agent session a plain command runs in (qem's SessionStart hook sets it)


def scoped(scope: str | None, session: str | None) -> tuple[str, str | None]:
    """Where a new note holds, checked (BadInput): `team` (the default), `private` (this
    clone), or `session` (the agent session `session` names, else QEM_SESSION; with
    neither, refused: a session note no session owns would never end)."""
    scope = scope or "team"
    errors.choice(scope, SCOPES, "scope")
    if scope != "session":
        if session is not None:
            raise errors.BadInput(f"--session names the session of a session note; this note's scope is {scope}")
        return scope, None
    session = session if session is not None else (os.environ.get(SESSION_ENV) or None)
    if session is None:
        raise errors.BadInput("--scope session: no agent session is known here; nothing was written",
                              hint=f"give its id: `--session ID`, or {SESSION_ENV}=ID in the environment (qem's"
                                   " SessionStart hook sets it for Claude Code's shell commands; the MCP tool"
                                   " `add` takes `session`)")
    problem = scope_problem("session", session)
    if problem:
        raise errors.BadInput(f"--session {session!r}: {problem}; nothing was written")
    return scope, session


def share(store: Store, place: Workspace, given: str, reason: str | None, actor: str,
          agent: bool | None = None, allow_secret: bool = False) -> Written:
    """`qem share ID`: a private note made a team note (decisions.decide_share), checked for
    secrets as every write is; returns the team note."""
    note_id = store.resolve(given)
    why = reason or "shared from this clone's private notes"
    twins: list[Note] = []

    def work(tx: Transaction) -> Note:
        old = tx.note(note_id)
        provenance = "agent" if old.provenance == "human" and protect.writes_as_agent(tx, actor) else old.provenance
        twins[:] = [n for n in repeats(store, [note_id]).get(note_id, []) if n.scope == "team"][:1]
        return tx.share(note_id, provenance, actor, why, twins[0] if twins else None)

    note = store.write(work, agent=agent, allow_secret=allow_secret)
    if twins:  # the killed share staged nothing: its team note's files are staged now, as a write's are
        store.tree.touched |= store.files_of_events([note.id]) | store.files_of_texts([note.id])
    written = _written(store, place, Written(note=store.note(note.id)))
    if twins:
        old = store.note(note_id)
        written.notices.append(f"note #{old.shown}'s text is in force already as team note #{note.shown} (a share"
                               f" that did not finish, or the team's own): #{old.shown} ends, superseded by it;"
                               " no second team note was made")
    return written


class Request(Record):
    """What a new note asks or answers, as a writer gives it: `to` the seat that owes it,
    `due` its deadline (a date, the end of that UTC day, or a UTC time), `answers` the
    request it answers (any id a reader takes)."""

    to: str | None = None
    due: str | None = None
    answers: str | None = None


def requested(store: Store, request: Request | None) -> tuple[str | None, str | None, str | None]:
    """A writer's `to`, `due` and `answers` checked, in their stored form (BadInput naming
    the option; NoSuchNote for an answer to no note)."""
    if request is None:
        return None, None, None
    if request.to is not None and seat_problem(request.to):
        raise errors.BadInput(f"--to {request.to!r}: {seat_problem(request.to)}")
    due = None if request.due is None else parse_time(request.due, "--due", end=True)
    answers = None if request.answers is None else store.resolve(request.answers)
    return request.to, due, answers


def bases(store: Store, given: Iterable[str], what: str = "--rests-on") -> tuple[str, ...]:
    """The notes a new note rests on, as a writer names them (any id a reader takes), each
    in plain force (BadInput naming it otherwise: a note out of force, or flagged stale, is
    no ground to stand on; rest on what holds now); NoSuchNote for an id of no note."""
    out: set[str] = set()
    now = utc_now()
    for name in given:
        base = store.note(store.resolve(name))
        refusal = resting.base_refusal(base, now, team=False, shown=lambda i: store.note(i).shown)
        if refusal:  # (a private base of a team note: decisions.decide_create, as for every way in)
            raise errors.BadInput(f"{what} {name}: {refusal}")
        out.add(base.id)
    if len(out) > REST_LIMIT:
        raise errors.BadInput(f"{what}: {len(out)} notes; a note rests on {REST_LIMIT} at most")
    return tuple(sorted(out))


def supersede(store: Store, place: Workspace, given: str, text: str, reason: str | None,
              actor: str, kind: str | None = None, priority: str | None = None,
              provenance: str | None = None, agent: bool | None = None, allow_secret: bool = False,
              anchors: list[str] | None = None, cwd: Path | None = None, expires: str | None = None,
              ttl: str | None = None, triggers: tuple[Trigger, ...] | None = None,
              rests_on: list[str] | None = None) -> Written:
    """A successor replaces the note (same kind, priority, provenance, anchored paths,
    end and triggers unless given, the anchors' content read now; an agent's successor is
    given its own provenance, so it never inherits `human`; it rests on what `rests_on`
    names, else on the note's bases still in plain force: re-pointing a note flagged for
    its base's change is superseding it)."""
    errors.choice(kind, KINDS, "kind")
    errors.choice(priority, PRIORITIES, "priority")
    errors.choice(provenance, CLAIMABLE_PROVENANCES, "provenance")
    body = note_text(text)
    why = reason_for("superseded", reason)
    wish = expiry.asked(expires, ttl)
    note_id = store.resolve(given)
    if anchors is None:
        anchors, cwd = [path for path, _ in store.note(note_id).anchors], None
    anchoring = anchored(place, anchors, cwd)
    resting = None if rests_on is None else bases(store, rests_on)

    def work(tx: Transaction) -> Note:
        old = tx.note(note_id)
        inherited = old.provenance
        if inherited == "human" and protect.writes_as_agent(tx, actor):
            inherited = "agent"  # a person's endorsement is not an agent's to carry over
        new = NewNote(kind or old.kind, priority or old.priority, provenance or inherited, body, note_id,
                      anchors=anchoring, expires=wish.at(tx.at, old.expires),
                      triggers=old.triggers if triggers is None else triggers,
                      to=old.to, due=old.due, answers=old.answers,  # the successor of a request is the request
                      scope=old.scope, session=old.session,  # and holds where it held
                      rests_on=kept_bases(tx, old) if resting is None else resting)
        return tx.create(new, actor, why)

    note = store.write(work, agent=agent, allow_secret=allow_secret)
    return _repeating(store, _written(store, place, Written(note=store.note(note.id))))


def kept_bases(tx: Transaction, old: Note) -> tuple[str, ...]:
    """The bases a successor keeps of its predecessor's: those still ground to rest on
    (resting.base_refusal: in plain force, not past its end; one that changed is what a
    person re-points by superseding)."""
    held = []
    for base in old.rests_on:
        try:
            if resting.base_refusal(tx.note(base), tx.at, team=False) is None:
                held.append(base)
        except errors.NoSuchNote:
            pass  # a base this log lacks (a branch not merged here) is not carried
    return tuple(held)


def repeats(store: Store, note_ids: list[str]) -> dict[str, list[Note]]:
    """For each of `note_ids` (notes just written), the other notes in force whose text is
    the same (texts are stored normalized, so this is sameness after normalization)."""
    found = {note_id: others for note_id, others in store.same_text_in_force(note_ids) if others}
    notes = store.notes_by_id({other for others in found.values() for other in others})  # read once for all
    out: dict[str, list[Note]] = {}
    for note_id, others in found.items():
        same = [notes[other] for other in others if other in notes]
        if same:
            out[note_id] = sorted(same, key=lambda n: (n.created_at, n.id))
    return out


REPEATS_NAMED = 3  # a notice names the oldest few repeats and counts the rest (--json lists all)


def repeat_notice(note: Note, same: list[Note]) -> str:
    named = ", ".join(f"#{n.shown}" for n in same[:REPEATS_NAMED])
    more = f" and {len(same) - REPEATS_NAMED} more" if len(same) > REPEATS_NAMED else ""
    return (f"note #{note.shown} repeats note {named}{more}, in force with the same text; if it adds nothing,"
            f" `qem revoke {note.shown} -m \"repeats #{same[0].shown}\"`")


def _repeating(store: Store, written: Written) -> Written:
    assert written.note is not None
    if expiry.born_ended([written.note]):  # given an end already past: recorded, never in force (no repeat)
        written.notices.append(expiry.ended_notice(written.note))
        return written
    written.repeats = repeats(store, [written.note.id]).get(written.note.id, [])
    if written.repeats:
        written.notices.append(repeat_notice(written.note, written.repeats))
    return written


def anchors_now(place: Workspace, note: Note, said: list[str] | None = None) -> tuple[tuple[str, str], ...] | None:
    """A note's anchored paths with the object id each holds now, a path that went left
    out (None: the note has no anchors).  What a person confirms by reinstating the note,
    so that the change that flagged it never flags it again.

    "Now" is what is committed next: git's index, where it holds the path.  A path with
    unstaged changes is confirmed as staged, never as the work tree holds it: those changes
    may never be committed, and an anchor to content no commit holds drifts in every fresh
    clone; if they are, the commit carrying them flags the note, which is when a person
    should look again.  `said` gets a line per such path."""
    if not note.anchors:
        return None
    from ..system import anchors

    tree = anchors.work_tree(place.root)
    out = []
    for path, _ in note.anchors:
        work = anchors.worktree_oid(tree, path)
        staged = anchors.index_oid(tree, path) if tree.git else None
        if staged is not None and staged != work and said is not None:
            said.append(f"anchor {path}: {'deleted' if work is None else 'changed'} in the work tree and not staged;"
                        f" note #{note.shown} is confirmed against what git's index holds (what the next commit"
                        f" carries); to confirm it against the change, `git add {path}` and reinstate it again")
        oid = staged if staged is not None else work
        if oid is not None:
            out.append((path, oid))
    return tuple(out)


def move(store: Store, place: Workspace, event_type: str, given: str, reason: str | None, actor: str,
         agent: bool | None = None) -> Written:
    """A lifecycle move on one note: revoked, stale_flagged, reinstated, promoted, expired
    (a reinstated note's anchors read anew: anchors_now)."""
    why = reason_for(event_type, reason)
    note_id = store.resolve(given)
    said: list[str] = []
    again = anchors_now(place, store.note(note_id), said) if event_type == "reinstated" else None
    event = store.write(lambda tx: tx.emit(note_id, event_type, actor, why, anchors=again), agent=agent)
    written = _written(store, place, Written(event=event, note=store.note(note_id)))
    written.notices[:0] = said
    return written


def flag_drift(store: Store, place: Workspace, report: "drift.Report", actor: str,
               agent: bool | None = None) -> "drift.Report":
    """`qem anchors check --flag`: each drifted note (still active, under the write lock)
    re-anchored where its content moved and flagged stale where it changed or went, all
    in one check-in; the report then says what was written."""
    from ..base.ids import new_checkin_id

    if not report.notes:
        return report
    place.config()  # a writer's config is checked before anything is written
    checkin = new_checkin_id()
    held = _unstaged_moves(place, report)

    def work(tx: Transaction) -> list[str]:
        done = []
        for found in report.notes:  # as the check saw it, still: another writer may have come first
            if found.note.id in held:
                continue
            now = tx.note(found.note.id)
            if now.state == "active" and now.anchors == found.note.anchors:
                tx.drift(found.note.id, found.drifted, actor, checkin)
                done.append(found.note.id)
        return done

    written = store.notes_by_id(store.write(work, agent=agent))
    report.notes = [found for found in report.notes if found.note.id in written or found.note.id in held]
    for found in report.notes:  # the rest were written before
        if found.note.id in held:
            continue
        moved_only = all(d.moved_to is not None for d in found.drifted)
        (report.reanchored if moved_only else report.flagged).append(written[found.note.id])
    report.checkin = checkin if written else None
    report.notices = list(held.values()) + auto_export(store, place)
    return report


def _unstaged_moves(place: Workspace, report: "drift.Report") -> dict[str, str]:
    """Of a work-tree check's drifted notes, those whose anchor moved to a path git's index
    does not hold with that content (a `mv` not yet staged), each with what to say: note
    id -> the line.  Re-anchored there, a note would name a path no commit holds, gone in
    every fresh clone; the move is staged first, as a reinstatement confirms what is."""
    from ..reads import drift
    from ..system import anchors

    if report.judged != drift.WORK_TREE:
        return {}
    tree = anchors.work_tree(place.root)
    held: dict[str, str] = {}
    for found in report.notes if tree.git else ():
        for d in found.drifted:
            if d.moved_to is not None and anchors.index_oid(tree, d.moved_to) != d.was:
                held[found.note.id] = (f"anchor {d.path} moved to {d.moved_to} in the work tree only (git's index"
                                       f" does not hold the move): note #{found.note.shown} is not re-anchored to a"
                                       f" path no commit holds; stage the move (`git add -A {d.path} {d.moved_to}`,"
                                       " or `git mv`) and run `qem anchors check --flag` again")
                break
    return held


def forget(store: Store, place: Workspace, given: str, reason: str | None, actor: str,
           agent: bool | None = None) -> Written:
    """Erase the note's text from the log, then from every file qem wrote (see
    qem_edit.writes.forgetting); the notices name what could not be cleaned."""
    from .forgetting import scrub

    why = reason_for("forgotten", reason)
    note_id = store.resolve(given)
    text = store.note(note_id).text
    event = store.write(lambda tx: tx.forget(note_id, actor, why or ""), agent=agent)
    written = _written(store, place, Written(event=event, note=store.note(note_id)))
    if text:
        written.notices += scrub(store, place, store.note(note_id), text)
    return written


def dispute(store: Store, place: Workspace, a: str, b: str, reason: str | None, actor: str,
            agent: bool | None = None) -> Written:
    why = reason_for("disputed", reason) or ""
    first, second = store.resolve(a), store.resolve(b)
    dispute_id = store.write(lambda tx: tx.dispute(first, second, actor, why), agent=agent)
    return _written(store, place, Written(dispute=dispute_id))


def rule(store: Store, place: Workspace, given: str, keep: str, reason: str | None, actor: str,
         agent: bool | None = None) -> Written:
    """Settle a disagreement.  `given` names a dispute between two notes (its id, or a
    prefix), and `keep` the note that stands; or a note whose concurrent changes disagree,
    and `keep` the side that stands (the characters its DISPUTED marker shows); or a note
    several live notes supersede (a fork), and `keep` the successor that stands."""
    why = reason_for("ruled", reason) or ""
    try:
        dispute_id = store.dispute_id(given.lstrip("#"))
    except errors.NoSuchNote:
        note = store.note(store.resolve(given))
        if note.rivals:
            side = _side(note, keep)
            store.write(lambda tx: tx.settle(note.id, side, actor, why), agent=agent)
        else:  # a fork: the successor that stands
            if sum(1 for n in store.notes() if n.supersedes == note.id and n.live) < 2:
                raise errors.Refused(f"note #{note.shown} has no concurrent changes or fork to rule on")
            kept = store.resolve(keep)
            store.write(lambda tx: tx.rule_fork(note.id, kept, actor, why), agent=agent)
        return _written(store, place, Written(note=store.note(note.id)))
    kept = store.resolve(keep)
    store.write(lambda tx: tx.rule(dispute_id, kept, actor, why), agent=agent)
    return _written(store, place, Written(dispute=dispute_id))


def _side(note: Note, keep: str) -> str:
    sides = [r.tip for r in note.rivals if r.tip.startswith(keep.lower())]
    if len(sides) == 1:
        return sides[0]
    shown = ", ".join(f"{ids.side_shown(r.tip)} ({r.type})" for r in note.rivals)
    raise errors.BadInput(f"--keep {keep!r} names {'none' if not sides else 'several'} of #{note.shown}'s sides: {shown}")
