"""What an agent is given at one moment of its session: the notes the moment triggers.

A moment is a session's start or its return from a compaction, a prompt, an edit or a
read of files, a shell command (qem_edit.base.triggers says what each note fires at).  The notes
it triggers come in one order, kind rank, then priority, then id (the context's), each
with why it came; a budget in characters (the harness's limit: 10,000 for Claude Code)
takes them in that order while they fit, a directive whole or not at all, and the last
line counts what was left out and names the command that lists it (`qem deliver ...
--skip N`).  A note already given in the session (qem_edit.system.ledger) is not given again; a
note given and changed since (superseded, revoked, flagged stale, expired, forgotten) is
given again as its change, first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter

from ..base import errors
from ..base.records import Record
from ..base.replay import Note, past_end_words
from ..base.triggers import bundle_at, bundle_why, by_command, by_paths, by_prompt, declaring
from ..base.vocabulary import FRAMES, KIND_RANK, KINDS, MOMENTS, PRIORITIES, PRIORITY_RANK
from ..storage.store import Store, read_gaps
from .standing import Standing, Standings

DEFAULT_BUDGET = 10_000  # characters: Claude Code's cap on what a hook adds to the context
CUT = 200  # characters of a first line a change or a line shows


def indented(text: str) -> str:
    """A note's text under its header line: each line indented by two spaces (a blank one
    left empty)."""
    return "\n".join(("  " + line).rstrip() for line in text.split("\n"))


def _cut(line: str) -> str:
    line = line.strip()
    return line if len(line) <= CUT else line[: CUT - 1].rstrip() + "…"


TIERED = ("start", "compact")  # the moments that give many notes at once (qem_edit.reads.tiers)
HEADINGS = {
    "start": "at the start of this session",
    "compact": "again after the compaction",
    "prompt": "for this prompt",
    "edit": "before this edit",
    "read": "with this read (what an edit of the file would give)",
    "shell": "before this command",
}


class Moment(Record):
    """One moment of a session: its event (MOMENTS), and what it is about: the files an
    edit or a read touches (paths from the top of the work tree), a shell command, a prompt."""

    event: str
    paths: tuple[str, ...] = ()
    command: str = ""
    prompt: str = ""
    top: str = ""  # the work tree's top: the paths the command names are written whole from it

    def problem(self) -> str | None:
        """What a person's `qem deliver` leaves out or adds that this moment does not take."""
        takes = {"edit": "paths", "read": "paths", "shell": "command", "prompt": "prompt"}.get(self.event)
        given = [name for name in ("paths", "command", "prompt") if getattr(self, name)]
        option = {"paths": "--path", "command": "--command", "prompt": "--prompt"}
        if takes and takes not in given:
            return f"{self.event} needs {option[takes]}"
        extra = [option[name] for name in given if name != takes]
        return f"{self.event} takes no {', '.join(extra)}" if extra else None

    def command_line(self, skip: int = 0) -> str:
        """The `qem deliver` command that lists this moment's notes, from the `skip`-th
        (run from anywhere: its paths are whole)."""
        parts = ["qem", "deliver", self.event]
        parts += [f"--path={os.path.join(self.top, p) if self.top else p}" for p in self.paths]
        if self.command:
            parts.append(f"--command={self.command}")
        if self.prompt:
            parts.append("--prompt=…")  # a prompt is too long to repeat: the reader gives it again
        if skip:
            parts.append(f"--skip={skip}")
        return " ".join(quoted(p) if p != "--prompt=…" else p for p in parts)


def quoted(word: str) -> str:
    """`word` as a POSIX shell reads it back, as `shlex.quote` writes it (every reply's room
    for its last line spells a command: shlex is a module every hook would load for this)."""
    if not word:
        return "''"
    if _SAFE.issuperset(word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


# shlex's own (`[^\w@%+=:,./-]`, ASCII): the characters a shell reads as themselves; a set, as
# compiling the pattern would cost every reply 0.05 ms
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


def requested(note: Note, why: str = "") -> str:
    """A request's seat and deadline on its line (`· to alice · due 2026-09-05T23:59:59Z`),
    and how late it is where it came because it is late and not answered (`why`)."""
    said = (f" · to {note.to}" if note.to else "") + (f" · due {note.due}" if note.due else "")
    if why != LATE_WHY:
        return said
    from ..base.owing import duration, late_by
    from ..base.times import utc_now

    late = late_by(note, utc_now())
    return said + (f" · LATE {duration(late)}" if late is not None else "")


def given_json(n: Note, standing: Standing, why: str, full: bool) -> dict[str, object]:
    """A note as a moment gives it, in JSON: whole (`text`) or as its line (`line`), with
    why it came and its standing; one form for every moment, tiered or not."""
    return {"id": n.id, "short": n.shown, "kind": n.kind, "priority": n.priority, "state": n.state,
            "provenance": n.provenance, "expires": n.expires, **standing.to_json(), "why": why,
            "full": full, "text" if full else "line": n.text if full else n.first_line()}


class Hit(Record):
    """A note a moment triggers: why, and whether whole (`full`) or as its index line (a
    read's second tier)."""

    note: Note
    why: str
    full: bool = True
    standing: Standing = Standing()

    def head(self) -> str:
        n = self.note
        marks = " · STALE" if n.state == "stale" else ""
        marks += standing_marks(n, self.standing) + requested(n, self.why)
        return f"- [#{n.shown}] {n.kind}/{n.priority} · {FRAMES.get(n.provenance, n.provenance)}{marks} · {self.why}"

    def block(self) -> str:
        n = self.note
        if not self.full:
            return f"{self.head()}\n  {_cut(n.first_line())} (`qem show {n.shown}`)"
        return self.head() + "\n" + indented(n.text if n.text is not None else n.first_line())

    def too_long(self) -> str:
        """The note, too long to give whole at this moment: its first line, its length,
        and the command that shows it."""
        n = self.note
        return (f"{self.head()}\n  {_cut(n.first_line())} (too long to give here: {len(n.text or ''):,}"
                f" characters; `qem show {n.shown}`)")

    def to_json(self) -> dict[str, object]:
        return given_json(self.note, self.standing, self.why, self.full)


def standing_marks(note: Note, standing: Standing) -> str:
    """How a note is marked where it is given: past its end (with why it is not in force)
    and each open dispute (qem_edit.reads.standing, every read's decision); "" for neither."""
    end = f" · {past_end_words(note)}" if standing.past_end else ""
    return end + "".join(f" · {d.mark()}" for d in standing.disputes)


def standings_now(standings: Standings | None) -> Standings:
    """The standings a fit marks its notes by: the reader's (from the index), else the
    notes' own (their ends, their disputes, no fork: a caller with no store)."""
    if standings is not None:
        return standings
    from ..base.times import utc_now

    return Standings(utc_now())


class Change(Record):
    """A note given earlier in the session that changed since: said first, in a line or
    two (its successor's first line; `qem show` has the rest)."""

    note: Note
    successor: Note | None = None

    def block(self) -> str:
        n = self.note
        why = f" ({_cut(n.state_reason)})" if n.state_reason else ""
        if n.state == "superseded" and self.successor is not None:
            s = self.successor
            more = f" (`qem show {s.shown}`)" if "\n" in (s.text or "") or len(s.first_line()) > CUT else ""
            return f"- [#{n.shown}] was superseded by [#{s.shown}]{why}; now:\n  {_cut(s.first_line())}{more}"
        if n.state == "active":
            return f"- [#{n.shown}] was reinstated{why}: {_cut(n.first_line())}"
        if n.state == "forgotten":
            return f"- [#{n.shown}] was forgotten: disregard it"
        return f"- [#{n.shown}] is now {n.state}{why}: {_cut(n.first_line())}"

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"id": self.note.id, "short": self.note.shown, "state": self.note.state,
                                  "reason": self.note.state_reason}
        if self.successor is not None:
            out["successor"] = {"id": self.successor.id, "short": self.successor.shown, "text": self.successor.text}
        return out


class Delivery:
    """What one moment gives: the changes, the notes that fit, and what did not (`left`,
    in order), and the changes that did not fit (`unsaid`: said at the next moment)."""

    exit_code = 0

    def __init__(self, moment: Moment, budget: int, skip: int = 0) -> None:
        self.moment, self.budget, self.skip = moment, budget, skip  # budget in characters (0: no limit)
        self.changes: list[Change] = []
        self.given: list[Hit] = []
        self.left = Ranks()
        self.unsaid = 0

    def heading(self) -> str:
        return f"# Project memory (qem), {HEADINGS[self.moment.event]}"

    def command(self) -> str | None:
        """The command listing what did not fit: the first left out's moment, from it on."""
        return self.left[0].moment.command_line(self.left[0].rank) if self.left else None

    def footer(self) -> str:
        lines = [_footer(len(self.left), self.left.directives(), self.command() or "")]
        if self.unsaid:
            lines.append(f"… {self.unsaid:,} change{'' if self.unsaid == 1 else 's'} of notes given earlier did not"
                         " fit: said at the next moment")
        return "\n".join(line for line in lines if line)

    def text(self) -> str:
        if not (self.changes or self.given or self.left or self.unsaid):
            return ""
        parts = [self.heading()]
        if self.changes:
            parts.append("Changed since given earlier in this session:\n" + "\n".join(c.block() for c in self.changes))
        if self.given:
            parts += self.given_parts()
        if self.left or self.unsaid:
            parts.append(self.footer())
        return "\n\n".join(parts)

    def given_parts(self) -> list[str]:
        """The notes given, as the reply's parts (a tiered moment groups them)."""
        return ["\n".join(h.block() for h in self.given)]

    def data(self) -> object:
        return {"moment": self.moment.event, "paths": list(self.moment.paths), "command": self.moment.command or None,
                "budget": self.budget, "changes": [c.to_json() for c in self.changes],
                "given": [h.to_json() for h in self.given], "skip": self.skip,
                "left": {"count": len(self.left), "directives": self.left.directives(),
                         "command": self.command()}}

    def remark(self) -> str | None:
        return None


# -- what a moment triggers ----------------------------------------------------------------------


class Due(Record):
    """A note a moment triggers, before its text is read: its order's fields, and why it
    comes, whole or as its line (a read's second tier)."""

    id: str
    kind: str
    priority: str
    why: str
    full: bool = True
    owed: int = 0  # a request owed: 2 late, 1 owed by this seat; before every other note, the late first

    def key(self) -> tuple[int, int, int, str]:
        return (-self.owed, KIND_RANK[self.kind], PRIORITY_RANK.get(self.priority, len(PRIORITIES)), self.id)

    @property
    def late(self) -> bool:
        return self.owed == LATE


def hits(store: Store, moment: Moment) -> Ranks:
    """Every note in force the moment triggers, once, in the one order (what is owed, the
    late first; then kind rank, priority, id): their ids and order only; fit reads the
    texts it gives."""
    if moment.event not in MOMENTS:
        raise errors.BadInput(f"unknown moment {moment.event!r}; use " + ", ".join(MOMENTS))
    events = declaring(moment.event)
    rows: list[tuple] = []
    for event in events:
        rows += store.due_at_moment(event, bundle_at(event), f"on {event}")
    if len(events) > 1:  # each once, the first moment's
        rows = list({row[0]: row for row in reversed(rows)}.values())
    why: dict[str, str] = {}
    if moment.event in ("edit", "read"):
        why = by_paths(moment.paths, lambda covering: ((note, path) for note, path, _ in store.anchors_in_force(covering)),
                       store.patterns_in_force("path"))
    elif moment.event == "shell" and moment.command:
        why = by_command(moment.command, store.patterns_in_force("run"))
    elif moment.event == "prompt" and moment.prompt:
        why = _by_prompt(store, moment.prompt, moment.top or None)
    if why:
        found = {row[0] for row in rows}
        rows += [_row(Due(note, kind, priority, why[note]))
                 for note, (kind, priority) in store.order_keys(n for n in why if n not in found).items()]
    rows.sort(key=_ORDER)
    owed = owed_hits(store, moment.event) if moment.event in ("start", "compact", "prompt") else []
    if owed:  # before every other note, the late first
        first = {due.id for due in owed}
        rows = [_row(due) for due in sorted(owed, key=Due.key)] + [row for row in rows if row[0] not in first]
    return Ranks.of(moment, rows)


def _row(due: Due) -> tuple[str, int, str, int, str, int]:
    """A note due as a Ranks row (a whole note: every note due comes whole, Due.full)."""
    return (due.id, KIND_RANK[due.kind], due.priority, PRIORITY_RANK.get(due.priority, len(PRIORITIES)), due.why,
            due.owed)


_ORDER = itemgetter(1, 3, 0)  # Due.key on a row owed nothing (kind rank, priority rank, id), in C


def owed_of(row: tuple) -> int:
    """What a Ranks row says is owed: LATE, OWED, or 0 (a row without the field)."""
    return row[5] if len(row) > 5 else 0


LATE, OWED = 2, 1
LATE_WHY = "late, not answered yet (`qem owed --late` says by how long)"  # the group its lines say LATE in
SEAT_ENV = "QEM_ACTOR"  # the seat a session answers for: the actor it writes as (unset: every seat)


def owed_hits(store: Store, event: str) -> list[Due]:
    """The requests a moment gives before every other note: at a start or after a
    compaction, what this seat owes (`QEM_ACTOR`; every seat where it is unset) and
    everything late; at a prompt, what is late (a deadline that passed during the session
    comes then).  A request answered yes is not given; unknown or no is."""
    requests = store.requests()
    if not requests:
        return []  # (before the imports: a memory with no request costs a hook none of them)
    from ..base.owing import NO, UNKNOWN, answered, late_by
    from ..base.times import utc_now

    seat, now = os.environ.get(SEAT_ENV) or None, utc_now()
    answers = store.answers_to(n.id for n in requests)
    gaps = read_gaps(store)
    out = []
    for note in requests:
        late = late_by(note, now) is not None
        mine = event != "prompt" and (seat is None or note.to == seat)
        if (late or mine) and answered(note, answers.get(note.id, []), now, gaps).value in (NO, UNKNOWN):
            why = LATE_WHY if late else (
                f"owed by you ({seat}), not answered yet" if seat else "owed, not answered yet (no seat known: every seat's)")
            out.append(Due(note.id, note.kind, note.priority, why, owed=LATE if late else OWED))
    return out


def _by_prompt(store: Store, prompt: str, top: str | None) -> dict[str, str]:
    return by_prompt(prompt, top, lambda paths: ((note, path) for note, path, _ in store.anchors_in_force(paths)),
                     lambda: store.patterns_in_force("path"), store.terms_in_force)


# -- fitting a budget ------------------------------------------------------------------------------


class Ranked(Record):
    """A note due and where it stands in its moment's whole order (what `--skip` counts)."""

    moment: Moment
    rank: int
    due: Due


class Ranks:
    """Notes due, in order, each as a Ranked (its moment, its rank in that moment's whole
    order, its Due), made only when read: a start at scale has thousands due and gives
    a hundred, and what its last line counts over the rest (how many, the directives
    among them) is counted from rows.  A read-only sequence; its slices are Ranks.  Held
    as parts, one a moment: (moment, its rows in order, their ranks), a row a note's
    (id, kind rank, priority, priority rank, why, owed) as the index gives it: without its
    why where it comes by its kind's bundle, without owed where it is owed nothing, and
    no `full` (every note due comes whole)."""

    __slots__ = ("_parts",)

    def __init__(self, parts: Iterable[tuple[Moment, list[tuple], Sequence[int]]] = ()) -> None:
        self._parts = [part for part in parts if part[1]]

    @classmethod
    def of(cls, moment: Moment, rows: list[tuple]) -> Ranks:
        """A moment's whole order: its `rows`, ranked from 0."""
        return cls([(moment, rows, range(len(rows)))])

    def __len__(self) -> int:
        return sum(len(rows) for _, rows, _ in self._parts)

    def __bool__(self) -> bool:
        return bool(self._parts)

    def __iter__(self) -> Iterator[Ranked]:
        for moment, rows, ranks in self._parts:
            for row, rank in zip(rows, ranks):
                yield Ranked(moment, rank, _due(row))

    def __getitem__(self, index: int | slice) -> Ranked | Ranks:  # type: ignore[override]
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("a slice of Ranks takes every item")
            parts = []
            for moment, rows, ranks in self._parts:
                if start < len(rows) and stop > 0:
                    parts.append((moment, rows[max(start, 0):stop], ranks[max(start, 0):stop]))
                start, stop = start - len(rows), stop - len(rows)
            return Ranks(parts)
        if index < 0:
            index += len(self)
        for moment, rows, ranks in self._parts:
            if 0 <= index < len(rows):
                return Ranked(moment, ranks[index], _due(rows[index]))
            index -= len(rows)
        raise IndexError("Ranks index out of range")

    def __add__(self, other: Ranks) -> Ranks:
        return Ranks(self._parts + other._parts)

    def dues(self) -> Iterator[tuple]:
        """Each note's row (id, kind rank, priority, priority rank[, why[, owed]]), in order."""
        for _, rows, _ in self._parts:
            yield from rows

    def owed(self) -> Iterator[tuple]:
        """The rows of what is owed (each moment's first, in its order): not every note due."""
        for _, rows, _ in self._parts:
            for row in rows:
                if not owed_of(row):
                    break
                yield row

    def ids(self) -> list[str]:
        return [row[0] for _, rows, _ in self._parts for row in rows]

    def without(self, among: Container[str] | Mapping[str, object], gone: Callable[[tuple], bool]) -> Ranks:
        """These, but those whose id is `among` and `gone(row)` says are gone: a few ids
        are looked at, not every note due."""
        if not among:
            return self
        parts = []
        for moment, rows, ranks in self._parts:
            kept = [i for i, row in enumerate(rows) if row[0] not in among or not gone(row)]
            parts.append((moment, rows, ranks) if len(kept) == len(rows) else
                         (moment, [rows[i] for i in kept], [ranks[i] for i in kept]))
        return Ranks(parts)

    def directives(self) -> int:
        """How many of them are directives."""
        return sum(list(map(_KIND, rows)).count(KIND_RANK["directive"]) for _, rows, _ in self._parts)

    def last_ranks(self) -> dict[Moment, int]:
        """Each moment's last rank here (where the command listing what is left starts at its longest)."""
        return {moment: ranks[-1] for moment, _, ranks in self._parts}


_KIND = itemgetter(1)  # a row's kind rank


def _due(row: tuple) -> Due:
    kind = KINDS[row[1]]
    return Due(row[0], kind, row[2], row[4] if len(row) > 4 else bundle_why(kind, row[2]), True, owed_of(row))


Fetch = Callable[[list[str]], "dict[str, Note]"]
NOTES_PER_FETCH = 32  # notes whose texts one fetch reads, while a budget has room


Measure = Callable[[str], int]


def fit(moment: Moment, entries: Ranks, changes: list[Change], budget: int, fetch: Fetch,
        skip: int = 0, measure: Measure = len, standings: Standings | None = None) -> Delivery:
    """The changes, then the notes due, in order while the whole text, its last line
    included, stays within `budget` (counted by `measure`: the harness's own unit, every
    part of the text adding its size); the first that does not fit ends it (a
    directive is never cut: whole, or counted; the last line names the command listing the
    rest).  The notes' texts are read (`fetch`) a few at a time, only while there is room;
    a note `fetch` does not give (no longer in the index) ends it too, counted."""
    if budget < 0:
        raise errors.BadInput(f"--budget {budget}: give a number of characters (0: no limit)")
    out, standings = Delivery(moment, budget, skip=skip), standings_now(standings)
    heading, reserve = measure(out.heading()), footer_room(entries, changes, measure)
    size = heading + fitted_changes(out, changes, budget, heading, reserve, measure)
    notes: dict[str, Note] = {}
    for i, entry in enumerate(entries):
        if entry.due.id not in notes:
            notes.update(fetch(entries[i:i + NOTES_PER_FETCH].ids()))
        note = notes.get(entry.due.id)
        if note is None:
            out.left = entries[i:]
            break
        hit = Hit(note, entry.due.why, entry.due.full, standings.of(note))
        block = hit.block()
        if budget and heading + measure(block) + 2 + reserve > budget:
            block = hit.too_long()  # never whole here: given as its line, so it hides nothing after it
            hit = _Shown(hit, block)
        cost = measure(block) + (2 if not out.given else 1)
        if budget and size + cost + reserve > budget:
            out.left = entries[i:]
            break
        out.given.append(hit)
        size += cost
    return out


def footer_room(entries: Ranks, changes: list[Change], measure: Measure) -> int:
    """Room kept for the last lines at their longest: what did not fit (the longest
    command listing it) and the changes that did not."""
    last = entries.last_ranks()  # each moment's last rank: its longest command
    longest = max((m.command_line(rank) for m, rank in last.items()), key=len, default="")
    reserve = measure("\n\n" + _footer(len(entries), entries.directives(), longest))
    unsaid = f"\n… {len(changes):,} changes of notes given earlier did not fit: said at the next moment"
    return reserve + measure(unsaid)


def fitted_changes(out: Delivery, changes: list[Change], budget: int, size: int, reserve: int,
                   measure: Measure) -> int:
    """The changes that fit, taken into `out` (the rest counted as unsaid); the size they add."""
    added = 0
    for change in changes:
        cost = measure(change.block()) + (
            measure("\n\nChanged since given earlier in this session:\n") if not out.changes else 1)
        if budget and size + added + cost + reserve > budget:
            out.unsaid += 1
            continue
        out.changes.append(change)
        added += cost
    return added


class _Shown(Record):
    """A hit given in another form than its own (too long: its line)."""

    hit: Hit
    shown: str

    @property
    def note(self) -> Note:
        return self.hit.note

    @property
    def full(self) -> bool:
        return True  # as whole as this harness's budget ever gives it: not given again this epoch

    def block(self) -> str:
        return self.shown

    def to_json(self) -> dict[str, object]:
        return {**self.hit.to_json(), "full": False, "too_long": True}


def _footer(left: int, directives: int, command: str) -> str:
    if not left:
        return ""
    among = f" ({directives:,} of them directive{'' if directives == 1 else 's'})" if directives else ""
    what = "note did" if left == 1 else "notes did"
    return f"… {left:,} more {what} not fit{among}; `{command}` lists them"


def deliver(store: Store, moment: Moment, budget: int = DEFAULT_BUDGET, skip: int = 0,
            fitter: Callable[..., Delivery] = fit) -> Delivery:
    """`qem deliver`: what the moment triggers, with no session (nothing left out as given),
    fitted by `fitter` (qem_edit.reads.tiers for a moment that gives many notes at once)."""
    if skip < 0:
        raise errors.BadInput(f"--skip {skip}: give a number of notes to leave out")
    from ..base.times import utc_now

    with store.reading():
        return fitter(moment, hits(store, moment)[skip:], [], budget, store.notes_by_id, skip,
                      standings=Standings.read(store, utc_now()))


