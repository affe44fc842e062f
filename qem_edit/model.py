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
EVENT_TYPES: tuple[str, ...] = (
    "created",
    "superseded",
    "revoked",
    "stale_flagged",
    "reinstated",
    "promoted",
    "expired",
    "forgotten",
    "disputed",
    "ruled",
)

LIVE_STATES = frozenset({"active", "stale"})

# Which states each lifecycle event may leave from, and where it goes.  A stale note is
# still in force (flagged for review), so it can be revoked, expired or superseded too.
TRANSITIONS: dict[str, tuple[frozenset[str], str | None]] = {
    "superseded": (frozenset({"active", "stale"}), "superseded"),
    "revoked": (frozenset({"active", "stale"}), "revoked"),
    "stale_flagged": (frozenset({"active"}), "stale"),
    "reinstated": (frozenset({"revoked", "stale", "expired"}), "active"),
    "expired": (frozenset({"active", "stale"}), "expired"),
    "forgotten": (frozenset(set(STATES) - {"forgotten"}), "forgotten"),
    # these change provenance or disputes, not state
    "promoted": (frozenset(set(STATES) - {"forgotten"}), None),
    "disputed": (LIVE_STATES, None),
    "ruled": (frozenset(set(STATES) - {"forgotten"}), None),
}

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
    sources, _ = TRANSITIONS[event_type]
    if note.state not in sources:
        raise TransitionError(_refusal(note, event_type))
    if event_type == "promoted" and note.provenance == "human":
        raise TransitionError(f"note #{note.id} is already provenance human")


def _refusal(note: Note, event_type: str) -> str:
    verb = {
        "superseded": "supersede",
        "revoked": "revoke",
        "stale_flagged": "flag as stale",
        "reinstated": "reinstate",
        "expired": "expire",
        "forgotten": "forget",
        "promoted": "promote",
        "disputed": "dispute",
        "ruled": "rule on",
    }[event_type]
    return f"cannot {verb} note #{note.id}: it is {note.state}"


def apply_event(notes: dict[int, Note], event: Event) -> None:
    """Fold one event into `notes` (in place).  Raises LogError or TransitionError."""
    if event.type not in EVENT_TYPES:
        raise LogError(f"seq {event.seq}: unknown event type {event.type!r}")
    if event.type == "created":
        notes[event.note_id] = note_from_created(event)
        return
    note = notes.get(event.note_id)
    if note is None:
        raise LogError(f"seq {event.seq}: event {event.type} for unknown note #{event.note_id}")
    check_transition(note, event.type)
    changes: dict[str, object] = {
        "state_at": event.at,
        "state_reason": event.reason,
        "state_seq": event.seq,
    }
    if event.type == "promoted":
        notes[note.id] = replace(note, provenance="human")
        return
    if event.type in ("disputed", "ruled"):
        dispute, other = event.data.get("dispute"), event.data.get("with")
        if not _is_id(dispute) or (event.type == "disputed" and not _is_id(other)):
            raise LogError(f"seq {event.seq}: {event.type} event without integer 'dispute'/'with'")
        kept = tuple(d for d in note.disputes if d[0] != dispute)
        if event.type == "disputed":
            kept += ((int(dispute), int(other)),)  # type: ignore[arg-type]
        notes[note.id] = replace(note, disputes=kept)
        return
    changes["state"] = TRANSITIONS[event.type][1]
    if event.type == "superseded":
        by = event.data.get("by")
        if not isinstance(by, int) or isinstance(by, bool):
            raise LogError(f"seq {event.seq}: superseded event without an integer 'by'")
        changes["superseded_by"] = by
    if event.type == "forgotten":
        changes["text"] = None
    notes[note.id] = replace(note, **changes)


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
