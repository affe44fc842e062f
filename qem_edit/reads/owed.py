"""`qem owed`: what is owed, by whom, and what is late, with the scope it was read from.

Every request in force (a note naming who owes it, or a deadline) whose answer is not yes
(qem_edit.base.owing decides it), the latest first, then by deadline; `--to NAME` keeps one
seat's, `--late` the late ones, `--at` reads the memory as of a date (late as of that date)
or as committed at a git revision (late as of now).  The first line names the scope read
and whether it is complete; an empty answer says what it is not proof of.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..base import errors, ids
from ..base.owing import NO, UNKNOWN, Answered, answered, duration, is_request
from ..base.replay import Note
from ..base.stored_form import seat_problem
from ..base.times import is_time, parse_time, utc_now
from ..base.vocabulary import scoped_prefix
from ..storage.store import Store, read_gaps


class Owed:
    """One request owed: the note, its answer (no or unknown) at the scope's now.  (Plain
    classes here, not dataclasses: `qem verify --staged`, on every commit, lists the late
    requests, and importing dataclasses costs it ~5 ms.)"""

    def __init__(self, note: Note, answer: Answered) -> None:
        self.note = note
        self.answer = answer

    def line(self) -> str:
        n, a = self.note, self.answer
        said = a.why if a.value == NO else f"UNKNOWN: {a.why}"
        late = f"LATE {duration(a.late)} · " if a.late is not None else ""
        said = said.replace(f", late by {duration(a.late)}", "") if a.late is not None else said
        return f"#{n.shown} {n.kind} · {late}{said} · {scoped_prefix(n.scope)}{n.first_line()}"

    def to_json(self) -> dict[str, object]:
        n = self.note
        return {"id": n.id, "short": n.shown, "kind": n.kind, "priority": n.priority, "to": n.to, "due": n.due,
                "late": self.answer.late is not None, **self.answer.to_json(), "text": n.text, "actor": n.actor,
                "created_at": n.created_at}


class OwedAnswer:
    """`qem owed`: the owed requests after the scope that was read."""

    exit_code = 0

    def __init__(self, store: str, now: str, at: str | None, requests: int, notes: int, asked: list[str],
                 owed: list[Owed], gaps: list[str] | None = None, strays: list[Note] | None = None) -> None:
        self.store = store
        self.now = now
        self.at = at
        self.requests = requests  # requests in force read
        self.notes = notes  # notes read
        self.asked = asked  # the filters, as given
        self.owed = owed
        self.gaps = gaps if gaps is not None else []
        self.strays = strays if strays is not None else []  # answers to requests this log lacks

    def scope_line(self) -> str:
        status = "complete" if not self.gaps else "incomplete: " + "; ".join(self.gaps)
        where = f" as at {self.at}" if self.at else ""
        return (f"scope: {self.store}{where}, late as of {self.now}: {self.requests:,} requests in force of"
                f" {self.notes:,} notes read; {status}")

    def text(self) -> str:
        lines = [self.scope_line()]
        asked = f" ({' '.join(self.asked)})" if self.asked else ""
        late = sum(1 for o in self.owed if o.answer.late is not None)
        lines.append(f"{len(self.owed):,} owed{asked}, {late:,} late")
        if not self.owed:
            lines.append(self.empty())
        lines += [o.line() for o in self.owed]
        lines += [f"note: #{n.shown} answers {ids.shown(str(n.answers))}, a request this log lacks (a branch not"
                  " merged here?)" for n in self.strays]
        return "\n".join(lines)

    def empty(self) -> str:
        return ("nothing owed" + (f" ({' '.join(self.asked)})" if self.asked else "") + " in this scope: not proof"
                " that nothing is owed; a request recorded on a branch not merged here, or never recorded, is not"
                " seen" + ("" if not self.gaps else ", and the log was read in part"))

    def data(self) -> object:
        return {"scope": {"store": self.store, "at": self.at, "now": self.now, "requests_in_force": self.requests,
                          "notes_read": self.notes, "complete": not self.gaps, "incomplete_because": self.gaps},
                "filters": self.asked, "count": len(self.owed), "owed": [o.to_json() for o in self.owed],
                "answers_to_requests_not_here": [n.id for n in self.strays]}

    def remark(self) -> str | None:
        return None


def build(store: Store, to: str | None = None, late: bool = False, at: str | None = None,
          now: str | None = None) -> OwedAnswer:
    """What is owed in `store` (as of `at`, where given), by `to` only, late only."""
    if to is not None and seat_problem(to):  # else `--to ""` (an unset variable) reads as nothing owed by anyone
        raise errors.BadInput(f"--to {to!r}: {seat_problem(to)}")
    asked = [f for f in (f"--to {to}" if to else "", "--late" if late else "", f"--at {at}" if at else "") if f]
    if at is None:
        with store.reading():
            hidden = store.hidden()  # other sessions' notes: not read here, so not counted
            requests, notes, gaps = store.requests(), store.count() - len(hidden), read_gaps(store)
            answers = store.answers_to(n.id for n in requests)
            strays = [n for n in store.dangling_answers() if n.id not in hidden]
        now = now or utc_now()
    else:
        from .history import notes_as_of

        aside: list[str] = []
        past = notes_as_of(store, at, aside)
        requests = sorted((n for n in past.values() if is_request(n) and n.live), key=lambda n: n.id)
        answers, notes, gaps = _answers_among(past.values()), len(past), _gaps_at(at, aside)
        strays = [n for n in past.values() if n.answers is not None and n.answers not in past]
        now = now or (parse_time(at, "--at", end=True) if is_time(at) else utc_now())
    owed = [Owed(n, a) for n in requests for a in [answered(n, answers.get(n.id, []), now, gaps)]
            if a.value in (NO, UNKNOWN) and (to is None or n.to == to) and (not late or a.late is not None)]
    owed.sort(key=lambda o: (-(o.answer.late or -1), o.note.due or "9999", o.note.id))
    return OwedAnswer(str(store.root), now, at, len(requests), notes, asked, owed, gaps, strays)


def _gaps_at(at: str, aside: list[str]) -> list[str]:
    """Why a read `--at` is incomplete: the log files it left out, the first few named."""
    if not aside:
        return []
    named = "; ".join(aside[:3]) + ("; ..." if len(aside) > 3 else "")
    return [f"{len(aside)} log file{'s' if len(aside) != 1 else ''} set aside as at {at} ({named})"]


def _answers_among(notes: Iterable[Note]) -> dict[str, list[Note]]:
    out: dict[str, list[Note]] = {}
    for note in notes:
        if note.answers is not None:
            out.setdefault(note.answers, []).append(note)
    return out
