"""`qem verify` in bounded memory: the fresh replay of the log lives in a temporary file
(removed afterwards, also on error), the two indexes are compared row by row in id order,
and the supersession graph's problems come from the notes table, in the very words and
order the resolver's Graph gives them."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

import pytest
from builders import add, emit, store_path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qem_edit.base import errors
from qem_edit.base import ids as ids_mod
from qem_edit.base.replay import Note, Rival
from qem_edit.base.resolver import Graph
from qem_edit.mirror import verify
from qem_edit.mirror.verify import verify_report
from qem_edit.storage.index import _INSERT_NOTE, ITEM, NOTE_COLUMNS, Index, _note_values
from qem_edit.storage.store import Store
from qem_edit.storage.supersession import graph_problems
from qem_edit.storage.verify_reads import differences as index_differences
from qem_edit.system import db


def _id(prefix: str) -> str:
    return (prefix + "0" * ids_mod.ID_LENGTH)[:ids_mod.ID_LENGTH]


def _index(notes: list[Note]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    Index(conn, None).create()  # type: ignore[arg-type]
    conn.executemany(_INSERT_NOTE, [_note_values(n, []) for n in notes])
    return conn


def _note(note_id: str, supersedes: str | None = None, state: str = "active", **over) -> Note:  # type: ignore[no-untyped-def]
    over.setdefault("short", note_id[:4])
    return Note(note_id, "finding", "medium", "t", "agent", "2026-01-01T00:00:00Z", "a",
                supersedes=supersedes, state=state, **over)


POOL = [_id(p) for p in ("a1", "a2", "b1", "b2", "c1", "c2", "d1", "d2")]
GONE = [_id("f9"), _id("f8")]
STATES = ["active", "stale", "superseded", "revoked", "expired", "forgotten"]


@st.composite
def graphs(draw):  # type: ignore[no-untyped-def]
    """Notes over a small pool of ids, pointing anywhere: into the pool, out of it, nowhere."""
    chosen = draw(st.lists(st.sampled_from(POOL), unique=True, max_size=len(POOL)))
    out = []
    for note_id in chosen:
        pointer = draw(st.one_of(st.none(), st.sampled_from(POOL + GONE)))
        state = draw(st.sampled_from(STATES))
        by = draw(st.one_of(st.none(), st.sampled_from(POOL + GONE)))
        rivals = tuple(
            Rival(tip, tip, "revoked", "x", "2026-01-01T00:00:00Z", None, "revoked", draw(st.one_of(
                st.none(), st.sampled_from(POOL + GONE))))
            for tip in draw(st.lists(st.sampled_from(["e1" * 13, "e2" * 13]), unique=True, max_size=2)))
        out.append(_note(note_id, None if pointer == note_id else pointer, state, superseded_by=by, rivals=rivals,
                         bad_pointer=draw(st.sampled_from([None, None, "'abc'"])),
                         short=draw(st.sampled_from([note_id[:4], note_id[:2], ""]))))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_the_graph_problems_from_the_table_are_the_resolvers(notes):  # type: ignore[no-untyped-def]
    conn, scratch = _index(notes), sqlite3.connect(":memory:", isolation_level=None)
    assert graph_problems(conn, scratch) == Graph.of({n.id: n for n in notes}).problems()


def test_cycles_dangling_malformed_forks_and_disputes_are_named_in_the_resolvers_order():
    a, b, c, d, e, f = (_id(p) for p in ("aaaa", "bbbb", "cccc", "dddd", "eeee", "ffff"))
    gone = _id("9999")
    rival = Rival("t" * 26, "t" * 26, "revoked", "x", "2026-01-01T00:00:00Z", None, "revoked", c)
    notes = [_note(a, b), _note(b, a), _note(c, gone), _note(d, bad_pointer="'zz'"),
             _note(e, d), _note(f, d, rivals=(rival, rival))]
    expected = [
        "cycle: #aaaa → #bbbb → #aaaa",
        f"dangling: #cccc points to #{gone[:8]}, which is not in the log",
        "malformed: #dddd has supersedes pointer 'zz'",
        "fork: #dddd is superseded by #eeee and #ffff (qem rule dddd --keep eeee)",
        f"disputed: concurrent changes disagree: revoked by x (#cccc) [side tttttt] vs revoked by x (#cccc)"
        f" [side tttttt] (qem rule ffff --keep SIDE)",
    ]
    assert Graph.of({n.id: n for n in notes}).problems() == expected
    assert graph_problems(_index(notes), sqlite3.connect(":memory:")) == expected


def _reference(have: sqlite3.Connection, want: sqlite3.Connection) -> list[str]:
    """The comparison as it was made with both indexes in memory."""
    want_rows = {r[0]: r for r in want.execute(f"SELECT {NOTE_COLUMNS} FROM notes")}
    have_rows = {r[0]: r for r in have.execute(f"SELECT {NOTE_COLUMNS} FROM notes")}
    want_items = dict(want.execute(f"SELECT id, {ITEM} FROM items").fetchall())
    have_items = dict(have.execute(f"SELECT id, {ITEM} FROM items").fetchall())
    out = []
    for note_id in sorted(set(want_rows) | set(have_rows)):
        if want_rows.get(note_id) != have_rows.get(note_id):
            out.append(f"note {note_id[:8]}: the index disagrees with the log (`qem verify --repair` rebuilds it)")
        elif want_items.get(note_id) != have_items.get(note_id):
            out.append(f"note {note_id[:8]}: the index's MEMORY.md item disagrees with the log")
    return out


def test_rows_and_items_that_differ_are_named_in_id_order():
    notes = [_note(_id(p)) for p in ("a1", "b1", "c1", "d1", "e1", "f1")]
    want, have = _index(notes), _index(notes)
    for conn in (want, have):
        conn.executemany("INSERT INTO items (kind_rank, id, item) VALUES (0, ?, ?)", [(n.id, n.id) for n in notes])
    a1, b1, c1, d1, e1, f1 = (n.id for n in notes)
    have.execute("UPDATE notes SET text = 'x' WHERE id = ?", (b1,))  # a row that differs
    have.execute("UPDATE items SET item = 'x' WHERE id = ?", (d1,))  # an item that differs
    have.execute("UPDATE items SET item = 'x' WHERE id = ?", (b1,))  # (the row's message wins)
    have.execute("DELETE FROM notes WHERE id = ?", (e1,))  # a note the index lacks
    want.execute("DELETE FROM notes WHERE id = ?", (a1,))  # a note the log lacks
    want.execute("DELETE FROM items WHERE id = ?", (f1,))  # an item the fresh replay lacks
    have.execute("INSERT INTO items (kind_rank, id, item) VALUES (3, ?, 'y')", (c1,))  # two items of one note
    found = index_differences(have, want)
    assert found == _reference(have, want)
    assert found == [
        f"note {a1[:8]}: the index disagrees with the log (`qem verify --repair` rebuilds it)",
        f"note {b1[:8]}: the index disagrees with the log (`qem verify --repair` rebuilds it)",
        f"note {c1[:8]}: the index's MEMORY.md item disagrees with the log",
        f"note {d1[:8]}: the index's MEMORY.md item disagrees with the log",
        f"note {e1[:8]}: the index disagrees with the log (`qem verify --repair` rebuilds it)",
        f"note {f1[:8]}: the index's MEMORY.md item disagrees with the log",
    ]


@pytest.fixture
def memory(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Store.open(store_path(tmp_path), create=True) as handle:
        for i in range(5):
            add(handle, f"note {i}")
        yield handle


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch):  # type: ignore[no-untyped-def]
    """The system's temporary directory, as verify sees it: one of the test's own."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_an_index_item_that_differs_fails_and_repair_fixes_it(memory: Store, scratch: Path):
    note_id = memory.notes()[2].id
    memory.conn.execute("UPDATE items SET item = 'tampered' WHERE id = ?", (note_id,))
    report = verify_report(memory)
    assert report.problems == [f"note {note_id[:8]}: the index's MEMORY.md item disagrees with the log"]
    assert verify_report(memory, repair=True).problems == []
    assert verify_report(memory).problems == []
    assert list(scratch.iterdir()) == []


def test_the_fresh_replay_is_a_file_removed_after_verify(memory: Store, scratch: Path, monkeypatch):
    seen = []
    real = db.connect

    def connect(target, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(target)
        return real(target, **kwargs)

    monkeypatch.setattr(db, "connect", connect)
    assert verify_report(memory).problems == []
    assert len(seen) == 1 and Path(seen[0]).parent == scratch and seen[0] != ":memory:"
    assert list(scratch.iterdir()) == []


def test_the_fresh_replay_is_removed_on_error_too(memory: Store, scratch: Path, monkeypatch):
    def broken(self):  # type: ignore[no-untyped-def]
        assert list(scratch.iterdir()), "the replay is made in the temporary directory"
        raise RuntimeError("boom")

    monkeypatch.setattr(Index, "sync", broken)
    with pytest.raises(RuntimeError):
        verify_report(memory)
    assert list(scratch.iterdir()) == []


def test_a_temporary_directory_that_cannot_be_written_is_named(memory: Store, tmp_path: Path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-dir"))
    with pytest.raises(errors.StoreUnwritable, match="cannot make a temporary file for a fresh replay of the log"):
        verify_report(memory)


def test_an_agents_move_answered_by_a_person_later_is_not_named(memory: Store, scratch: Path):
    """The protect rule over the streamed events: an agent's revoke of a directive fails
    verify until a person's later event on the note follows it."""
    directive = add(memory, "always run the tests", kind="directive")
    config = memory.root / "config.toml"
    config.write_text('[protect]\nkinds = []\nagents = ["bot-*"]\n')  # (the write is let through)
    emit(memory, directive, "revoked", actor="bot-1")
    config.write_text('[protect]\nagents = ["bot-*"]\n')
    found = verify_report(memory).problems
    assert len(found) == 1 and f"event " in found[0] and "bot-1, an agent, revoked directive" in found[0]
    emit(memory, directive, "reinstated", actor="bot-2")  # an agent's answer is none
    assert len(verify_report(memory).problems) == 1
    emit(memory, directive, "stale_flagged", actor="a-person")
    assert verify_report(memory).problems == []
    assert os.listdir(scratch) == []


def test_a_replay_that_sqlite_cannot_write_is_named_and_removed(memory: Store, scratch: Path, monkeypatch):
    def full(self):  # type: ignore[no-untyped-def]
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Index, "sync", full)
    with pytest.raises(errors.QemError, match="qem-verify-.*disk is full"):
        verify_report(memory)
    assert list(scratch.iterdir()) == []
