"""What keeps a big memory's commands bounded: the export's stat cache never trusts a
changed file, a query's time filters are answered from an index, dump streams."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from builders import store_path
from conftest import CORPUS, run_qem


def _loaded(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    assert run_qem("load", str(CORPUS), "-w", str(ws)).returncode == 0
    assert run_qem("export", "-w", str(ws)).returncode == 0
    return ws


def test_a_same_size_edit_with_its_old_mtime_is_still_caught(tmp_path: Path) -> None:
    """`export --check` skips reading a mirror whose inode, size, modification and change
    times are those export recorded; an edit that keeps size and mtime moves the change
    time, and is read."""
    ws = _loaded(tmp_path)
    mirror = ws / "MEMORY.md"
    assert run_qem("export", "--check", "-w", str(ws)).returncode == 0
    before = os.stat(mirror)
    data = mirror.read_bytes()
    at = data.index(b"- [#") + 4
    swapped = data[:at] + (b"z" if data[at:at + 1] != b"z" else b"y") + data[at + 1:]
    with open(mirror, "r+b") as handle:  # in place: the same inode
        handle.write(swapped)
    os.utime(mirror, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(mirror).st_size == before.st_size and os.stat(mirror).st_mtime_ns == before.st_mtime_ns
    done = run_qem("export", "--check", "-w", str(ws))
    assert done.returncode == 1 and "edited by hand" in done.stderr, done.stderr


def test_a_query_s_time_window_is_read_from_an_index(tmp_path: Path) -> None:
    ws = _loaded(tmp_path)
    conn = sqlite3.connect(store_path(ws) / "index.db")
    try:
        plan = " ".join(str(row) for row in conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM notes WHERE kind = ? AND created_at >= ? AND created_at <= ?"
            " ORDER BY kind_rank, id", ("gotcha", "2026-06-01T00:00:00Z", "2026-06-02T00:00:00Z")))
    finally:
        conn.close()
    assert "notes_by_created" in plan, plan


def test_dump_streams_the_same_lines_to_a_file_and_to_stdout(tmp_path: Path) -> None:
    ws = _loaded(tmp_path)
    target = tmp_path / "dump.jsonl"
    assert run_qem("dump", str(target), "-w", str(ws)).returncode == 0
    printed = run_qem("dump", "-w", str(ws))
    assert printed.returncode == 0 and printed.stdout.encode("utf-8") == target.read_bytes()
    events = int(run_qem("query", "--events", "--count", "-w", str(ws)).stdout)
    assert events > 749 and len(target.read_bytes().splitlines()) == 1 + events  # the memory's id, then every event


def test_a_load_of_a_big_dump_splits_its_events_into_packs_every_reader_takes(tmp_path: Path, monkeypatch) -> None:
    """A single pack of a big load passed the size every reader holds a pack to, so a
    fresh index (a clone, `verify`, `--repair`) set the whole load aside; a load's events
    go into packs of at most PACK_SPLIT_BYTES."""
    from qem_edit.mirror.verify import verify_report
    from qem_edit.storage import logtree
    from qem_edit.storage.store import Store
    from qem_edit.transfer.dump import load, read_dump

    monkeypatch.setattr(logtree, "PACK_SPLIT_BYTES", 64 << 10)
    monkeypatch.setattr(logtree, "MAX_PACK_BYTES", 200 << 10)  # the corpus's events take 270 kB, its texts 140 kB
    root = tmp_path / "ws" / ".qem"
    events, texts, memory = read_dump(CORPUS.read_bytes(), str(CORPUS))
    with Store.open(root, create=True, write=True) as store:
        assert load(store, events, texts, memory) == len(events)
    packs = sorted((root / "packs").glob("e-*.jsonl"))
    assert len(packs) > 3 and all(p.stat().st_size <= (64 << 10) + 4096 for p in packs)
    with Store.open(root) as store:
        assert store.rebuild() == 749
        report = verify_report(store)
        assert not report.problems, report.problems[:3]
