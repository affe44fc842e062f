"""The index built from the whole log, streamed (a fresh clone's first command, `qem
verify --repair`, a big pull, a big load): the same rows as the index kept up to date
write by write; a pack found bad part way leaves nothing of itself behind; a load reads
its dump a line at a time, and a bad line changes nothing.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import signal
from pathlib import Path

import pytest
from builders import add, emit, forget

from qem_edit.base import errors, ids
from qem_edit.base.decisions import NewNote
from qem_edit.mirror.verify import verify_report
from qem_edit.storage import index as index_mod
from qem_edit.storage import logtree
from qem_edit.storage.logtree import EVENTS, PACKS, TEXTS
from qem_edit.storage.store import Store
from qem_edit.system import cores
from qem_edit.transfer import dump as dump_mod
from qem_edit.transfer.dump import dump_lines, load, load_staged, read_dump, stage_dump

TABLES = ("files", "events", "event_files", "texts", "notes", "links", "items", "long_items",
          "anchors", "triggers", "terms", "rests")  # (the last four: what each note declares)


def rows(s: Store, tables: tuple[str, ...] = TABLES) -> dict[str, list[tuple]]:
    return {t: s.conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables}


def copy_log(source: Path, target: Path) -> None:
    """Every log file of `source` into `target` (what a git merge of the two does)."""
    for folder in (EVENTS, TEXTS, PACKS):
        for path in sorted((source / folder).glob("*")):
            if not (target / folder / path.name).exists():
                shutil.copy(path, target / folder / path.name)


@pytest.fixture(autouse=True)
def short_ids_collide(monkeypatch):
    """Notes created with one-character short ids: neighbours lengthen each other's."""
    monkeypatch.setenv("QEM_SHORT_LENGTH", "1")


def tangled(tmp_path: Path) -> Path:
    """A memory with links, forks, concurrent changes, disputes and forgets, kept up to
    date write by write (its index was never built whole)."""
    root = tmp_path / "a" / ".qem"
    with Store.open(root, create=True) as s:
        notes = [add(s, f"note {i}", kind=("gotcha", "directive", "reference", "task")[i % 4]) for i in range(40)]
        add(s, "the successor of 0", supersedes=notes[0])
        s.write(lambda tx: tx.dispute(notes[1], notes[2], "me", "they disagree"))
        forget(s, notes[3])
        emit(s, notes[4], "revoked")
        declaring(s, notes)
    other = tmp_path / "b" / ".qem"
    shutil.copytree(root, other)
    (other / "index.db").unlink()
    for path in other.glob("index.db-*"):
        path.unlink()
    with Store.open(root) as s, Store.open(other) as t:
        add(s, "one successor of 5", supersedes=notes[5])
        add(t, "another successor of 5", supersedes=notes[5])  # a fork
        emit(s, notes[6], "stale_flagged")
        emit(t, notes[6], "revoked")  # concurrent changes
        forget(t, notes[7])
        t.pack()
    copy_log(other, root)
    with Store.open(root) as s:  # the merge, caught up file by file
        assert s.note(notes[7]).state == "forgotten"
        assert s.conn.execute("SELECT count(*) FROM notes WHERE rivals != '[]'").fetchone()[0]
        assert s.conn.execute("SELECT count(*) FROM notes WHERE disputes != '[]'").fetchone()[0]
    return root


def declaring(s: Store, notes: list[str]) -> None:
    """Notes that declare anchors, triggers, terms (backticks) and what they rest on, some
    sharing a declaration: the rows each note's insert kept in their tables."""
    for i in range(6):
        new = NewNote("gotcha", "high", "agent", f"about `lock.py` and `retry_{i % 2}` and `pool`",
                      anchors=((f"src/{'ab'[i % 2]}.py", f"{i:040x}"), ("src/shared.py", "e" * 40)),
                      triggers=(("on", "edit"), ("path", f"src/{'ab'[i % 2]}/**")) if i % 3 else (),
                      rests_on=(notes[i], notes[10]) if i % 2 else ())
        made = s.write(lambda tx: tx.create(new, "tester")).id
        if i == 5:
            emit(s, made, "revoked")  # (a note no longer in force keeps its declarations' rows)


def test_the_streamed_build_makes_the_rows_writes_made(tmp_path):
    root = tangled(tmp_path)
    with Store.open(root) as s:
        before = rows(s)
        assert before["links"] and len(before["items"]) == len(before["notes"]) > 40
        assert all(before[t] for t in ("anchors", "triggers", "terms", "rests"))
        assert len({len(short) for _, short, *_ in before["notes"]}) > 1  # neighbours lengthened some
        s.rebuild()
        assert rows(s) == before
        made = dict(s.conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"))
        assert made == index_mod._SECONDARY  # each made again at the end, or kept up as the rows went in
        assert s.conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]  # (each index holds its table's rows)
        for kept in ("notes_by_parent", "notes_forgotten", "notes_disagreeing"):  # (kept up: they hold rows here)
            assert s.conn.execute(f"SELECT count(*) FROM notes INDEXED BY {kept} WHERE "
                                  + made[kept].partition(" WHERE ")[2]).fetchone()[0] > 0, kept
        # the triggers a replay of every note sets aside are back, and keep the tables as before
        assert {sql for (sql,) in s.conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger'")} \
            == set(index_mod.TRIGGERS)
        declaring(s, [n for (n,) in s.conn.execute("SELECT id FROM notes ORDER BY id")])
        after = rows(s)
        assert all(len(after[t]) > len(before[t]) for t in ("anchors", "triggers", "terms", "rests"))
        s.rebuild()
        assert rows(s) == after


@pytest.mark.parametrize("several", [False, True])
def test_a_build_keeps_the_last_text_of_each_note_in_each_file(tmp_path, several):
    """Where a file holds several texts of one note, the last in sorted order stands (as
    it always did); where each note has one text in each file, each stands as it is."""
    with Store.open(tmp_path / ".qem", create=True) as s:
        index = s.index
        s.conn.execute("BEGIN")
        index.start_staging()
        rows = [("n1", "packs/t-a.jsonl", "k1", "one", "d1"), ("n2", "packs/t-a.jsonl", "k2", "two", "d2"),
                ("n1", "packs/t-b.jsonl", "k1", "one", "d1")]
        if several:  # (staged in no order: the order staged decides nothing)
            more = [("n2", "packs/t-a.jsonl", f"k{k}", f"text {t}", f"d{d}") for k in range(4) for t in range(4) for d in range(4)]
            random.Random(7).shuffle(more)
            rows += [("n1", "packs/t-a.jsonl", "k0", "zero", "d0"), *more]
        s.conn.executemany(index_mod._STAGE_TEXT, rows)
        index._insert_staged()
        got = s.conn.execute("SELECT note, file, key, text, digest FROM texts ORDER BY note, file").fetchall()
        s.conn.execute("ROLLBACK")
    want = {(n, f): r for n, f, *_ in sorted(rows) for r in [max(x for x in rows if x[:2] == (n, f))]}
    assert got == sorted(want.values())
    assert len(got) == 3 and (not several or ("n2", "packs/t-a.jsonl", "k3", "text 3", "d3") in got)


def test_an_index_qem_makes_has_large_pages_and_one_made_before_opens_as_it_is(tmp_path):
    """A new index, a fresh clone's and a rebuilt one are made with db.PAGE_SIZE pages (a whole
    log's build reads its tables a page at a time); an index an older qem made, of 4 KiB
    pages, is read and written as it is."""
    from qem_edit.system import db

    root = tangled(tmp_path)
    size = "PRAGMA page_size"
    with Store.open(root) as s:
        assert s.conn.execute(size).fetchone()[0] == db.PAGE_SIZE > 4096  # (made write by write)
        s.rebuild()
        assert s.conn.execute(size).fetchone()[0] == db.PAGE_SIZE
    for path in root.glob("index.db*"):
        path.unlink()
    with Store.open(root) as s:  # (built whole, as in a fresh clone)
        assert s.conn.execute(size).fetchone()[0] == db.PAGE_SIZE
        want = rows(s)
    from qem_edit.storage.staging import build_fresh

    fresh = build_fresh(str(tmp_path / "fresh.db"), logtree.LogTree(root), 1024)  # (verify's replay afresh)
    try:
        assert fresh.execute(size).fetchone()[0] == db.PAGE_SIZE
    finally:
        fresh.close()
    for path in root.glob("index.db*"):
        path.unlink()
    old = db.connect(str(root / "index.db"))
    old.execute("PRAGMA page_size = 4096")
    old.execute("PRAGMA journal_mode = WAL")
    old.close()
    with Store.open(root) as s:
        assert s.conn.execute(size).fetchone()[0] == 4096
        assert rows(s) == want
        add(s, "written into an index of small pages")
    with Store.open(root) as s:
        assert s.conn.execute(size).fetchone()[0] == 4096
        assert s.conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert any(n.text == "written into an index of small pages" for n in s.notes_by_id(
            [i for (i,) in s.conn.execute("SELECT id FROM notes")]).values())


def test_a_big_pull_replays_every_note_to_the_same_rows(tmp_path, monkeypatch):
    root = tangled(tmp_path)
    with Store.open(root) as s:
        s.pack()  # (the whole log in packs)
    own = tmp_path / "own" / ".qem"
    with Store.open(own, create=True) as s:
        add(s, "a note of this clone's own")
    shutil.copy(root / "config.toml", own / "config.toml")
    got = {}
    for limit in (0, 10**9):  # every note replayed streamed; only the notes the pull touches
        copy = tmp_path / f"copy-{limit}" / ".qem"
        shutil.copytree(own, copy)
        copy_log(root, copy)  # a pull of packs into an index that holds other notes
        monkeypatch.setattr(index_mod, "_REFOLD_ALL", limit)
        with Store.open(copy) as s:
            got[limit] = rows(s)
            assert got[limit]["notes"] and s.set_aside() == []
            s.rebuild()
            assert rows(s) == got[limit]
    assert got[0] == got[10**9]


def _pack_with_a_bad_second_line(tmp_path: Path, memory: Path) -> tuple[str, str]:
    """A pack whose first line is a good event of a note no other file holds, and whose
    second line is not canonical; named by its hash.  Returns its name and that note."""
    with Store.open(tmp_path / "elsewhere" / ".qem", create=True) as other:
        stranger = add(other, "a note from elsewhere")
        good = (other.root / EVENTS / stranger).read_bytes()
    bad = json.dumps(json.loads(good), indent=1).replace("\n", " ").encode() + b"\n"
    data = good + bad
    name = f"{PACKS}/e-{ids.content_id(data)}.jsonl"
    (memory / name).write_bytes(data)
    return name, stranger


@pytest.mark.parametrize("fresh", [True, False])
def test_a_pack_set_aside_part_way_leaves_nothing_of_it(tmp_path, monkeypatch, fresh):
    root = tangled(tmp_path)
    monkeypatch.setattr(logtree, "PART_BYTES", 64)  # its good line staged before the bad one is read
    with Store.open(root) as s:
        want = rows(s, ("events", "notes", "items", "texts"))
    name, stranger = _pack_with_a_bad_second_line(tmp_path, root)
    if fresh:
        (root / "index.db").unlink()
    with Store.open(root) as s:
        assert s.set_aside() == [f"{name}:2: not in canonical form"]
        assert not s.conn.execute("SELECT 1 FROM events WHERE id = ? OR note = ?", (stranger, stranger)).fetchall()
        assert not s.conn.execute("SELECT 1 FROM event_files WHERE file = ?", (name,)).fetchall()
        assert rows(s, ("events", "notes", "items", "texts")) == want


def test_a_pack_that_does_not_hash_to_its_name_is_set_aside_whole(tmp_path):
    root = tangled(tmp_path)
    name, stranger = _pack_with_a_bad_second_line(tmp_path, root)
    good = (root / name).read_bytes().split(b"\n")[0] + b"\n"
    (root / name).unlink()
    wrong = f"{PACKS}/e-{ids.content_id(b'other bytes')}.jsonl"
    (root / wrong).write_bytes(good)  # every line good, the name another's
    (root / "index.db").unlink()
    with Store.open(root) as s:
        assert s.set_aside() == [f"{wrong}: its bytes do not hash to its name (changed by hand, or damaged)"]
        assert not s.conn.execute("SELECT 1 FROM events WHERE id = ?", (stranger,)).fetchall()


def _packs_gone_wrong(tmp_path: Path, memory: Path) -> list[str]:
    """Packs no qem write makes, each named by its hash unless said: lines out of order, a
    line repeated, one that is not JSON, one cut short, one of another name, both out of
    order and of another name; and a loose event file of another name."""
    with Store.open(tmp_path / "elsewhere" / ".qem", create=True) as other:
        for i in range(12):
            add(other, f"a note from elsewhere, number {i}")
        lines = sorted((other.root / n).read_bytes() for n in other.tree.names() if n.startswith(EVENTS))
    made = {
        "disorder": lines[:5] + [lines[6], lines[5]] + lines[7:],
        "repeat": lines[:3] + [lines[3]] * 50,
        "garbage": lines[:4] + [b"{not json\n"] + lines[4:],
        "cut": lines[:-1] + [lines[-1][:-1]],
    }
    names = []
    for data in (b"".join(parts) for parts in made.values()):
        names.append(f"{PACKS}/e-{ids.content_id(data)}.jsonl")
        (memory / names[-1]).write_bytes(data)
    for data in (b"".join(lines), b"".join(made["disorder"])):
        names.append(f"{PACKS}/e-{ids.content_id(data + b'x')}.jsonl")
        (memory / names[-1]).write_bytes(data)
    names.append(f"{EVENTS}/{ids.content_id(b'another')}")
    (memory / names[-1]).write_bytes(lines[0])
    return names


def _read_in_stretches(tree: logtree.LogTree, name: str) -> object:
    """A pack read as the build reads it, a stretch at a time: its records, or its fault."""
    try:
        reading = tree.pack(name)
        records = [r for args in reading.parts() for r in reading.take(logtree.pack_part(*args))]
        reading.end()
    except logtree.LogFileError as exc:
        return str(exc)
    return records


def test_a_pack_read_in_stretches_is_judged_as_it_is_read_whole(tmp_path, monkeypatch):
    root = tangled(tmp_path)
    with Store.open(root) as s:
        s.pack()
    names = _packs_gone_wrong(tmp_path, root) + sorted(n for n in logtree.LogTree(root).names() if n.startswith(PACKS))
    tree = logtree.LogTree(root)
    for name in (n for n in names if n.startswith(PACKS)):
        try:
            whole: object = [r for part in tree.read(name) for r in part]
        except logtree.LogFileError as exc:
            whole = str(exc)
        for size in (1, 50, 300, 10**6):  # a line split across stretches, a stretch of a line, of many, of all
            monkeypatch.setattr(logtree, "PART_BYTES", size)
            assert _read_in_stretches(tree, name) == whole, (name, size)


_BUILDER: list = []  # the building process's id, and the replay a worker is killed in


def _dies_in_a_worker(*args):  # type: ignore[no-untyped-def]
    if os.getpid() != _BUILDER[0]:
        os.kill(os.getpid(), signal.SIGKILL)
    return _BUILDER[1](*args)


def test_a_build_spread_over_worker_processes_makes_the_rows_one_process_makes(tmp_path, monkeypatch):
    root = tangled(tmp_path)
    wrong = _packs_gone_wrong(tmp_path, root)
    built, workers = {}, []
    real_init = cores.Spread.__init__
    monkeypatch.setattr(cores.Spread, "__init__", lambda self, pool=None, n=1: (workers.append(n), real_init(self, pool, n))[1])
    _BUILDER[:] = [os.getpid(), index_mod._folded]
    for way in ("one process", "spread", "a worker killed"):
        monkeypatch.setenv("QEM_WORKERS", "1" if way == "one process" else "2")
        if way == "spread":  # every piece small: stretches and batches meet their neighbours
            for module, name, value in ((logtree, "PART_BYTES", 300), (index_mod, "_SPREAD_BYTES", 0),
                                        (index_mod, "_SPREAD_NOTES", 0), (index_mod, "_FOLD_BATCH", 3),
                                        (index_mod, "_LOOSE_BATCH", 2)):
                monkeypatch.setattr(module, name, value)
        if way == "a worker killed":  # its pieces, and every later one, are done by the build's own process
            monkeypatch.setattr(index_mod, "_folded", _dies_in_a_worker)
        for path in root.glob("index.db*"):
            path.unlink()
        with Store.open(root) as s:
            built[way] = rows(s)
            assert sorted(p.split(":")[0] for p in s.set_aside()) == sorted(wrong)
    assert workers[0] == 1 and workers.count(2) >= 2  # the later builds were spread over two workers
    assert built["spread"] == built["one process"] == built["a worker killed"]


@pytest.mark.parametrize("fails", ["starting the pool", "starting a worker"])
def test_a_machine_that_cannot_start_workers_builds_in_one_process(tmp_path, monkeypatch, fails):
    """No semaphores (a container without /dev/shm), or a process limit reached: the build
    is the one a single process makes, with no error."""
    import concurrent.futures

    root = tangled(tmp_path)
    with Store.open(root) as s:
        want = rows(s)
    real = concurrent.futures.ProcessPoolExecutor

    class Failing(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if fails == "starting the pool":
                raise OSError(38, "Function not implemented")
            super().__init__(*args, **kwargs)

        def submit(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Failing)
    monkeypatch.setenv("QEM_WORKERS", "2")
    monkeypatch.setattr(index_mod, "_SPREAD_BYTES", 0)
    monkeypatch.setattr(index_mod, "_SPREAD_NOTES", 0)
    for path in root.glob("index.db*"):
        path.unlink()
    with Store.open(root) as s:
        assert rows(s) == want


def _dump(s: Store) -> bytes:
    return "".join(dump_lines(s)).encode()


def test_a_big_load_writes_and_indexes_what_a_small_one_does(tmp_path, monkeypatch):
    root = tangled(tmp_path)
    with Store.open(root) as s:
        data = _dump(s)
    made = {}
    for bulk_at in (10**9, 0):
        monkeypatch.setattr(dump_mod, "BULK_AT", bulk_at)
        with Store.open(tmp_path / f"load-{bulk_at}" / ".qem", create=True) as s:
            assert load(s, *read_dump(data, "d.jsonl")) == data.count(b"\n") - 1
            made[bulk_at] = (rows(s), sorted(s.tree.names()), _dump(s), s.last_write.calm)
            assert load(s, *read_dump(data, "d.jsonl")) == 0  # a re-load: nothing new
    assert made[0][:3] == made[10**9][:3]
    assert made[0][2] == data
    assert made[0][3] is False  # (the mirror is rendered whole after a big load)


def test_a_big_load_into_a_memory_that_holds_part_of_it(tmp_path, monkeypatch):
    root = tangled(tmp_path)
    with Store.open(root) as s:
        data = _dump(s)
    lines = data.split(b"\n")
    half = b"\n".join(lines[: len(lines) // 2]) + b"\n"
    made = []
    for bulk_at, refold_all in ((10**9, 10**9), (0, 10**9), (0, 0)):  # small; big: the touched notes, all
        monkeypatch.setattr(dump_mod, "BULK_AT", bulk_at)
        monkeypatch.setattr(index_mod, "_REFOLD_ALL", refold_all)
        with Store.open(tmp_path / f"load-{bulk_at}-{refold_all}" / ".qem", create=True) as s:
            first = load(s, *read_dump(half, "half.jsonl"))
            assert load(s, *read_dump(data, "d.jsonl")) == data.count(b"\n") - 1 - first
            made.append(rows(s, ("events", "notes", "links", "items")))
            assert _dump(s) == data
            assert s.set_aside() == [] and verify_report(s).problems == []
    assert made[0] == made[1] == made[2]


def test_a_bad_line_of_a_big_dump_changes_nothing(tmp_path):
    root = tangled(tmp_path)
    with Store.open(root) as s:
        data = _dump(s)
        before = rows(s), sorted(s.tree.names())
    broken = data + b'{"id": "x"}\n'
    last = len(broken.split(b"\n")) - 1
    with pytest.raises(errors.BadInput, match=rf"d.jsonl:{last}: "):
        stage_dump(io.BytesIO(broken), "d.jsonl")
    # a line that is not UTF-8 is named before an earlier malformed one (as a dump read whole)
    with pytest.raises(errors.BadInput, match=r"d.jsonl:4: not UTF-8 text"):
        stage_dump(io.BytesIO(b"\n".join(data.split(b"\n")[:2]) + b"\n{]\n\xff\n"), "d.jsonl")
    with Store.open(root) as s:
        assert (rows(s), sorted(s.tree.names())) == before


def test_a_staged_dump_is_read_from_its_temporary_file(tmp_path):
    root = tangled(tmp_path)
    with Store.open(root) as s:
        data = _dump(s)
    with stage_dump(io.BytesIO(data), "d.jsonl") as staged:
        assert staged.path.exists() and staged.count == data.count(b"\n") - 1
        with Store.open(tmp_path / "new" / ".qem", create=True) as s:
            assert load_staged(s, staged) == staged.count
            assert _dump(s) == data
        folder = staged.path.parent
    assert not folder.exists()  # the staging file goes with it


def _git(*args: str, cwd: Path) -> None:
    import subprocess

    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _fresh_clone(tmp_path: Path) -> tuple[Path, str]:
    """A memory committed to git (packed) and a fresh clone of it: (the clone, the
    origin's `qem list`)."""
    from conftest import run_qem

    origin = tmp_path / "origin"
    origin.mkdir()
    _git("init", "-q", cwd=origin)
    for i in range(30):
        assert run_qem("add", "-k", "gotcha", f"note {i}", "-w", str(origin)).returncode == 0
    assert run_qem("pack", "-w", str(origin)).returncode == 0
    _git("add", "-A", cwd=origin)
    _git("commit", "-q", "-m", "memory", cwd=origin)
    _git("clone", "-q", "--no-local", str(origin), str(tmp_path / "clone"), cwd=tmp_path)
    listed = run_qem("list", "-w", str(origin))
    assert listed.returncode == 0
    return tmp_path / "clone", listed.stdout


def test_a_fresh_clones_index_is_built_whole_then_put_in_place(tmp_path):
    """The first command in a fresh clone builds the index in a file of its own (no
    journal) and moves it into place complete, in WAL mode as every index is kept: killed
    before the move, it leaves no index; the next command removes what it left, and builds."""
    from conftest import run_qem

    clone, want = _fresh_clone(tmp_path)
    memory = clone / ".qem"
    killed = run_qem("list", "-w", str(clone), env={"QEM_FAULT": "index-built"})
    assert killed.returncode == -signal.SIGKILL
    assert not (memory / "index.db").exists()
    assert [p.name for p in memory.glob(".index.db.*.tmp")]  # the build's own file, complete but not moved
    got = run_qem("list", "-w", str(clone))
    assert got.returncode == 0, got.stderr
    assert got.stdout == want
    assert not list(memory.glob(".index.db.*"))
    assert sorted(p.name for p in memory.glob("index.db*")) == ["index.db"]
    with Store.open(memory) as s:
        assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert s.count() == 30 and s.set_aside() == []

