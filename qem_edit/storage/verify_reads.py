"""What `qem verify` reads of an index: the store's, or the log replayed afresh.

The store's are VerifyReads, one of the classes Store is made of.  Where two indexes differ, the log files one set aside, and the events and texts the
protected-kinds, removals and secrets checks judge (qem_edit.storage.protect,
qem_edit.reads.removals through the store, qem_edit.storage.secrets).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..base import ids
from ..base.replay import Event
from ..base.shown import progress
from ..system import db
from ..system.db import sqlite3
from .index import EVENT_COLUMNS, ITEM, NOTE_COLUMNS, event_from_row
from .reading import IndexReads


def set_aside_problems(conn: sqlite3.Connection) -> list[str]:
    """Every log file the index could not read, with why, by name."""
    return [problem for (problem,) in conn.execute("SELECT problem FROM files WHERE problem IS NOT NULL ORDER BY name")]


def differences(have: sqlite3.Connection, want: sqlite3.Connection) -> list[str]:
    """The notes whose row, or else whose MEMORY.md item, differs between two indexes:
    both walked in id order side by side, one row of each at a time."""
    notes = f"SELECT {NOTE_COLUMNS} FROM notes ORDER BY id"
    items = f"SELECT id, {ITEM} FROM items ORDER BY id, kind_rank"
    want_items, have_items = _Ahead(want.execute(items)), _Ahead(have.execute(items))
    out = []
    tick = progress("comparing the index with the log", lambda: want.execute("SELECT count(*) FROM notes").fetchone()[0])
    for note_id, wanted, had in _side_by_side(want.execute(notes), have.execute(notes)):
        tick()
        if wanted != had:
            out.append(f"note {ids.shown(note_id)}: the index disagrees with the log (`qem verify --repair` rebuilds it)")
        elif want_items.get(note_id) != have_items.get(note_id):
            out.append(f"note {ids.shown(note_id)}: the index's MEMORY.md item disagrees with the log")
    tick.end()
    return out


def _side_by_side(left: Iterable[tuple], right: Iterable[tuple]) -> Iterator[tuple]:
    """(id, left row or None, right row or None) for every id of two row streams in id
    order (a row's first column is its id)."""
    lefts, rights = iter(left), iter(right)
    a, b = next(lefts, None), next(rights, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a[0] < b[0]):
            yield a[0], a, None  # type: ignore[index]
            a = next(lefts, None)
        elif a is None or b[0] < a[0]:
            yield b[0], None, b
            b = next(rights, None)
        else:
            yield a[0], a, b
            a, b = next(lefts, None), next(rights, None)


class _Ahead:
    """(id, value) rows in id order, looked up by ids asked in increasing order; the
    last row of an id wins (as in a dict made of them)."""

    def __init__(self, rows: Iterable[tuple]) -> None:
        self.rows = iter(rows)
        self.row = next(self.rows, None)

    def get(self, key: str) -> object:
        found = None
        while self.row is not None and self.row[0] <= key:
            if self.row[0] == key:
                found = self.row[1]
            self.row = next(self.rows, None)
        return found


def guarded_events(conn: sqlite3.Connection, types: list[str], kinds: list[str]) -> Iterator[tuple[Event, str]]:
    """(event, its note's kind) for every event of these types on a note of these kinds,
    in log order (clock, then id), streamed."""
    columns = ", ".join("e." + c.strip() for c in EVENT_COLUMNS.split(","))
    rows = conn.execute(
        f"SELECT {columns}, json_extract(c.data, '$.kind') FROM events e"
        " JOIN events c ON c.id = e.note AND c.type = 'created'"
        f" WHERE e.type IN ({db.marks(types)}) AND json_extract(c.data, '$.kind') IN ({db.marks(kinds)})"
        " ORDER BY e.clock, e.id", [*types, *kinds])
    return ((event_from_row(row[:-1]), row[-1]) for row in rows)


def followers(conn: sqlite3.Connection, event_id: str) -> Iterator[tuple[str, str, str | None]]:
    """(type, actor, writer) of every event that follows `event_id` (through `prev`, at
    any distance, within the note: an event of another note follows none), from a table
    of who follows whom made on the first call (`verify_follows`)."""
    if conn.execute("SELECT name FROM sqlite_master WHERE name = 'verify_follows'").fetchone() is None:
        conn.execute("CREATE TABLE verify_follows (prev TEXT NOT NULL, event TEXT NOT NULL, PRIMARY KEY (prev, event))"
                     " WITHOUT ROWID")
        conn.execute("INSERT OR IGNORE INTO verify_follows (prev, event) SELECT j.value, e.id FROM events e,"
                     " json_each(e.prev) j JOIN events p ON p.id = j.value AND p.note = e.note WHERE j.type = 'text'")
    return conn.execute(
        "WITH RECURSIVE later(id) AS (SELECT event FROM verify_follows WHERE prev = ?"
        " UNION SELECT f.event FROM verify_follows f JOIN later l ON f.prev = l.id)"
        " SELECT e.type, e.actor, json_extract(e.data, '$.writer') FROM later l JOIN events e ON e.id = l.id",
        (event_id,))


def has_event(conn: sqlite3.Connection, event_id: object) -> bool:
    return conn.execute("SELECT 1 FROM events WHERE id = ?", (event_id,)).fetchone() is not None


def kind_text_state(conn: sqlite3.Connection, note_id: str) -> tuple[str | None, str | None, str | None]:
    """A note's kind, text and state (all None: no such note)."""
    row = conn.execute("SELECT kind, text, state FROM notes WHERE id = ?", (note_id,)).fetchone()
    return row if row is not None else (None, None, None)


def was_forgotten(conn: sqlite3.Connection, note_id: str) -> bool:
    """Whether the log holds a forget of the note."""
    return conn.execute("SELECT 1 FROM events WHERE note = ? AND type = 'forgotten'", (note_id,)).fetchone() is not None


def texts_with_files(conn: sqlite3.Connection) -> Iterator[tuple[str, str, str, str]]:
    """(note, short id, text, file) for every note's text that matches its hash, in id order, streamed."""
    return conn.execute("SELECT n.id, n.short, n.text, t.file FROM notes n JOIN texts t ON t.note = n.id"
                        " WHERE n.text IS NOT NULL AND t.digest = n.text_hash ORDER BY n.id")


def event_rows(conn: sqlite3.Connection) -> Iterator[tuple[object, ...]]:
    """Every event's columns (EVENT_COLUMNS, as `event_from_row` takes them), in id order, streamed."""
    return conn.execute(f"SELECT {EVENT_COLUMNS} FROM events ORDER BY id")


def event_file(conn: sqlite3.Connection, event_id: str) -> str | None:
    """A log file that holds event `event_id` (None: none is known)."""
    row = conn.execute("SELECT file FROM event_files WHERE event = ? ORDER BY file LIMIT 1", (event_id,)).fetchone()
    return None if row is None else row[0]


def secret_allowed(conn: sqlite3.Connection, event_id: str) -> bool:
    """Whether a person allowed the secret in what event `event_id` wrote (qem_edit.storage.secrets)."""
    row = conn.execute("SELECT json_extract(data, '$.secret') FROM events WHERE id = ?", (event_id,)).fetchone()
    return row is not None and row[0] == "allowed"


class VerifyReads(IndexReads):
    """Store's reads for qem_edit.mirror.verify and qem_edit.reads.removals, on the store's
    connection (`Store.verify_reads`): loaded when one of them asks, so that a store opened
    by a hook does not load them.  They read the whole index, every session's notes alike."""

    def __init__(self, store: IndexReads) -> None:
        self.root, self.conn, self.index_path = store.root, store.conn, store.index_path
        self.session, self.every_session, self._reading = store.session, True, False

    def differences_from(self, fresh: sqlite3.Connection) -> list[str]:
        """Where the index differs from `fresh`, an index of the log replayed afresh
        (`differences`); a damaged index, or one that cannot be read, says so."""
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

    def graph_problems(self, scratch: sqlite3.Connection) -> list[str]:
        """The supersession graph's problems (qem_edit.storage.supersession); `scratch`: a database of its own."""
        from .supersession import graph_problems

        return self._guarded(lambda: graph_problems(self.conn, scratch))

    def set_aside_in(self, fresh: sqlite3.Connection) -> list[str]:
        """Every log file `fresh` (the log replayed afresh) could not read, with why, by name."""
        return set_aside_problems(fresh)

    def has_event_in(self, fresh: sqlite3.Connection, event_id: object) -> bool:
        """Whether `fresh` (the log replayed afresh) holds event `event_id`."""
        return has_event(fresh, event_id)

    def kind_text_state_in(self, fresh: sqlite3.Connection, note_id: str) -> tuple[str | None, str | None, str | None]:
        """A note's kind, text and state in `fresh` (the log replayed afresh; all None: no such note)."""
        return kind_text_state(fresh, note_id)

    def was_forgotten_in(self, fresh: sqlite3.Connection, note_id: str) -> bool:
        """Whether `fresh` (the log replayed afresh) holds a forget of the note."""
        return was_forgotten(fresh, note_id)
