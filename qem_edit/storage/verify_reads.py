"""The reads `qem verify` checks the index with: a fresh replay's differences, the fold's findings."""

from __future__ import annotations

import sqlite3
from typing import Callable

from .index import differences
from .reading import IndexReads, T


class VerifyReads(IndexReads):
    """Store's reads for qem_edit.mirror.verify."""

    def read_index(self, read: Callable[[sqlite3.Connection], T]) -> T:
        """`read` (one of qem_edit.storage.index's reads, given the index's connection), SQLite's
        errors translated as every read's are."""
        return self._guarded(lambda: read(self.conn))

    def differences_from(self, fresh: sqlite3.Connection) -> list[str]:
        """Where the index differs from `fresh`, an index of the log replayed afresh
        (qem_edit.storage.index.differences); a damaged index, or one that cannot be read, says so."""
        try:
            damage = self.conn.execute("PRAGMA quick_check").fetchone()[0]
            if damage != "ok":
                return [f"the index is damaged ({damage}); `qem verify --repair` rebuilds it"]
            return differences(self.conn, fresh)
        except sqlite3.DatabaseError as exc:
            return [f"the index cannot be read ({exc}); `qem verify --repair` rebuilds it"]

    def note_problems(self) -> list[tuple[str, str]]:
        """(short id, its problems as a JSON array) of every note the fold found problems in, in id order."""
        return self._read("SELECT short, problems FROM notes WHERE problems != '[]' ORDER BY id")

    def events_without_note(self) -> list[tuple[str, str]]:
        """(event, note) of every event whose note's creation the log does not hold, in id order."""
        return self._read(
            "SELECT e.id, e.note FROM events e LEFT JOIN notes n ON n.id = e.note WHERE n.id IS NULL ORDER BY e.id")

    def textless(self) -> list[str]:
        """The short ids of the notes whose text is missing (and not forgotten), in id order."""
        return [short for (short,) in self._read(
            "SELECT n.short FROM notes n WHERE n.state != 'forgotten' AND n.text IS NULL ORDER BY n.id")]

    def claimed_numbers(self) -> list[tuple[int, int]]:
        """(old number, how many notes claim it) for every old number more than one note claims."""
        return self._read("SELECT alias, count(*) FROM notes WHERE alias IS NOT NULL GROUP BY alias HAVING count(*) > 1")

    def texts_without_note(self) -> list[tuple[str, str]]:
        """(note, file) of every text whose note's creation the log does not hold, by file."""
        return self._read("SELECT t.note, t.file FROM texts t LEFT JOIN notes n ON n.id = t.note"
                          " WHERE n.id IS NULL ORDER BY t.file")
