"""The store in-process: lifecycle rules, normalization, forgetting, the log's guards,
verify, and dump/load.  (The CLI's face of the same rules is in test_cli.py.)"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import AT, add, emit, forget
from conftest import CORPUS
from qem_edit import errors
from qem_edit import store as store_mod
from qem_edit.dump import dump_lines, load_events, read_dump
from qem_edit.model import NewNote, TextError, normalize_text
from qem_edit.store import Store


# -- helpers --------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path):
    with Store.open(tmp_path / "memory.db", create=True) as handle:
        yield handle


def supersede(s: Store, note_id: int, text: str = "the successor") -> int:
    old = s.note(note_id)
    return add(s, text, kind=old.kind, provenance=old.provenance, supersedes=note_id)


def dumped(s: Store) -> str:
    return "".join(dump_lines(s))


def note_in_state(s: Store, state: str, provenance: str = "agent") -> int:
    """A fresh note brought to `state` by the ordinary moves."""
    note_id = add(s, f"a note to be {state}", provenance=provenance)
    if state == "stale":
        emit(s, note_id, "stale_flagged")
    elif state == "superseded":
        supersede(s, note_id)
    elif state == "revoked":
        emit(s, note_id, "revoked")
    elif state == "expired":
        emit(s, note_id, "expired")
    elif state == "forgotten":
        forget(s, note_id)
    assert s.note(note_id).state == state
    return note_id


def do_move(s: Store, move: str, note_id: int):
    if move == "superseded":
        return supersede(s, note_id)
    if move == "forgotten":
        return forget(s, note_id)
    return emit(s, note_id, move)


# -- opening ---------------------------------------------------------------------------------


def test_open_missing_store_refuses_and_points_at_init(tmp_path):
    path = tmp_path / "nothing.db"
    with pytest.raises(errors.StoreMissing) as info:
        Store.open(path)
    assert "qem init" in (info.value.hint or "")
    assert not path.exists(), "a read must not create the store"


def test_create_then_reopen(tmp_path):
    path = tmp_path / "deep" / "dir" / "memory.db"
    Store.open(path, create=True).close()
    assert path.is_file()
    with Store.open(path) as again:
        assert again.head() == 0
        assert again.verify() == []


@pytest.mark.parametrize("content", [b"hello, not a database" * 100, None])
def test_open_refuses_what_is_not_a_qem_store(tmp_path, content):
    path = tmp_path / "other.db"
    if content is None:  # an SQLite database of someone else's
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
        conn.close()
    else:
        path.write_bytes(content)
    before = path.read_bytes()
    with pytest.raises(errors.NotAStore):
        Store.open(path, create=True)
    assert path.read_bytes() == before


def test_open_refuses_a_directory(tmp_path):
    with pytest.raises(errors.NotAStore):
        Store.open(tmp_path, create=True)


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "memory.db"
    Store.open(path, create=True).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {store_mod.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(errors.SchemaTooNew):
        Store.open(path)


# -- the lifecycle ---------------------------------------------------------------------------

STATES = ("active", "stale", "superseded", "revoked", "expired", "forgotten")
# Written out from the issue rather than imported, so a change to model.TRANSITIONS must be
# a deliberate change here too.  A stale note is still in force: it can be superseded,
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


@pytest.mark.parametrize("move", sorted(ALLOWED))
def test_transition_table(db, move):
    """Every move from every state: allowed ones land where they should, the rest are
    refused with a message naming the note and its state, and write nothing."""
    for state in STATES:
        note_id = note_in_state(db, state)
        if state in ALLOWED[move]:
            do_move(db, move, note_id)
            note = db.note(note_id)
            if move == "promoted":
                assert (note.state, note.provenance) == (state, "human")
            else:
                assert note.state == LANDS_IN[move]
        else:
            before, head = dumped(db), db.head()
            with pytest.raises(errors.Refused) as info:
                do_move(db, move, note_id)
            assert f"#{note_id}" in str(info.value) and state in str(info.value)
            assert (dumped(db), db.head()) == (before, head)
    assert db.verify() == []


def test_promote_of_a_human_note_is_refused(db):
    note_id = add(db)
    do_move(db, "promoted", note_id)
    before = dumped(db)
    with pytest.raises(errors.Refused, match="already provenance human"):
        do_move(db, "promoted", note_id)
    assert dumped(db) == before


def test_supersede_links_both_ways_in_one_transaction(db):
    old = add(db, "old text", kind="directive", priority="high")
    head = db.head()
    new = supersede(db, old, "new text")
    assert db.head() == head + 2
    events = db.events(after=head)
    assert [(e.note_id, e.type) for e in events] == [(new, "created"), (old, "superseded")]
    assert events[0].at == events[1].at
    assert events[0].data["supersedes"] == old and events[1].data == {"by": new}
    assert db.note(old).superseded_by == new and db.note(new).supersedes == old
    assert db.note(old).text == "old text"  # the old text stays in the log


def test_unknown_note_is_refused(db):
    add(db)
    before = dumped(db)
    for move in ALLOWED:
        with pytest.raises(errors.NoSuchNote, match="#99"):
            do_move(db, move, 99) if move != "superseded" else add(db, supersedes=99)
    assert dumped(db) == before


@pytest.mark.parametrize("note_id", [0, -1, 2**63, 10**30])
def test_out_of_range_ids_are_unknown_notes_not_crashes(db, note_id):
    with pytest.raises(errors.NoSuchNote):
        db.note(note_id)
    with pytest.raises(errors.NoSuchNote):
        emit(db, note_id, "revoked")


def test_a_failed_transaction_writes_nothing(db):
    add(db)
    before = dumped(db)

    def work(tx):
        tx.create(NewNote("task", "low", "agent", "first of two"), "tester")
        raise errors.Refused("changed my mind")

    with pytest.raises(errors.Refused):
        db.write(work)
    assert dumped(db) == before
    assert [n.id for n in db.notes()] == [1]


def test_undecodable_text_is_refused_not_a_crash(db):
    with pytest.raises(errors.BadInput, match="UTF-8"):
        db.write(lambda tx: tx.create(NewNote("task", "low", "agent", "bad \udcff byte"), "tester"))
    assert db.head() == 0


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
    assert db.events(note_id)[0].data["text"] == "  indented\n\nmore"


# -- forget ----------------------------------------------------------------------------------

SECRET = "sk-live-7f3a9c-TOPSECRET"


def test_forget_erases_text_from_every_event_and_the_cache(db):
    first = add(db, f"token {SECRET} in the env")
    second = supersede(db, first, f"rotate {SECRET} monthly")
    add(db, "an unrelated note")
    forget(db, first, "contained a credential")
    forget(db, second, "contained a credential")
    head = db.head()

    raw = sqlite3.connect(db.path)
    for table in ("events", "notes"):
        for row in raw.execute(f"SELECT * FROM {table}"):
            assert SECRET not in json.dumps(row), (table, row)
    raw.close()

    for note_id in (first, second):
        note = db.note(note_id)
        assert (note.state, note.text) == ("forgotten", None)
        created, *rest = db.events(note_id)
        assert created.type == "created" and created.data["text"] is None
        tomb = rest[-1]
        assert (tomb.type, tomb.actor, tomb.reason, dict(tomb.data)) == (
            "forgotten", "tester", "contained a credential", {})
    # the chain survives the erasure
    assert db.note(first).superseded_by == second and db.note(second).supersedes == first
    assert SECRET not in dumped(db)
    assert db.verify() == []
    assert db.head() == head


def test_forget_leaves_no_trace_in_the_file(tmp_path, monkeypatch):
    """Even where SQLite's build leaves freed bytes in place by default (secure_delete off,
    the stock default), the erased text must not survive in the database file."""
    real_connect = sqlite3.connect

    def insecure_connect(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(store_mod.sqlite3, "connect", insecure_connect)
    path = tmp_path / "memory.db"
    with Store.open(path, create=True) as s:
        for i in range(40):
            add(s, f"filler note {i} " + "z" * 150)
        victim = add(s, f"{SECRET} " + "q" * 100)
        for i in range(5):
            add(s, f"more filler {i}")
        forget(s, victim)
    monkeypatch.undo()
    leftovers = [p.name for p in tmp_path.iterdir() if SECRET.encode() in p.read_bytes()]
    assert leftovers == []


def test_ids_are_never_reused_after_forgetting(db):
    a = add(db)
    b = add(db)
    forget(db, b)
    c = add(db)
    assert c > b > a
    forget(db, c)
    assert add(db) == c + 1


# -- the log's own guards --------------------------------------------------------------------


def test_the_database_refuses_to_delete_events(db):
    add(db)
    raw = sqlite3.connect(db.path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        raw.execute("DELETE FROM events")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        raw.execute("DELETE FROM events WHERE seq = 1")
    raw.close()
    assert db.head() == 1


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE events SET actor = 'mallory'",
        "UPDATE events SET type = 'revoked'",
        "UPDATE events SET data = json_set(data, '$.text', 'rewritten')",
        "UPDATE events SET data = json_set(data, '$.kind', 'task')",
        "UPDATE events SET reason = 'retconned' WHERE type = 'revoked'",
        "UPDATE events SET note_id = 2 WHERE seq = 1",
    ],
)
def test_the_database_refuses_to_rewrite_events(db, sql):
    note_id = add(db, "original")
    emit(db, note_id, "revoked")
    add(db, "second")
    before = dumped(db)
    raw = sqlite3.connect(db.path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        raw.execute(sql)
    raw.close()
    assert dumped(db) == before


def test_the_database_refuses_a_second_creation_of_an_id(db):
    add(db)
    raw = sqlite3.connect(db.path)
    with pytest.raises(sqlite3.IntegrityError):
        raw.execute(
            "INSERT INTO events (seq, note_id, type, at, actor, data)"
            " VALUES (99, 1, 'created', ?, 'x', '{}')", (AT,)
        )
    raw.close()


def test_a_created_event_cannot_be_made_twice_through_the_api(db):
    from qem_edit.model import Event

    add(db)
    data = {"kind": "task", "priority": "low", "provenance": "agent", "text": "dup", "supersedes": None}
    before = dumped(db)
    with pytest.raises(errors.Refused, match="already exists"):
        db.write(lambda tx: tx.append(Event(tx.head + 1, 1, "created", AT, "tester", None, None, data)))
    assert dumped(db) == before


# -- verify ----------------------------------------------------------------------------------


def test_verify_passes_on_fresh_and_busy_stores(db):
    assert db.verify() == []
    for state in STATES:
        note_in_state(db, state)
    do_move(db, "promoted", 1)
    assert db.verify() == []


@pytest.mark.parametrize(
    "tamper, words",
    [
        ("UPDATE notes SET text = 'x' WHERE id = 1", ["note #1", "text"]),
        ("UPDATE notes SET state = 'active' WHERE id = 2", ["note #2", "state"]),
        ("UPDATE notes SET provenance = 'human' WHERE id = 1", ["note #1", "provenance"]),
        ("DELETE FROM notes WHERE id = 2", ["note #2", "missing from the cache"]),
        (
            "INSERT INTO notes SELECT 9, kind_rank, kind, priority, text, provenance, created_at,"
            " actor, supersedes, superseded_by, state, state_at, state_reason, state_seq"
            "{extra} FROM notes WHERE id = 1",
            ["note #9", "no created event"],
        ),
    ],
)
def test_verify_catches_a_cache_that_disagrees_and_repair_fixes_it(db, tamper, words):
    add(db, "first")
    second = add(db, "second")
    emit(db, second, "revoked")
    raw = sqlite3.connect(db.path)
    columns = [r[1] for r in raw.execute("PRAGMA table_info(notes)")]
    extra = "".join(f", {c}" for c in columns[columns.index("state_seq") + 1:])
    raw.execute(tamper.replace("{extra}", extra))
    raw.commit()
    raw.close()
    problems = db.verify()
    assert len(problems) == 1
    assert all(w in problems[0] for w in words), problems
    before = dumped(db)
    db.rebuild_cache()
    assert db.verify() == []
    assert dumped(db) == before  # repairing the cache never touches the log
    assert db.note(1).text == "first"


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
    with Store.open(tmp_path / "copy.db", create=True) as copy:
        where: list[str] = []
        events = read_dump(first.encode(), "x.jsonl", lines=where)
        assert load_events(copy, events, where) == db.head()
        assert dumped(copy) == first
        assert copy.notes() == db.notes()
        assert copy.verify() == []


def test_dump_lines_follow_docs(db):
    busy_store(db)
    for number, line in enumerate(dumped(db).split("\n")[:-1], start=1):
        obj = json.loads(line)
        assert list(obj) == ["seq", "note_id", "type", "at", "actor", "reason", "checkin", "data"]
        assert obj["seq"] == number


@pytest.mark.skipif(not CORPUS.exists(), reason="fixture corpus not generated yet")
def test_the_fixture_corpus_loads_and_dumps_back_identically(db):
    raw = CORPUS.read_bytes()
    where: list[str] = []
    events = read_dump(raw, CORPUS.name, lines=where)
    load_events(db, events, where)
    assert dumped(db).encode("utf-8") == raw
    assert db.verify() == []
    assert len(db.notes()) == len({e.note_id for e in events if e.type == "created"})


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
        ([_line(), "[1, 2]"], ["f.jsonl:2", "JSON object"]),
        ([{k: v for k, v in _line().items() if k != "actor"}], ["f.jsonl:1", "missing", "actor"]),
        ([_line(extra=1)], ["f.jsonl:1", "unknown field", "extra"]),
        ([_line(), _line(2, 1, "exploded")], ["f.jsonl:2", "unknown event type"]),
        ([_line(at="2026-07-27 10:00:00")], ["f.jsonl:1", "at must be a UTC time"]),
        ([_line(at="2026-07-27T10:00:00+02:00")], ["f.jsonl:1", "at must be a UTC time"]),
        ([_line(seq=0)], ["f.jsonl:1", "seq"]),
        ([_line(note_id=True)], ["f.jsonl:1", "note_id"]),
        ([_line(note_id=2**64)], ["f.jsonl:1", "note_id"]),
        ([_line(), _line(seq=1, note_id=2)], ["f.jsonl:2", "seq 1 does not follow 1"]),
        ([_line(actor="")], ["f.jsonl:1", "actor"]),
        ([_line(reason=5)], ["f.jsonl:1", "reason"]),
        ([_line(data=[])], ["f.jsonl:1", "data must be an object"]),
        ([_line(data={**_line()["data"], "text": "trailing   "})], ["f.jsonl:1", "not normalized"]),
        ([_line(data={**_line()["data"], "text": "a\r\nb"})], ["f.jsonl:1", "not normalized"]),
        ([_line(data={**_line()["data"], "text": ""})], ["f.jsonl:1", "empty"]),
        ([_line(data={**_line()["data"], "text": "a\u0000b"})], ["f.jsonl:1", "NUL"]),
    ],
)
def test_read_dump_refuses_and_names_the_line(lines, words):
    with pytest.raises(errors.BadInput) as info:
        read_dump(_jsonl(*lines), "f.jsonl")
    assert all(w in str(info.value) for w in words), str(info.value)


def test_read_dump_refuses_non_utf8():
    with pytest.raises(errors.BadInput, match=r"f.jsonl:2: not UTF-8"):
        read_dump(_jsonl(_line()) + b'{"seq": \xff}\n', "f.jsonl")


@pytest.mark.parametrize(
    "lines, words",
    [
        ([_line(note_id=5), _line(2, 5, "revoked"), _line(3, 5, "revoked")], ["f.jsonl:3", "cannot revoke note #5", "revoked"]),
        ([_line(note_id=5), _line(2, 6, "expired")], ["f.jsonl:2", "no note #6"]),
        ([_line(note_id=5), _line(2, 5)], ["f.jsonl:2", "already exists"]),
        ([_line(note_id=5), _line(2, 5, "superseded")], ["f.jsonl:2", "'by'"]),
        ([_line(note_id=5, data={**_line()["data"], "kind": "rumour"})], ["f.jsonl:1", "unknown kind"]),
        ([_line(note_id=5, data={**_line()["data"], "text": None})], ["f.jsonl:1", "no text but is never forgotten"]),
    ],
)
def test_load_refuses_what_does_not_replay_and_writes_nothing(db, lines, words):
    add(db, "already here")
    before = dumped(db)
    where: list[str] = []
    events = read_dump(_jsonl(*lines), "f.jsonl", lines=where)
    with pytest.raises(errors.BadInput) as info:
        load_events(db, events, where)
    message = str(info.value)
    assert all(w in message for w in words), message
    assert dumped(db) == before


def test_load_refuses_an_id_the_store_already_has(db):
    add(db, "already here")
    before = dumped(db)
    where: list[str] = []
    events = read_dump(_jsonl(_line(note_id=5), _line(2, 1)), "f.jsonl", lines=where)
    with pytest.raises(errors.BadInput, match=r"f.jsonl:2 .*note #1 already exists"):
        load_events(db, events, where)
    assert dumped(db) == before


def test_load_onto_a_store_numbers_on_from_its_head_and_keeps_ids(db):
    add(db, "already here")
    events = read_dump(_jsonl(_line(note_id=7), _line(2, 7, "revoked", reason="r")), "f.jsonl")
    load_events(db, events)
    assert [(e.seq, e.note_id, e.type) for e in db.events()] == [
        (1, 1, "created"), (2, 7, "created"), (3, 7, "revoked")]
    assert add(db, "next") == 8


def test_the_store_api_normalizes_text_too(tmp_path: Path) -> None:
    """Not only the CLI: any writer through Transaction.create stores the normalized text,
    so a rendering read back never differs from the store by whitespace alone."""
    with Store.open(tmp_path / "m.db", create=True) as store:
        note = store.write(lambda tx: tx.create(NewNote("task", "medium", "agent", "\n\nends in blanks   \r\nsecond\t\n\n"), "a"))
        assert note.text == "ends in blanks\nsecond"
        assert store.note(note.id).text == "ends in blanks\nsecond"
        with pytest.raises(errors.Refused):
            store.write(lambda tx: tx.create(NewNote("task", "medium", "agent", " \n\t"), "a"))
        with pytest.raises(errors.Refused):
            store.write(lambda tx: tx.create(NewNote("task", "medium", "agent", "nul\x00"), "a"))
        assert store.head() == 1
