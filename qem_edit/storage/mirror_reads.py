"""The reads MEMORY.md is made from: rendered items, their changes, the caches export keeps."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..base.vocabulary import KIND_RANK
from ..system import db
from ..system.db import sqlite3
from .index import ITEM
from .reading import IndexReads

# of the short ids of a block of MEMORY.md's items (a JSON array), those no note shows or whose
# note has no item (a note whose text is missing has none): both read from covering indexes
_NOT_SHOWN = ("SELECT j.value FROM json_each(?) j WHERE NOT EXISTS (SELECT 1 FROM notes n INDEXED BY"
              " notes_by_short JOIN items i INDEXED BY items_by_id ON i.id = n.id WHERE n.short = j.value)")


class MirrorReads(IndexReads):
    """Store's reads for qem_edit.mirror.export, the check-in's plan and qem_edit.reads.incomplete."""

    def items_changed_since(self, moment: str) -> list[str] | None:
        """The notes whose rendered items changed since `moment` (a `moment` of this very
        index), in id order; None when that cannot be told (another index, or a replay of
        every note since)."""
        index_id, _, generation = moment.rpartition(":")
        if not generation.isdigit():
            return None
        return self._guarded(lambda: self.index.items_changed_since(int(generation))
                             if self.index.meta("index_id") == index_id else None)

    def items_now(self, note_ids: Iterable[str]) -> dict[str, tuple[str, bytes | None]]:
        """Each of these notes' kind and rendered item now (None: it has none)."""
        notes = self.notes_by_id(note_ids)
        items = self._guarded(lambda: self.index.changed_items(notes))
        return {i: (n.kind, items[i][1] if i in items else None) for i, n in notes.items()}

    def export_items(self, kinds: Iterable[str], *, with_ids: bool = False) -> dict[str, list]:
        from .item_reads import items_by_kind  # here: a hook, which reads no item, does not load them

        return self._guarded(lambda: items_by_kind(self.conn, kinds, with_ids=with_ids))

    def iter_items(self, kind: str) -> Iterator[bytes]:
        """One kind's rendered items as UTF-8 bytes, in id order, read a batch at a time
        (inside `reading`, so that every kind comes from one snapshot)."""
        cursor = self._guarded(lambda: self.conn.execute(
            f"SELECT CAST({ITEM} AS BLOB) FROM items WHERE kind_rank = ? ORDER BY id", (KIND_RANK[kind],)))
        while rows := self._guarded(lambda: cursor.fetchmany(2000)):
            for (item,) in rows:
                yield item

    def items_of_notes(self, note_ids: Iterable[str]) -> dict[str, list[bytes]]:
        from .item_reads import items_of_notes

        return self._guarded(lambda: items_of_notes(self.conn, note_ids))

    def shorts_not_shown(self, shorts_json: str) -> list[str]:
        """Of the short ids in `shorts_json` (a JSON array), those no note shows or whose
        note has no item (a note whose text is missing has none): read from covering
        indexes, no note row."""
        return [short for (short,) in self._read(_NOT_SHOWN, (shorts_json,))]

    def text_missing(self, short: str) -> bool | None:
        """Whether the note shown as `short` has lost its text (None: no such note); a short
        id this clone shows longer (or shorter) is taken as a prefix of an id."""
        missing = "text IS NULL AND state != 'forgotten'"
        rows = self._read(f"SELECT {missing} FROM notes WHERE short = ? LIMIT 1", (short,))
        if not rows:
            rows = self._read(f"SELECT {missing} FROM notes WHERE id >= ? AND id < ? LIMIT 1", (short, short + "{"))
        return None if not rows else bool(rows[0][0])

    def remembered(self, key: str) -> str | None:
        """A cache entry of the index's `meta` (None: none, or the index cannot be read)."""
        try:
            return self.index.meta(key)
        except sqlite3.Error:
            return None

    def remembered_under(self, prefix: str) -> dict[str, str] | None:
        """Every cache entry whose key starts with `prefix` (None: the index cannot be read)."""
        try:
            return dict(self.conn.execute("SELECT key, value FROM meta WHERE key LIKE ?", (prefix + "%",)).fetchall())
        except sqlite3.Error:
            return None

    def remember(self, key: str, value: str) -> None:
        """Keep a cache entry in the index's `meta`; a read-only index keeps nothing."""
        try:
            self.index.set_meta(key, value)
        except sqlite3.Error:
            pass

    def note_rendering(self, digest: str, kept: int) -> None:
        """Record a rendering's hash (the latest `kept` are kept), on a connection of its
        own: the store's may be inside the read transaction the rendering streams from."""
        try:
            conn = db.connect(str(self.index_path)) if self.index_path is not None else self.conn
            try:
                conn.execute("INSERT OR REPLACE INTO renderings (hash) VALUES (?)", (digest,))
                conn.execute("DELETE FROM renderings WHERE rowid <= (SELECT max(rowid) FROM renderings) - ?", (kept,))
            finally:
                if conn is not self.conn:
                    conn.close()
        except sqlite3.Error:
            pass  # then such a file reads as hand-edited: `export --force`

    def rendered(self, digest: str) -> bool:
        """Whether a rendering with this hash was recorded (an index that cannot be read knows nothing)."""
        try:
            return self.conn.execute("SELECT 1 FROM renderings WHERE hash = ?", (digest,)).fetchone() is not None
        except sqlite3.Error:
            return False
