"""Many writers at once: no lost or doubled notes, no "database is locked", a log that
verifies.  Store-level workers carry the bulk (a process each, importing the store); a
smaller run goes through real `qem add` processes.

A memory is a directory (`<workspace>/.qem`): the log's files, and a local SQLite index
beside them.  Writers on one clone take turns under the memory's write lock
(`.qem/write.lock`) and the index's own SQLite lock; note ids are content hashes, so two
writers can never be handed the same id, and the order every clone agrees on is (clock,
then id).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import REPO, run_qem
from filelock import FileLock

from qem_edit.base import errors, ids
from qem_edit.base.decisions import NewNote
from qem_edit.mirror.verify import verify_report
from qem_edit.storage import store as store_mod
from qem_edit.storage.logtree import LogTree
from qem_edit.storage.store import Store
from qem_edit.system import db as db_mod

WORKER = r"""
import sys, time
from pathlib import Path
from qem_edit.base.decisions import NewNote
from qem_edit.storage.store import Store

path, name, count, start = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
while time.time() < start:          # all workers start together, the memory not yet there
    time.sleep(0.001)
for i in range(count):
    # a fresh index connection per write, as each `qem add` would have
    with Store.open(path, create=True) as store:
        note = store.write(
            lambda tx: tx.create(NewNote("task", "low", "agent", f"{name} note {i}"), name))
    print(note.id, flush=True)
"""

READER = r"""
import sys, time
from pathlib import Path
from qem_edit.base import errors
from qem_edit.storage.store import Store

path, stop = Path(sys.argv[1]), Path(sys.argv[2])
checks = 0
while not stop.exists():
    try:
        store = Store.open(path)
    except errors.StoreMissing:       # the memory is not there yet
        time.sleep(0.005)
        continue
    with store:
        with store.reading():
            notes, events = store.notes(), store.events()
        # one `created` event per note: a consistent snapshot has exactly as many notes
        created = sum(1 for e in events if e.type == "created")
        assert len(notes) == created == len(events), (len(notes), created, len(events))
        checks += 1
print(checks)
"""


def _spawn(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def problems(store: Store) -> list[str]:
    """What `qem verify` reports: problems and open disputes (one clone's writers take
    turns, so a fork or a concurrent change would be a defect here too)."""
    report = verify_report(store)
    return report.problems + report.disputes


def test_four_processes_adding_fifty_each(tmp_path):
    path = tmp_path / "ws" / ".qem"
    stop = tmp_path / "stop"
    start = time.time() + 0.8  # let every interpreter start first
    reader = _spawn(READER, str(path), str(stop))
    workers = [_spawn(WORKER, str(path), f"worker-{w}", "50", str(start)) for w in range(4)]
    outputs = [p.communicate(timeout=180) for p in workers]
    stop.touch()
    reader_out, reader_err = reader.communicate(timeout=60)

    for proc, (out, err) in zip(workers, outputs):
        assert proc.returncode == 0, err
        assert err == ""
        assert "locked" not in out.lower()
    assert reader.returncode == 0, reader_err
    assert "locked" not in reader_err.lower() and int(reader_out) > 0

    made = [line for out, _ in outputs for line in out.split()]
    # 200 notes, 200 distinct ids: none lost, none handed out twice
    assert len(made) == 200 and len(set(made)) == 200 and all(ids.is_id(i) for i in made)
    with Store.open(path) as s:
        events = s.events()
        assert len(events) == 200 and all(e.type == "created" for e in events)
        notes = s.notes()
        assert {n.id for n in notes} == set(made)
        # each worker's notes are in the log in the order it wrote them (clock, then id)
        position = {e.id: i for i, e in enumerate(events)}
        clocks = [e.clock for e in events]
        assert len(set(clocks)) == 200  # writers took turns: no two events share a clock
        for w in range(4):
            mine = sorted((n for n in notes if n.actor == f"worker-{w}"), key=lambda n: position[n.id])
            assert [n.text for n in mine] == [f"worker-{w} note {i}" for i in range(50)]
        assert problems(s) == []
    proc = run_qem("verify", "--store", str(path))
    assert proc.returncode == 0 and proc.stderr.startswith("ok: "), proc.stderr
    assert "200 notes" in proc.stderr


def test_four_clis_adding_ten_each(tmp_path, ws):
    def one_writer(w: int) -> list[subprocess.CompletedProcess]:
        return [run_qem("add", f"cli {w}.{i}", "-k", "task", "--actor", f"cli-{w}", cwd=ws)
                for i in range(10)]

    with ThreadPoolExecutor(4) as pool:
        runs = [p for batch in pool.map(one_writer, range(4)) for p in batch]

    created = 0
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        assert "locked" not in (proc.stdout + proc.stderr).lower()
        assert "Traceback" not in proc.stderr
        # the only thing a writer may say on stderr: that it created the memory
        for line in proc.stderr.splitlines():
            assert line.startswith("qem: created a new memory at"), line
            created += 1
    assert created >= 1
    printed = [p.stdout.strip() for p in runs]
    with Store.open(ws / ".qem") as s:
        # each printed (short) id names one note, and the 40 name 40 different notes
        named = {s.resolve(shown) for shown in printed}
        assert len(named) == 40 and named == {n.id for n in s.notes()}
        assert len(s.events()) == 40

    verify = run_qem("verify", cwd=ws)
    assert verify.returncode == 0 and "40 notes" in verify.stderr, verify.stderr
    listed = json.loads(run_qem("list", "--json", cwd=ws).stdout)
    assert sorted(n["text"] for n in listed) == sorted(f"cli {w}.{i}" for w in range(4) for i in range(10))


@pytest.mark.parametrize("held", ["write lock", "index lock"])
def test_a_writer_waits_for_a_held_lock_instead_of_failing(tmp_path, ws, held):
    root = ws / ".qem"
    Store.open(root, create=True).close()
    if held == "write lock":  # another writer is between its catch-up and its commit
        holder = FileLock(str(root / store_mod.LOCK_NAME))
        holder.acquire()
        release = holder.release
    else:  # another process holds the index's SQLite write lock
        conn = sqlite3.connect(root / store_mod.INDEX_NAME, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")

        def release() -> None:
            conn.execute("COMMIT")
            conn.close()
    try:
        writer = subprocess.Popen([sys.executable, "-m", "qem_edit", "add", "patient", "-k", "task"],
                                  cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.7)
        assert writer.poll() is None, "the writer gave up while the lock was held"
        assert LogTree(root).names() == set(), "the writer wrote while the lock was held"
    finally:
        release()
    out, err = writer.communicate(timeout=30)
    assert writer.returncode == 0, err
    assert "locked" not in err.lower()
    with Store.open(root) as s:
        [note] = s.notes()
        assert note.text == "patient" and out == f"{note.shown}\n"


@pytest.mark.parametrize("held", ["write lock", "index lock"])
def test_a_lock_held_too_long_is_a_clear_refusal(tmp_path, monkeypatch, held):
    """Past its patience the store gives up with StoreBusy (exit 2), never 'database is locked'."""
    monkeypatch.setattr(store_mod, "WRITE_PATIENCE_S", 0.3)
    monkeypatch.setattr(db_mod, "WRITE_PATIENCE_S", 0.3)
    monkeypatch.setattr(db_mod, "BUSY_TIMEOUT_MS", 20)
    path = tmp_path / ".qem"
    store = Store.open(path, create=True)
    if held == "write lock":
        holder = FileLock(str(path / store_mod.LOCK_NAME))
        holder.acquire()
        release = holder.release
    else:
        conn = sqlite3.connect(path / store_mod.INDEX_NAME, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")

        def release() -> None:
            conn.execute("ROLLBACK")
            conn.close()
    try:
        started = time.monotonic()
        with pytest.raises(errors.StoreBusy) as info:
            store.write(lambda tx: tx.create(NewNote("task", "low", "agent", "x"), "t"))
        assert time.monotonic() - started < 10
    finally:
        release()
    assert "nothing was written" in str(info.value) and "database is locked" not in str(info.value)
    assert info.value.exit_code == 2
    assert store.events() == [] and LogTree(path).names() == set()
    # once the lock is free, the same store writes
    store.write(lambda tx: tx.create(NewNote("task", "low", "agent", "after"), "t"))
    assert [n.text for n in store.notes()] == ["after"]
    store.close()


def test_opening_a_memory_while_another_process_creates_it(tmp_path, monkeypatch):
    """Deterministic replay of simultaneous first writes: the opener found no memory, and
    another process created it (the log's folders, the memory's id, the index) before the
    opener made it.  The opener must take that memory as it is: not fail, not call it
    something else, not give it a second id."""
    from qem_edit.storage import starting

    root = tmp_path / "ws" / ".qem"
    real_is_new = starting.is_new
    raced: list[str] = []

    def racing_is_new(where):  # type: ignore[no-untyped-def]
        """The opener's first look finds no memory; the other process then makes it
        (before the opener takes the start lock, which it holds while it starts one)."""
        if not raced:
            found = real_is_new(where)
            other = run_qem("add", "from the other process", "-k", "task", "--store", str(root))
            assert other.returncode == 0, other.stderr
            raced.append(store_mod.read_memory_id(root) or "")
            return found
        return real_is_new(where)

    monkeypatch.setattr(starting, "is_new", racing_is_new)
    with Store.open(root, create=True) as store:
        assert raced and raced[0]
        assert store.memory_id() == raced[0] == store_mod.read_memory_id(root)
        assert [n.text for n in store.notes()] == ["from the other process"]
        assert problems(store) == []
        store.write(lambda tx: tx.create(NewNote("task", "low", "agent", "after the race"), "t"))
    assert store_mod.read_memory_id(root) == raced[0]
    done = run_qem("verify", "--store", str(root))
    assert done.returncode == 0 and "2 notes" in done.stderr, done.stderr


def test_two_processes_starting_one_memory_take_turns(tmp_path, monkeypatch):
    """While one process starts the memory (its config.toml, its id, its folders), another
    that found no memory waits for it, then takes that memory: one id, written once."""
    from qem_edit.storage import starting

    root = tmp_path / "ws" / ".qem"
    real_start = starting.start
    seen: dict[str, object] = {}

    def slow_start(where):  # type: ignore[no-untyped-def]
        seen["other"] = subprocess.Popen([sys.executable, "-m", "qem_edit", "add", "from the other process", "-k",
                                          "task", "--store", str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1.5)  # the other process has started meanwhile: it must not start the memory too
        seen["config meanwhile"] = (root / "config.toml").exists()
        return real_start(where)

    monkeypatch.setattr(starting, "start", slow_start)
    with Store.open(root, create=True) as store:
        mine = store.memory_id()
    other = seen["other"]
    _, err = other.communicate(timeout=120)  # type: ignore[attr-defined]
    assert other.returncode == 0, err  # type: ignore[attr-defined]
    assert seen["config meanwhile"] is False
    config = (root / "config.toml").read_text("utf-8")
    assert config.count("[memory]") == 1 and store_mod.read_memory_id(root) == mine


def test_opening_an_index_while_another_process_builds_it(tmp_path, monkeypatch):
    """A fresh clone: the log is there, the index is not, and two commands build it at
    once.  Replayed deterministically, at both moments it can happen: another process
    builds the whole index after the opener found none and before it takes the build
    lock (the opener must find it there and use it, never build over it); and between
    the opener's connecting to the index and its first statement (it must find it ready,
    never drop what the other built nor call it damaged)."""
    from qem_edit.system import files as files_mod

    root = tmp_path / ".qem"
    with Store.open(root, create=True) as store:
        for text in ("one", "two", "three"):
            store.write(lambda tx, text=text: tx.create(NewNote("task", "low", "agent", text), "t"))
    real_connect, real_locked = sqlite3.connect, files_mod.locked
    raced: list[int] = []
    built: list[str] = []  # the id of the index the other process built

    def other_builds() -> None:
        other = run_qem("list", "--store", str(root))
        assert other.returncode == 0, other.stderr
        check = real_connect(root / store_mod.INDEX_NAME)
        raced.append(check.execute("SELECT count(*) FROM notes").fetchone()[0])
        built.append(check.execute("SELECT value FROM meta WHERE key = 'index_id'").fetchone()[0])
        check.close()

    class Racing(sqlite3.Connection):
        def execute(self, sql, *args):  # type: ignore[no-untyped-def]
            if sql.startswith("PRAGMA journal_mode") and not raced:
                other_builds()
            return super().execute(sql, *args)

    def locked_late(path, timeout):  # type: ignore[no-untyped-def]
        if os.path.basename(path) == store_mod.BUILD_LOCK_NAME and not raced:
            other_builds()
        return real_locked(path, timeout)

    for moment in ("lock", "connect"):
        (root / store_mod.INDEX_NAME).unlink()
        for leftover in root.glob(store_mod.INDEX_NAME + "-*"):
            leftover.unlink()
        raced.clear()
        with monkeypatch.context() as patch:
            if moment == "lock":
                patch.setattr(files_mod, "locked", locked_late)
            else:  # (no build of its own: as where the index was found there)
                patch.setattr(store_mod, "_build_missing", lambda root, path: None)
                patch.setattr(db_mod.sqlite3, "connect", lambda *a, **k: real_connect(*a, factory=Racing, **k))
            with Store.open(root) as store:
                assert raced == [3 + (moment == "connect")]  # the other process built the index first
                assert store.index.meta("index_id") == built[-1]  # and it is the one used, not built over
                assert problems(store) == []
                assert not list(root.glob(f".{store_mod.INDEX_NAME}.*"))
                if moment == "lock":
                    store.write(lambda tx: tx.create(NewNote("task", "low", "agent", "after the race"), "t"))
    with Store.open(root) as store:
        assert sorted(n.text for n in store.notes()) == ["after the race", "one", "three", "two"]
