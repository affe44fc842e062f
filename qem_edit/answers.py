"""What the read commands answer, each in its text and its JSON form.

A command computes an answer and the CLI prints it: `text()` for people (stdout), `data()`
for scripts (`--json`, printed by `as_json` in one style for every command), `remark()`
for what goes to stderr beside the answer (e.g. "no notes match"), and `exit_code` where
the answer itself is a verdict (verify).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Sequence

from .model import Event, Note
from .resolver import Answer as Currency


def as_json(data: object) -> str:
    """Every `--json` output: indented by two, UTF-8 kept as it is."""
    return json.dumps(data, ensure_ascii=False, indent=2)


def first_line(note: Note) -> str:
    return (note.text or "(forgotten)").split("\n", 1)[0]


@dataclass
class NoteView:
    """`qem show`: one note, whole."""

    note: Note
    exit_code = 0

    def text(self) -> str:
        note = self.note
        lines = [f"#{note.id} {note.kind} · {note.priority} · {note.provenance} · {note.state}",
                 f"created {note.created_at} by {note.actor}"]
        if note.supersedes is not None:
            lines.append(f"supersedes #{note.supersedes}")
        if note.state != "active" and note.state_at:
            by = f" by #{note.superseded_by}" if note.superseded_by is not None else ""
            why = f": {note.state_reason}" if note.state_reason else ""
            lines.append(f"{note.state}{by} at {note.state_at}{why}")
        lines += ["", note.text if note.text is not None else "(forgotten: the text was erased)"]
        return "\n".join(lines)

    def data(self) -> object:
        return self.note.to_json()

    def remark(self) -> str | None:
        return None


@dataclass
class NoteList:
    """`qem list`: one line per note, in the projection's order."""

    notes: Sequence[Note]
    exit_code = 0

    def text(self) -> str:
        return "\n".join(
            f"#{n.id}\t{n.kind}\t{n.priority}\t{n.provenance}\t{n.state}\t{first_line(n)}" for n in self.notes
        )

    def data(self) -> object:
        return [n.to_json() for n in self.notes]

    def remark(self) -> str | None:
        return None if self.notes else "no notes match"


def event_line(e: Event) -> str:
    """One event as `qem log` prints it."""
    extra = ""
    if e.type == "superseded":
        extra = f" by #{e.data.get('by')}"
    elif e.type == "created" and e.data.get("supersedes") is not None:
        extra = f" superseding #{e.data['supersedes']}"
    why = f" ({e.reason})" if e.reason else ""
    checkin = f" [checkin {e.checkin}]" if e.checkin else ""
    return f"{e.seq}\t{e.at}\t#{e.note_id} {e.type}{extra} by {e.actor}{why}{checkin}"


@dataclass
class EventList:
    """`qem log`: the events, in seq order."""

    events: Sequence[Event]
    exit_code = 0

    def text(self) -> str:
        return "\n".join(event_line(e) for e in self.events)

    def data(self) -> object:
        return [e.to_json() for e in self.events]

    def remark(self) -> str | None:
        return None


@dataclass
class CurrencyAnswer:
    """`qem status`: is this note current?"""

    answer: Currency
    exit_code = 0

    def text(self) -> str:
        return f"#{self.answer.note_id} current: {self.answer.value} ({self.answer.reason})"

    def data(self) -> object:
        return self.answer.to_json()

    def remark(self) -> str | None:
        return None


@dataclass
class VerifyReport:
    """`qem verify`: the caches against a replay of the log, and the graph's anomalies."""

    head: int
    problems: list[str] = field(default_factory=list)
    repaired: int | None = None  # notes rewritten by --repair

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0

    def text(self) -> str:
        lines = []
        if self.repaired is not None:
            lines.append(f"rebuilt the notes cache from the log: {self.repaired} notes")
        return "\n".join(lines + self.problems)

    def data(self) -> object:
        return {"head": self.head, "ok": not self.problems, "problems": self.problems, "repaired": self.repaired}

    def remark(self) -> str | None:
        if not self.problems:
            return f"ok: the notes cache equals a replay of {self.head} events"
        return (
            f"verify: {len(self.problems)} problem(s) at head {self.head}; `qem verify --repair` rebuilds"
            " the cache; a cycle, dangling pointer or fork came with a loaded log and is"
            " settled by events (revoke, supersede, or `qem dispute` and `qem rule`)"
        )
