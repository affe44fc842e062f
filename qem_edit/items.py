"""The item cache: each note's rendered MEMORY.md item, kept in the store.

Export joins these items as bytes instead of rendering every note on every run.  The
cache is derived like the `notes` table: written in the same transaction as the events
that change a note, checked by `qem verify`, and valid only for the rendering it was made
with (`FORMAT_VERSION`); when the rendering changes, the next write renders every item
again.  This is the only part of the store that knows the renderer.
"""

from __future__ import annotations

import sqlite3
from typing import Iterable, Mapping

from .model import KIND_RANK, Note
from .renderer import FORMAT_VERSION, item_text

SCHEMA = """
-- Each note's rendered MEMORY.md item, clustered in the file's order, so that export
-- reads one narrow table in sequence.
CREATE TABLE items (
    kind_rank INTEGER NOT NULL,
    id        INTEGER NOT NULL,
    item      TEXT NOT NULL,
    PRIMARY KEY (kind_rank, id)
) WITHOUT ROWID;
"""
_VERSION_KEY = "render_version"


def initial_meta() -> str:
    """The SQL that records, in a new store, which rendering its (empty) cache holds."""
    return f"INSERT INTO meta (key, value) VALUES ('{_VERSION_KEY}', '{FORMAT_VERSION}');"


def save(conn: sqlite3.Connection, note: Note) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO items (kind_rank, id, item) VALUES (?, ?, ?)",
        (KIND_RANK[note.kind], note.id, item_text(note)),
    )


def fresh(conn: sqlite3.Connection) -> bool:
    """Whether the cached items were rendered by this rendering."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_VERSION_KEY,)).fetchone()
    return row is not None and row[0] == FORMAT_VERSION


def rebuild(conn: sqlite3.Connection, notes: Iterable[Note]) -> None:
    """Render every note's item again (inside a write transaction)."""
    conn.execute("DELETE FROM items")
    for note in notes:
        save(conn, note)
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_VERSION_KEY, FORMAT_VERSION)
    )


def by_kind(conn: sqlite3.Connection, kinds: Iterable[str], *, with_ids: bool = False) -> dict[str, list]:
    """Each kind's cached items as UTF-8 bytes, in id order; with `with_ids`, as
    (note id, item) pairs.  Valid while `fresh`."""
    columns = "id, item" if with_ids else "item"
    conn.text_factory = bytes
    try:
        out: dict[str, list] = {}
        for kind in kinds:
            rows = conn.execute(
                f"SELECT {columns} FROM items WHERE kind_rank = ? ORDER BY id", (KIND_RANK[kind],)
            ).fetchall()
            out[kind] = rows if with_ids else [row[0] for row in rows]
        return out
    finally:
        conn.text_factory = str


def disagreements(conn: sqlite3.Connection, notes: Mapping[int, Note]) -> list[str]:
    """Where the cache differs from the items of `notes` (the log's replay); [] when it
    was made by another rendering, which no reader uses until a write rebuilds it."""
    if not fresh(conn):
        return []
    cached = dict(conn.execute("SELECT id, item FROM items").fetchall())
    problems = []
    for note_id in sorted(set(notes) | set(cached)):
        note = notes.get(note_id)
        if note is None or cached.get(note_id) != item_text(note):
            problems.append(f"note #{note_id}: the cached MEMORY.md item disagrees with the log")
    return problems
