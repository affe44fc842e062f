"""The store in-process: lifecycle rules, normalization, forgetting, the log's guards,
verify, and dump/load.  (The CLI's face of the same rules is in test_cli.py.)

A memory is a directory (`<workspace>/.qem`): the log, immutable files named by their
bytes' hash (`events/<id>`, `texts/<note id>`, `packs/*.jsonl`), and a local SQLite index
rebuilt from it.  "Nothing was written" means the dump, the log's files (names and bytes)
and the number of events are all unchanged.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from builders import AT, add, emit, forget
from conftest import CORPUS
from hypothesis import given, settings
from hypothesis import strategies as st

from qem_edit.base import errors, ids
from qem_edit.base.decisions import NewNote
from qem_edit.base.replay import Event, LogError, fold, note_from_created
from qem_edit.base.stored_form import normalize_text
from qem_edit.base.vocabulary import TextError
from qem_edit.mirror.verify import verify_report
from qem_edit.storage import index as index_mod
from qem_edit.storage import store as store_mod
from qem_edit.storage.logtree import FORMAT, MAX_EVENT_BYTES, TextRecord, canonical, event_bytes, event_from
from qem_edit.storage.store import Store
from qem_edit.system import db as db_mod
from qem_edit.transfer.dump import dump_lines, load, read_dump

# -- helpers --------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path):
    with Store.open(tmp_path / ".qem", create=True) as handle:
        yield handle


def supersede(s: Store, note_id: str, text: str = "the successor") -> str:
    old = s.note(note_id)
    return add(s, text, kind=old.kind, provenance=old.provenance, supersedes=note_id)


def dumped(s: Store) -> str:
    return "".join(dump_lines(s))


def log_files(s: Store) -> dict[str, bytes]:
    """Every file of the log, by name, with its bytes."""
    return {name: (s.root / name).read_bytes() for name in sorted(s.tree.names())}


def written(s: Store) -> tuple[str, dict[str, bytes], int]:
    """What a write changes: the dump, the log's files, the number of events."""
    return dumped(s), log_files(s), len(s.events())


def problems(s: Store) -> list[str]:
    """What `qem verify` reports: its problems and its open disputes."""
    report = verify_report(s)
    return report.problems + report.disputes


# The ordinary move that brings a new (active) note to each other state.
MOVE_TO = {"stale": "stale_flagged", "superseded": "superseded", "revoked": "revoked", "expired": "expired",
           "forgotten": "forgotten"}


def note_in_state(s: Store, state: str, provenance: str = "agent") -> str:
    """A fresh note brought to `state` by the ordinary moves."""
    note_id = add(s, f"a note to be {state}", provenance=provenance)
    if state in MOVE_TO:
        do_move(s, MOVE_TO[state], note_id)
    assert s.note(note_id).state == state
    return note_id


def do_move(s: Store, move: str, note_id: str | int):
    if move == "superseded":
        return supersede(s, s.resolve(note_id))
    if move == "forgotten":
        return forget(s, note_id)
    return emit(s, note_id, move)


# -- opening ---------------------------------------------------------------------------------


def test_open_missing_store_refuses_and_points_at_init(tmp_path):
    path = tmp_path / "nothing" / ".qem"
    with pytest.raises(errors.StoreMissing) as info:
        Store.open(path)
    assert "qem init" in (info.value.hint or "")
    assert not path.exists() and not path.parent.exists(), "a read must not create the store"


def test_create_then_reopen(tmp_path):
    path = tmp_path / "deep" / "dir" / ".qem"
    Store.open(path, create=True).close()
    assert path.is_dir()
    assert all((path / folder).is_dir() for folder in ("events", "texts", "packs"))
    memory = store_mod.read_memory_id(path)
    assert memory and "[memory]" in (path / "config.toml").read_text()
    assert "/index.db" in (path / ".gitignore").read_text()  # the index never travels
    with Store.open(path) as again:
        assert again.events() == [] and again.notes() == []
        assert again.memory_id() == memory
        assert problems(again) == []
    assert store_mod.read_memory_id(path) == memory  # reopening never renames the memory


@pytest.fixture
def with_notes(tmp_path: Path) -> Path:
    """A memory holding two notes, closed: (its directory)."""
    path = tmp_path / ".qem"
    with Store.open(path, create=True) as s:
        add(s, "first")
        emit(s, add(s, "second"), "revoked")
    return path


def _log_bytes(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes()
            for folder in ("events", "texts", "packs") for p in sorted((path / folder).iterdir())}


def _not_a_database(index: Path) -> None:
    for leftover in index.parent.glob(index.name + "-*"):
        leftover.unlink()
    index.write_bytes(b"hello, not a database" * 100)


def _run_sql(index: Path, *statements: str) -> None:
    """`statements` run on the index, as another program might."""
    conn = sqlite3.connect(index)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def _someone_elses_database(index: Path) -> None:
    conn = sqlite3.connect(index)
    tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    conn.close()
    _run_sql(index, *[f"DROP TABLE {name}" for name in tables], "CREATE TABLE t (x)")


INDEX_DAMAGES = {
    "not a database": _not_a_database,
    "someone else's database": _someone_elses_database,
    "an index of another qem version": lambda index: _run_sql(
        index, "UPDATE meta SET value = '999' WHERE key = 'index_version'",
        "DELETE FROM notes"),  # and it holds nothing useful
}


@pytest.mark.parametrize("damage", INDEX_DAMAGES)
def test_a_damaged_or_foreign_index_is_rebuilt_from_the_log(with_notes, damage):
    """(Was: a file that is not a store is refused.)  The one SQLite file is the index, a
    cache of the log: damaged, or another program's or version's, it is made anew from the
    log; the log is never touched."""
    path = with_notes
    log = _log_bytes(path)
    index = path / store_mod.INDEX_NAME
    INDEX_DAMAGES[damage](index)
    with Store.open(path) as s:
        assert sorted((n.text, n.state) for n in s.notes()) == [("first", "active"), ("second", "revoked")]
        assert s.index.meta("index_version") == index_mod.INDEX_VERSION
        assert problems(s) == []
    assert index.read_bytes().startswith(b"SQLite format 3\0")
    assert _log_bytes(path) == log  # the log itself is never touched


def test_a_memory_path_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / "not-a-directory"
    path.write_bytes(b"some file")
    with pytest.raises(errors.StoreMissing):
        Store.open(path)
    with pytest.raises((errors.StoreUnwritable, errors.NotAStore)):
        Store.open(path, create=True)
    assert path.read_bytes() == b"some file"


def test_a_store_from_an_older_qem_is_refused_with_the_way_to_convert_it(tmp_path):
    path = tmp_path / ".qem"
    path.mkdir()
    (path / "memory.db").write_bytes(b"an old single-file store")
    with pytest.raises(errors.BadInput) as info:
        Store.open(path, create=True)
    assert "qem migrate" in (info.value.hint or "")
    assert sorted(p.name for p in path.iterdir()) == ["memory.db"]  # nothing was made beside it


def test_a_log_file_of_a_newer_format_is_set_aside_and_named(with_notes):
    """(Was: a newer schema is refused.)  An event written by a newer qem is not guessed
    at: its file is set aside, named by verify, and the rest of the log is read."""
    path = with_notes
    newer = canonical({"v": FORMAT + 1, "type": "created", "note": None, "at": AT, "actor": "future",
                       "reason": None, "checkin": None, "clock": 99, "prev": [], "data": {"shape": "new"}})
    name = f"events/{ids.content_id(newer)}"
    (path / name).write_bytes(newer)
    with Store.open(path) as s:
        assert len(s.notes()) == 2
        [why] = s.set_aside()
        assert name in why and f"log format {FORMAT + 1}" in why
        assert any(name in p for p in problems(s))


# -- the lifecycle ---------------------------------------------------------------------------

STATES = ("active", "stale", "superseded", "revoked", "expired", "forgotten")
# Written out from the issue rather than imported, so a change to vocabulary.MOVES must be a
# deliberate change here too.  A stale note is still in force: it can be superseded,
# revoked or expired.
ALLOWED = {
    "superseded": {"active", "stale"},
    "revoked": {"active", "stale"},
    "stale_flagged": {"active"},
    "reinstated": {"revoked", "stale", "expired"},
    "expired": {"active", "stale"},
    "forgotten": {"active", "stale", "superseded", "revoked", "expired"},
    "promoted": {"active", "stale", "superseded", "revoked", "expired"},
}
LANDS_IN = {
    "superseded": "superseded",
    "revoked": "revoked",
    "stale_flagged": "stale",
    "reinstated": "active",
    "expired": "expired",
    "forgotten": "forgotten",
}


def test_a_note_of_one_event_folds_as_its_creation_and_a_lone_change_is_no_note():
    """Most notes are one `created` event: folded straight from it, as the whole fold would."""
    note_id = "a" * ids.ID_LENGTH
    created = Event(note_id, note_id, "created", AT, "tester",
                    data={"kind": "gotcha", "priority": "high", "provenance": "agent", "text": "d" * 64})
    folded = fold([created], "the text")
    assert folded.problems == [] and folded.note == note_from_created(created, "the text")
    assert folded.note.text == "the text" and folded.note.state == "active"
    assert fold(iter([created]), "the text") == folded  # (any iterable of events)
    lone = Event("b" * ids.ID_LENGTH, note_id, "stale_flagged", AT, "tester", prev=(note_id,))
    with pytest.raises(LogError, match="0 created events"):
        fold([lone])


@pytest.mark.parametrize("move, state", [(m, s) for m in sorted(ALLOWED) for s in STATES],
                         ids=[f"{m} from {s}" for m in sorted(ALLOWED) for s in STATES])
def test_transition_table(db, move, state):
    """Every move from every state: allowed ones land where they should, the rest are
    refused with a message naming the note and its state, and write nothing."""
    note_id = note_in_state(db, state)
    if state in ALLOWED[move]:
        do_move(db, move, note_id)
        note = db.note(note_id)
        if move == "promoted":
            assert (note.state, note.provenance) == (state, "human")
        else:
            assert note.state == LANDS_IN[move]
    else:
        before = written(db)
        with pytest.raises(errors.Refused) as info:
            do_move(db, move, note_id)
        assert f"#{db.note(note_id).shown}" in str(info.value) and state in str(info.value)
        assert written(db) == before
    assert problems(db) == []


def test_promote_of_a_human_note_is_refused(db):
    note_id = add(db)
    do_move(db, "promoted", note_id)
    before = written(db)
    with pytest.raises(errors.Refused, match="already provenance human"):
        do_move(db, "promoted", note_id)
    assert written(db) == before


def test_supersede_links_both_ways_in_one_transaction(db):
    old = add(db, "old text", kind="directive", priority="high")
    count, files = len(db.events()), set(db.tree.names())
    new = supersede(db, old, "new text")
    events = db.events()[count:]
    assert len(db.events()) == count + 2
    assert [(e.note, e.type) for e in events] == [(new, "created"), (old, "superseded")]
    assert events[0].at == events[1].at and events[0].clock < events[1].clock
    assert events[0].data["supersedes"] == old and events[1].data == {"by": new}
    assert events[1].prev == (old,)  # it follows the old note's own history
    # one transaction: both events in one pack (whose rename is the moment they exist)
    new_files = set(db.tree.names()) - files
    assert [n for n in new_files if n.startswith("events/")] == []
    assert len([n for n in new_files if n.startswith("packs/e-")]) == 1
    assert db.note(old).superseded_by == new and db.note(new).supersedes == old
    assert db.note(old).text == "old text"  # the old text stays in the log


@pytest.mark.parametrize("move", sorted(ALLOWED))
def test_unknown_note_is_refused(db, move):
    add(db)
    before = written(db)
    with pytest.raises(errors.NoSuchNote, match="#99"):
        do_move(db, move, 99) if move != "superseded" else add(db, supersedes=99)
    assert written(db) == before


@pytest.mark.parametrize("note_id", ["0", "-1", str(2**63), str(10**30), "zzzz", "#", "", "²",
                                     "0" * ids.ID_LENGTH, "a" * (ids.ID_LENGTH + 1)])
def test_out_of_range_ids_are_unknown_notes_not_crashes(db, note_id):
    add(db)
    before = written(db)
    with pytest.raises(errors.NoSuchNote):
        db.resolve(note_id)
    with pytest.raises(errors.NoSuchNote):
        db.note(note_id)
    with pytest.raises(errors.NoSuchNote):
        emit(db, note_id, "revoked")
    assert written(db) == before


def test_a_failed_transaction_writes_nothing(db):
    first = add(db)
    before = written(db)

    def work(tx):
        tx.create(NewNote("task", "low", "agent", "first of two"), "tester")
        raise errors.Refused("changed my mind")

    with pytest.raises(errors.Refused):
        db.write(work)
    assert written(db) == before
    assert [n.id for n in db.notes()] == [first]


def test_undecodable_text_is_refused_not_a_crash(db):
    with pytest.raises(errors.BadInput, match="UTF-8"):
        db.write(lambda tx: tx.create(NewNote("task", "low", "agent", "bad \udcff byte"), "tester"))
    assert db.events() == [] and db.tree.names() == set()


# -- normalization ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, want",
    [
        ("one\r\ntwo\rthree\n", "one\ntwo\nthree"),
        ("trailing   \nspaces\t \n", "trailing\nspaces"),
        ("\n\n  \n\t\nbody\n \n\n", "body"),
        ("first\n\n\n\nafter a gap", "first\n\n\n\nafter a gap"),
        ("    indented code\n  - nested", "    indented code\n  - nested"),
        ("\r\n\r\n  keep indent  \r\n\r\n", "  keep indent"),
        ("ünïcødé ✅", "ünïcødé ✅"),
    ],
)
def test_normalize_text(raw, want):
    assert normalize_text(raw) == want


@pytest.mark.parametrize("raw", ["", "\n", "   \r\n\t\n", "a\x00b", "\x00"])
def test_normalize_refuses_empty_and_nul(raw):
    with pytest.raises(TextError):
        normalize_text(raw)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(["a", "b", " ", "\t", "\n", "\r", "é", "-"]), max_size=40))
def test_normalize_properties(raw):
    try:
        text = normalize_text(raw)
    except TextError:
        assert not raw.strip()
        return
    assert normalize_text(text) == text  # idempotent
    assert "\r" not in text
    lines = text.split("\n")
    assert all(line == line.rstrip() for line in lines)
    assert lines[0].strip() and lines[-1].strip()
    # only whitespace changed, and never inside a line's text
    assert "".join(text.split()) == "".join(raw.split())
    for line in text.split("\n"):
        assert line in raw.replace("\r", "\n")


def test_the_store_keeps_the_normalized_text(db):
    note_id = add(db, "\r\n  indented\r\n\r\nmore   \r\n\r\n")
    assert db.note(note_id).text == "  indented\n\nmore"
    # the text is in the log beside its event, which holds its hash
    record = json.loads((db.root / "texts" / note_id).read_bytes())
    assert record["text"] == "  indented\n\nmore"
    assert db.events(note_id)[0].data["text"] == TextRecord(note_id, record["key"], record["text"]).digest
    assert db.texts()[note_id] == "  indented\n\nmore"


def test_a_long_id_list_is_bound_a_chunk_at_a_time(db):
    """An id list is bound into `IN (...)` a chunk at a time (db.chunks): one longer than
    SQLite binds in one statement (its limit lowered here to 600) is read, and purged, whole."""
    kept, gone = add(db, "a note kept"), add(db, "a note whose text goes")
    many = [f"{i:032x}" for i in range(1500)]
    db.conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 600)
    assert db.events_of_checkins(many) == []
    assert set(db.notes_by_id([*many, kept])) == {kept}
    assert dict(db.same_text_in_force([*many, kept])) == {kept: []}
    db.write(lambda tx: db.purge_texts({*many, gone}))
    assert set(db.texts()) == {kept}


def test_a_huge_note_lies_where_no_search_passes(db):
    """A note's text (and its MEMORY.md item) may be megabytes. In a table clustered by its
    key (WITHOUT ROWID) a row can be lifted into a page above the leaves, and every search
    that passes it there reads the whole row again: a 4.5 MB note among 2,000 made a
    check-in take 2 s or 90 s by where it landed. The tables holding texts are keyed by
    rowid, whose upper pages hold only numbers; the items stay clustered (export reads them
    in order) with a long one (over a fifth of a page: 3,276 bytes) kept aside, read back
    whole by export, a check-in's reads and verify's comparison."""
    log = "a pasted log:\n" + "a line of it, é\n" * 300_000
    notes = [NewNote("gotcha", "medium", "agent", f"note {i}", None) for i in range(1500)]
    notes.insert(750, NewNote("finding", "medium", "agent", log, None))
    notes.insert(10, NewNote("finding", "medium", "agent", "é" * 1400, None))  # an item of 2,800 bytes and a few: in its row
    notes.insert(11, NewNote("finding", "medium", "agent", "é" * 1700, None))  # of 3,400 and more: kept aside
    made = db.write(lambda tx: [tx.create(new, "tester").id for new in notes])
    huge, short, long = made[752], made[10], made[11]
    clustered = {name for name, sql in db.conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
                 if sql.rstrip().upper().endswith("WITHOUT ROWID")}
    assert "items" in clustered and not clustered & {"notes", "texts"}, clustered
    rows = dict(db.conn.execute("SELECT id, item IS NULL FROM items WHERE id IN (?, ?, ?)", (huge, short, long)))
    assert rows == {huge: 1, long: 1, short: 0}, rows
    assert {i for (i,) in db.conn.execute("SELECT id FROM long_items")} == {huge, long}
    items = db.items_of_notes([huge, long])["finding"]
    assert len(items) == 2 and all(isinstance(i, bytes) for i in items)
    assert any(log.rstrip().split("\n")[-1].encode() in i for i in items)
    exported = b"".join(item for kind in db.export_items(["finding"]).values() for item in kind)
    assert exported.count("a line of it, é".encode()) == 300_000 and ("é" * 1700).encode() in exported
    assert [bytes(i) for i in db.iter_items("finding")] == db.export_items(["finding"])["finding"]
    by_id, now = dict(db.export_items(["finding"], with_ids=True)["finding"]), db.items_now([huge, long])
    assert {i: now[i][1] for i in (huge, long)} == {i: by_id[i] for i in (huge, long)}  # a check-in's read
    assert verify_report(db).problems == []  # the index built afresh agrees, long items and all
    (kept,) = db.conn.execute("SELECT item FROM long_items WHERE id = ?", (long,)).fetchone()
    db.conn.execute("UPDATE long_items SET item = 'tampered' WHERE id = ?", (long,))
    assert any("MEMORY.md item disagrees" in p for p in verify_report(db).problems)
    db.conn.execute("UPDATE long_items SET item = ? WHERE id = ?", (kept, long))
    assert db.items_now([long])[long][1] == by_id[long]  # put back as it was
    aside = "SELECT id FROM long_items EXCEPT SELECT id FROM items WHERE item IS NULL"
    emit(db, huge, "revoked")  # rendered again: still long, still aside, once
    assert db.conn.execute(aside).fetchall() == [] and db.conn.execute("SELECT count(*) FROM long_items").fetchone()[0] == 2
    forget(db, huge)  # its item gone, and what was kept aside with it
    assert {i for (i,) in db.conn.execute("SELECT id FROM long_items")} == {long}
    with db_mod.transaction(db.conn):  # every item rendered again (a new renderer): emptied at once, then remade
        db.index._rerender_all()
    assert db.conn.execute(aside).fetchall() == [] and db.conn.execute("SELECT count(*) FROM long_items").fetchone()[0] == 1
    assert db.conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'long_items_out'").fetchone()[0] == 1
    db.conn.execute("SAVEPOINT emptied")
    index_mod._clear_items(db.conn)  # (what a replay of every note starts with)
    assert db.conn.execute("SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM long_items)").fetchone()[0] == 0
    db.conn.execute("ROLLBACK TO emptied")
    db.conn.execute("RELEASE emptied")
    try:
        upper = db.conn.execute("SELECT name, max(mx_payload) FROM dbstat WHERE pagetype = 'internal'"
                                " GROUP BY name").fetchall()
    except sqlite3.OperationalError:  # an SQLite built without its dbstat table
        return
    assert upper and all(largest < 4096 for _, largest in upper), upper


def test_the_reads_of_anchors_never_scan_the_notes(db):
    """Each read of the anchors in force walks the anchors and looks each note up: asked for
    one state (`any_anchor_in_force`, a commit hook's question), SQLite planned it as a scan
    of every note instead (74,900 rows, 13 ms of a 57 ms hook, whenever the anchored note
    came late in id order)."""
    for i in range(50):
        add(db, f"a note {i}")
    asked: list[str] = []
    db.conn.set_trace_callback(lambda sql: asked.append(sql) if "FROM anchors" in sql else None)
    for states in (("active",), ("active", "stale")):
        db.any_anchor_in_force(states=states)
        db.anchored_paths(10, states=states)
        db.anchors_in_force(states=states)
        db.anchors_in_force(["src/a.py"], states=states)
        db.anchors_in_force(folder="src", states=states)
        db.anchors_of_notes([f"{i:026x}" for i in range(3)], states=states)
    db.conn.set_trace_callback(None)
    assert len(asked) == 12, asked
    for sql in asked:
        plan = [row[3] for row in db.conn.execute("EXPLAIN QUERY PLAN " + sql)]
        assert not any(step.startswith("SCAN n") for step in plan), (sql, plan)

def test_notes_sharing_a_long_beginning_are_searched_once_for_their_repeats(db):
    """A check-in of many notes sharing their first 48 characters (a list nested ever deeper)
    asks the index once for that beginning, not once a note (which read every such note once
    for each: 1,080 notes took minutes); each note's repeats are still exactly its twins."""
    stem = "- " * 30
    written = [add(db, f"{stem}nested {i % 150}") for i in range(300)]  # each text twice
    other = add(db, "a note of its own")
    searches: list[str] = []
    db.conn.set_trace_callback(lambda sql: searches.append(sql) if "substr(text" in sql else None)
    found = dict(db.same_text_in_force([*written, other]))
    db.conn.set_trace_callback(None)
    assert len(searches) == 2, len(searches)  # the shared beginning, and the other note's
    assert found[other] == []
    for i, note in enumerate(written):
        assert found[note] == [written[(i + 150) % 300]]


# -- forget ----------------------------------------------------------------------------------

SECRET = "sk-live-7f3a9c-TOPSECRET"


def test_forget_erases_text_from_the_log_and_the_index(db):
    first = add(db, f"token {SECRET} in the env")
    second = supersede(db, first, f"rotate {SECRET} monthly")
    add(db, "an unrelated note")
    forget(db, first, "contained a credential")
    forget(db, second, "contained a credential")
    count = len(db.events())

    raw = sqlite3.connect(db.index_path)
    for table in ("events", "texts", "notes", "items"):
        for row in raw.execute(f"SELECT * FROM {table}"):
            assert SECRET not in json.dumps(row, default=str), (table, row)
    raw.close()
    for name, data in log_files(db).items():
        assert SECRET.encode() not in data, name

    for note_id in (first, second):
        note = db.note(note_id)
        assert (note.state, note.text) == ("forgotten", None)
        assert note_id not in db.texts() and not (db.root / "texts" / note_id).exists()
        created, *rest = db.events(note_id)
        assert created.type == "created" and ids.is_id(created.data["text"])  # only the hash stays
        tomb = rest[-1]
        assert (tomb.type, tomb.actor, tomb.reason, dict(tomb.data)) == (
            "forgotten", "tester", "contained a credential", {})
    # the chain survives the erasure
    assert db.note(first).superseded_by == second and db.note(second).supersedes == first
    assert SECRET not in dumped(db)
    assert problems(db) == []
    assert len(db.events()) == count


def test_forget_leaves_no_trace_in_any_file(tmp_path, monkeypatch):
    """Even where SQLite's build leaves freed bytes in place by default (secure_delete off,
    the stock default), the erased text must not survive in any file of the memory: the
    log's files, the index, its journal."""
    real_connect = sqlite3.connect

    def insecure_connect(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(db_mod.sqlite3, "connect", insecure_connect)
    path = tmp_path / ".qem"
    with Store.open(path, create=True) as s:
        for i in range(40):
            add(s, f"filler note {i} " + "z" * 150)
        victim = add(s, f"{SECRET} " + "q" * 100)
        for i in range(5):
            add(s, f"more filler {i}")
        s.pack()  # the text now sits in a pack with others: forget rewrites the pack
        forget(s, victim)
    monkeypatch.undo()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "index.db" for p in files)
    leftovers = [str(p.relative_to(tmp_path)) for p in files if SECRET.encode() in p.read_bytes()]
    assert leftovers == []
    with Store.open(path) as s:
        assert sum(1 for n in s.notes() if n.text and n.text.startswith("filler note")) == 40


def test_ids_are_never_reused_after_forgetting(db):
    a = add(db, "same words")
    b = add(db, "same words")
    forget(db, b)
    c = add(db, "same words")
    forget(db, c)
    d = add(db, "same words")
    made = [a, b, c, d]
    assert len(set(made)) == 4 and all(ids.is_id(i) for i in made)  # content-hashed, with a nonce
    assert [db.note(i).state for i in made] == ["active", "forgotten", "forgotten", "active"]


# -- the log's own guards --------------------------------------------------------------------
#
# (Once SQL triggers on one store file.)  Now every log file is named by the hash of its
# bytes and never changed: a file rewritten behind qem's back no longer matches its name,
# is set aside (its content never applied) and named by verify; a file that arrives twice
# is one file's events once.


def test_every_log_file_is_named_by_its_bytes(db):
    note_id = add(db, "original")
    emit(db, note_id, "revoked")
    supersede(db, add(db, "second"))
    for name, data in log_files(db).items():
        folder, _, base = name.partition("/")
        if folder == "events":
            assert base == ids.content_id(data)
        elif folder == "packs":
            assert base[2:-len(".jsonl")] == ids.content_id(data)
        else:
            assert folder == "texts" and base in {n.id for n in db.notes()}


def _created_and_revoked(s: Store) -> tuple[str, str, str]:
    """A note and its revocation, each in its own event file; returns (note, created
    file, revoked file)."""
    note_id = add(s, "original")
    revoked = emit(s, note_id, "revoked")
    add(s, "second")
    return note_id, f"events/{note_id}", f"events/{revoked.id}"


def _rewrite(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    obj = json.loads(path.read_bytes())
    change(obj)
    path.write_bytes(canonical(obj))


REWRITES = {
    "actor": ("revoked", lambda o: o.update(actor="mallory")),
    "type": ("revoked", lambda o: o.update(type="expired")),
    "reason": ("revoked", lambda o: o.update(reason="retconned")),
    "kind": ("created", lambda o: o["data"].update(kind="task")),
    "clock": ("revoked", lambda o: o.update(clock=o["clock"] + 100)),
    "cut short": ("revoked", None),
}


def _forged_in(s: Store) -> list[str]:
    text = dumped(s).replace(" ", "")
    return [f for f in ("mallory", "retconned", '"expired"', '"kind":"task"') if f in text]


@pytest.mark.parametrize("how", ["replaced", "in place"])
@pytest.mark.parametrize("what", sorted(REWRITES))
def test_an_event_file_rewritten_behind_qems_back_is_set_aside(tmp_path, what, how):
    """A new file under the old name (`replaced`, as git or most editors write one) or the
    same file's bytes overwritten (`in place`): log files never change, so commands go on
    serving what the index read; `qem verify` names the file, and a rebuilt index (a fresh
    clone, `qem verify --repair`) sets it aside.  The forged bytes are never taken."""
    path = tmp_path / ".qem"
    with Store.open(path, create=True) as s:
        note_id, created, revoked = _created_and_revoked(s)
        honest = dumped(s)
    which, change = REWRITES[what]
    name = created if which == "created" else revoked
    original = (path / name).read_bytes()
    if change is None:
        forged = original[: len(original) // 2]
    else:
        _rewrite(path / name, change)
        forged = (path / name).read_bytes()
        (path / name).write_bytes(original)
    if how == "replaced":
        (path / name).unlink()
    (path / name).write_bytes(forged)
    with Store.open(path) as s:  # never a crash: the forged file is never taken
        assert _forged_in(s) == []
        found = problems(s)
        assert any(p.startswith(name + ":") and "do not hash to its name" in p for p in found), found
        assert dumped(s) == honest
        assert s.rebuild() >= 1
        [why] = s.set_aside()
        assert why.startswith(name + ":") and "do not hash to its name" in why
        assert _forged_in(s) == []
        found = problems(s)
        assert any(p.startswith(name + ":") for p in found), found
        if which == "revoked":  # the note is as if the forged event never was
            assert s.note(note_id).state == "active"
        else:  # its creation is gone: its revocation is named as an orphan
            assert note_id not in {n.id for n in s.notes()}
            assert any("whose creation the log does not hold" in p for p in found)
    (path / name).unlink()
    (path / name).write_bytes(original)  # put back: verify sees it whole, a rebuild reads it
    with Store.open(path) as s:
        assert not any(p.startswith(name) for p in problems(s))
        s.rebuild()
        assert s.set_aside() == [] and problems(s) == [] and dumped(s) == honest


def test_a_text_file_rewritten_behind_qems_back_is_not_taken(tmp_path):
    path = tmp_path / ".qem"
    with Store.open(path, create=True) as s:
        note_id = add(s, "the real text")
    _rewrite(path / "texts" / note_id, lambda o: o.update(text="a forged text"))
    with Store.open(path) as s:
        assert s.note(note_id).text == "the real text"  # what the index read before
        assert problems(s) != []  # a fresh read of the log disagrees
        s.rebuild()
        assert s.note(note_id).text is None  # its hash is in the note's created event
        assert "a forged text" not in dumped(s)
        assert any("text is missing from the log (or does not match its hash)" in p for p in problems(s))


def test_a_deleted_event_file_is_caught(tmp_path):
    path = tmp_path / ".qem"
    with Store.open(path, create=True) as s:
        note_id, created, _ = _created_and_revoked(s)
        count = len(s.events())
    (path / created).unlink()
    with Store.open(path) as s:  # the index forgets what left the log, and says what is broken
        assert len(s.events()) == count - 1
        assert note_id not in {n.id for n in s.notes()}
        assert any("whose creation the log does not hold" in p for p in problems(s))


@pytest.mark.parametrize("how", ["renamed", "oversized", "a folder"])
def test_a_misplaced_or_oversized_file_is_set_aside(tmp_path, how):
    path = tmp_path / ".qem"
    with Store.open(path, create=True) as s:
        note_id, created, revoked = _created_and_revoked(s)
    if how == "renamed":
        name = "events/" + "0" * ids.ID_LENGTH
        (path / revoked).rename(path / name)
    elif how == "oversized":
        data = b" " * (MAX_EVENT_BYTES + 1)
        name = f"events/{ids.content_id(data)}"
        (path / name).write_bytes(data)
    else:
        name = f"events/{'1' * ids.ID_LENGTH}"
        (path / name).mkdir()
    with Store.open(path) as s:
        [why] = s.set_aside()
        assert why.startswith(name + ":")
        assert any(name in p for p in problems(s))
        assert {n.text for n in s.notes()} == {"original", "second"}


def test_a_number_past_sqlites_integers_in_an_event_never_crashes(tmp_path):
    """An event from another clone is valid JSON whatever number it holds: a note's old
    number (`alias`) too large for the index is no number, never a crash."""
    path = tmp_path / ".qem"
    Store.open(path, create=True).close()
    created = canonical({"v": FORMAT, "type": "created", "note": None, "at": AT, "actor": "far", "reason": None,
                         "checkin": None, "clock": 1, "prev": [],
                         "data": {"kind": "task", "priority": "low", "provenance": "agent", "supersedes": None,
                                  "text": "0" * ids.ID_LENGTH, "nonce": "n", "short": 4, "alias": 2**64}})
    name = f"events/{ids.content_id(created)}"
    (path / name).write_bytes(created)
    with Store.open(path) as s:
        [note] = s.notes()
        assert note.id == name.split("/")[1] and note.alias is None


def test_an_event_that_arrives_twice_is_one_event(db):
    note_id = add(db, "once")
    revoked = emit(db, note_id, "revoked")
    before = dumped(db)
    # the same events again, in a pack (as a merge of a branch that packed them brings them)
    db.tree.write_pack("e", [event_bytes(e) for e in db.events()])
    db.sync()
    assert dumped(db) == before
    assert [e.id for e in db.events(note_id)] == [note_id, revoked.id]
    assert problems(db) == []


def test_an_event_cannot_be_made_twice_through_the_api(db):
    add(db, "one")
    emit(db, add(db, "two"), "expired")
    raw = dumped(db).encode()
    before = written(db)
    assert load(db, *read_dump(raw, "own.jsonl")) == 0  # every event is already here
    assert written(db) == before

    def again(tx):  # an event already in the log, written again: the same file, one event
        tx.events = [db.events()[0]]

    db.write(again)
    assert written(db) == before
    assert problems(db) == []


# -- verify ----------------------------------------------------------------------------------


def test_verify_passes_on_fresh_and_busy_stores(db):
    assert problems(db) == []
    made = [note_in_state(db, state) for state in STATES]
    do_move(db, "promoted", made[0])
    assert problems(db) == []
    assert verify_report(db).notes == len(made) + 1  # + the successor


@pytest.mark.parametrize(
    "tamper, words",
    [
        ("UPDATE notes SET text = 'x' WHERE id = '{first}'", ["note {first8}", "disagrees with the log"]),
        ("UPDATE notes SET state = 'active' WHERE id = '{second}'", ["note {second8}", "disagrees with the log"]),
        ("UPDATE notes SET provenance = 'human' WHERE id = '{first}'", ["note {first8}", "disagrees with the log"]),
        ("DELETE FROM notes WHERE id = '{second}'", ["note {second8}", "disagrees with the log"]),
        ("INSERT INTO notes SELECT {copy} FROM notes WHERE id = '{first}'", ["note {fake8}", "disagrees with the log"]),
        ("UPDATE items SET item = 'x' WHERE id = '{first}'", ["note {first8}", "MEMORY.md item disagrees"]),
    ],
)
def test_verify_catches_an_index_that_disagrees_and_repair_fixes_it(db, tamper, words):
    first = add(db, "first")
    second = add(db, "second")
    emit(db, second, "revoked")
    honest, log = dumped(db), log_files(db)
    fake = "9" * ids.ID_LENGTH
    raw = sqlite3.connect(db.index_path)
    columns = [r[1] for r in raw.execute("PRAGMA table_info(notes)")]
    copy = ", ".join(f"'{fake}'" if c == "id" else c for c in columns)
    names = {"first": first, "second": second, "first8": first[:8], "second8": second[:8], "fake8": fake[:8],
             "copy": copy}
    raw.execute(tamper.format(**names))
    raw.commit()
    raw.close()
    found = verify_report(db).problems
    assert any(all(w.format(**names) in p for w in words) for p in found), found
    note8 = words[0].format(**names).split()[-1]
    assert all(note8 in p for p in found), found  # only the tampered note is named
    db.rebuild()
    assert problems(db) == []
    assert log_files(db) == log  # repairing the index never touches the log
    assert dumped(db) == honest
    assert db.note(first).text == "first"


# -- dump and load ---------------------------------------------------------------------------


def busy_store(s: Store) -> None:
    for state in STATES:
        note_in_state(s, state)
    directive = add(s, "Always run\n\n  tests in the venv", kind="directive", provenance="user-stated")
    do_move(s, "promoted", directive)
    s.write(lambda tx: tx.emit(directive, "stale_flagged", "reviewer", "check", checkin="ck-1"),
            at="2026-08-01T09:30:00Z")
    add(s, "ünïcødé ✅ \"quoted\" \\ backslash", kind="reference")


def test_dump_load_dump_is_byte_identical(tmp_path, db):
    busy_store(db)
    first = dumped(db)
    with Store.open(tmp_path / "copy" / ".qem", create=True) as copy:
        assert load(copy, *read_dump(first.encode(), "x.jsonl")) == len(db.events())
        assert dumped(copy) == first
        assert copy.notes() == db.notes()
        assert problems(copy) == []


def test_dump_lines_follow_the_log(db):
    busy_store(db)
    events = db.events()
    forgotten = {n.id for n in db.notes() if n.state == "forgotten"}
    first, *lines = dumped(db).split("\n")
    assert json.loads(first) == {"memory": db.memory_id()}  # the memory's id comes first
    assert lines[-1] == "" and len(lines) - 1 == len(events)
    for line, event in zip(lines, events):  # in the order every clone agrees on
        obj = json.loads(line)
        assert list(obj) == sorted(obj)
        keys = {"id", "v", "type", "note", "at", "actor", "reason", "checkin", "clock", "prev", "data"}
        with_text = event.type == "created" and event.id not in forgotten
        assert set(obj) == keys | ({"text"} if with_text else set())
        assert obj["id"] == event.id
        text = obj.pop("text", None)
        stored = {k: v for k, v in obj.items() if k != "id"}
        assert ids.content_id(canonical(stored)) == obj["id"]  # the id is the hash of the stored event
        assert event_from(stored, "line").id == event.id
        if text is not None:
            assert TextRecord(event.id, text["key"], text["text"]).digest == obj["data"]["text"]


@pytest.mark.skipif(not CORPUS.exists(), reason="fixture corpus not generated yet")
def test_the_fixture_corpus_converts_and_dumps_back_identically(tmp_path, db):
    raw = CORPUS.read_bytes()
    old = [json.loads(line) for line in raw.decode("utf-8").splitlines()]
    assert load(db, *read_dump(raw, CORPUS.name)) == len(old)
    assert problems(db) == []
    numbers = {e["note_id"] for e in old if e["type"] == "created"}
    notes = db.notes()
    assert len(notes) == len(numbers) and {n.alias for n in notes} == numbers  # every note keeps its number
    # the converted log dumps and loads back byte for byte, and converting again (on
    # another clone) makes the same events: the same ids, the same files
    first = dumped(db)
    for name in ("again", "from-dump"):
        with Store.open(tmp_path / name / ".qem", create=True) as other:
            data = raw if name == "again" else first.encode()
            load(other, *read_dump(data, name))
            assert dumped(other) == first
            if name == "again":  # (a dump names no memory: the converted log does)
                assert other.memory_id() == db.memory_id()


def _line(seq=1, note_id=1, type_="created", **over) -> dict:
    obj = {"seq": seq, "note_id": note_id, "type": type_, "at": AT, "actor": "s", "reason": None,
           "checkin": None,
           "data": {"kind": "task", "priority": "low", "provenance": "agent", "text": "t",
                    "supersedes": None} if type_ == "created" else {}}
    obj.update(over)
    return obj


def _jsonl(*objs) -> bytes:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs).encode()


@pytest.mark.parametrize(
    "lines, words",
    [
        ([_line(), "{not json"], ["f.jsonl:2", "not JSON"]),
        ([_line(), "[1, 2]"], ["f.jsonl:2", "holds exactly"]),
        ([{k: v for k, v in _line().items() if k != "actor"}], ["f.jsonl:1", "holds exactly", "actor"]),
        ([_line(extra=1)], ["f.jsonl:1", "holds exactly"]),
        ([_line(), _line(2, 1, "exploded")], ["f.jsonl:2", "unknown event type"]),
        ([_line(at="2026-07-27 10:00:00")], ["f.jsonl:1", "a bad time"]),
        ([_line(at="2026-07-27T10:00:00+02:00")], ["f.jsonl:1", "a bad time"]),
        ([_line(seq=0)], ["f.jsonl:1", "seq"]),
        ([_line(seq=2**62)], ["f.jsonl:1", "seq"]),
        ([_line(note_id=True)], ["f.jsonl:1", "note_id"]),
        ([_line(note_id=2**64)], ["f.jsonl:1", "note_id"]),
        ([_line(), _line(seq=1, note_id=2)], ["f.jsonl:2", "seq 1 does not follow 1"]),
        ([_line(actor="")], ["f.jsonl:1", "actor"]),
        ([_line(actor="two\nlines")], ["f.jsonl:1", "actor"]),
        ([_line(reason=5)], ["f.jsonl:1", "reason"]),
        ([_line(checkin=["x"])], ["f.jsonl:1", "checkin"]),
        ([_line(data=[])], ["f.jsonl:1", "data that is not an object"]),
        ([_line(data={**_line()["data"], "text": "trailing   "})], ["f.jsonl:1", "not normalized"]),
        ([_line(data={**_line()["data"], "text": "a\r\nb"})], ["f.jsonl:1", "not normalized"]),
        ([_line(data={**_line()["data"], "text": ""})], ["f.jsonl:1", "empty"]),
        ([_line(data={**_line()["data"], "text": "a\u0000b"})], ["f.jsonl:1", "NUL"]),
    ],
)
def test_read_dump_refuses_and_names_the_line(lines, words):
    """A numbered log (the format before memory lived in git), converted on load."""
    with pytest.raises(errors.BadInput) as info:
        read_dump(_jsonl(*lines), "f.jsonl")
    assert all(w in str(info.value) for w in words), str(info.value)


@pytest.fixture(scope="module")
def dump_pair(tmp_path_factory) -> list[dict]:
    """Two dump lines in the log's own format: a note's creation and its revocation."""
    path = tmp_path_factory.mktemp("pair") / ".qem"
    with Store.open(path, create=True) as s:
        emit(s, add(s, "a text"), "revoked", "why")
        return [json.loads(line) for line in dumped(s).splitlines()[1:]]  # after the memory's id


def _changed(obj: dict, **over) -> dict:
    out = json.loads(json.dumps(obj))
    for key, value in over.items():
        if value is ...:
            out.pop(key)
        else:
            out[key] = value
    return out


NEW_FORMAT_REFUSALS = {
    "bad-json": (lambda c, r: [c, "{not json"], ["f.jsonl:2", "not JSON"]),
    "not-an-object": (lambda c, r: [c, "[1, 2]"], ["f.jsonl:2", "JSON object"]),
    "missing-field": (lambda c, r: [c, _changed(r, actor=...)], ["f.jsonl:2", "missing", "actor"]),
    "unknown-field": (lambda c, r: [c, _changed(r, extra=1)], ["f.jsonl:2", "fields of an event are wrong"]),
    "unknown-type": (lambda c, r: [c, _changed(r, type="exploded")], ["f.jsonl:2", "unknown event type"]),
    "bad-time": (lambda c, r: [_changed(c, at="2026-07-27 10:00:00")], ["f.jsonl:1", "at must be a UTC time"]),
    "newer-format": (lambda c, r: [_changed(c, v=FORMAT + 1)], ["f.jsonl:1", f"log format {FORMAT + 1}"]),
    "empty-actor": (lambda c, r: [c, _changed(r, actor="")], ["f.jsonl:2", "actor"]),
    "bad-reason": (lambda c, r: [c, _changed(r, reason=5)], ["f.jsonl:2", "reason"]),
    "bad-data": (lambda c, r: [c, _changed(r, data=[])], ["f.jsonl:2", "data must be an object"]),
    "bad-clock": (lambda c, r: [c, _changed(r, clock=0)], ["f.jsonl:2", "clock"]),
    "no-prev": (lambda c, r: [c, _changed(r, prev=[])], ["f.jsonl:2", "prev"]),
    "bad-note": (lambda c, r: [c, _changed(r, note="7")], ["f.jsonl:2", "not a note id"]),
    "changed": (lambda c, r: [c, _changed(r, reason="retconned")], ["f.jsonl:2", "not the hash", "changed"]),
    "forged-text": (lambda c, r: [_changed(c, text={**c["text"], "text": "forged"})],
                    ["f.jsonl:1", "text does not match"]),
}


@pytest.mark.parametrize("case", sorted(NEW_FORMAT_REFUSALS))
def test_read_dump_refuses_a_bad_line_of_the_log_format(dump_pair, case):
    make, words = NEW_FORMAT_REFUSALS[case]
    with pytest.raises(errors.BadInput) as info:
        read_dump(_jsonl(*make(*dump_pair)), "f.jsonl")
    assert all(w in str(info.value) for w in words), str(info.value)


NON_UTF8 = {  # a good first line, then a second that is not UTF-8
    "numbered log": lambda pair: _jsonl(_line()) + b'{"seq": \xff}\n',
    "log format": lambda pair: _jsonl(pair[0]) + b'{"id": \xff}\n',
}


@pytest.mark.parametrize("case", NON_UTF8)
def test_read_dump_refuses_non_utf8(dump_pair, case):
    with pytest.raises(errors.BadInput, match=r"f.jsonl:2: not UTF-8"):
        read_dump(NON_UTF8[case](dump_pair), "f.jsonl")


@pytest.mark.parametrize(
    "lines, words",
    [
        ([_line(note_id=5), _line(2, 5, "revoked"), _line(3, 5, "revoked")],
         ["cannot revoke note #", "it is revoked", "nothing was loaded"]),
        ([_line(note_id=5), _line(2, 6, "expired")], ["seq 2", "note #6", "never created"]),
        ([_line(note_id=5), _line(2, 5)], ["seq 2", "note #5 already exists"]),
        ([_line(note_id=5, data={**_line()["data"], "kind": "rumour"})], ["seq 1", "unknown kind"]),
        ([_line(note_id=5, data={**_line()["data"], "text": None})], ["seq 1", "no text but is never forgotten"]),
        ([_line(note_id=5), _line(2, 5, "disputed", data={"dispute": 1})], ["seq 2", "dispute"]),
    ],
)
def test_load_refuses_what_does_not_replay_and_writes_nothing(db, lines, words):
    add(db, "already here")
    before = written(db)
    with pytest.raises(errors.BadInput) as info:
        load(db, *read_dump(_jsonl(*lines), "f.jsonl"))
    message = str(info.value)
    assert all(w in message for w in words), message
    assert written(db) == before


def test_a_supersession_without_a_successor_is_loaded_as_unknown_never_guessed(db):
    """(Was refused.)  A numbered log's `superseded` with no `by` converts to a pointer to
    no note: its note is not current, and verify names the dangling pointer."""
    from qem_edit.base.resolver import Graph

    load(db, *read_dump(_jsonl(_line(note_id=5), _line(2, 5, "superseded")), "f.jsonl"))
    note = db.note(db.resolve(5))
    assert note.state == "superseded" and note.superseded_by not in {n.id for n in db.notes()}
    assert Graph.of({n.id: n for n in db.notes()}).currency(note.id).value == "unknown"
    assert any(p.startswith(f"dangling: #{note.shown}") for p in problems(db))


def test_a_number_the_memory_already_holds_is_never_silently_taken(db):
    """(Was: load refuses an id the store already has.)  Notes made in the memory have no
    numbers, so a numbered log's numbers cannot collide with them; two numbered logs that
    use the same number both load, and the number is then ambiguous, never one note's by
    accident: the CLI names both, and verify names the clash."""
    fresh = add(db, "already here")
    load(db, *read_dump(_jsonl(_line(note_id=1, data={**_line()["data"], "text": "from log one"})), "one.jsonl"))
    assert db.note(db.resolve(1)).text == "from log one" and db.resolve(1) != fresh
    load(db, *read_dump(_jsonl(_line(at="2026-07-28T10:00:00Z", data={**_line()["data"], "text": "from log two"})),
                        "two.jsonl"))
    with pytest.raises(errors.NoSuchNote) as info:
        db.resolve(1)
    assert "could be any of 2 notes" in str(info.value)
    assert "from log one" in str(info.value) and "from log two" in str(info.value)
    assert any("2 notes claim the old number #1" in p for p in problems(db))


def test_load_onto_a_store_keeps_the_numbers_and_new_events_come_last(db):
    first = add(db, "already here")
    load(db, *read_dump(_jsonl(_line(note_id=7), _line(2, 7, "revoked", reason="r")), "f.jsonl"))
    seven = db.resolve(7)
    assert db.note(seven).state == "revoked" and db.note(seven).alias == 7
    assert sorted((e.note, e.type) for e in db.events()) == sorted(
        [(first, "created"), (seven, "created"), (seven, "revoked")])
    assert [e.type for e in db.events(seven)] == ["created", "revoked"]  # its own order kept
    after = add(db, "next")
    assert db.events()[-1].id == after  # a new event comes after every event the log holds
    assert db.note(after).alias is None


def test_the_store_api_normalizes_text_too(tmp_path: Path) -> None:
    """Not only the CLI: any writer through Transaction.create stores the normalized text,
    so a rendering read back never differs from the store by whitespace alone."""
    with Store.open(tmp_path / "m" / ".qem", create=True) as store:
        note = store.write(lambda tx: tx.create(NewNote("task", "medium", "agent", "\n\nends in blanks   \r\nsecond\t\n\n"), "a"))
        assert note.text == "ends in blanks\nsecond"
        assert store.note(note.id).text == "ends in blanks\nsecond"
        with pytest.raises(errors.Refused):
            store.write(lambda tx: tx.create(NewNote("task", "medium", "agent", " \n\t"), "a"))
        with pytest.raises(errors.Refused):
            store.write(lambda tx: tx.create(NewNote("task", "medium", "agent", "nul\x00"), "a"))
        assert len(store.events()) == 1
