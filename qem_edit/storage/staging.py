"""SQLite files apart from the index: the log replayed afresh, and a dump staged for a load.

`qem verify` compares the index with a replay of the log built afresh in a file of its
own (`build_fresh`); `qem load` holds a dump's lines in another (`StagedLines`), which the
store's connection attaches to tell what is new.  Both are thrown away after use.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..base.replay import Event
from ..system import db
from ..system.db import sqlite3
from .index import EVENT_COLUMNS, Index, event_from_row, event_values
from .logtree import LogTree, TextRecord


def build_fresh(name: str, tree: LogTree, cache_kib: int) -> sqlite3.Connection:
    """The index of `tree`'s log, built afresh in the database file `name` (no journal:
    the file is thrown away after the check)."""
    try:
        conn = db.connect(name)
    except sqlite3.DatabaseError as exc:
        raise db.translate(exc, Path(name), "open") from None
    try:
        for pragma in (f"page_size = {db.PAGE_SIZE}", "journal_mode = OFF", "synchronous = OFF", "temp_store = FILE",
                       f"cache_size = -{cache_kib}"):
            conn.execute(f"PRAGMA {pragma}")
        index = Index(conn, tree)
        conn.execute("BEGIN")
        index.create()
        index.sync()
        conn.execute("COMMIT")
        return conn
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise db.translate(exc, Path(name), "use") from None
    except BaseException:
        conn.close()
        raise


# -- a dump staged for a load ---------------------------------------------------------------------


class StagedLines:
    """A dump's events and texts in a temporary SQLite file of their own (no journal: it
    is thrown away after the load), in the dump's order, so a dump of any size is held a
    batch at a time; the store's connection attaches it (`Store.attached`) to tell what
    is new."""

    def __init__(self, path: str) -> None:
        self.conn = db.connect(path)
        self.conn.execute("PRAGMA journal_mode = OFF")
        self.conn.execute("PRAGMA synchronous = OFF")
        self.conn.execute("PRAGMA cache_size = -32768")  # (KiB) for the sort by note: bounded
        self.conn.execute(f"CREATE TABLE lines (seq INTEGER PRIMARY KEY, {EVENT_COLUMNS}, new INTEGER NOT NULL DEFAULT 1)")
        self.conn.execute("CREATE TABLE texts (seq INTEGER PRIMARY KEY, note TEXT, key TEXT, text TEXT)")
        self.conn.execute("BEGIN")

    def close(self) -> None:
        self.conn.close()

    def add(self, events: list[Event], texts: list[TextRecord]) -> None:
        self.conn.executemany(f"INSERT INTO lines ({EVENT_COLUMNS}) VALUES ({', '.join('?' * 10)})",
                              [event_values(e) for e in events])
        self.conn.executemany("INSERT INTO texts (note, key, text) VALUES (?, ?, ?)",
                              [(t.note, t.key, t.text) for t in texts])

    def done(self) -> None:
        """Every line is in: committed, for the store's connection to read."""
        self.conn.execute("COMMIT")

    def events(self, new: bool = False) -> Iterator[Event]:
        """The staged events in the dump's order (`new`: only those the store lacks)."""
        where = "WHERE new" if new else ""
        for row in self.conn.execute(f"SELECT {EVENT_COLUMNS} FROM lines {where} ORDER BY seq"):
            yield event_from_row(row)

    def texts(self, new: bool = False) -> Iterator[TextRecord]:
        """The staged texts in the dump's order (`new`: only those of notes a new event creates)."""
        where = "WHERE note IN (SELECT id FROM lines WHERE new AND type = 'created')" if new else ""
        for note, key, text in self.conn.execute(f"SELECT note, key, text FROM texts {where} ORDER BY seq"):
            yield TextRecord(note, key, text)

    def note_of(self, event_id: str) -> str | None:
        row = self.conn.execute("SELECT note FROM lines WHERE id = ?", (event_id,)).fetchone()
        return None if row is None else row[0]

    def new_by_note(self) -> Iterator[tuple[int, Event]]:
        """(its place in the dump, event) for every new event, by note, then in the dump's order."""
        self.conn.execute("CREATE INDEX IF NOT EXISTS lines_by_id ON lines (id)")
        for row in self.conn.execute(f"SELECT seq, {EVENT_COLUMNS} FROM lines WHERE new ORDER BY note, seq"):
            yield row[0], event_from_row(row[1:])
