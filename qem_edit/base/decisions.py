"""A writer's decisions: the notes an act concerns in, the events it appends (drafts) out.

Each act of a writer is decided here, in pure code, from the notes it concerns; the store
only gives the drafts their time, actor, clock, place in the note's history and id,
writes them, and saves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from . import ids
from .records import Record
from .replay import Note, check_transition
from .stored_form import normalize_text
from .triggers import trigger_data
from .vocabulary import TransitionError, Trigger


class NewNote(Record):
    """The content of a note about to be created."""

    kind: str
    priority: str
    provenance: str
    text: str
    supersedes: str | None = None
    anchors: tuple[tuple[str, str], ...] = ()  # (path, object id), as anchors_of gives them
    expires: str | None = None  # its end, a UTC time (None: none)
    triggers: tuple[Trigger, ...] = ()  # (name, value), as triggers_of gives them
    to: str | None = None  # who owes it (a request)
    due: str | None = None  # its deadline, a UTC time
    answers: str | None = None  # the request it answers, a note id
    scope: str = "team"  # SCOPES
    session: str | None = None  # a session note's session
    rests_on: tuple[str, ...] = ()  # the notes it rests on, ids


class Draft(Record):
    """An event decided but not yet written: the store gives it its time, actor, clock,
    the events it follows, and its id (`note` None: a note created by this draft)."""

    note: str | None
    type: str
    reason: str | None = None
    data: Mapping[str, object] = MappingProxyType({})
    text: str | None = None  # a created note's text, stored apart from its event


NEW_NOTE = "@created"  # in a draft's data, or as its note: the id of the note its batch creates


def decide_move(note: Note, event_type: str, reason: str | None = None,
                anchors: tuple[tuple[str, str], ...] | None = None) -> Draft:
    """A lifecycle move on one note (revoke, flag stale, reinstate, expire, promote).
    `anchors`: on a reinstatement, the note's anchored paths as they are now (a person
    confirms the note over the content now, so the same change never flags it again);
    recorded where they differ from what the note holds."""
    check_transition(note, event_type)
    data: dict[str, object] = {"from": note.provenance} if event_type == "promoted" else {}
    if event_type == "reinstated" and anchors is not None and tuple(sorted(anchors)) != note.anchors:
        data["anchors"] = _anchor_list(anchors)
    return Draft(note.id, event_type, reason, data)


def _anchor_list(anchors: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"path": path, "oid": oid} for path, oid in sorted(anchors)]


class Drifted(Record):
    """One anchor whose content is not what its note recorded: `now` the object id the
    path holds (None: gone), `moved_to` where the same content is now (a move)."""

    path: str
    was: str
    now: str | None
    moved_to: str | None = None

    @property
    def what(self) -> str:
        if self.moved_to is not None:
            return "moved"
        return "deleted" if self.now is None else "changed"

    def words(self) -> str:
        """What happened, in a stale flag's reason and the check's report."""
        if self.moved_to is not None:
            return f"anchor {self.path} moved to {self.moved_to} (the same content, {self.was[:12]})"
        if self.now is None:
            return f"anchor {self.path} was deleted (it held {self.was[:12]})"
        return f"anchor {self.path} changed ({self.was[:12]} → {self.now[:12]})"


def decide_drift(note: Note, drifted: list[Drifted]) -> list[Draft]:
    """A note whose anchored content drifted: the moved anchors follow their content (an
    `anchored` event, no flag), and a change or a deletion flags the note stale, its
    reason and `data.drift` naming each path and what it held and holds."""
    drafts = []
    moved = [d for d in drifted if d.moved_to is not None]
    if moved:
        check_transition(note, "anchored")
        where = {d.path: d.moved_to for d in moved}
        anchors = [(where.get(path, path), oid) for path, oid in note.anchors]
        data = {"anchors": _anchor_list(anchors), "moved": [{"from": d.path, "to": d.moved_to} for d in moved]}
        drafts.append(Draft(note.id, "anchored", "; ".join(d.words() for d in moved), data))
    lost = [d for d in drifted if d.moved_to is None]
    if lost:
        check_transition(note, "stale_flagged")
        data = {"drift": [{"path": d.path, "was": d.was, "now": d.now} for d in lost]}
        drafts.append(Draft(note.id, "stale_flagged", "; ".join(d.words() for d in lost), data))
    return drafts


def decide_create(new: NewNote, old: Note | None, reason: str | None = None,
                  answered: Note | None = None, bases: tuple[Note, ...] = (), at: str | None = None) -> list[Draft]:
    """A new note (its text normalized, as every way in stores it), and, when it replaces
    `old`, the supersession of `old`; `answered`: the note its `answers` names, where the
    log holds it; `bases`: the notes it rests on that the log holds; when its end is at or
    before `at` (the write's time), its expiry too, in the same write: a fact already past
    its end keeps it, recorded, and is never in force.  Raises TextError or TransitionError."""
    text = normalize_text(new.text)
    if old is not None:
        check_transition(old, "superseded")
        _check_scopes(new, old)
    _check_bases(new, bases)
    _check_answered(new, answered)
    refusal = request_refusal(new, old, answered)
    if refusal:
        raise TransitionError(refusal)
    data = {"kind": new.kind, "priority": new.priority, "provenance": new.provenance,
            "supersedes": old.id if old is not None else None}
    if new.anchors:
        data["anchors"] = _anchor_list(new.anchors)
    if new.expires is not None:  # only then: every other created event keeps its bytes
        data["expires"] = new.expires
    if new.triggers:
        data["triggers"] = trigger_data(new.triggers)
    for name in ("to", "due", "answers"):  # only when given: every other created event keeps its bytes
        if getattr(new, name) is not None:
            data[name] = getattr(new, name)
    if new.scope != "team":  # only then, as above
        data["scope"] = new.scope
        if new.scope == "session":
            data["session"] = new.session
    if new.rests_on:
        data["rests_on"] = sorted(set(new.rests_on))
    drafts = [Draft(None, "created", reason, data, text)]
    if old is not None:
        drafts.append(Draft(old.id, "superseded", reason, {"by": NEW_NOTE}))
    if new.expires is not None and at is not None and new.expires <= at:
        drafts.append(Draft(NEW_NOTE, "expired", ENDED_WHEN_WRITTEN))
    return drafts


ENDED_WHEN_WRITTEN = "past its end when written"  # the reason of the expiry a write of such a note adds


def _check_scopes(new: NewNote, old: Note) -> None:
    """A successor holds where its note held: a team note's successor in one clone would
    leave every other clone a team note superseded by a note it never sees (`qem share`
    makes a private note a team one)."""
    if (new.scope, new.session) != (old.scope, old.session):
        where = old.scope if old.scope != "session" else f"session {old.session}"
        raise TransitionError(f"note #{old.shown} is a {where} note: its successor must be one too"
                              f" ({_LOCAL_WAY.get(old.scope, _LOCAL_WAY['private']).format(shown='ID' if old.scope == 'team' else old.shown)})")


def _check_bases(new: NewNote, bases: tuple[Note, ...]) -> None:
    """A team note rests on team notes only (`team_base_refusal`)."""
    for base in bases if new.scope == "team" else ():
        refusal = team_base_refusal(base)
        if refusal:
            raise TransitionError(refusal)


def team_base_refusal(base: Note, name: str | None = None) -> str | None:
    """Why a team note cannot rest on `base` (None: it can): a private or session note,
    which every other clone lacks, would be named by a committed event.  `name`: how the
    message names it (`note #ID`)."""
    if not base.local:
        return None
    return (f"{name or f'note #{base.shown}'} is a {base.scope} note: a team note cannot rest on it"
            f" ({_LOCAL_WAY[base.scope].format(shown=base.shown)})")


_LOCAL_WAY = {"private": "`qem share {shown}` makes a private note a team note",
              "session": "a session note cannot be shared: it holds for its agent session only"}


def _check_answered(new: NewNote, answered: Note | None) -> None:
    """A team note answers team requests only, as it rests on team notes only: its
    committed `answers` would name a note every other clone lacks."""
    if new.scope == "team" and answered is not None and answered.local:
        where = "private" if answered.scope == "private" else f"session {answered.session}"
        raise TransitionError(f"cannot answer note #{answered.shown}: it is a {where} note, and a team note's answer"
                              " is committed where every other clone lacks it; answer it with a note of its scope"
                              f" (`qem add TEXT -k KIND --answers {answered.shown} --scope {answered.scope}`)"
                              f"{_SHARE_HINT.get(answered.scope, '')}; nothing was written")


_SHARE_HINT = {"private": ", or `qem share` the request first"}


def decide_share(note: Note, provenance: str, reason: str, twin: Note | None = None,
                 local: frozenset[str] = frozenset(), successor: Note | None = None) -> list[Draft]:
    """A private note made a team note: a team note of the same content (its anchors as
    recorded), created without a pointer to the private one (every other clone would read
    a pointer to a note it never sees), and the private one superseded by it here.
    `local`: the notes it answers or rests on that are private or session notes: the team
    note keeps its other pointers and drops these (a committed pointer to a note only this
    clone holds).  `successor`: the note that superseded it, when it did.
    `twin`: a team note in force with the private one's text already (the one a share
    killed between its two writes made: the team note is in the log, the private one's
    end is not); the private one is then superseded by it, and no second team note made."""
    if note.scope != "private":
        raise TransitionError(f"note #{note.shown} is a {note.scope} note; only a private note is shared"
                              + (" (it is the team's already)" if note.scope == "team" else
                                 " (a session note holds for its agent session only: add its text anew as a team"
                                 " note)" if note.scope == "session" else ""))
    if note.state == "superseded" and successor is not None and successor.scope == "team":
        raise TransitionError(f"note #{note.shown} was shared already: team note #{successor.shown} holds it")
    check_transition(note, "superseded")
    if twin is not None:
        return [Draft(note.id, "superseded", reason, {"by": twin.id})]
    new = NewNote(note.kind, note.priority, provenance, note.text or "", anchors=note.anchors, expires=note.expires,
                  triggers=note.triggers, to=note.to, due=note.due,
                  answers=note.answers if note.answers not in local else None,
                  rests_on=tuple(b for b in note.rests_on if b not in local))
    [created] = decide_create(new, None, reason)
    return [created, Draft(note.id, "superseded", reason, {"by": NEW_NOTE})]


def request_refusal(new: NewNote, old: Note | None, answered: Note | None) -> str | None:
    """What a writer refuses in a new note's request fields (None: nothing), judged only
    where the note sets them anew (a successor keeping its predecessor's is not judged
    again): a deadline after the note's end (expired, it is no longer owed, so the deadline
    would never come), and an answer to a note that is not a request (names no `to` or
    `due`: nothing is owed there to answer).  A write's decision, as a move's from-states
    are: a log file or a load, history already written, is read as it is."""
    what = f"the successor of #{old.shown}" if old is not None else "the new note"
    refusal = deadline_refusal(what, new.due, new.expires, old)
    if refusal:
        return refusal + "; nothing was written"
    if answered is not None and (old is None or old.answers != answered.id):
        refusal = answer_refusal(answered)
        return refusal and refusal + "; nothing was written"
    return None


def answer_refusal(answered: Note) -> str | None:
    """Why a new answer to `answered` is refused (None: it is a request, which may be)."""
    if answered.to is not None or answered.due is not None:
        return None
    return (f"cannot answer note #{answered.shown}: it is not a request (it names no `to` or `due`), so nothing is"
            f" owed there to answer; make it one (in MEMORY.md, `to NAME · ` or `due DATE · ` before its text, then"
            " `qem checkin`) or answer nothing")


def deadline_refusal(what: str, due: str | None, end: str | None, old: Note | None) -> str | None:
    """A deadline after the note's end, set anew (None: not so): expired, a request is no
    longer owed, so its deadline would never come.  A check-in's plan says it on the item's
    line; `decide_create` for every write."""
    if due is None or end is None or due <= end or (old is not None and (old.due, old.expires) == (due, end)):
        return None
    return (f"{what} is due {due} but ends (expires) {end}, before its deadline: once expired it is no longer owed;"
            " give an end after the deadline (`--expires DATE` or `--expires none`; in MEMORY.md, its `expires`"
            " marker) or an earlier deadline")


def decide_forget(note: Note, reason: str) -> Draft:
    """The tombstone; the store then deletes the note's text from the log."""
    check_transition(note, "forgotten")
    return Draft(note.id, "forgotten", reason)


def decide_dispute(a: Note, b: Note, dispute_id: str, reason: str) -> list[Draft]:
    """A dispute between two live notes: an event on each, neither note edited."""
    if a.id == b.id:
        raise TransitionError("a note cannot dispute itself")
    for note, other in ((a, b), (b, a)):
        check_transition(note, "disputed")
        if any(with_ == other.id for _, with_ in note.disputes):
            raise TransitionError(f"notes #{a.shown} and #{b.shown} already have an open dispute")
    return [
        Draft(a.id, "disputed", reason, {"dispute": dispute_id, "with": b.id}),
        Draft(b.id, "disputed", reason, {"dispute": dispute_id, "with": a.id}),
    ]


def decide_rule(dispute_id: str, sides: tuple[Note, Note], keep: str, reason: str) -> list[Draft]:
    """Close a dispute between two notes: `keep` stands, the other side is revoked in its
    favour.  `sides` are the two notes the dispute was opened between."""
    first, second = sides
    shown = ids.side_shown(dispute_id)
    if keep not in (first.id, second.id):
        raise TransitionError(f"dispute {shown} is between #{first.shown} and #{second.shown}; --keep one of them")
    kept, other = (first, second) if keep == first.id else (second, first)
    if not any(d == dispute_id for d, _ in kept.disputes):
        raise TransitionError(f"dispute {shown} is already closed")
    if not (kept.live and other.live):
        raise TransitionError(f"dispute {shown} is already settled: one side is no longer in force")
    data = {"dispute": dispute_id, "kept": keep}
    return [
        Draft(kept.id, "ruled", reason, data),
        Draft(other.id, "ruled", reason, data),
        Draft(other.id, "revoked", f"ruling on dispute {shown}, #{kept.shown} stands: {reason}"),
    ]


def decide_settle(note: Note, keep: str, reason: str) -> Draft:
    """Settle a note's concurrent changes: the side whose last event is `keep` (a tip,
    as its rival lists it) stands; the ruling follows every side, so a side merged in
    later, which it did not see, reopens the dispute."""
    if not note.rivals:
        raise TransitionError(f"note #{note.shown} has no concurrent changes to rule on")
    tips = [r.tip for r in note.rivals]
    if keep not in tips:
        raise TransitionError(f"--keep names none of #{note.shown}'s sides: " + ", ".join(ids.shown(t) for t in tips))
    return Draft(note.id, "ruled", reason, {"keep": keep})


def decide_fork(parent: Note, successors: list[Note], keep: str, reason: str) -> list[Draft]:
    """Settle a fork (several live notes supersede `parent`): the successor `keep` stands,
    every other live successor is revoked in its favour."""
    live = [n for n in successors if n.live]
    if len(live) < 2:
        raise TransitionError(f"note #{parent.shown} has no concurrent changes or fork to rule on")
    kept = [n for n in live if n.id == keep]
    if not kept:
        names = ", ".join(f"#{n.shown}" for n in live)
        raise TransitionError(f"--keep names none of the notes that supersede #{parent.shown}: {names}")
    why = f"ruling on the fork of #{parent.shown}, #{kept[0].shown} stands: {reason}"
    return [Draft(n.id, "revoked", why) for n in live if n.id != keep]
