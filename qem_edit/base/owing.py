"""What is owed: whether a request is answered, who owes it and how late it is.

What is owed, pure: whether a request is answered (yes, no or unknown, with the reason),
who owes it and how late it is, from the request, the notes that answer it and now.

A request is a note that names who owes it (`to`) or a deadline (`due`).  An answer is a
note whose `answers` names it: a pointer, like `supersedes`, never an edit of the request.
An answer counts unless it was revoked or forgotten (a withdrawn answer answers nothing);
a superseded answer's successor carries the pointer on, so of a chain only the note in
force speaks.  Two answers in force that neither replaced make the answer unknown (they may
disagree: a person settles it by superseding or revoking one), as does a log read in part
(files set aside, which may hold an answer).  A request that is revoked, superseded,
expired or forgotten is not owed, and says so; nor is one past its end at `now`
(replay.past_end: not in force, as every read says, though `qem expire --due` has not
swept it yet).  No database, no clock: `now` is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from . import ids
from .records import Record
from .replay import PAST_WHY, Note, past_end

YES, NO, UNKNOWN, NOT_OWED = "yes", "no", "unknown", "not owed"
WITHDRAWN = frozenset({"revoked", "forgotten"})  # an answer in these states answers nothing


class Answered(Record):
    """A request's answer: `value` one of yes, no, unknown, not owed; `why` in words; the
    answers that decide it (`by`); `late` seconds past its deadline (None: not late)."""

    value: str
    why: str
    by: tuple[Note, ...] = ()
    late: int | None = None

    def to_json(self) -> dict[str, object]:
        return {"answered": self.value, "why": self.why, "late_seconds": self.late,
                "by": [{"id": n.id, "short": n.shown, "actor": n.actor, "at": n.created_at} for n in self.by]}


def is_request(note: Note) -> bool:
    return note.to is not None or note.due is not None


def seconds_between(earlier: str, later: str) -> int:
    """Seconds from one UTC time (`YYYY-MM-DDTHH:MM:SSZ`) to another, by the calendar
    (pure: no clock, no time zone)."""
    return _epoch(later) - _epoch(earlier)


def _epoch(stamp: str) -> int:
    year, month, day = int(stamp[:4]), int(stamp[5:7]), int(stamp[8:10])
    # days since 0000-03-01 (a year that starts in March puts the leap day last)
    y = year - (month <= 2)
    days = 365 * y + y // 4 - y // 100 + y // 400 + (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    return days * 86400 + int(stamp[11:13]) * 3600 + int(stamp[14:16]) * 60 + int(stamp[17:19])


def late_by(note: Note, now: str) -> int | None:
    """Seconds a request in force is past its deadline at `now` (None: not late)."""
    if note.due is None or not note.live or note.due >= now:
        return None
    return seconds_between(note.due, now)


def duration(seconds: int) -> str:
    """`3d 4h`, `5h 12m`, `40m`, `20s`: the two largest units."""
    parts, rest = [], seconds
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size or (unit == "s" and not parts):
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return " ".join(parts[:2])


def owed_words(note: Note, now: str) -> str:
    """`owed by alice, due 2026-09-05T23:59:59Z, late by 3d 4h`: who, when, how late."""
    words = f"owed by {note.to}" if note.to else "owed by nobody named"
    if note.due is not None:
        words += f", due {note.due}"
        late = late_by(note, now)
        words += f", late by {duration(late)}" if late is not None else ""
    return words


def answered(request: Note, answers: Iterable[Note], now: str, gaps: Sequence[str] = ()) -> Answered:
    """Whether `request` is answered, from the notes whose `answers` names it (any state),
    at `now`; `gaps`: why the log read is incomplete (files set aside), none when whole."""
    if request.state not in ("active", "stale"):
        return Answered(NOT_OWED, _not_owed(request))
    if past_end(request, now):  # not in force, as every read says (qem_edit.reads.standing), though not swept yet
        return Answered(NOT_OWED, f"not owed: past its end {request.expires} ({PAST_WHY})")
    speaking = answering(request.id, answers)
    if len(speaking) > 1:
        names = " and ".join(f"#{a.shown} ({a.actor}, {a.created_at})" for a in speaking)
        return Answered(UNKNOWN, f"two answers in force may disagree: {names}; supersede one with the other,"
                                 " or revoke one", tuple(speaking), late_by(request, now))
    if speaking:
        a = speaking[0]
        return Answered(YES, f"answered by #{a.shown} ({a.actor}, {a.created_at})", (a,))
    late = late_by(request, now)
    if gaps:
        return Answered(UNKNOWN, "no answer in the log read, which is incomplete (" + "; ".join(gaps)
                        + "): an answer may be there; " + owed_words(request, now), (), late)
    return Answered(NO, owed_words(request, now), (), late)


def answering(request_id: str, answers: Iterable[Note]) -> list[Note]:
    """The answers that speak for a request, from the notes whose `answers` names it (any
    state): those in force, else the latest one not withdrawn (an answer that expired still
    stands); oldest first.  A fact of the log, no clock: MEMORY.md's `answered by` shows it."""
    counting = sorted((a for a in answers if a.answers == request_id and a.state not in WITHDRAWN),
                      key=lambda a: (a.created_at, a.id))
    return [a for a in counting if a.live] or counting[-1:]


def answered_by(notes: Iterable[Note]) -> dict[str, tuple[str, ...]]:
    """For each note some note answers, the ids of the answers that speak for it
    (`answering`), from a whole set of notes (a rendering's)."""
    given: dict[str, list[Note]] = {}
    for note in notes:
        if note.answers is not None:
            given.setdefault(note.answers, []).append(note)
    return {request: tuple(a.id for a in answering(request, answers)) for request, answers in given.items()}


def _not_owed(request: Note) -> str:
    if request.state == "superseded":
        return f"not owed: superseded by #{ids.shown(request.superseded_by or '')} (the successor is the request now)"
    when = f" at {request.state_at}" if request.state_at else ""
    who = f" by {request.state_actor}" if request.state_actor else ""
    why = f": {request.state_reason}" if request.state_reason else ""
    return f"not owed: {request.state}{when}{who}{why}"


def pointer(answer: Note, target: Note | None) -> Answered | None:
    """What an answer's own pointer says (None: it answers no note): unknown where the note
    it names is not in the log read (another branch not merged yet, or a pointer to nothing)."""
    if answer.answers is None:
        return None
    if target is None:
        return Answered(UNKNOWN, f"answers {ids.shown(answer.answers)}, which is not in the log read (a note of a branch"
                                 " not merged here, or a pointer to no note): whether it is answered is unknown")
    return None
