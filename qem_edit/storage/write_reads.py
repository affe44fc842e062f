"""The reads a write decides on: latest events, the clock, resting notes, a check-in's events."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..base import cjson
from ..base.replay import Event
from ..system import db
from .index import EVENT_COLUMNS, event_from_row
from .reading import IN_FORCE, IndexReads


class WriteReads(IndexReads):
    """Store's reads for the write transaction (qem_edit.storage.transaction), `qem add` and a check-in."""

    def max_clock(self) -> int:
        return self._read("SELECT coalesce(max(clock), 0) FROM events")[0][0]

    def tips(self, note_id: str) -> list[str]:
        """The note's latest events: those no other event of the note follows."""
        return self.tips_of([note_id]).get(note_id, [])

    def tips_of(self, note_ids: Iterable[str]) -> dict[str, list[str]]:
        """Each note's latest events (`tips`), read at once for many notes."""
        rows: dict[str, list[tuple[str, str]]] = {}
        for chunk in db.chunks(sorted(set(note_ids))):
            for event_id, note, prev in self._read(f"SELECT id, note, prev FROM events WHERE note IN ({db.marks(chunk)})", chunk):
                rows.setdefault(note, []).append((event_id, prev))
        out = {}
        for note, events in rows.items():
            followed = {p for _, prev in events for p in cjson.loads(prev)}
            out[note] = sorted(e for e, _ in events if e not in followed)
        return out

    def clock_holder(self, clock: int) -> str | None:
        """A log file holding an event with this clock (the first by name)."""
        rows = self._read("SELECT f.file FROM events e JOIN event_files f ON f.event = e.id"
                          " WHERE e.clock = ? ORDER BY f.file LIMIT 1", (clock,))
        return rows[0][0] if rows else None

    def dependents(self, base_ids: Iterable[str]) -> list[tuple[str, str]]:
        """The notes resting on any of `base_ids` (qem_edit.base.resting), as (note, base) pairs in
        order."""
        out: list[tuple[str, str]] = []
        for chunk in db.chunks(sorted(set(base_ids))):
            out += self._read(f"SELECT note, base FROM rests WHERE base IN ({db.marks(chunk)})", chunk)
        return sorted(out)

    def owed_flags(self) -> list[tuple[str, str]]:
        """The notes in plain force resting on a note that is not (a base that changed on
        another clone, a note resting on one that came out of force there), as (note, base)
        pairs in order; whether each was flagged for that change already is the caller's
        (resting.flagged_for)."""
        return [tuple(r) for r in self._read(  # type: ignore[misc]
            "SELECT r.note, r.base FROM rests r JOIN notes d ON d.id = r.note JOIN notes b ON b.id = r.base"
            " WHERE d.state = 'active' AND b.state != 'active' ORDER BY r.note, r.base")]

    def same_text_in_force(self, note_ids: list[str]) -> Iterator[tuple[str, list[str]]]:
        """(note, the other notes in force whose text is the same) for each of `note_ids`
        (texts are stored normalized, so this is sameness after normalization)."""
        texts: dict[str, str] = {}
        for chunk in db.chunks(sorted(set(note_ids))):
            texts.update(self._read(f"SELECT id, text FROM notes WHERE id IN ({db.marks(chunk)})", chunk))
        in_force: dict[str, list[str]] = {}  # a text → the notes in force with it
        for start in sorted({text[:48] for text in texts.values()}):  # one search a beginning, not one a note:
            # notes sharing their first 48 characters (a list nested ever deeper) are read once, not once each
            for other, text in self._read(f"SELECT id, text FROM notes WHERE substr(text, 1, 48) = ? AND {IN_FORCE}",
                                          (start,)):  # (the index's search: a term on the whole text would scan)
                in_force.setdefault(text, []).append(other)
        for note_id, text in sorted(texts.items()):
            yield note_id, [other for other in in_force.get(text, ()) if other != note_id]

    def events_of_checkins(self, checkins: Iterable[str]) -> list[Event]:
        rows: list[tuple] = []
        for chunk in db.chunks(sorted(set(checkins))):
            rows += self._read(f"SELECT {EVENT_COLUMNS} FROM events WHERE checkin IN ({db.marks(chunk)})", chunk)
        return [event_from_row(r) for r in rows]
