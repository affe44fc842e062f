"""What every read says of a note beyond its state: past its end, in dispute.

What every read says of a note beyond its state: past its end and not swept yet, and
the open disputes it is a side of.  One decision, made here, for `qem show`, `qem status`,
`qem query`, `qem context`, the hooks' replies (qem_edit.reads.delivery, qem_edit.reads.tiers), the MCP
tools and resources (which call those reads) and `qem verify`'s list of disputes, so that
no two of them answer the same note differently.

Past its end: a note in force whose end (`expires`) is at or before now (replay.past_end).
It is not in force in truth, but it stays active in the log until `qem expire --due`
records its expiry: a read names it, never hides it, never expires it.

In dispute: a note in force that is a side of a dispute `qem dispute` opened and no ruling
closed, whose other side is in force too (a side that left force ends it, as MEMORY.md
shows it: resolver.disputed_with); that has concurrent changes that disagree (rivals); or
that is one of two or more notes in force superseding the same note (a fork).  Each is
named with the other side's short id and the command that settles it.

The facts the decision needs are read once per answer, from the index's small tables of
disagreeing notes and forks (`Standings.read`), or from the notes a replay gave
(`Standings.of_notes`, for `--at`); deciding then needs no further read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ..base import ids
from ..base.records import Record
from ..base.replay import PAST_MARK, PAST_WHY, Note, past_end

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..storage.store import Store

DISPUTED_MARK = "DISPUTED"


class Disagreement(Record):
    """One open disagreement a note is a side of: what it is (`label`: `dispute ID`, `fork
    of #P`, `concurrent changes`), the other sides by short id, and the command settling it."""

    label: str
    others: tuple[str, ...]
    settle: str

    def mark(self) -> str:
        sides = f" with {', '.join('#' + o for o in self.others)}" if self.others else ""
        return f"{DISPUTED_MARK}{sides} ({self.label})"

    def to_json(self) -> dict[str, object]:
        return {"what": self.label, "with": list(self.others), "settle": self.settle}


class Standing(Record):
    """What every read says of one note beyond its state: its end when it is past it (and
    not swept yet: None otherwise) and its open disagreements."""

    past_end: str | None = None
    disputes: tuple[Disagreement, ...] = ()

    def marks(self) -> list[str]:
        """The marks a line of the note carries (`PAST ITS END ...`, `DISPUTED with ...`)."""
        return ([f"{PAST_MARK} {self.past_end}"] if self.past_end else []) + [d.mark() for d in self.disputes]

    def said(self) -> list[str]:
        """The same, as whole sentences with what to do (`qem show`, `qem status`)."""
        out = [f"{PAST_MARK} {self.past_end}: {PAST_WHY} (active in the log until then)"] if self.past_end else []
        return out + [f"{d.mark()}: settle with `{d.settle}`" for d in self.disputes]

    def to_json(self) -> dict[str, object]:
        return {"past_end": self.past_end is not None, "open_disputes": [d.to_json() for d in self.disputes]}


class Standings:
    """The facts the decision needs, for one answer: the notes with disputes or rivals (any
    state: a dispute's other side may have left force), the forks among the notes in
    force (parent → its successors in force), the short ids that name them, and now."""

    def __init__(self, now: str, disagreeing: Mapping[str, Note] | None = None,
                 forks: Mapping[str, list[str]] | None = None, name: Callable[[str], str] | None = None) -> None:
        self.now = now
        self.disagreeing = dict(disagreeing or {})
        self.forked = {child: parent for parent, kids in (forks or {}).items() for child in kids}
        self.forks = dict(forks or {})
        self.name = name or ids.shown

    @classmethod
    def read(cls, store: "Store", now: str, about: Iterable[Note] | None = None) -> "Standings":
        """From the index (inside one `store.reading()` where the answer reads more); with
        `about`, the forks only those notes may be in (a hook's few, read by their parents)."""
        disagreeing = {n.id: n for n in store.disagreeing()}
        if about is None:
            forks = store.forks_in_force()
        else:
            forks = store.forks_among(n.supersedes for n in about if n.supersedes is not None and n.live)
        named = set(disagreeing) | set(forks) | {c for kids in forks.values() for c in kids} | {
            other for n in disagreeing.values() for _, other in n.disputes}
        shorts = store.shorts(named) if named else {}
        return cls(now, disagreeing, forks, lambda i: ids.shown(i, shorts.get(i)))

    @classmethod
    def of_notes(cls, notes: Mapping[str, Note], now: str) -> "Standings":
        """From a set of notes held whole (a replay as of a date; a graph's)."""
        forks: dict[str, list[str]] = {}
        for note in sorted(notes.values(), key=lambda n: n.id):
            if note.live and note.supersedes is not None:
                forks.setdefault(note.supersedes, []).append(note.id)
        return cls(now, {i: n for i, n in notes.items() if n.disputes or n.rivals},
                   {p: kids for p, kids in forks.items() if len(kids) > 1},
                   lambda i: notes[i].shown if i in notes else ids.shown(i))

    def of(self, note: Note) -> Standing:
        """The decision for one note (as it is now: the note a read holds)."""
        end = note.expires if past_end(note, self.now) else None
        return Standing(end, tuple(self.disputes_of(note)) if note.live else ())

    def disputes_of(self, note: Note) -> list[Disagreement]:
        out = []
        for dispute, other in note.disputes:
            side = self.disagreeing.get(other)
            if side is None or side.live:  # a side that left force ended it; one not in the index may not have
                short = ids.side_shown(dispute)
                out.append(Disagreement(f"dispute {short}", (self.name(other),), f"qem rule {short} --keep ONE"))
        if note.rivals:
            from ..base.resolver import rival_words  # (rivals are rare: a read without them loads no resolver)

            out.append(Disagreement(rival_words(note, self.name), (), f"qem rule {self.name(note.id)} --keep SIDE"))
        parent = self.forked.get(note.id)
        if parent is not None:
            others = tuple(self.name(k) for k in self.forks[parent] if k != note.id)
            out.append(Disagreement(f"fork of #{self.name(parent)}", others,
                                    f"qem rule {self.name(parent)} --keep {self.name(note.id)}"))
        return out

    def open_disputes(self) -> Iterable[tuple[str, str, str]]:
        """Every open dispute between two notes once: (its short id, one side's short id,
        the other's), in the order of the first side's id, for `qem verify`."""
        seen: set[str] = set()
        for note in sorted(self.disagreeing.values(), key=lambda n: n.id):
            for dispute, other in note.disputes:
                side = self.disagreeing.get(other)
                if dispute in seen or not note.live or (side is not None and not side.live):
                    continue
                seen.add(dispute)
                yield ids.side_shown(dispute), self.name(note.id), self.name(other)
