"""The reads of a memory's transfer: the dump's events with texts, a staged dump, texts held."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..base.replay import Event
from ..system import db
from .index import EVENT_COLUMNS, event_from_row
from .reading import IndexReads, Scope

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..system.files import AnyPath


class TransferReads(IndexReads):
    """Store's reads for qem_edit.transfer: dump, load, mdimport and vectr."""

    def events_with_texts(self) -> Iterator[tuple[Event, str | None]]:
        """Every event in order (clock, then id), read a row at a time, each creation with
        its note's text as `key NUL text` (None: a forgotten text, or one its note's hash
        disowns, or not a creation).  The team's notes only: this clone's own (private,
        session) never leave it, in a dump as in a commit."""
        cursor = self._guarded(lambda: self.conn.execute(
            f"SELECT {', '.join('e.' + c.strip() for c in EVENT_COLUMNS.split(','))},"
            " CASE WHEN e.type = 'created' THEN (SELECT t.key || char(0) || t.text FROM texts t JOIN notes n"
            " ON n.id = t.note WHERE t.note = e.id AND n.state != 'forgotten'"  # a text a merge brought back stays forgotten
            " AND t.digest = n.text_hash LIMIT 1) END"  # and one its note's hash disowns is not its text
            " FROM events e WHERE e.note NOT IN (SELECT id FROM notes WHERE scope != 'team') ORDER BY e.clock, e.id"))
        while True:
            rows = self._guarded(lambda: cursor.fetchmany(2000))
            if not rows:
                return
            for row in rows:
                yield event_from_row(row[:-1]), row[-1]

    def attached(self, path: AnyPath) -> Scope:
        """A staged dump (qem_edit.storage.staging.StagedLines, `path` its file) attached to the index, its lines the index holds
        marked as not new, while the block runs: how many are new."""
        def attach() -> int:
            self.conn.execute("ATTACH DATABASE ? AS staged", (str(path),))
            try:
                self.conn.execute("UPDATE staged.lines SET new = 0 WHERE id IN (SELECT id FROM main.events)")
                return self._read("SELECT count(*) FROM staged.lines WHERE new")[0][0]
            except BaseException:
                self.conn.execute("DETACH DATABASE staged")
                raise

        def detach(error: BaseException | None) -> None:
            self.conn.execute("DETACH DATABASE staged")
        return Scope(attach, detach)

    def note_of_event(self, event_id: str) -> str | None:
        rows = self._read("SELECT note FROM events WHERE id = ?", (event_id,))
        return rows[0][0] if rows else None

    def texts_held(self, texts: Iterable[str]) -> set[str]:
        """Which of `texts` (normalized, as texts are stored) some note holds, in any state
        but forgotten (a forgotten note's text is gone): an import proposes none of them again."""
        wanted, held = sorted(set(texts)), set()
        for chunk in db.chunks(wanted):
            held.update(row[0] for row in self._read(f"SELECT DISTINCT text FROM notes WHERE text IN ({db.marks(chunk)})", chunk))
        return held

    def imported_from_vectr(self, number: int) -> list[tuple[str, str | None]]:
        """(note, vectr workspace) of every note imported from vectr's note `number`."""
        return self._read("SELECT id, json_extract(data, '$.vectr.workspace') FROM events WHERE type = 'created'"
                          " AND json_extract(data, '$.vectr.id') = ?", (number,))
