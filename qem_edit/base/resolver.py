"""Which note is current, three-valued, by following `supersedes` pointers.

Pure: notes in, answers out.  The answer is `yes`, `no` or `unknown`, always with the
reason.  Resolution follows the single-parent pointer, never the clock: a later timestamp
does not win.  The store's own write path cannot make bad graphs, but logs loaded from
elsewhere can, so the resolver never guesses: a cycle makes every note on it (and every
note downstream of it) unknown; a dangling or malformed pointer makes its note and that
note's successors unknown; two live successors of one note (a fork) are each unknown until
a ruling leaves one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from . import ids
from .records import Record
from .replay import PAST_MARK, PAST_WHY, Note, past_end


class Answer(Record):
    note_id: str
    value: str  # yes, no, unknown
    reason: str
    shown: str = ""

    def to_json(self) -> dict[str, object]:
        return {"id": self.note_id, "short": self.shown or self.note_id, "current": self.value, "reason": self.reason}


class Graph:
    """The supersession graph of a set of notes, with its anomalies found once."""

    def __init__(self, notes: Mapping[str, Note], numbered: dict[str, str] | None = None,
                 now: str | None = None) -> None:
        self.notes = notes
        self.now = now  # when given, a note in force past its end (replay.past_end) is not current
        self.children: dict[str, list[str]] = {}
        self.cycles: list[tuple[str, ...]] = []
        self.dangling: dict[str, str] = {}  # note → missing target
        self.malformed: dict[str, str] = {}  # note → raw pointer
        self.poisoned: dict[str, str] = {}  # note → why it is unknown
        self.numbered = numbered  # a converted note's old number, hashed → the note

    @classmethod
    def of(cls, notes: Mapping[str, Note], now: str | None = None) -> "Graph":
        """The graph of `notes`; with `now` (a UTC time), currency judged then too: the
        rendering of MEMORY.md gives none, and never consults a clock."""
        graph = cls(notes, now=now)
        graph._build()
        return graph

    def _build(self) -> None:
        notes = self.notes
        for note in sorted(notes.values(), key=lambda n: n.id):
            if note.bad_pointer is not None:
                self.malformed[note.id] = note.bad_pointer
            if note.supersedes is not None:
                parent = self.parent(note.id)
                if parent in notes:
                    self.children.setdefault(parent, []).append(note.id)
                else:
                    self.dangling[note.id] = note.supersedes
            elif note.state == "superseded" and note.superseded_by is not None and note.superseded_by not in notes:
                self.dangling[note.id] = note.superseded_by
        self._find_cycles()
        for note_id, target in self.dangling.items():
            self._poison(note_id, f"#{self.name(note_id)} points to #{self.name(target)}, which is not in the log (dangling pointer)")
        for note_id, raw in self.malformed.items():
            self._poison(note_id, f"#{self.name(note_id)} has a malformed supersedes pointer {raw}")
        for cycle in self.cycles:
            path = " → ".join(f"#{self.name(n)}" for n in (*cycle, cycle[0])) + self.old_numbers(cycle)
            for note_id in cycle:
                self._poison(note_id, f"supersession cycle {path}")
        for note in self.notes.values():
            if note.rivals:
                self._poison(note.id, f"#{note.shown}: {rival_words(note, self.name)}; no ruling yet (qem rule {note.shown} --keep SIDE)")

    def _find_cycles(self) -> None:
        # Each note has at most one parent, so following parents from any note either ends
        # or enters exactly one cycle.
        done: set[str] = set()
        for start in sorted(self.notes):
            path: list[str] = []
            on_path: dict[str, int] = {}
            node: str | None = start
            while node is not None and node in self.notes and node not in done:
                if node in on_path:
                    cycle = path[on_path[node]:]
                    low = cycle.index(min(cycle))
                    self.cycles.append(tuple(cycle[low:] + cycle[:low]))
                    break
                on_path[node] = len(path)
                path.append(node)
                node = self.parent(node)
            done.update(path)

    def parent(self, note_id: str) -> str | None:
        """The note `note_id` supersedes: its pointer, or the note a converted log's
        pointer names by its old number (ids.numbered_pointer)."""
        target = self.notes[note_id].supersedes
        if target is None or target in self.notes:
            return target
        if self.numbered is None:
            self.numbered = ids.renumbered({n.id: n.alias for n in self.notes.values() if n.alias is not None})
        return self.numbered.get(target, target)

    def old_numbers(self, cycle: tuple[str, ...]) -> str:
        """` (numbered #1 → #2 → #1 before the conversion)`, for a cycle of converted notes."""
        numbers = [self.notes[n].alias for n in cycle]
        if None in numbers:
            return ""
        return f" (numbered {' → '.join(f'#{a}' for a in (*numbers, numbers[0]))} before the conversion)"

    def name(self, note_id: str) -> str:
        """A note as messages name it: its short id."""
        note = self.notes.get(note_id)
        return note.shown if note is not None else ids.shown(note_id)

    def _poison(self, root: str, reason: str) -> None:
        """`root` and every note downstream of it (its successors, theirs...) are unknown."""
        stack = [root]
        while stack:
            node = stack.pop()
            if node in self.poisoned:
                continue
            self.poisoned[node] = reason if node == root else f"{reason} (#{self.name(node)} descends from #{self.name(root)})"
            stack.extend(self.children.get(node, []))

    # -- forks -------------------------------------------------------------------------

    def live_siblings(self, note: Note) -> list[str]:
        """Other live successors of this note's parent: a fork while the list is not empty."""
        if note.supersedes is None:
            return []
        return [
            c for c in self.children.get(note.supersedes, [])
            if c != note.id and self.notes[c].live
        ]

    def forks(self) -> dict[str, list[str]]:
        """parent → its live successors, for every note more than one live note supersedes
        (an open fork: a ruling, or revoking all but one, closes it)."""
        out = {}
        for parent, kids in self.children.items():
            live = [k for k in kids if self.notes[k].live]
            if len(live) > 1:
                out[parent] = live
        return out

    # -- answers -------------------------------------------------------------------------

    def currency(self, note_id: str) -> Answer:
        note = self.notes[note_id]
        if self.now is not None and past_end(note, self.now):  # out of force by its own end, whatever the graph says
            return Answer(note_id, "no", f"{PAST_MARK} {note.expires}: {PAST_WHY}")
        if note_id in self.poisoned:
            return Answer(note_id, "unknown", self.poisoned[note_id])
        if note.state == "forgotten":
            return Answer(note_id, "no", "forgotten")
        kids = self.children.get(note_id, [])
        if len(kids) > 1:
            names = " and ".join(f"#{self.name(k)}" for k in kids)
            return Answer(note_id, "no", f"superseded, and forked: {names} both supersede it")
        if kids:
            return Answer(note_id, "no", f"superseded by #{self.name(kids[0])}")
        if note.state == "superseded":
            return Answer(note_id, "no", f"superseded by #{self.name(note.superseded_by or '')}")
        if note.state in ("revoked", "expired"):
            why = f": {note.state_reason}" if note.state_reason else ""
            return Answer(note_id, "no", f"{note.state} {note.state_at or ''}{why}".rstrip())
        siblings = self.live_siblings(note)
        if note.live and siblings:
            names = [f"#{self.name(note_id)}", *(f"#{self.name(s)}" for s in siblings)]
            both = "both" if len(names) == 2 else "all"
            return Answer(
                note_id,
                "unknown",
                f"fork: {', '.join(names[:-1])} and {names[-1]} {both} supersede #{self.name(note.supersedes or '')};"
                " no ruling yet",
            )
        if note.state == "stale":
            return Answer(note_id, "yes", "current, but flagged stale" + (f": {note.state_reason}" if note.state_reason else ""))
        return Answer(note_id, "yes", "current: in force, nothing supersedes it")

    def problems(self) -> list[str]:
        out = [f"cycle: {' → '.join(f'#{self.name(n)}' for n in (*c, c[0]))}{self.old_numbers(c)}" for c in self.cycles]
        out += [f"dangling: #{self.name(n)} points to #{self.name(t)}, which is not in the log" for n, t in sorted(self.dangling.items())]
        out += [f"malformed: #{self.name(n)} has supersedes pointer {raw}" for n, raw in sorted(self.malformed.items())]
        out += [
            f"fork: #{self.name(p)} is superseded by " + " and ".join(f"#{self.name(k)}" for k in kids)
            + f" (qem rule {self.name(p)} --keep {self.name(kids[0])})"
            for p, kids in sorted(self.forks().items())
        ]
        out += [f"disputed: {rival_words(n, self.name)} (qem rule {n.shown} --keep SIDE)"
                for n in sorted(self.notes.values(), key=lambda n: n.id) if n.rivals]
        return out


def disputed_with(note: Note, graph: Graph) -> list[tuple[str, list[str]]]:
    """The open disagreements a note is part of: (label, other notes), for markers."""
    if not note.live:
        return []
    out: list[tuple[str, list[str]]] = []
    for dispute, other in note.disputes:
        other_note = graph.notes.get(other)
        if other_note is None or other_note.live:
            out.append((f"dispute {ids.side_shown(dispute)}", [other]))
    siblings = graph.live_siblings(note)
    if siblings:
        out.append((f"fork of #{graph.name(note.supersedes or '')}", siblings))
    return out


def rival_words(note: Note, shown: Callable[[str], str] | None = None) -> str:
    """What concurrent changes of a note's state each did, for messages; `shown` gives a
    note's short id (else its id's first 8 characters)."""
    name = shown or ids.shown
    sides = []
    for rival in note.rivals:
        side = f"{rival.type} by {rival.actor}" + (f" (#{name(rival.superseded_by)})" if rival.superseded_by else "")
        sides.append(f"{side} [side {ids.side_shown(rival.tip)}]")
    return "concurrent changes disagree: " + " vs ".join(sides)
