"""Which note is current?  Three-valued answers by following `supersedes` pointers.

Pure: notes in, answers out.  The answer is `yes`, `no` or `unknown`, always with the
reason.  Resolution follows the single-parent pointer, never the clock: a later timestamp
does not win.  The store's own write path cannot make bad graphs, but logs loaded from
elsewhere can, so the resolver never guesses: a cycle makes every note on it (and every
note downstream of it) unknown; a dangling or malformed pointer makes its note and that
note's successors unknown; two live successors of one note (a fork) are each unknown until
a ruling leaves one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .model import Note


@dataclass(frozen=True)
class Answer:
    note_id: int
    value: str  # yes, no, unknown
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"id": self.note_id, "current": self.value, "reason": self.reason}


@dataclass
class Graph:
    """The supersession graph of a set of notes, with its anomalies found once."""

    notes: Mapping[int, Note]
    children: dict[int, list[int]] = field(default_factory=dict)
    cycles: list[tuple[int, ...]] = field(default_factory=list)
    dangling: dict[int, int] = field(default_factory=dict)  # note → missing target
    malformed: dict[int, str] = field(default_factory=dict)  # note → raw pointer
    poisoned: dict[int, str] = field(default_factory=dict)  # note → why it is unknown

    @classmethod
    def of(cls, notes: Mapping[int, Note]) -> "Graph":
        graph = cls(notes)
        graph._build()
        return graph

    def _build(self) -> None:
        notes = self.notes
        for note in sorted(notes.values(), key=lambda n: n.id):
            if note.bad_pointer is not None:
                self.malformed[note.id] = note.bad_pointer
            if note.supersedes is not None:
                if note.supersedes in notes:
                    self.children.setdefault(note.supersedes, []).append(note.id)
                else:
                    self.dangling[note.id] = note.supersedes
            elif note.state == "superseded" and note.superseded_by is not None and note.superseded_by not in notes:
                self.dangling[note.id] = note.superseded_by
        self._find_cycles()
        for note_id, target in self.dangling.items():
            self._poison(note_id, f"#{note_id} points to #{target}, which is not in the store (dangling pointer)")
        for note_id, raw in self.malformed.items():
            self._poison(note_id, f"#{note_id} has a malformed supersedes pointer {raw}")
        for cycle in self.cycles:
            path = " → ".join(f"#{n}" for n in (*cycle, cycle[0]))
            for note_id in cycle:
                self._poison(note_id, f"supersession cycle {path}")

    def _find_cycles(self) -> None:
        # Each note has at most one parent, so following parents from any note either ends
        # or enters exactly one cycle.
        done: set[int] = set()
        for start in sorted(self.notes):
            path: list[int] = []
            on_path: dict[int, int] = {}
            node: int | None = start
            while node is not None and node in self.notes and node not in done:
                if node in on_path:
                    cycle = path[on_path[node]:]
                    low = cycle.index(min(cycle))
                    self.cycles.append(tuple(cycle[low:] + cycle[:low]))
                    break
                on_path[node] = len(path)
                path.append(node)
                node = self.notes[node].supersedes
            done.update(path)

    def _poison(self, root: int, reason: str) -> None:
        """`root` and every note downstream of it (its successors, theirs...) are unknown."""
        stack = [root]
        while stack:
            node = stack.pop()
            if node in self.poisoned:
                continue
            self.poisoned[node] = reason if node == root else f"{reason} (#{node} descends from #{root})"
            stack.extend(self.children.get(node, []))

    # -- forks -------------------------------------------------------------------------

    def live_siblings(self, note: Note) -> list[int]:
        """Other live successors of this note's parent: a fork while the list is not empty."""
        if note.supersedes is None:
            return []
        return [
            c for c in self.children.get(note.supersedes, [])
            if c != note.id and self.notes[c].live
        ]

    def forks(self) -> dict[int, list[int]]:
        """parent → its successors, for every note superseded by more than one note."""
        return {p: kids for p, kids in self.children.items() if len(kids) > 1}

    # -- answers -------------------------------------------------------------------------

    def currency(self, note_id: int) -> Answer:
        note = self.notes[note_id]
        if note_id in self.poisoned:
            return Answer(note_id, "unknown", self.poisoned[note_id])
        if note.state == "forgotten":
            return Answer(note_id, "no", "forgotten")
        kids = self.children.get(note_id, [])
        if len(kids) > 1:
            names = " and ".join(f"#{k}" for k in kids)
            return Answer(note_id, "no", f"superseded, and forked: {names} both supersede it")
        if kids:
            return Answer(note_id, "no", f"superseded by #{kids[0]}")
        if note.state == "superseded":
            return Answer(note_id, "no", f"superseded by #{note.superseded_by}")
        if note.state in ("revoked", "expired"):
            why = f": {note.state_reason}" if note.state_reason else ""
            return Answer(note_id, "no", f"{note.state} {note.state_at or ''}{why}".rstrip())
        siblings = self.live_siblings(note)
        if note.live and siblings:
            names = [f"#{note_id}", *(f"#{s}" for s in siblings)]
            both = "both" if len(names) == 2 else "all"
            return Answer(
                note_id,
                "unknown",
                f"fork: {', '.join(names[:-1])} and {names[-1]} {both} supersede #{note.supersedes};"
                " no ruling yet",
            )
        if note.state == "stale":
            return Answer(note_id, "yes", "current, but flagged stale" + (f": {note.state_reason}" if note.state_reason else ""))
        return Answer(note_id, "yes", "current: in force, nothing supersedes it")

    def problems(self) -> list[str]:
        out = [f"cycle: {' → '.join(f'#{n}' for n in (*c, c[0]))}" for c in self.cycles]
        out += [f"dangling: #{n} points to #{t}, which is not in the store" for n, t in sorted(self.dangling.items())]
        out += [f"malformed: #{n} has supersedes pointer {raw}" for n, raw in sorted(self.malformed.items())]
        out += [
            f"fork: #{p} is superseded by " + " and ".join(f"#{k}" for k in kids)
            for p, kids in sorted(self.forks().items())
        ]
        return out


def disputed_with(note: Note, graph: Graph) -> list[tuple[str, list[int]]]:
    """The open disagreements a note is part of: (label, other notes), for markers."""
    if not note.live:
        return []
    out: list[tuple[str, list[int]]] = []
    for dispute, other in note.disputes:
        other_note = graph.notes.get(other)
        if other_note is None or other_note.live:
            out.append((f"dispute {dispute}", [other]))
    siblings = graph.live_siblings(note)
    if siblings:
        out.append((f"fork of #{note.supersedes}", siblings))
    return out
