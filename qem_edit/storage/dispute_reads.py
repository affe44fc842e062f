"""The reads of disagreement: disputes by id, forks, and the notes that disagree."""

from __future__ import annotations

from collections.abc import Iterable

from ..base import errors
from ..base.replay import Note
from ..system import db
from .index import NOTE_COLUMNS, note_from_row
from .reading import IN_FORCE, IndexReads


class DisputeReads(IndexReads):
    """Store's reads for qem_edit.reads.standing, the transaction's rulings and export's patch."""

    def dispute_id(self, given: str) -> str:
        rows = self._read(
            "SELECT DISTINCT json_extract(data, '$.dispute') FROM events WHERE type = 'disputed'"
            " AND json_extract(data, '$.dispute') >= ? AND json_extract(data, '$.dispute') < ?", (given, given + "{"))
        if len(rows) != 1:
            what = "no dispute" if not rows else f"{len(rows)} disputes start with"
            raise errors.NoSuchNote(f"{what} {given} in this memory")
        return rows[0][0]

    def dispute_sides(self, given: str) -> tuple[str, str]:
        """The two notes of an open or closed dispute between notes, by its id or a prefix."""
        rows = self._read(
            "SELECT DISTINCT json_extract(data, '$.dispute'), note FROM events WHERE type = 'disputed'"
            " AND json_extract(data, '$.dispute') >= ? AND json_extract(data, '$.dispute') < ? ORDER BY 2",
            (given, given + "{"),
        )
        disputes = sorted({d for d, _ in rows})
        if len(disputes) != 1:
            what = "no dispute" if not disputes else f"{len(disputes)} disputes start with"
            raise errors.NoSuchNote(f"{what} {given} in this memory")
        sides = sorted(n for d, n in rows if d == disputes[0])
        if len(sides) != 2:
            raise errors.NoSuchNote(f"dispute {given} does not have two sides in this memory")
        return sides[0], sides[1]

    def has_disagreements(self) -> bool:
        """Whether any note is disputed or forked (export then marks them, from the graph).
        Asked once per moment of the index (the answer reads every supersession): a
        command asks it again and again as it renders and compares."""
        moment = self.moment(self.head())
        if self._calm_known is not None and self._calm_known[0] == moment:
            return self._calm_known[1]
        found = bool(self._read(
            "SELECT 1 FROM notes INDEXED BY notes_disagreeing WHERE disputes != '[]' OR rivals != '[]' UNION ALL SELECT 1 FROM"
            " (SELECT supersedes FROM notes WHERE supersedes IS NOT NULL"
            "  GROUP BY supersedes HAVING count(*) > 1) LIMIT 1"))
        if not self.conn.in_transaction or self._reading:  # (inside a write, the index may not match its moment yet)
            self._calm_known = (moment, found)
        return found

    def forked_in_force(self) -> set[str]:
        """The notes in force that supersede a note another note in force supersedes too."""
        return {note for kids in self.forks_in_force().values() for note in kids}

    def forks_in_force(self) -> dict[str, list[str]]:
        """Each note two or more notes in force supersede → those notes, in id order."""
        out: dict[str, list[str]] = {}
        for note, parent in self._read(
                f"SELECT id, supersedes FROM notes WHERE {IN_FORCE} AND supersedes IN (SELECT supersedes FROM notes"
                f" INDEXED BY notes_by_parent WHERE supersedes IS NOT NULL AND {IN_FORCE} GROUP BY supersedes"
                " HAVING count(*) > 1) ORDER BY id"):
            out.setdefault(parent, []).append(note)
        return out

    def forks_among(self, parents: Iterable[str]) -> dict[str, list[str]]:
        """Of these notes, each two or more notes in force supersede → those notes, in id
        order (read by the index on parents: the cost follows the notes asked about)."""
        out: dict[str, list[str]] = {}
        for chunk in db.chunks(sorted(set(parents))):
            for note, parent in self._read(
                    f"SELECT id, supersedes FROM notes INDEXED BY notes_by_parent WHERE supersedes IN"
                    f" ({db.marks(chunk)}) AND {IN_FORCE} ORDER BY supersedes, id", chunk):
                out.setdefault(parent, []).append(note)
        return {parent: kids for parent, kids in out.items() if len(kids) > 1}

    def disagreeing(self) -> list[Note]:
        """The notes, in any state, with disputes or concurrent changes that disagree (few:
        read by the index made for them), in id order."""
        return [note_from_row(r) for r in self._read(
            f"SELECT {NOTE_COLUMNS} FROM notes INDEXED BY notes_disagreeing WHERE disputes != '[]' OR rivals != '[]'"
            " ORDER BY id")]
