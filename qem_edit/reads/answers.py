"""The reads' answers (show, status, list, log…), each with its text and JSON form.

The reads, once for every shell: each a function of an open store that returns its
answer, which knows its text and its JSON form.

The CLI, the MCP server and any other shell call the same function and only print what
it returns: `text()` for people (stdout), `data()` for scripts (`--json`, printed by
`as_json` in one style for every command), `remark()` for what goes to stderr beside the
answer (e.g. "no notes match"), and `exit_code` where the answer itself is a verdict
(verify).  Here: `show`, `notes` (list), `log` and `status`; a query is
`query.answer`, the session-start context `context.build`, verify `checks.verify_report`
(and `staged.verify_staged`), whose answer, `checks.VerifyReport`, lives with it.  A shell checks its arguments' form before it opens the
store (a bad kind is named before a missing store); the read names what the store lacks.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..base import ids
from ..base.owing import Answered, answered, is_request, pointer
from ..base.replay import TEXT_MISSING, Event, Note, scope_mark
from ..base.resolver import Answer as Currency
from ..base.resolver import Graph
from ..base.times import utc_now
from ..base.vocabulary import SCOPE_WORDS, TRIGGER_ATTRIBUTES, scoped_prefix
from ..storage.store import Store
from .query import read_gaps
from .standing import Standing, Standings


def as_json(data: object) -> str:
    """Every `--json` output: indented by two, UTF-8 kept as it is but for DEL and the C1
    controls, escaped as json.dumps escapes the C0 ones (no raw control reaches a terminal)."""
    from ..base.shown import holds_unicode

    # on a stream that cannot hold every character (PYTHONIOENCODING=ascii), JSON's own
    # \\u escapes, which any reader takes, rather than the stream's, which none does
    ascii_only = not holds_unicode(sys.stdout)
    return _C1.sub(lambda m: f"\\u{ord(m[0]):04x}", json.dumps(data, ensure_ascii=ascii_only, indent=2))


_C1 = re.compile("[\x7f-\x9f]")


def first_line(note: Note) -> str:
    return note.first_line()


def _scoped(note: Note) -> str:
    """A list line's mark of a note that is not the team's: `(private) `, `(this session) `."""
    return scoped_prefix(note.scope)


@dataclass
class NoteView:
    """`qem show`: one note, whole."""

    note: Note
    exit_code = 0

    shorts: dict[str, str] = field(default_factory=dict)  # how linked notes are shown
    came_with: str | None = None  # for a note whose text is missing: the commit its event came in
    standing: Standing = Standing()  # past its end, in dispute (qem_edit.reads.standing: every read's decision)
    now: str = ""  # when the note is read (its end is said in the past tense once it is past)

    def text(self) -> str:
        note = self.note
        shown = lambda i: ids.shown(i, self.shorts.get(i))  # noqa: E731
        alias = f" (formerly #{note.alias})" if note.alias is not None else ""
        lines = [f"#{note.shown} {note.kind} · {note.priority} · {note.provenance} · {note.state}",
                 f"id {note.id}{alias}", f"created {note.created_at} by {note.actor}"]
        if note.supersedes is not None:
            lines.append(f"supersedes #{shown(note.supersedes)}")
        if note.local:
            lines.append("scope " + SCOPE_WORDS[note.scope].format(session=note.session))
        if note.expires is not None and self.now and note.expires <= self.now:
            lines += [] if self.standing.past_end else [f"ended {note.expires}"]  # (past it and in force: said below)
        elif note.expires is not None:
            lines.append(f"expires {note.expires} (its end: `qem expire --due` expires it then)")
        if note.to is not None or note.due is not None:
            lines.append("requested" + (f" of {note.to}" if note.to else "") + (f", due {note.due}" if note.due else "")
                         + f" (`qem status {note.shown}`: answered?)")
        if note.answers is not None:
            lines.append(f"answers #{shown(note.answers)}")
        if note.rests_on:
            lines.append("rests on " + ", ".join(f"#{shown(b)}" for b in note.rests_on))
        if note.state != "active" and note.state_at:
            by = f" by #{shown(note.superseded_by)}" if note.superseded_by is not None else ""
            why = f": {note.state_reason}" if note.state_reason else ""
            who = f" ({note.state_actor})" if note.state_actor else ""
            lines.append(f"{note.state}{by} at {note.state_at}{who}{why}")
        lines += self.standing.said()
        lines += [f"anchor {path} {oid}" for path, oid in note.anchors]
        lines += [f"{TRIGGER_ATTRIBUTES[name]} {value}" for name, value in note.triggers]
        lines += ["", note.text if note.text is not None else self._no_text()]
        return "\n".join(lines)

    def _no_text(self) -> str:
        if not self.note.text_missing:
            return "(forgotten: the text was erased)"
        return (f"{TEXT_MISSING}: {self.came_with or 'the commit that brought its event'} carried no"
                f" .qem/texts/{self.note.id}; get it from that commit's author (`git add .qem && git commit`"
                " in their clone, then push)")

    def data(self) -> object:
        missing = {"text_missing": True} if self.note.text_missing else {}
        return {**self.note.to_json(), **missing, **self.standing.to_json()}

    def remark(self) -> str | None:
        return None


@dataclass
class NoteList:
    """`qem list`: one line per note, in the projection's order."""

    notes: Sequence[Note]
    standings: Standings | None = None  # past its end, in dispute (qem_edit.reads.standing), marked on the line
    exit_code = 0

    def text(self) -> str:
        return "\n".join(
            f"#{n.shown}\t{n.kind}\t{n.priority}\t{n.provenance}\t{n.state}\t{_scoped(n)}{first_line(n)}{self._marks(n)}"
            for n in self.notes
        )

    def _marks(self, note: Note) -> str:
        return "".join(f" · {m}" for m in self.standings.of(note).marks()) if self.standings else ""

    def data(self) -> object:
        if self.standings is None:
            return [n.to_json() for n in self.notes]
        return [{**n.to_json(), **self.standings.of(n).to_json()} for n in self.notes]

    def remark(self) -> str | None:
        return None if self.notes else "no notes match"


def event_line(e: Event, shorts: dict[str, str] | None = None) -> str:
    """One event as `qem log` prints it: its id's first characters, when, the note."""
    shown = lambda i: ids.shown(str(i), (shorts or {}).get(str(i)))  # noqa: E731
    extra = ""
    if e.type == "superseded":
        extra = f" by #{shown(e.data.get('by'))}"
    elif e.type == "created" and e.data.get("supersedes") is not None:
        extra = f" superseding #{shown(e.data['supersedes'])}"
    why = f" ({e.reason})" if e.reason else ""
    checkin = f" [checkin {e.checkin}]" if e.checkin else ""
    return f"{ids.shown(e.id)}\t{e.at}\t#{shown(e.note)} {e.type}{extra} by {e.actor}{why}{checkin}"


@dataclass
class EventList:
    """`qem log`: the events, in the order every clone agrees on (clock, then id)."""

    events: Sequence[Event]
    shorts: dict[str, str] = field(default_factory=dict)
    exit_code = 0

    def text(self) -> str:
        return "\n".join(event_line(e, self.shorts) for e in self.events)

    def data(self) -> object:
        return [e.to_json() for e in self.events]

    def remark(self) -> str | None:
        return None


@dataclass
class CurrencyAnswer:
    """`qem status`: is this note current?"""

    answer: Currency
    shown: str = ""
    expires: str | None = None  # the note's end (None: none)
    standing: Standing = Standing()  # past its end (then current: no), in dispute (qem_edit.reads.standing)
    exit_code = 0
    # a request's (or an answer's) second question: answered? (qem_edit.base.owing; None: neither)
    answered: Answered | None = None
    request: str | None = None  # for an answer: the request it names, as shown (its answer is the request's)
    scope: tuple[str, str | None] = ("team", None)  # where the note holds, and a session note's session
    rests: tuple[str, str] | None = None  # whether what it rests on holds: (yes|no|unknown, why) (qem_edit.base.resting)

    def text(self) -> str:
        me = f"#{self.shown or self.answer.note_id}"
        said = f"{me} current: {self.answer.value} ({self.answer.reason})"
        if self.expires and not self.standing.past_end:  # (past it, the reason says so)
            said += f"; ends {self.expires}"
        said += "".join(f"\n{me} {d.mark()}: settle with `{d.settle}`" for d in self.standing.disputes)
        if self.scope[0] != "team":  # (show says it so too: a read names what only this clone reads)
            said += "\nscope " + SCOPE_WORDS[self.scope[0]].format(session=self.scope[1])
        if self.answered is not None:
            about = f"{me} answers #{self.request}, which is answered" if self.request else f"{me} answered"
            said += f"\n{about}: {self.answered.value} ({self.answered.why})"
        if self.rests is not None:
            said += f"\n{me} rests on notes in force: {self.rests[0]} ({self.rests[1]})"
        return said

    def data(self) -> object:
        answered = {"answered": {**self.answered.to_json(), "request": self.request}} if self.answered else {}
        return {**self.answer.to_json(), "short": self.shown or self.answer.note_id, "expires": self.expires,
                **self.standing.to_json(), "scope": self.scope[0], "session": self.scope[1], **answered,
                **({"rests_on": {"value": self.rests[0], "why": self.rests[1]}} if self.rests else {})}

    def remark(self) -> str | None:
        return None


# -- the reads -------------------------------------------------------------------------------------


def show(store: Store, note_id: str, at: str | None = None) -> NoteView:
    """One note, whole: as it is, or as it was `at` a date or git revision."""
    from ..base.times import is_time, parse_time

    full = store.resolve(note_id)
    now = utc_now() if at is None else parse_time(at, "--at", end=True) if is_time(at) else utc_now()
    if at is None:
        note = store.note(full)
        standings = Standings.read(store, now, [note])
    else:
        from .history import note_at

        note = note_at(store, full, at)
        standings = Standings.of_notes({note.id: note}, now)  # (as of then: this note's own disputes)
    shorts = store.index.shorts([*(x for x in (note.supersedes, note.superseded_by, note.answers) if x), *note.rests_on])
    return NoteView(note, shorts, came_with=_came_with(store, note), standing=standings.of(note), now=now)


def _came_with(store: Store, note: Note) -> str | None:
    """For a note whose text is missing: the commit that brought its event, if git knows."""
    if not note.text_missing:
        return None
    from .incomplete import event_commit

    return event_commit(store, note.id)


def notes(store: Store, kind: str | None = None, state: str | None = None) -> NoteList:
    """The notes (of one kind, in one state), in the projection's order."""
    return NoteList(store.notes(kinds=[kind] if kind else None, states=[state] if state else None),
                    Standings.read(store, utc_now()))


def log(store: Store, note_id: str | None = None) -> EventList:
    """The events (all, or one note's; an unknown id is an error), the notes they name
    shown by their short ids."""
    events = store.events(store.resolve(note_id) if note_id is not None else None)
    linked = {e.note for e in events} | {str(e.data[k]) for e in events for k in ("by", "supersedes") if e.data.get(k)}
    return EventList(events, store.index.shorts(linked))


def status(store: Store, note_id: str) -> CurrencyAnswer:
    """Is the note current: yes, no or unknown, by the graph of every note."""
    full, now = store.resolve(note_id), utc_now()
    note, notes = store.note(full), {n.id: n for n in store.notes()}
    standings = Standings.of_notes(notes, now)  # (every note is read for the graph already)
    request = None
    if note.answers is not None and not is_request(note):
        request = ids.shown(note.answers, store.index.shorts([note.answers]).get(note.answers))
    return CurrencyAnswer(Graph.of(notes, now).currency(full), note.shown, note.expires, standings.of(note),
                          answered_of(store, note, now), request, scope=(note.scope, note.session),
                          rests=rests_of(store, note, now))


def rests_of(store: Store, note: Note, now: str) -> tuple[str, str] | None:
    """Whether what `note` rests on holds (qem_edit.base.resting.standing; None: it rests on
    nothing), a base in doubt not flagged yet said so: the next write flags it."""
    from ..base import resting

    if not note.rests_on:
        return None
    found: dict[str, Note | None] = {}

    def bases_of(note_id: str) -> tuple[str, ...]:
        if note_id not in found:
            found[note_id] = store.notes_by_id([note_id]).get(note_id)
        return found[note_id].rests_on if found[note_id] is not None else ()  # type: ignore[union-attr]

    loop = resting.cycle(note.id, bases_of)
    bases = store.notes_by_id(note.rests_on)
    value, why = resting.standing(note, bases, loop, now)
    if value == "no" and note.state == "active":
        events = store.events(note.id)
        changes = [store.event(str(b.state_event)) for b in bases.values() if resting.owed(note, b)]
        if not changes:
            why += "; `qem expire --due` expires it, and the write flags this note"
        elif any(c is not None and not resting.settled(events, c.note, c) for c in changes):
            why += "; not flagged yet (the change came from another clone): the next write flags it"
        else:
            why += "; confirmed since (reinstated)"
    return value, why


def answered_of(store: Store, note: Note, now: str) -> Answered | None:
    """Whether `note` is answered, where it is a request or an answer (None: neither)."""
    if note.answers is not None and not is_request(note):
        found = store.notes_by_id([note.answers])
        return pointer(note, found.get(note.answers)) or answered_of(store, found[note.answers], now)
    if not is_request(note):
        return None
    return answered(note, store.answers_to([note.id]).get(note.id, []), now, read_gaps(store))

