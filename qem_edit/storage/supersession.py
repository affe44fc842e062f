"""The supersession graph of an index, checked for `qem verify`.

Cycles, dangling and malformed pointers, forks and concurrent changes that disagree, in
the words and order of qem_edit.base.resolver's Graph, read from the notes table with SQL
and one int per note (for the cycles) instead of every note in memory.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable, Iterator

from ..base import ids
from ..base.replay import Note
from ..base.vocabulary import LIVE_STATES
from ..system import db
from ..system.db import sqlite3
from ..system.db import Connection
from .index import NOTE_COLUMNS, note_from_row, shorts


def graph_problems(conn: Connection, scratch: Connection) -> list[str]:
    """What `Graph.of(every note).problems()` (qem_edit.base.resolver) says of the notes of the
    index `conn`, in its words and order, without every note in memory: SQL over the
    notes table, and the cycles found over one int per note (`scratch`, a database of
    this check's own, holds the table that numbers them)."""
    dangling = dangling_pointers(conn)
    numbered = _numbered(conn) if dangling else {}
    return (_cycles(conn, scratch, numbered) + _dangling(dangling, numbered) + _malformed(conn) + _forks(conn)
            + _disputed(conn))


def _numbered(conn: Connection) -> dict[str, str]:
    """The converted notes' old numbers, hashed (ids.numbered_pointer) → the note, as the
    resolver reads them (only when some pointer names no note)."""
    return ids.renumbered(aliases(conn))


def _cycles(conn: Connection, scratch: Connection, numbered: dict[str, str]) -> list[str]:
    parent = array("q", (-1 if i is None else i for i in parents(conn, scratch, numbered)))
    cycles = cycles_of(parent)
    if not cycles:
        return []
    wanted = {i for cycle in cycles for i in cycle}
    by_i = numbered_notes(scratch, wanted)
    name = _names(conn, by_i.values())
    return [f"cycle: {' → '.join(f'#{name(by_i[i])}' for i in (*c, c[0]))}{_old_numbers(conn, [by_i[i] for i in c])}"
            for c in cycles]


def _old_numbers(conn: Connection, cycle: list[str]) -> str:
    """As `Graph.old_numbers` words it: the cycle's notes by their numbers before the conversion."""
    old = aliases(conn, cycle)
    numbers = [old.get(n) for n in cycle]
    if None in numbers:
        return ""
    return f" (numbered {' → '.join(f'#{a}' for a in (*numbers, numbers[0]))} before the conversion)"


def cycles_of(parent: array) -> list[tuple[int, ...]]:
    """The cycles of a graph where note `i`'s parent is `parent[i]` (-1: none in the
    graph), the notes numbered in id order: each from its lowest note, in the order
    `Graph._find_cycles` finds them."""
    done = bytearray(len(parent))
    cycles = []
    for start in range(len(parent)):
        path: list[int] = []
        on_path: dict[int, int] = {}
        node = start
        while node >= 0 and not done[node]:
            if node in on_path:
                cycle = path[on_path[node]:]
                low = cycle.index(min(cycle))
                cycles.append(tuple(cycle[low:] + cycle[:low]))
                break
            on_path[node] = len(path)
            path.append(node)
            node = parent[node]
        for node in path:
            done[node] = 1
    return cycles


def _names(conn: Connection, note_ids: Iterable[str]):  # type: ignore[no-untyped-def]
    """A note as the graph's messages name it: its short id (its id when the short id is
    empty), or the first 8 characters of an id the index does not hold."""
    shown = shorts(conn, note_ids)
    return lambda note_id: (shown[note_id] or note_id) if note_id in shown else ids.shown(note_id)


def _dangling(rows: list[tuple[str, str, str, int]], numbered: dict[str, str]) -> list[str]:
    """A pointer to no note; not one a converted log's old number names (`_numbered`)."""
    return [f"dangling: #{short or note_id} points to #{ids.shown(target)}, which is not in the log"
            for note_id, short, target, pointer in rows if not (pointer and target in numbered)]


def _malformed(conn: Connection) -> list[str]:
    rows = bad_pointers(conn)
    return [f"malformed: #{short or note_id} has supersedes pointer {raw}" for note_id, short, raw in rows]


def _forks(conn: Connection) -> list[str]:
    rows = live_successors(conn)
    out = []
    for parent, group in itertools.groupby(rows, key=lambda r: r[0]):
        kids = [(parent_short or parent, short or kid) for _, parent_short, kid, short in group]
        if len(kids) > 1:
            shown = kids[0][0]
            out.append(f"fork: #{shown} is superseded by " + " and ".join(f"#{k}" for _, k in kids)
                       + f" (qem rule {shown} --keep {kids[0][1]})")
    return out


def _disputed(conn: Connection) -> list[str]:
    from ..base.resolver import rival_words

    out = []
    for note in notes_with_rivals(conn):
        if note.rivals:
            name = _names(conn, [r.superseded_by for r in note.rivals if r.superseded_by])
            out.append(f"disputed: {rival_words(note, name)} (qem rule {note.shown} --keep SIDE)")
    return out


# -- the queries ---------------------------------------------------------------------------------


def aliases(conn: sqlite3.Connection, note_ids: list[str] | None = None) -> dict[str, int]:
    """The converted notes' old numbers (of `note_ids`; None: of every note that has one)."""
    if note_ids is None:
        return dict(conn.execute("SELECT id, alias FROM notes WHERE alias IS NOT NULL"))
    out: dict[str, int] = {}
    for chunk in db.chunks(note_ids):
        out.update(conn.execute(f"SELECT id, alias FROM notes WHERE id IN ({db.marks(chunk)})", chunk))
    return out


def parents(conn: sqlite3.Connection, scratch: sqlite3.Connection, numbered: dict[str, str]) -> Iterator[int | None]:
    """Every note's parent (the note it supersedes; an old number through `numbered`) as
    its number in id order (None: no note of the index), the notes numbered in a table
    (`verify_graph`) of `scratch`, a database of the check's own."""
    scratch.execute("DROP TABLE IF EXISTS verify_graph")
    scratch.execute("CREATE TABLE verify_graph (id TEXT PRIMARY KEY, i INTEGER NOT NULL, parent TEXT) WITHOUT ROWID")
    rows = conn.execute("SELECT id, supersedes FROM notes ORDER BY id")
    scratch.execute("BEGIN")
    try:
        scratch.executemany("INSERT INTO verify_graph (id, i, parent) VALUES (?, ?, ?)",
                            ((note_id, i, numbered.get(parent, parent)) for i, (note_id, parent) in enumerate(rows)))
    finally:
        scratch.execute("COMMIT")
    return (i for (i,) in scratch.execute(
        "SELECT p.i FROM verify_graph c LEFT JOIN verify_graph p ON p.id = c.parent ORDER BY c.id"))


def numbered_notes(scratch: sqlite3.Connection, wanted: set[int]) -> dict[int, str]:
    """The notes `parents` numbered `wanted`, by number."""
    return {i: note_id for note_id, i in scratch.execute("SELECT id, i FROM verify_graph") if i in wanted}


def dangling_pointers(conn: sqlite3.Connection) -> list[tuple[str, str, str, int]]:
    """(note, short id, target, 1 for supersedes / 0 for superseded_by) for every pointer to no note."""
    return conn.execute(
        "SELECT n.id, n.short, n.supersedes, 1 FROM notes n WHERE n.supersedes IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM notes p WHERE p.id = n.supersedes)"
        " UNION ALL SELECT n.id, n.short, n.superseded_by, 0 FROM notes n WHERE n.supersedes IS NULL"
        " AND n.state = 'superseded' AND n.superseded_by IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM notes p WHERE p.id = n.superseded_by) ORDER BY 1").fetchall()


def bad_pointers(conn: sqlite3.Connection) -> Iterator[tuple[str, str, str]]:
    """(note, short id, the pointer as written) for every malformed supersedes pointer, in id order."""
    return conn.execute("SELECT id, short, bad_pointer FROM notes WHERE bad_pointer IS NOT NULL ORDER BY id")


def live_successors(conn: sqlite3.Connection) -> Iterator[tuple[str, str, str, str]]:
    """(parent, its short id, successor, its short id) for every successor in force, by parent then id."""
    live = ", ".join(f"'{s}'" for s in sorted(LIVE_STATES))
    return conn.execute(
        "SELECT c.supersedes, p.short, c.id, c.short FROM notes c JOIN notes p ON p.id = c.supersedes"
        f" WHERE c.supersedes IS NOT NULL AND c.state IN ({live}) ORDER BY c.supersedes, c.id")


def notes_with_rivals(conn: sqlite3.Connection) -> Iterator[Note]:
    """The notes with concurrent changes that disagree, in id order, streamed."""
    return map(note_from_row, conn.execute(f"SELECT {NOTE_COLUMNS} FROM notes WHERE rivals != '[]' ORDER BY id"))
