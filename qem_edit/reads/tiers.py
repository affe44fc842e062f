"""A moment that gives many notes at once: each due note as a line, whole texts while room remains.

What a moment that gives many notes at once gives (a session's start, its return from a
compaction, a subagent's start): every due note at least as one line, whole texts while
room remains.

The seed's two-tier recall (the vectr post, section 08), made exact.  The first tier is a
line for every due note: `- [#id] kind/priority · first line`, with its provenance only
where it is not an agent's (said once, above the notes) and STALE where flagged.  The
second gives the notes' other lines under their first, in the one order, to each note
whose remaining lines fit what the budget has left (a note too long for it stays a line,
ending in `…`, and hides nothing after it; a first line past 200 characters is cut in
its line, which says so and names `qem show ID`).  Notes come in groups by why they came, each
reason said once, as the group's heading.  Only when the lines alone exceed the budget is
anything left out: a tail of the order, counted in the last line with the `qem deliver`
command that lists it.  The budget is in the harness's own unit (`measure`).
"""

from __future__ import annotations


from ..base import errors
from ..base.records import Record
from ..base.replay import Note, scope_mark
from ..base.vocabulary import FRAMES
from . import delivery
from .delivery import (CUT, NOTES_PER_FETCH, TIERED, Change, Delivery, Fetch, Measure, Moment, Ranks, fitted_changes,
                       footer_room, indented)
from .standing import Standing, Standings

DEFAULT_PROVENANCE = "agent"
PREAMBLE = ("Recorded by an agent unless marked: verify before relying on a note. A line ending in … has more:"
            " `qem show ID` gives it whole.")


class Listed(Record):
    """A note given at a tiered moment: as its line, or whole (`whole`)."""

    note: Note
    why: str
    whole: bool = False
    standing: Standing = Standing()

    @property
    def full(self) -> bool:
        """Given as whole as it is: whole, or a line that is all of it (the ledger's word)."""
        return self.whole or not self.more()

    def more(self) -> bool:
        """Whether the note holds more than its line shows."""
        text = self.note.text if self.note.text is not None else self.note.first_line()
        first = self.note.first_line().strip()
        return len(first) > CUT or text.strip() != first

    def head(self) -> str:
        n = self.note
        marks = "" if n.provenance == DEFAULT_PROVENANCE else f" · {FRAMES.get(n.provenance, n.provenance)}"
        marks += (" · STALE" if n.state == "stale" else "") + delivery.standing_marks(n, self.standing)
        marks += delivery.requested(n, self.why)
        marks += f" · {scope_mark(n)}" if n.local else ""
        return f"- [#{n.shown}] {n.kind}/{n.priority}{marks} · "

    def line(self) -> str:
        """The first tier's line: the whole first line, or, past CUT characters, its start
        saying it was cut and how to read the rest (the second tier may give it whole)."""
        first = self.note.first_line().strip()
        if len(first) > CUT:
            return (self.head() + first[: CUT - 1].rstrip() + f"… [cut at {CUT} of {len(first):,} characters:"
                    f" `qem show {self.note.shown}` gives it whole]")
        return self.head() + first + (" …" if self.more() else "")

    def block(self) -> str:
        if not self.whole:
            return self.line()
        text = (self.note.text if self.note.text is not None else self.note.first_line()).strip("\n")
        first, _, rest = text.partition("\n")
        return self.head() + first.strip() + ("\n" + indented(rest) if rest else "")

    def to_json(self) -> dict[str, object]:
        return delivery.given_json(self.note, self.standing, self.why, self.full)


def least(note: Note) -> int:
    """The fewest characters a note's line and its newline take in a tiered reply (its
    marks, its cut, its `…` only add), and so the fewest units in any harness's measure:
    what a hook reads ahead counts against the budget."""
    first = note.first_line().strip()
    return len(f"- [#{note.shown}] {note.kind}/{note.priority} · ") + (len(first) if len(first) <= CUT else 0) + 1


def _group(why: str) -> str:
    return f"## {why[:1].upper()}{why[1:]}"


class Tiered(Delivery):
    """A tiered moment's reply: the changes, then the notes grouped by why they came."""

    def given_parts(self) -> list[str]:
        groups: dict[str, list[Listed]] = {}
        for listed in self.given:
            groups.setdefault(listed.why, []).append(listed)
        return [PREAMBLE] + [_group(why) + f" ({len(shown):,})\n\n" + "\n".join(h.block() for h in shown)
                             for why, shown in groups.items()]


def fit_tiers(moment: Moment, entries: Ranks, changes: list[Change], budget: int, fetch: Fetch,
              skip: int = 0, measure: Measure = len, standings: Standings | None = None) -> Tiered:
    """The changes, then a line for each note due in order while the lines fit `budget`
    (the first that does not ends it, counted), then whole texts in order where room
    remains.  `fetch` reads the notes' texts a few at a time."""
    if budget < 0:
        raise errors.BadInput(f"--budget {budget}: give a number of characters (0: no limit)")
    out = Tiered(moment, budget, skip=skip)
    heading, reserve = measure(out.heading()), footer_room(entries, changes, measure)
    size = heading + fitted_changes(out, changes, budget, heading, reserve, measure)
    room = (budget - reserve or -1) if budget else 0  # (0: no limit; a budget the last lines fill leaves none)
    size = _lines(out, entries, room, size, fetch, measure,
                  delivery.standings_now(standings))
    if budget:
        _wholes(out, budget - reserve - size, measure)
    else:
        out.given = [h._replace(whole=True) for h in out.given]
    return out


def _lines(out: Tiered, entries: Ranks, room: int, size: int, fetch: Fetch, measure: Measure,
           standings: Standings) -> int:
    """The first tier: a line for each note in order while `room` holds it (0: no limit);
    returns the size taken."""
    notes: dict[str, Note] = {}
    groups: set[str] = set()
    for i, entry in enumerate(entries):
        if entry.due.id not in notes:
            notes.update(fetch(entries[i:i + NOTES_PER_FETCH].ids()))
        note = notes.get(entry.due.id)
        listed = Listed(note, entry.due.why, standing=standings.of(note)) if note is not None else None
        cost = 0 if listed is None else measure(listed.line()) + 1
        if listed is not None and not out.given:
            cost += measure("\n\n" + PREAMBLE)
        if listed is not None and listed.why not in groups:  # its heading, its count at its longest
            cost += measure(f"\n\n{_group(listed.why)} ({len(entries):,})\n")
        if listed is None or (room and size + cost > room):
            out.left = entries[i:]
            break
        groups.add(listed.why)
        out.given.append(listed)
        size += cost
    return size


def _wholes(out: Tiered, room: int, measure: Measure) -> None:
    """The second tier: each listed note, in order, whole where its other lines fit what
    is left of `room`."""
    for i, listed in enumerate(out.given):
        if not listed.more():
            continue
        whole = listed._replace(whole=True)
        extra = measure(whole.block()) - measure(listed.line())
        if extra <= room:
            out.given[i] = whole
            room -= extra


def fitter(moments: list[Moment]):  # type: ignore[no-untyped-def]
    """How a reply giving these moments is fitted: in two tiers where one of them gives
    many notes at once, else note by note (qem_edit.reads.delivery.fit)."""
    return fit_tiers if any(m.event in TIERED for m in moments) else delivery.fit


def deliver(store, moment: Moment, budget: int = delivery.DEFAULT_BUDGET,  # type: ignore[no-untyped-def]
            skip: int = 0) -> Delivery:
    """`qem deliver`: what the moment gives, fitted as a hook fits it."""
    return delivery.deliver(store, moment, budget, skip, fitter([moment]))
