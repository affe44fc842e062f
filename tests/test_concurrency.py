"""Many writers at once: no lost or doubled ids, no "database is locked", a log that
verifies.  Store-level workers carry the bulk (a process each, importing the store); a
smaller run goes through real `qem add` processes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import REPO, run_qem
from qem_edit import errors
from qem_edit import store as store_mod
from qem_edit.model import NewNote
from qem_edit.store import Store

WORKER = r"""
import sys, time
from pathlib import Path
from qem_edit.model import NewNote
from qem_edit.store import Store

path, name, count, start = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
while time.time() < start:          # all workers start together, the store not yet there
    time.sleep(0.001)
for i in range(count):
    # a fresh connection per write, as each `qem add` would have
    with Store.open(path, create=True) as store:
        note = store.write(
            lambda tx: tx.create(NewNote("task", "low", "agent", f"{name} note {i}"), name))
    print(note.id, flush=True)
"""

READER = r"""
import sys, time
from pathlib import Path
from qem_edit.store import Store

path, stop = Path(sys.argv[1]), Path(sys.argv[2])
checks = 0
while not stop.exists():
    if not path.exists():
        time.sleep(0.005)
        continue
    try:
        store = Store.open(path)
    except Exception as exc:          # the store is being created right now
        if "empty file" in str(exc):
            time.sleep(0.005)
            continue
        raise
    with store:
        head, notes = store.snapshot()
        # one `created` event per note: a consistent snapshot has exactly as many notes
        assert len(notes) == head, (len(notes), head)
        checks += 1
print(checks)
"""


def _spawn(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_four_processes_adding_fifty_each(tmp_path):
    path = tmp_path / "ws" / ".qem" / "memory.db"
    stop = tmp_path / "stop"
    start = time.time() + 0.8  # let every interpreter start first
    reader = _spawn(READER, str(path), str(stop))
    workers = [_spawn(WORKER, str(path), f"worker-{w}", "50", str(start)) for w in range(4)]
    outputs = [p.communicate(timeout=120) for p in workers]
    stop.touch()
    reader_out, reader_err = reader.communicate(timeout=60)

    for proc, (out, err) in zip(workers, outputs):
        assert proc.returncode == 0, err
        assert err == ""
        assert "locked" not in out.lower()
    assert reader.returncode == 0, reader_err
    assert "locked" not in reader_err.lower() and int(reader_out) > 0

    ids = [int(line) for out, _ in outputs for line in out.split()]
    assert len(ids) == 200 and sorted(ids) == list(range(1, 201))
    with Store.open(path) as s:
        assert s.head() == 200
        notes = s.notes()
        assert sorted(n.id for n in notes) == list(range(1, 201))
        # each worker's notes got increasing ids in the order it wrote them
        for w in range(4):
            mine = sorted((n for n in notes if n.actor == f"worker-{w}"), key=lambda n: n.id)
            assert [n.text for n in mine] == [f"worker-{w} note {i}" for i in range(50)]
        assert s.verify() == []
    proc = run_qem("verify", "--store", str(path))
    assert proc.returncode == 0 and proc.stderr.startswith("ok: "), proc.stderr


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
        # the only thing a writer may say on stderr: that it created the store
        for line in proc.stderr.splitlines():
            assert line.startswith("qem: created a new store at"), line
            created += 1
    assert created >= 1
    ids = [int(p.stdout) for p in runs]
    assert sorted(ids) == list(range(1, 41))

    verify = run_qem("verify", cwd=ws)
    assert verify.returncode == 0 and "40 events" in verify.stderr
    listed = json.loads(run_qem("list", "--json", cwd=ws).stdout)
    assert sorted(n["text"] for n in listed) == sorted(f"cli {w}.{i}" for w in range(4) for i in range(10))


def test_a_writer_waits_for_a_held_lock_instead_of_failing(tmp_path, ws):
    Store.open(ws / ".qem" / "memory.db", create=True).close()
    holder = sqlite3.connect(ws / ".qem" / "memory.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        writer = subprocess.Popen([sys.executable, "-m", "qem_edit", "add", "patient", "-k", "task"],
                                  cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.7)
        assert writer.poll() is None, "the writer gave up while the lock was held"
    finally:
        holder.execute("COMMIT")
        holder.close()
    out, err = writer.communicate(timeout=30)
    assert writer.returncode == 0 and out == "1\n", err
    assert "locked" not in err.lower()


def test_a_lock_held_too_long_is_a_clear_refusal(tmp_path, monkeypatch):
    """Past its patience the store gives up with StoreBusy (exit 2), never 'database is locked'."""
    monkeypatch.setattr(store_mod, "BUSY_TIMEOUT_MS", 20)
    monkeypatch.setattr(store_mod, "WRITE_PATIENCE_S", 0.3)
    path = tmp_path / "memory.db"
    store = Store.open(path, create=True)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(errors.StoreBusy) as info:
            store.write(lambda tx: tx.create(NewNote("task", "low", "agent", "x"), "t"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "nothing was written" in str(info.value) and "database is locked" not in str(info.value)
    assert info.value.exit_code == 2
    assert store.head() == 0
    store.close()


def test_opening_a_store_while_another_process_creates_it(tmp_path, monkeypatch):
    """Deterministic replay of a race once seen with simultaneous first writes: the opener
    read the header (no application id yet), the creator committed, and the opener then
    saw tables or a schema version and called the brand-new store 'not a qem store'."""
    path = tmp_path / "memory.db"
    real_connect = sqlite3.connect
    raced: list[str] = []
    create_script = (
        "PRAGMA journal_mode = WAL; BEGIN IMMEDIATE;" + store_mod._SCHEMA
        + f"PRAGMA application_id = {store_mod.APPLICATION_ID};"
        + f"PRAGMA user_version = {store_mod.SCHEMA_VERSION}; COMMIT;"
    )

    class Racing(sqlite3.Connection):
        def execute(self, sql, *args):
            if sql == "PRAGMA user_version" and not raced:
                # another process creates the store between the opener's two header reads
                other = real_connect(path, timeout=0.1, isolation_level=None)
                try:
                    other.executescript(create_script)
                    raced.append("created")
                except sqlite3.OperationalError:
                    raced.append("held off")  # the opener's read snapshot kept it out
                finally:
                    other.close()
            return super().execute(sql, *args)

    monkeypatch.setattr(store_mod.sqlite3, "connect",
                        lambda *a, **k: real_connect(*a, factory=Racing, **k))
    with Store.open(path, create=True) as store:
        assert raced
        assert store.verify() == [] and store.head() == 0
        store.write(lambda tx: tx.create(NewNote("task", "low", "agent", "after the race"), "t"))
