"""The reads of requests: the notes past their end, those owed, and the answers to them."""

from __future__ import annotations

from collections.abc import Iterable

from ..base.replay import Note
from ..system import db
from .index import NOTE_COLUMNS, note_from_row
from .reading import IndexReads


class RequestReads(IndexReads):
    """Store's reads for qem_edit.reads.owed, qem_edit.reads.answers, delivery and expiry."""

    def due(self, now: str) -> list[Note]:
        """The notes in force past their end at `now` (a UTC time), in the projection's order."""
        rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes INDEXED BY notes_by_end WHERE expires IS NOT NULL"
                          " AND state IN ('active', 'stale') AND expires <= ? ORDER BY kind_rank, id", (now,))
        return [note_from_row(r) for r in rows]

    def requests(self, live: bool = True) -> list[Note]:
        """The requests (notes naming who owes them, or a deadline), in force only where
        `live`, in the projection's order."""
        where = " AND state IN ('active', 'stale')" if live else ""
        rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes INDEXED BY notes_requests"
                          f" WHERE (seat IS NOT NULL OR due IS NOT NULL){where} ORDER BY kind_rank, id")
        return [note_from_row(r) for r in self._seen(rows)]

    def answers_to(self, note_ids: Iterable[str]) -> dict[str, list[Note]]:
        """For each of `note_ids`, the notes whose `answers` names it (any state)."""
        out: dict[str, list[Note]] = {}
        for chunk in db.chunks(sorted(set(note_ids))):
            rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes WHERE answers IN ({db.marks(chunk)})", chunk)
            for note in map(note_from_row, self._seen(rows)):
                out.setdefault(str(note.answers), []).append(note)
        return out

    def dangling_answers(self) -> list[Note]:
        """The answers whose request is not in this log (a branch not merged here)."""
        rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes AS n INDEXED BY notes_by_answered WHERE answers IS NOT NULL"
                          " AND NOT EXISTS (SELECT 1 FROM notes p WHERE p.id = n.answers) ORDER BY kind_rank, id")
        return [note_from_row(r) for r in rows]
