"""The replay: a note's events folded into the note, the Event and Note records it speaks.

A note's events form a small graph: each event names the events of that note its writer
had seen (`prev`), so two writers on two branches who change the same note make two
branches of it.  Replay folds each branch from where it left the other; where the
branches reach the same end (both revoked the note) they agree, where they do not (one
revoked it, the other superseded it) the note is in dispute: it stays as it was where
they parted, and each side is listed, until a ruling or an edit settles it.  The order
in which events arrived never matters: the same set gives the same notes on every clone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from . import ids
from .records import Record
from .stored_form import anchors_of, is_timestamp, rests_on_problem, seat_problem
from .triggers import trigger_data, triggers_of
from .vocabulary import (
    KIND_RANK,
    LIVE_STATES,
    LOCAL_SCOPES,
    MOVE_BY_EVENT,
    MOVE_BY_TARGET,
    MOVE_BY_VERB,
    PRIORITIES,
    PROVENANCES,
    SCOPE_MARKS,
    LogError,
    Move,
    TransitionError,
    Trigger,
)


class Event(Record):
    id: str
    note: str
    type: str
    at: str
    actor: str
    reason: str | None = None
    checkin: str | None = None
    data: Mapping[str, object] = MappingProxyType({})
    clock: int = 1
    prev: tuple[str, ...] = ()

    @property
    def order(self) -> tuple[int, str]:
        """The total order every clone agrees on: Lamport clock, then id."""
        return (self.clock, self.id)

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "note": self.note,
            "type": self.type,
            "at": self.at,
            "actor": self.actor,
            "reason": self.reason,
            "checkin": self.checkin,
            "clock": self.clock,
            "prev": list(self.prev),
            "data": dict(self.data),
        }


class Rival(Record):
    """One side of a dispute over a note's state: the branch's last event (`tip`, what a
    ruling keeps) and the event that set the state it reached."""

    tip: str
    event: str
    type: str
    actor: str
    at: str
    reason: str | None
    state: str
    superseded_by: str | None = None


TEXT_MISSING = "(text missing from this commit)"  # how a note without its text file is shown


class Note(Record):
    id: str
    kind: str
    priority: str
    text: str | None  # None once forgotten (or while its text is missing from the log)
    provenance: str
    created_at: str
    actor: str
    supersedes: str | None = None
    superseded_by: str | None = None
    state: str = "active"
    # the event that put the note in its state (None while it was never changed)
    state_at: str | None = None
    state_reason: str | None = None
    state_actor: str | None = None
    state_event: str | None = None
    # a `supersedes` value in the log that is not a note id, kept as given
    bad_pointer: str | None = None
    # open disputes with other notes: (dispute id, the other note's id)
    disputes: tuple[tuple[str, str], ...] = ()
    # concurrent changes of this note's state that disagree (an open dispute)
    rivals: tuple[Rival, ...] = ()
    short: str = ""  # the id MEMORY.md shows (set by the store, which knows every id)
    alias: int | None = None  # the note's number in a store converted from numeric ids
    short_len: int = 4  # the short-id length the note was created with
    text_hash: str | None = None
    erased_since: bool = False  # shown as it was (`--at`), its text erased by a later forget
    # the files and folders the note is about: (path from the work tree's top, the git
    # object id its content had when the note was written), in path order
    anchors: tuple[tuple[str, str], ...] = ()
    expires: str | None = None  # the note's end (a UTC time, its created event's `expires`): due for expiry then
    triggers: tuple[Trigger, ...] = ()  # when it is delivered to an agent, as it declares (TRIGGER_NAMES)
    # a request: the seat that owes it (`to`) and its deadline (`due`, a UTC time); an answer:
    # the request it answers (`answers`, a note id: a pointer like `supersedes`, never an
    # edit of the request), all from its created event's data
    to: str | None = None
    due: str | None = None
    answers: str | None = None
    scope: str = "team"  # SCOPES: where the note holds
    session: str | None = None  # a session note's session (the harness's id)
    # the notes it rests on (ids, in order, from its created event): when one of them
    # leaves plain force (superseded, revoked, expired, forgotten, flagged stale), this
    # note is flagged stale in the same write (`decide_dependents`)
    rests_on: tuple[str, ...] = ()

    @property
    def local(self) -> bool:
        """Kept in this clone alone (private or session): never in a committed file."""
        return self.scope in LOCAL_SCOPES

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def text_missing(self) -> bool:
        """No text, and no forget took it: its text file did not come with the commit."""
        return self.text is None and self.state != "forgotten" and not self.erased_since

    def first_line(self) -> str:
        """The text's first line, or what stands for a text there is none of."""
        if self.text is None:
            return TEXT_MISSING if self.text_missing else "(forgotten)"
        return self.text.split("\n", 1)[0]

    @property
    def shown(self) -> str:
        return self.short or self.id

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "short": self.shown,
            "alias": self.alias,
            "kind": self.kind,
            "priority": self.priority,
            "text": self.text,
            "provenance": self.provenance,
            "state": self.state,
            "created_at": self.created_at,
            "actor": self.actor,
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
            "state_at": self.state_at,
            "state_reason": self.state_reason,
            "disputes": [{"dispute": d, "with": other} for d, other in self.disputes],
            "rivals": [r._asdict() for r in self.rivals],
            "bad_pointer": self.bad_pointer,
            "anchors": [{"path": path, "oid": oid} for path, oid in self.anchors],
            "expires": self.expires,
            "triggers": trigger_data(self.triggers),
            "to": self.to,
            "due": self.due,
            "answers": self.answers,
            "scope": self.scope,
            "session": self.session,
            "rests_on": list(self.rests_on),
        }


def scope_mark(note: Note) -> str:
    """How every read marks a note that is not the team's ("" for a team note)."""
    return SCOPE_MARKS.get(note.scope, "")


def sort_key(note: Note) -> tuple[int, str]:
    """The projection's total order: kind rank, then note id."""
    return (KIND_RANK[note.kind], note.id)


def check_transition(note: Note, event_type: str) -> None:
    """Raise TransitionError when `event_type` makes no sense for `note` now."""
    move = MOVE_BY_EVENT[event_type]
    if note.state not in move.sources:
        raise TransitionError(f"cannot {move.refusal} note #{note.shown}: it is {note.state}")
    if move.verb == "promote" and note.provenance == "human":
        raise TransitionError(f"note #{note.shown} is already provenance human")


def after_event(note: Note, event: Event) -> Note:
    """The note once `event` (on it, not its creation) is folded in.  Raises
    TransitionError (a move that makes no sense here) or LogError (malformed data)."""
    move = MOVE_BY_EVENT.get(event.type)
    if move is None:
        raise LogError(f"event {event.id}: unknown event type {event.type!r}")
    check_transition(note, event.type)
    if "anchors" in event.data:  # a re-anchoring, or a reinstatement that read the content anew
        note = note._replace(anchors=_anchors_after(note, event))
    if event.type == "stale_flagged" and "drift" in event.data:
        _check_drift(note, event)
    if move.verb == "anchor":
        return note
    if move.verb == "promote":
        return note._replace(provenance="human")
    if move.verb in ("dispute", "rule"):
        return note._replace(disputes=_disputes_after(note, event))
    return note._replace(**_state_change(move, event))


def _anchors_after(note: Note, event: Event) -> tuple[tuple[str, str], ...]:
    """The anchors an event gives its note, held to what a writer makes (LogError where a
    hand-written event asks more): a re-anchoring moves exactly the paths it names, to
    paths the note did not hold, keeping each content's id; a reinstatement reads the
    note's own paths anew, and may only drop those that went."""
    given = anchors_of(event.data)
    if event.type == "anchored":
        moved = {str(m["from"]): str(m["to"]) for m in event.data.get("moved", [])}  # type: ignore[union-attr]
        held = dict(note.anchors)
        expected = tuple(sorted((moved.get(path, path), oid) for path, oid in note.anchors))
        if not set(moved) <= set(held) or set(moved.values()) & set(held) or given != expected:
            raise LogError(f"event {event.id}: a re-anchoring that moves other anchors than the note holds")
    elif not {path for path, _ in given} <= {path for path, _ in note.anchors}:
        raise LogError(f"event {event.id}: a reinstatement that anchors paths the note is not anchored to")
    return given


def _check_drift(note: Note, event: Event) -> None:
    """A drift flag names the note's own anchors, each with the id the note recorded
    (LogError otherwise: no check of qem's writes such a flag)."""
    held = dict(note.anchors)
    for entry in event.data["drift"]:  # type: ignore[union-attr]
        if held.get(entry["path"]) != entry["was"]:
            raise LogError(f"event {event.id}: a drift flag on {entry['path']!r}, which the note does not hold"
                           " with that content")


def _state_change(move: Move, event: Event) -> dict[str, object]:
    """The fields a state-changing event sets on its note."""
    changes: dict[str, object] = {
        "state": move.target,
        "state_at": event.at,
        "state_reason": event.reason,
        "state_actor": event.actor,
        "state_event": event.id,
    }
    if move.verb == "supersede":
        by = event.data.get("by")
        if not isinstance(by, str) or not by:
            raise LogError(f"event {event.id}: superseded event without a note id 'by'")
        changes["superseded_by"] = by
    elif move.verb == "forget":
        changes["text"] = None
    return changes


def _disputes_after(note: Note, event: Event) -> tuple[tuple[str, str], ...]:
    """The note's open disputes once a `disputed` (opens one) or `ruled` (closes one)
    event is folded in.  A ruling on the note's own concurrent changes names no dispute."""
    dispute, other = event.data.get("dispute"), event.data.get("with")
    if event.type == "ruled" and dispute is None:
        return note.disputes
    if not isinstance(dispute, str) or (event.type == "disputed" and not isinstance(other, str)):
        raise LogError(f"event {event.id}: {event.type} event without string 'dispute'/'with'")
    kept = tuple(d for d in note.disputes if d[0] != dispute)
    if event.type == "disputed":
        kept += ((dispute, str(other)),)
    return kept


def note_from_created(event: Event, text: str | None) -> Note:
    """A note as its `created` event makes it; `text` from the log's text record (None
    where there is none: forgotten, or missing)."""
    data = event.data
    kind, priority, provenance = data.get("kind"), data.get("priority"), data.get("provenance")
    if kind not in KIND_RANK:
        raise LogError(f"event {event.id}: unknown kind {kind!r}")
    if priority not in PRIORITIES:
        raise LogError(f"event {event.id}: unknown priority {priority!r}")
    if provenance not in PROVENANCES:
        raise LogError(f"event {event.id}: unknown provenance {provenance!r}")
    supersedes = data.get("supersedes")
    bad_pointer = None
    if supersedes is not None and not (isinstance(supersedes, str) and supersedes and supersedes != event.id):
        bad_pointer = repr(supersedes)  # recorded as given; the resolver names it
        supersedes = None
    alias, short_len = data.get("alias"), data.get("short", 4)
    return Note(
        id=event.id,
        kind=str(kind),
        priority=str(priority),
        text=text,
        provenance=str(provenance),
        created_at=event.at,
        actor=event.actor,
        supersedes=supersedes,
        bad_pointer=bad_pointer,
        alias=alias if isinstance(alias, int) and not isinstance(alias, bool) and 0 < alias < 2**62 else None,
        short_len=short_len if isinstance(short_len, int) and 1 <= short_len <= 26 else 4,
        text_hash=data.get("text") if isinstance(data.get("text"), str) else None,
        anchors=anchors_of(data),
        expires=_end(event),
        triggers=triggers_of(data),
        to=data.get("to") if seat_problem(data.get("to")) is None else None,
        due=str(data["due"]) if is_timestamp(data.get("due")) else None,
        answers=str(data["answers"]) if ids.is_id(data.get("answers")) and data["answers"] != event.id else None,
        scope=str(data["scope"]) if data.get("scope") in LOCAL_SCOPES else "team",
        session=str(data["session"]) if data.get("scope") == "session" and isinstance(data.get("session"), str) else None,
        rests_on=tuple(data["rests_on"]) if rests_on_problem(data, event.id) is None and "rests_on" in data else (),  # type: ignore[arg-type]
    )


def _end(event: Event) -> str | None:
    """A created event's `expires` (absent: the note has no end); LogError when it is not
    a UTC time (the log's reader sets such a file aside before it gets here)."""
    end = event.data.get("expires")
    if end is None and "expires" not in event.data:
        return None
    if not is_timestamp(end):
        raise LogError(f"event {event.id}: expires {end!r} is not a UTC time like 2026-07-27T10:00:00Z")
    return str(end)


def past_end(note: Note, now: str) -> bool:
    """Whether a note in force is past its end at `now` (a UTC time): due for `qem expire
    --due`.  Reading never expires it; only the sweep's event does.  The one test every
    read makes (qem_edit.reads.standing), with the words every read says it in:"""
    return note.live and note.expires is not None and note.expires <= now


PAST_MARK = "PAST ITS END"  # a note in force past its end, not swept yet
PAST_WHY = "not in force; `qem expire --due` expires it"


def past_end_words(note: Note) -> str:
    """`PAST ITS END 2026-02-01T00:00:00Z (not in force; ...)`: how a read that gives the
    note says it (a status's reason and `qem show` say the same, after a colon)."""
    return f"{PAST_MARK} {note.expires} ({PAST_WHY})"


# -- replay: a note from the graph of its events -------------------------------------------------


class Folded(Record):
    """A note after its events, with what could not be folded in (named, not fatal)."""

    note: Note
    problems: list[str]


def fold(events: Iterable[Event], text: str | None = None) -> Folded:
    """One note from all its events (any order; one `created` among them)."""
    events = events if isinstance(events, list) else list(events)
    if len(events) == 1 and events[0].type == "created":  # (most notes: made and never changed since)
        return Folded(note_from_created(events[0], text), [])
    ordered = sorted(events, key=lambda e: e.order)
    created = [e for e in ordered if e.type == "created"]
    if len(created) != 1:
        raise LogError(f"note {ordered[0].note if ordered else '?'}: {len(created)} created events")
    first = note_from_created(created[0], text)
    after: dict[str, Note] = {first.id: first}
    parents: dict[str, tuple[str, ...]] = {first.id: ()}
    problems: list[str] = []
    tips = {first.id}
    for event in ordered:
        if event.type == "created":
            continue
        seen = tuple(p for p in event.prev if p in after) or (first.id,)
        if len(seen) < len(event.prev):
            problems.append(f"event {event.id} follows events of #{first.id} that are not in the log")
        start = after[seen[0]] if len(seen) == 1 else _settled(seen, after, parents, event)
        after[event.id] = _folded_in(start, event, problems)
        parents[event.id] = seen
        tips = (tips - set(seen)) | {event.id}
    return Folded(_resolved(sorted(tips, key=lambda t: _order(t, ordered)), after, parents), problems)


def _order(event_id: str, ordered: list[Event]) -> int:
    return next(i for i, e in enumerate(ordered) if e.id == event_id)


def _folded_in(start: Note, event: Event, problems: list[str]) -> Note:
    try:
        return after_event(start, event)
    except (TransitionError, LogError) as exc:
        problems.append(f"event {event.id} ({event.type}) does not apply: {exc}")
        return start


def _settled(seen: tuple[str, ...], after: dict[str, Note], parents: dict, event: Event) -> Note:
    """Where an event that saw several branches of a note starts: a ruling keeps the side
    it names; any other event (an edit made while the note was in dispute) starts from
    the note as the branches left it, and settles them."""
    if event.type == "ruled" and event.data.get("keep") in after:
        return after[str(event.data["keep"])]._replace(rivals=())
    return _resolved(list(seen), after, parents)._replace(rivals=())


def _resolved(tips: list[str], after: dict[str, Note], parents: dict[str, tuple[str, ...]]) -> Note:
    """The note where its branches end: one branch, or branches that agree on its state;
    otherwise the state where they parted, with each branch's end as a rival."""
    if len(tips) == 1:
        return after[tips[0]]
    ends = [after[t] for t in tips]
    forgotten = [n for n in ends if n.state == "forgotten"]
    if forgotten:
        return forgotten[-1]  # forget is the one hard delete: no branch brings the text back
    base = after[_last_common(tips, parents, after)]
    changed = [(t, after[t]) for t in tips if after[t].state != base.state]
    anchored = [n.anchors for n in ends if n.anchors != base.anchors]  # the latest branch that re-anchored it
    merged = (changed[-1][1] if changed else base)._replace(
        provenance="human" if any(n.provenance == "human" for n in ends) else base.provenance,
        disputes=_merged_disputes(base, ends),
        anchors=anchored[-1] if anchored else base.anchors,
    )
    if len({n.state for _, n in changed}) <= 1:
        return merged
    rivals = tuple(_rival(tip, n) for tip, n in changed)
    return merged._replace(**{f: getattr(base, f) for f in _STATE_FIELDS}, rivals=rivals)


_STATE_FIELDS = ("state", "superseded_by", "state_at", "state_reason", "state_actor", "state_event")


def _rival(tip: str, note: Note) -> Rival:
    move = MOVE_BY_TARGET.get(note.state, MOVE_BY_VERB["reinstate"])
    return Rival(tip, note.state_event or tip, move.event, note.state_actor or note.actor,
                 note.state_at or note.created_at, note.state_reason, note.state, note.superseded_by)


def _merged_disputes(base: Note, ends: list[Note]) -> tuple[tuple[str, str], ...]:
    opened = {d for n in ends for d in n.disputes} - set(base.disputes)
    closed = {d for n in ends for d in base.disputes if d not in n.disputes}
    return tuple(sorted((set(base.disputes) | opened) - closed))


def _last_common(tips: list[str], parents: dict[str, tuple[str, ...]], after: dict[str, Note]) -> str:
    """The latest event every tip descends from (the note's creation at the least)."""
    common: set[str] | None = None
    for tip in tips:
        seen, stack = set(), [tip]
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(parents.get(node, ()))
        common = seen if common is None else common & seen
    order = list(after)  # events were folded in (clock, id) order
    return max(common or {order[0]}, key=order.index)


def replay(events: Iterable[Event], texts: Mapping[str, str] | None = None) -> dict[str, Note]:
    """Every note of `events` (any order), its text from `texts` (note id → text)."""
    by_note: dict[str, list[Event]] = {}
    for event in events:
        by_note.setdefault(event.note, []).append(event)
    texts = texts or {}
    return {note_id: fold(group, texts.get(note_id)).note for note_id, group in by_note.items()}
