"""`qem verify`: what a CI job runs on a commit.

It fails (exit 1) when a log file is malformed or does not match its name, when an event
does not apply or names a note the log does not hold, when a note's text is missing or
does not match its hash, when a forgotten text is still in the tree, when two notes claim
one old number, when the local index disagrees with a fresh replay of the log, when the
supersession graph is broken (a cycle, a dangling or malformed pointer), or when MEMORY.md
is not the rendering of the log, or when an agent took a note of a protected kind out of
force (qem_edit.protect).  Open disputes (forks, disputes between notes,
concurrent changes that disagree) are listed; `--fail-on-disputes` makes them fail too.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from . import db
from .answers import VerifyReport
from .index import EVENT_COLUMNS, NOTE_COLUMNS, Index, event_from_row
from .model import Event
from .protect import log_problems as protect_problems
from .resolver import Graph
from .store import Store


def verify_report(store: Store, place=None, *, repair: bool = False, disputes_fail: bool = False) -> VerifyReport:  # type: ignore[no-untyped-def]
    """Every check above; with `repair`, an index that disagrees with the log is rebuilt
    first (the log itself is never changed)."""
    problems, set_aside, logged = _index_problems(store)
    repaired = None
    if problems and repair:
        repaired = store.rebuild()
        problems, set_aside, logged = _index_problems(store)
    problems = set_aside + _log_problems(store) + problems
    graph = Graph.of({n.id: n for n in store.notes()})
    found = graph.problems()
    broken = [p for p in found if not p.startswith(("fork:", "disputed:"))]
    disputes = [p for p in found if p.startswith(("fork:", "disputed:"))] + _open_disputes(store)
    problems += broken + protect_problems(store, logged)
    if place is not None:
        problems += _mirror_problems(store, place)
    if disputes_fail:
        problems, disputes = problems + disputes, []
    return VerifyReport(store.count(), problems, repaired, disputes, _loose_texts(store))


def _log_problems(store: Store) -> list[str]:
    out = []
    for note_id, problems in store._read("SELECT short, problems FROM notes WHERE problems != '[]' ORDER BY id"):
        out += [f"note #{note_id}: {p}" for p in __import__("json").loads(problems)]
    for event_id, note_id in store._read(
            "SELECT e.id, e.note FROM events e LEFT JOIN notes n ON n.id = e.note WHERE n.id IS NULL ORDER BY e.id"):
        out.append(f"event {event_id[:8]} names note {note_id[:8]}, whose creation the log does not hold")
    for (short,) in store._read(
            "SELECT n.short FROM notes n WHERE n.state != 'forgotten' AND n.text IS NULL ORDER BY n.id"):
        out.append(f"note #{short}: its text is missing from the log (or does not match its hash)")
    for note_id, name in store.forgotten_texts():
        out.append(f"{name}: still holds the text of forgotten note {note_id[:8]} (any qem write removes it)")
    for alias, count in store._read(
            "SELECT alias, count(*) FROM notes WHERE alias IS NOT NULL GROUP BY alias HAVING count(*) > 1"):
        out.append(f"{count} notes claim the old number #{alias} (two converted stores merged?)")
    return out


def _loose_texts(store: Store) -> list[str]:
    """Texts whose note's creation the log does not hold: listed, not failed (a write
    killed before its event leaves one; so does a commit of a text without its event,
    whose event a later commit brings)."""
    return [f"{name}: the text of note {note_id[:8]}, whose creation the log does not hold (a write"
            " interrupted before its event, or the event not committed yet); remove it if it is the former"
            for note_id, name in store._read("SELECT t.note, t.file FROM texts t LEFT JOIN notes n ON n.id = t.note"
                                             " WHERE n.id IS NULL ORDER BY t.file")]


def _index_problems(store: Store) -> tuple[list[str], list[str], list[Event]]:
    """Where the local index differs from a replay of the log read afresh; the log
    files that fresh read set aside (a file changed in place since the index read it
    included: the index goes on serving what it read); and every event it read.  The
    replay is built in a temporary file (streamed: qem_edit.index), and the two indexes'
    notes and items compared a row at a time, in id order."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="qem-verify-") as folder:
        fresh = db.connect(str(Path(folder) / "fresh.db"))
        try:
            fresh.execute("PRAGMA journal_mode = OFF")
            index = Index(fresh, store.tree)
            fresh.execute("BEGIN")
            index.create()
            index.sync()
            fresh.execute("COMMIT")
            aside = [p for (p,) in fresh.execute("SELECT problem FROM files WHERE problem IS NOT NULL ORDER BY name")]
            logged = [event_from_row(r) for r in fresh.execute(f"SELECT {EVENT_COLUMNS} FROM events")]
            try:
                damage = store.conn.execute("PRAGMA quick_check").fetchone()[0]
                if damage != "ok":
                    return [f"the index is damaged ({damage}); `qem verify --repair` rebuilds it"], aside, logged
                return _differences(fresh, store.conn), aside, logged
            except sqlite3.DatabaseError as exc:
                return [f"the index cannot be read ({exc}); `qem verify --repair` rebuilds it"], aside, logged
        finally:
            fresh.close()


def _differences(fresh: sqlite3.Connection, have: sqlite3.Connection) -> list[str]:
    """The notes whose row, or item, differs between the fresh index and the one kept."""
    query = (f"SELECT {NOTE_COLUMNS}, (SELECT item FROM items i WHERE i.id = n.id)"
             " FROM notes n ORDER BY id")
    out = []
    wants, haves = fresh.execute(query), have.execute(query)
    want, got = next(wants, None), next(haves, None)
    while want is not None or got is not None:
        if got is None or (want is not None and want[0] < got[0]):
            note_id, want = want[0], next(wants, None)  # type: ignore[index]
        elif want is None or got[0] < want[0]:
            note_id, got = got[0], next(haves, None)
        else:
            note_id = want[0]
            if want[:-1] != got[:-1]:
                out.append(f"note {note_id[:8]}: the index disagrees with the log (`qem verify --repair` rebuilds it)")
            elif want[-1] != got[-1]:
                out.append(f"note {note_id[:8]}: the index's MEMORY.md item disagrees with the log")
            want, got = next(wants, None), next(haves, None)
            continue
        out.append(f"note {note_id[:8]}: the index disagrees with the log (`qem verify --repair` rebuilds it)")
    return out


def _open_disputes(store: Store) -> list[str]:
    rows = store._read("SELECT short, disputes FROM notes WHERE disputes != '[]' ORDER BY id")
    import json

    out = []
    for short, disputes in rows:
        for dispute, other in json.loads(disputes):
            out.append(f"dispute {dispute[:6]}: #{short} and {other[:8]} disagree (qem rule {dispute[:6]} --keep ONE)")
    return out


def _mirror_problems(store: Store, place) -> list[str]:  # type: ignore[no-untyped-def]
    from .export import check

    mirror = place.mirror_path()
    if not mirror.is_file():
        return []
    verdict = check(store, mirror)
    return [] if verdict.clean else [f"{mirror}: {verdict.message}"]
