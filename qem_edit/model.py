"""The note domain: kinds, states, events, and the replay that turns a log into notes.

Pure: no database, no clock, no terminal. The store, the renderer and the reconciler all
speak these types, and the transition table here is the one place that decides which
lifecycle moves make sense.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

KINDS: tuple[str, ...] = (
    "directive",
    "task",
    "gotcha",
    "finding",
    "reference",
    "decision",
    "operational",
)
KIND_RANK: dict[str, int] = {k: i for i, k in enumerate(KINDS)}
PRIORITIES: tuple[str, ...] = ("high", "medium", "low")
PROVENANCES: tuple[str, ...] = ("auto", "agent", "user-stated", "human")
# Provenances a writer may claim on `add`; `human` takes a person's act.
CLAIMABLE_PROVENANCES: tuple[str, ...] = ("auto", "agent", "user-stated")
STATES: tuple[str, ...] = ("active", "stale", "superseded", "revoked", "expired", "forgotten")
LIVE_STATES = frozenset({"active", "stale"})
_ANY = frozenset(STATES) - {"forgotten"}


@dataclass(frozen=True)
class Move:
    """One lifecycle move: the verb a person or a plan uses, the event it appends, the
    states it may leave from and the state it reaches (None: the state stays), how a plan
    shows it, and how a refusal words it ("cannot flag as stale note #3: it is revoked")."""

    verb: str
    event: str
    sources: frozenset[str]
    target: str | None
    sign: str
    refusal: str
    marker: bool = False  # asked for in MEMORY.md by writing or removing a state marker
    needs_reason: bool = False  # a writer must say why (-m)

    @property
    def shown(self) -> str:
        """The verb as a plan prints it: "flag stale"."""
        return self.verb.replace("_", " ")


# The lifecycle, written once.  Checks, plans, plan displays, refusals and the store's SQL
# constraint are all derived from this table; a stale note is still in force (flagged for
# review), so it can be revoked, expired or superseded too.  Its order is the order in
# which a plan counts its operations.
MOVES: tuple[Move, ...] = (
    Move("create", "created", frozenset(), "active", "+", "create"),
    Move("supersede", "superseded", LIVE_STATES, "superseded", "~", "supersede"),
    Move("revoke", "revoked", LIVE_STATES, "revoked", "-", "revoke", marker=True, needs_reason=True),
    Move("flag_stale", "stale_flagged", frozenset({"active"}), "stale", "!", "flag as stale", marker=True,
         needs_reason=True),
    Move("reinstate", "reinstated", frozenset({"revoked", "stale", "expired"}), "active", "^", "reinstate",
         marker=True),
    Move("expire", "expired", LIVE_STATES, "expired", "x", "expire", marker=True),
    Move("promote", "promoted", _ANY, None, "*", "promote"),
    Move("forget", "forgotten", _ANY, "forgotten", "#", "forget", needs_reason=True),
    Move("dispute", "disputed", LIVE_STATES, None, "?", "dispute", needs_reason=True),
    Move("rule", "ruled", _ANY, None, "=", "rule on", needs_reason=True),
)
MOVE_BY_VERB: dict[str, Move] = {m.verb: m for m in MOVES}
MOVE_BY_EVENT: dict[str, Move] = {m.event: m for m in MOVES}
EVENT_TYPES: tuple[str, ...] = tuple(m.event for m in MOVES)


def marker_move(before: str, after: str) -> Move | None:
    """The move a person asks for by changing a note's state marker from `before` to
    `after` (None: no single move does that)."""
    for move in MOVES:
        if move.marker and move.target == after and before in move.sources:
            return move
    return None


_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\Z")


class TextError(ValueError):
    """A note text that cannot be stored (empty, or holding a NUL)."""


class TransitionError(ValueError):
    """A lifecycle move that makes no sense for the note's current state."""


class LogError(ValueError):
    """An event that cannot be replayed (unknown type, unknown note, malformed data)."""


def normalize_text(text: str) -> str:
    """Normalize a note text once and for all, the way every write does.

    CRLF and CR become LF, trailing whitespace is stripped from each line, and leading and
    trailing blank lines are dropped.  Empty results and NUL characters are refused.
    """
    if "\x00" in text:
        raise TextError("note text contains a NUL character")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = [line.rstrip() for line in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise TextError("note text is empty")
    return "\n".join(lines)


def is_timestamp(value: object) -> bool:
    return isinstance(value, str) and bool(_TIMESTAMP.match(value))


@dataclass(frozen=True)
class Event:
    seq: int
    note_id: int
    type: str
    at: str
    actor: str
    reason: str | None = None
    checkin: str | None = None
    data: Mapping[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "seq": self.seq,
            "note_id": self.note_id,
            "type": self.type,
            "at": self.at,
            "actor": self.actor,
            "reason": self.reason,
            "checkin": self.checkin,
            "data": dict(self.data),
        }


@dataclass(frozen=True)
class Note:
    id: int
    kind: str
    priority: str
    text: str | None  # None once forgotten
    provenance: str
    created_at: str
    actor: str
    supersedes: int | None = None
    superseded_by: int | None = None
    state: str = "active"
    # the event that put the note in its state (None while it was never changed)
    state_at: str | None = None
    state_reason: str | None = None
    state_seq: int | None = None
    # a `supersedes` value in the log that is not a note id, kept as given (JSON)
    bad_pointer: str | None = None
    # open disputes: (dispute id, the other note's id)
    disputes: tuple[tuple[int, int], ...] = ()

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
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
            "bad_pointer": self.bad_pointer,
        }


def sort_key(note: Note) -> tuple[int, int]:
    """The projection's total order: kind rank, then note id."""
    return (KIND_RANK[note.kind], note.id)


def check_transition(note: Note, event_type: str) -> None:
    """Raise TransitionError when `event_type` makes no sense for `note` now."""
    move = MOVE_BY_EVENT[event_type]
    if note.state not in move.sources:
        raise TransitionError(f"cannot {move.refusal} note #{note.id}: it is {note.state}")
    if move.verb == "promote" and note.provenance == "human":
        raise TransitionError(f"note #{note.id} is already provenance human")


def apply_event(notes: dict[int, Note], event: Event) -> None:
    """Fold one event into `notes` (in place).  Raises LogError or TransitionError."""
    move = MOVE_BY_EVENT.get(event.type)
    if move is None:
        raise LogError(f"seq {event.seq}: unknown event type {event.type!r}")
    if move.verb == "create":
        notes[event.note_id] = note_from_created(event)
        return
    note = notes.get(event.note_id)
    if note is None:
        raise LogError(f"seq {event.seq}: event {event.type} for unknown note #{event.note_id}")
    check_transition(note, event.type)
    if move.verb == "promote":
        notes[note.id] = replace(note, provenance="human")
    elif move.verb in ("dispute", "rule"):
        notes[note.id] = replace(note, disputes=_disputes_after(note, event))
    else:
        notes[note.id] = replace(note, **_state_change(move, event))


def _state_change(move: Move, event: Event) -> dict[str, object]:
    """The fields a state-changing event sets on its note."""
    changes: dict[str, object] = {
        "state": move.target,
        "state_at": event.at,
        "state_reason": event.reason,
        "state_seq": event.seq,
    }
    if move.verb == "supersede":
        by = event.data.get("by")
        if not isinstance(by, int) or isinstance(by, bool):
            raise LogError(f"seq {event.seq}: superseded event without an integer 'by'")
        changes["superseded_by"] = by
    elif move.verb == "forget":
        changes["text"] = None
    return changes


def _disputes_after(note: Note, event: Event) -> tuple[tuple[int, int], ...]:
    """The note's open disputes once a `disputed` (opens one) or `ruled` (closes one)
    event is folded in."""
    dispute, other = event.data.get("dispute"), event.data.get("with")
    if not _is_id(dispute) or (event.type == "disputed" and not _is_id(other)):
        raise LogError(f"seq {event.seq}: {event.type} event without integer 'dispute'/'with'")
    kept = tuple(d for d in note.disputes if d[0] != dispute)
    if event.type == "disputed":
        kept += ((int(dispute), int(other)),)  # type: ignore[arg-type]
    return kept


def note_from_created(event: Event) -> Note:
    data = event.data
    kind, priority, provenance = data.get("kind"), data.get("priority"), data.get("provenance")
    if kind not in KIND_RANK:
        raise LogError(f"seq {event.seq}: unknown kind {kind!r}")
    if priority not in PRIORITIES:
        raise LogError(f"seq {event.seq}: unknown priority {priority!r}")
    if provenance not in PROVENANCES:
        raise LogError(f"seq {event.seq}: unknown provenance {provenance!r}")
    text = data.get("text")
    if text is not None and not isinstance(text, str):
        raise LogError(f"seq {event.seq}: text is not a string")
    supersedes = data.get("supersedes")
    bad_pointer = None
    if supersedes is not None and not (_is_id(supersedes) and supersedes != event.note_id):
        # Logs from elsewhere are recorded as given; the resolver names the bad pointer.
        bad_pointer = json.dumps(supersedes, ensure_ascii=False)
        supersedes = None
    return Note(
        id=event.note_id,
        kind=str(kind),
        priority=str(priority),
        text=text,
        provenance=str(provenance),
        created_at=event.at,
        actor=event.actor,
        supersedes=supersedes,
        bad_pointer=bad_pointer,
    )


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def replay(events: Iterable[Event]) -> dict[int, Note]:
    """The state of every note after `events`, folded in seq order."""
    notes: dict[int, Note] = {}
    for event in events:
        apply_event(notes, event)
    return notes


# -- decisions: notes in, events out ---------------------------------------------------------
#
# Each act of a writer is decided here, in pure code, from the notes it concerns; the store
# only gives the drafts their seq, time, actor and check-in, appends them and saves.


@dataclass(frozen=True)
class NewNote:
    """The content of a note about to be created."""

    kind: str
    priority: str
    provenance: str
    text: str
    supersedes: int | None = None


@dataclass(frozen=True)
class Draft:
    """An event decided but not yet written."""

    note_id: int
    type: str
    reason: str | None = None
    data: Mapping[str, object] = field(default_factory=dict)


def decide_move(note: Note, event_type: str, reason: str | None = None) -> Draft:
    """A lifecycle move on one note (revoke, flag stale, reinstate, expire, promote)."""
    check_transition(note, event_type)
    data = {"from": note.provenance} if event_type == "promoted" else {}
    return Draft(note.id, event_type, reason, data)


def decide_create(note_id: int, new: NewNote, old: Note | None, reason: str | None = None) -> list[Draft]:
    """A new note (its text normalized, as every way in stores it), and, when it replaces
    `old`, the supersession of `old`.  Raises TextError or TransitionError."""
    text = normalize_text(new.text)
    if old is not None:
        check_transition(old, "superseded")
    data = {
        "kind": new.kind,
        "priority": new.priority,
        "provenance": new.provenance,
        "text": text,
        "supersedes": new.supersedes,
    }
    drafts = [Draft(note_id, "created", reason, data)]
    if old is not None:
        drafts.append(Draft(old.id, "superseded", reason, {"by": note_id}))
    return drafts


def decide_forget(note: Note, reason: str) -> Draft:
    """The tombstone; the store then erases the text from the note's `created` event."""
    check_transition(note, "forgotten")
    return Draft(note.id, "forgotten", reason)


def decide_dispute(a: Note, b: Note, dispute_id: int, reason: str) -> list[Draft]:
    """A dispute between two live notes: an event on each, neither note edited."""
    if a.id == b.id:
        raise TransitionError("a note cannot dispute itself")
    for note, other in ((a, b), (b, a)):
        check_transition(note, "disputed")
        if any(with_ == other.id for _, with_ in note.disputes):
            raise TransitionError(f"notes #{a.id} and #{b.id} already have an open dispute")
    return [
        Draft(a.id, "disputed", reason, {"dispute": dispute_id, "with": b.id}),
        Draft(b.id, "disputed", reason, {"dispute": dispute_id, "with": a.id}),
    ]


def decide_rule(dispute_id: int, sides: tuple[Note, Note], keep: int, reason: str) -> list[Draft]:
    """Close a dispute: `keep` stands, the other side is revoked in its favour.

    `sides` are the two notes the dispute was opened between, in id order."""
    first, second = sides
    if keep not in (first.id, second.id):
        raise TransitionError(
            f"dispute {dispute_id} is between #{first.id} and #{second.id}; --keep one of them"
        )
    kept, other = (first, second) if keep == first.id else (second, first)
    if not any(d == dispute_id for d, _ in kept.disputes):
        raise TransitionError(f"dispute {dispute_id} is already closed")
    if not (kept.live and other.live):
        raise TransitionError(f"dispute {dispute_id} is already settled: one side is no longer in force")
    data = {"dispute": dispute_id, "kept": keep}
    return [
        Draft(kept.id, "ruled", reason, data),
        Draft(other.id, "ruled", reason, data),
        Draft(other.id, "revoked", f"ruling on dispute {dispute_id}, #{keep} stands: {reason}"),
    ]
