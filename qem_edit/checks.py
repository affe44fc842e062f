"""`qem verify`: what a CI job runs on a commit.

It fails (exit 1) when a log file is malformed or does not match its name, when an event
does not apply or names a note the log does not hold, when a note's text is missing or
does not match its hash, when a forgotten text is still in the tree, when two notes claim
one old number, when the local index disagrees with a fresh replay of the log, when the
supersession graph is broken (a cycle, a dangling or malformed pointer), or when MEMORY.md
is not the rendering of the log, or when an agent took a note of a protected kind out of
force (qem_edit.protect), or when events of a protected note that the base (HEAD, or the
merge base of `--base REV` and HEAD) holds are not in the log (qem_edit.removals; another
note's removal is listed), or when a text or a reason holds a secret no person allowed
(qem_edit.secrets).  Open disputes (forks, disputes between notes,
concurrent changes that disagree) are listed; `--fail-on-disputes` makes them fail too.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import tempfile
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path

from . import db, errors, ids
from .answers import VerifyReport
from .index import NOTE_COLUMNS, Index, note_from_row
from .model import LIVE_STATES
from .protect import log_problems as protect_problems
from .removals import verify_findings as removal_findings
from .resolver import rival_words
from .shown import progress
from .secrets import log_problems as secret_problems
from .store import Store

# The fresh replay's page cache (KiB): it lives in a temporary file, not in memory.
FRESH_CACHE_KIB = 16 * 1024


def verify_report(store: Store, place=None, *, repair: bool = False, disputes_fail: bool = False,  # type: ignore[no-untyped-def]
                  base: str | None = None) -> VerifyReport:
    """Every check above; with `repair`, an index that disagrees with the log is rebuilt
    first (the log itself is never changed).  `base`: the revision whose merge base with
    HEAD the removals are judged against (default HEAD itself; qem_edit.removals)."""
    with fresh_index(store) as fresh:
        problems, set_aside = _index_problems(store, fresh)
        if not (problems and repair):
            return _report(store, place, fresh, problems, set_aside, None, disputes_fail, base)
    repaired = store.rebuild()
    with fresh_index(store) as fresh:
        problems, set_aside = _index_problems(store, fresh)
        return _report(store, place, fresh, problems, set_aside, repaired, disputes_fail, base)


def _report(store: Store, place, fresh: sqlite3.Connection, index_problems: list[str], set_aside: list[str],  # type: ignore[no-untyped-def]
            repaired: int | None, disputes_fail: bool, base: str | None = None) -> VerifyReport:
    problems = set_aside + _log_problems(store) + index_problems
    found = store._guarded(lambda: graph_problems(store.conn, fresh))
    broken = [p for p in found if not p.startswith(("fork:", "disputed:"))]
    disputes = [p for p in found if p.startswith(("fork:", "disputed:"))] + _open_disputes(store)
    removed, removal_notices = removal_findings(store, fresh, base)
    problems += broken + protect_problems(store, fresh) + secret_problems(store, fresh) + removed
    if place is not None:
        problems += _mirror_problems(store, place)
    if disputes_fail:
        problems, disputes = problems + disputes, []
    return VerifyReport(store.count(), problems, repaired, disputes, removal_notices + _loose_texts(store))


def _log_problems(store: Store) -> list[str]:
    out = []
    for note_id, problems in store._read("SELECT short, problems FROM notes WHERE problems != '[]' ORDER BY id"):
        out += [f"note #{note_id}: {p}" for p in __import__("json").loads(problems)]
    for event_id, note_id in store._read(
            "SELECT e.id, e.note FROM events e LEFT JOIN notes n ON n.id = e.note WHERE n.id IS NULL ORDER BY e.id"):
        out.append(f"event {ids.shown(event_id)} names note {ids.shown(note_id)}, whose creation the log does not hold")
    for (short,) in store._read(
            "SELECT n.short FROM notes n WHERE n.state != 'forgotten' AND n.text IS NULL ORDER BY n.id"):
        out.append(f"note #{short}: its text is missing from the log (or does not match its hash): text missing"
                   " from this commit; get it from the commit's author (`git add .qem && git commit` in their clone)")
    for note_id, name in store.forgotten_texts():
        out.append(f"{name}: still holds the text of forgotten note {ids.shown(note_id)} (any qem write removes it)")
    for alias, count in store._read(
            "SELECT alias, count(*) FROM notes WHERE alias IS NOT NULL GROUP BY alias HAVING count(*) > 1"):
        out.append(f"{count} notes claim the old number #{alias} (two converted stores merged?)")
    return out


def _loose_texts(store: Store) -> list[str]:
    """Texts whose note's creation the log does not hold: listed, not failed (a write
    killed before its event leaves one; so does a commit of a text without its event,
    whose event a later commit brings)."""
    return [f"{name}: the text of note {ids.shown(note_id)}, whose creation the log does not hold (a write"
            " interrupted before its event, or the event not committed yet); remove it if it is the former"
            for note_id, name in store._read("SELECT t.note, t.file FROM texts t LEFT JOIN notes n ON n.id = t.note"
                                             " WHERE n.id IS NULL ORDER BY t.file")]


@contextlib.contextmanager
def fresh_index(store: Store) -> Iterator[sqlite3.Connection]:
    """A replay of the log read afresh, built in a temporary SQLite file (in the system's
    temporary directory, with a modest cache) that is removed afterwards, also on error."""
    try:
        handle, name = tempfile.mkstemp(prefix="qem-verify-", suffix=".db")
    except OSError as exc:
        raise errors.StoreUnwritable(f"cannot make a temporary file for a fresh replay of the log"
                                     f" ({tempfile.gettempdir()}): {exc.strerror}") from None
    os.close(handle)
    conn = None
    try:
        conn = _replayed(store, name)
        yield conn
    finally:
        if conn is not None:
            conn.close()
        for suffix in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(name + suffix)


def _replayed(store: Store, name: str) -> sqlite3.Connection:
    """The index of the log, built afresh in the database file `name`."""
    try:
        conn = db.connect(name)
    except sqlite3.DatabaseError as exc:
        raise db.translate(exc, Path(name), "open") from None
    try:
        for pragma in ("journal_mode = OFF", "synchronous = OFF", "temp_store = FILE",
                       f"cache_size = -{FRESH_CACHE_KIB}"):
            conn.execute(f"PRAGMA {pragma}")
        index = Index(conn, store.tree)
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


def _index_problems(store: Store, fresh: sqlite3.Connection) -> tuple[list[str], list[str]]:
    """Where the local index differs from `fresh`, a replay of the log read afresh; and
    the log files that fresh read set aside (a file changed in place since the index
    read it included: the index goes on serving what it read)."""
    aside = [p for (p,) in fresh.execute("SELECT problem FROM files WHERE problem IS NOT NULL ORDER BY name")]
    try:
        damage = store.conn.execute("PRAGMA quick_check").fetchone()[0]
        if damage != "ok":
            return [f"the index is damaged ({damage}); `qem verify --repair` rebuilds it"], aside
        return index_differences(store.conn, fresh), aside
    except sqlite3.DatabaseError as exc:
        return [f"the index cannot be read ({exc}); `qem verify --repair` rebuilds it"], aside


def index_differences(have: sqlite3.Connection, want: sqlite3.Connection) -> list[str]:
    """The notes whose row, or else whose MEMORY.md item, differs between two indexes:
    both walked in id order side by side, one row of each at a time."""
    notes = f"SELECT {NOTE_COLUMNS} FROM notes ORDER BY id"
    items = "SELECT id, item FROM items ORDER BY id, kind_rank"
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


# -- the supersession graph ----------------------------------------------------------------------


def graph_problems(conn: sqlite3.Connection, scratch: sqlite3.Connection) -> list[str]:
    """What `Graph.of(every note).problems()` (qem_edit.resolver) says of the notes of the
    index `conn`, in its words and order, without every note in memory: SQL over the
    notes table, and the cycles found over one int per note (`scratch`, a database of
    this check's own, holds the table that numbers them)."""
    dangling = _dangling_rows(conn)
    numbered = _numbered(conn) if dangling else {}
    return (_cycles(conn, scratch, numbered) + _dangling(dangling, numbered) + _malformed(conn) + _forks(conn)
            + _disputed(conn))


def _numbered(conn: sqlite3.Connection) -> dict[str, str]:
    """The converted notes' old numbers, hashed (ids.numbered_pointer) → the note, as the
    resolver reads them (only when some pointer names no note)."""
    return ids.renumbered(dict(conn.execute("SELECT id, alias FROM notes WHERE alias IS NOT NULL")))


def _cycles(conn: sqlite3.Connection, scratch: sqlite3.Connection, numbered: dict[str, str]) -> list[str]:
    scratch.execute("DROP TABLE IF EXISTS verify_graph")
    scratch.execute("CREATE TABLE verify_graph (id TEXT PRIMARY KEY, i INTEGER NOT NULL, parent TEXT) WITHOUT ROWID")
    rows = conn.execute("SELECT id, supersedes FROM notes ORDER BY id")
    scratch.execute("BEGIN")
    try:
        scratch.executemany("INSERT INTO verify_graph (id, i, parent) VALUES (?, ?, ?)",
                            ((note_id, i, numbered.get(parent, parent)) for i, (note_id, parent) in enumerate(rows)))
    finally:
        scratch.execute("COMMIT")
    parent = array("q", (-1 if i is None else i for (i,) in scratch.execute(
        "SELECT p.i FROM verify_graph c LEFT JOIN verify_graph p ON p.id = c.parent ORDER BY c.id")))
    cycles = cycles_of(parent)
    if not cycles:
        return []
    wanted = {i for cycle in cycles for i in cycle}
    ids = {i: note_id for note_id, i in scratch.execute("SELECT id, i FROM verify_graph") if i in wanted}
    name = _names(conn, ids.values())
    return [f"cycle: {' → '.join(f'#{name(ids[i])}' for i in (*c, c[0]))}{_old_numbers(conn, [ids[i] for i in c])}"
            for c in cycles]


def _old_numbers(conn: sqlite3.Connection, cycle: list[str]) -> str:
    """As `Graph.old_numbers` words it: the cycle's notes by their numbers before the conversion."""
    aliases = dict(conn.execute(f"SELECT id, alias FROM notes WHERE id IN ({', '.join('?' * len(cycle))})", cycle))
    numbers = [aliases.get(n) for n in cycle]
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


def _names(conn: sqlite3.Connection, note_ids: Iterable[str]):  # type: ignore[no-untyped-def]
    """A note as the graph's messages name it: its short id (its id when the short id is
    empty), or the first 8 characters of an id the index does not hold."""
    shown: dict[str, str] = {}
    wanted = sorted(set(note_ids))
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        shown.update(conn.execute(f"SELECT id, short FROM notes WHERE id IN ({', '.join('?' * len(chunk))})", chunk))
    return lambda note_id: (shown[note_id] or note_id) if note_id in shown else ids.shown(note_id)


def _dangling(rows: list[tuple[str, str, str, int]], numbered: dict[str, str]) -> list[str]:
    """A pointer to no note; not one a converted log's old number names (`_numbered`)."""
    return [f"dangling: #{short or note_id} points to #{ids.shown(target)}, which is not in the log"
            for note_id, short, target, pointer in rows if not (pointer and target in numbered)]


def _dangling_rows(conn: sqlite3.Connection) -> list[tuple[str, str, str, int]]:
    return conn.execute(
        "SELECT n.id, n.short, n.supersedes, 1 FROM notes n WHERE n.supersedes IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM notes p WHERE p.id = n.supersedes)"
        " UNION ALL SELECT n.id, n.short, n.superseded_by, 0 FROM notes n WHERE n.supersedes IS NULL"
        " AND n.state = 'superseded' AND n.superseded_by IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM notes p WHERE p.id = n.superseded_by) ORDER BY 1").fetchall()


def _malformed(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT id, short, bad_pointer FROM notes WHERE bad_pointer IS NOT NULL ORDER BY id")
    return [f"malformed: #{short or note_id} has supersedes pointer {raw}" for note_id, short, raw in rows]


def _forks(conn: sqlite3.Connection) -> list[str]:
    live = ", ".join(f"'{s}'" for s in sorted(LIVE_STATES))
    rows = conn.execute(
        "SELECT c.supersedes, p.short, c.id, c.short FROM notes c JOIN notes p ON p.id = c.supersedes"
        f" WHERE c.supersedes IS NOT NULL AND c.state IN ({live}) ORDER BY c.supersedes, c.id")
    out = []
    for parent, group in itertools.groupby(rows, key=lambda r: r[0]):
        kids = [(parent_short or parent, short or kid) for _, parent_short, kid, short in group]
        if len(kids) > 1:
            shown = kids[0][0]
            out.append(f"fork: #{shown} is superseded by " + " and ".join(f"#{k}" for _, k in kids)
                       + f" (qem rule {shown} --keep {kids[0][1]})")
    return out


def _disputed(conn: sqlite3.Connection) -> list[str]:
    out = []
    for row in conn.execute(f"SELECT {NOTE_COLUMNS} FROM notes WHERE rivals != '[]' ORDER BY id"):
        note = note_from_row(row)
        if note.rivals:
            name = _names(conn, [r.superseded_by for r in note.rivals if r.superseded_by])
            out.append(f"disputed: {rival_words(note, name)} (qem rule {note.shown} --keep SIDE)")
    return out


def _open_disputes(store: Store) -> list[str]:
    rows = store._read("SELECT short, disputes FROM notes WHERE disputes != '[]' ORDER BY id")
    import json

    out = []
    for short, disputes in rows:
        for dispute, other in json.loads(disputes):
            out.append(f"dispute {ids.side_shown(dispute)}: #{short} and {ids.shown(other)} disagree (qem rule {ids.side_shown(dispute)} --keep ONE)")
    return out


def _mirror_problems(store: Store, place) -> list[str]:  # type: ignore[no-untyped-def]
    from .export import check

    mirror = place.mirror_path()
    if not mirror.is_file():
        return []
    verdict = check(store, mirror)
    return [] if verdict.clean else [f"{mirror}: {verdict.message}"]
