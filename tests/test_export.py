"""`qem export`: golden files, byte stability, --check/--diff/--stdout, safe writes,
auto-export.

Golden files: each `fixtures/golden/<case>.jsonl` (an event log) renders to
`fixtures/golden/<case>.md`, and `fixtures/corpus-749.jsonl` to `fixtures/MEMORY-749.md`
(committed so a reviewer can read what the format looks like on a real corpus).  After an
intended format change, regenerate them and review the diff:

    QEM_UPDATE_GOLDEN=1 python -m pytest tests/test_export.py -k golden

Byte stability is checked where it can break: the store's query order (SQLite is told to
return unordered SELECTs backwards), a VACUUM, the clock's time zone, the locale, hash
randomization, the order notes were inserted in, and a second export that must leave the
file (and its mtime) alone.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from _render_support import CORPUS, CORPUS_MD, GOLDEN
from builders import load_store, shown, store_path
from qem_edit.reconciler.parse import parse
from qem_edit.renderer import render
from qem_edit.renderer.format import SECTION_TITLES

from qem_edit.base import errors, ids
from qem_edit.base.replay import replay
from qem_edit.mirror.export import export, render_store
from qem_edit.shells import cli
from qem_edit.storage.starting import ensure_memory_id
from qem_edit.storage.store import Store
from qem_edit.transfer.dump import load, read_dump

SECTIONS = [f"## {title}" for title in SECTION_TITLES.values()]

UPDATE = os.environ.get("QEM_UPDATE_GOLDEN") == "1"


# A converted log names its memory (the id is derived from the log); a log with no events
# names none, so its golden file's memory is pinned here.
UNNAMED_MEMORY = "843q9pkqe0c7"


def golden_store(path: Path, log: Path | bytes, name: str = "log") -> Store:
    """A new memory at `path` holding `log`, as `qem load` makes it; a log that names no
    memory gets UNNAMED_MEMORY.  The caller closes it."""
    raw = log.read_bytes() if isinstance(log, Path) else log
    if read_dump(raw, name)[2] is None:
        path.mkdir(parents=True)
        ensure_memory_id(path, UNNAMED_MEMORY)
    return load_store(path, log, name)


def golden_cases() -> list:
    cases = [pytest.param(log, log.with_suffix(".md"), id=log.stem) for log in sorted(GOLDEN.glob("*.jsonl"))]
    cases.append(pytest.param(CORPUS, CORPUS_MD, id="corpus-749"))
    return cases


@pytest.fixture(scope="module")
def corpus_template(tmp_path_factory) -> Path:
    """A store holding the fixture corpus, built once; tests copy it."""
    if not CORPUS.exists():
        pytest.skip("fixtures/corpus-749.jsonl is not there")
    path = store_path(tmp_path_factory.mktemp("corpus"))
    load_store(path, CORPUS).close()
    return path


@pytest.fixture
def corpus_ws(ws: Path, corpus_template: Path) -> Path:
    shutil.copytree(corpus_template, store_path(ws))
    return ws


@pytest.fixture
def qem_here(ws, monkeypatch, capsysbinary):
    """`cli.main` in this process, in the workspace (no child start-up); stdout as bytes."""
    monkeypatch.chdir(ws)

    def call(*args: str) -> subprocess.CompletedProcess:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8"))
        capsysbinary.readouterr()
        with pytest.raises(SystemExit) as exit_:
            cli.main(list(args))
        out = capsysbinary.readouterr()
        return subprocess.CompletedProcess(args, exit_.value.code, out.out, out.err.decode("utf-8"))

    return call


def expected_corpus() -> bytes:
    if not CORPUS_MD.exists():
        pytest.skip("fixtures/MEMORY-749.md is not generated yet (QEM_UPDATE_GOLDEN=1)")
    return CORPUS_MD.read_bytes()


# -- golden files ------------------------------------------------------------------------------


@pytest.mark.parametrize("log, md", golden_cases())
def test_golden(log: Path, md: Path, tmp_path: Path) -> None:
    if not log.exists():
        pytest.skip(f"{log.name} is not there")
    with golden_store(store_path(tmp_path), log) as store:
        _, data = render_store(store)  # what `qem export` writes
        memory = store.memory_id()
        # the export's fast path (rendered items) and the full render agree
        assert render(store.notes(), memory).encode("utf-8") == data
        # and so does a replay of the log alone, with the short ids the set gives
        events, texts, _ = read_dump(log.read_bytes(), log.name)
        replayed = replay(events, {t.note: t.text for t in texts})
        shorts = ids.short_ids({n: note.short_len for n, note in replayed.items()})
        assert render([n._replace(short=shorts[n.id]) for n in replayed.values()], memory).encode("utf-8") == data
        notes = store.notes()
    if UPDATE:
        if not md.exists() or md.read_bytes() != data:
            md.write_bytes(data)
            print(f"rewrote {md}")
    assert md.exists(), f"{md} is missing; run QEM_UPDATE_GOLDEN=1 pytest tests/test_export.py -k golden"
    assert data == md.read_bytes(), f"{md.name} differs from the rendering; if the change is intended, regenerate (see this module's docstring) and review the diff"
    parsed = parse(md.read_text("utf-8"))
    assert parsed.errors == [] and parsed.memory == memory
    assert [i.note_id for i in parsed.items] == [n.shown for n in notes]


def test_the_corpus_golden_through_the_real_cli(qem, ws: Path) -> None:
    expected = expected_corpus()
    assert qem("load", str(CORPUS)).returncode == 0
    proc = qem("export")
    assert proc.returncode == 0, proc.stderr
    assert (ws / "MEMORY.md").read_bytes() == expected


@pytest.mark.parametrize("log, md", golden_cases())
def test_store_query_order_is_irrelevant(log: Path, md: Path, tmp_path: Path) -> None:
    """SQLite returns rows of a SELECT without ORDER BY in whatever order its plan gives;
    `reverse_unordered_selects` reverses it.  The export must not change."""
    if not log.exists() or not md.exists():
        pytest.skip("golden not there")
    with golden_store(store_path(tmp_path), log) as store:
        store.conn.execute("PRAGMA reverse_unordered_selects = ON")
        assert render_store(store)[1] == md.read_bytes()
        assert render(store.notes(), store.memory_id()).encode("utf-8") == md.read_bytes()


# -- byte stability ----------------------------------------------------------------------------


def test_export_twice_is_identical_and_leaves_the_file_alone(corpus_ws: Path, qem_here) -> None:
    mirror = corpus_ws / "MEMORY.md"
    first = qem_here("export")
    assert first.returncode == 0 and "wrote" in first.stderr
    data = mirror.read_bytes()
    os.utime(mirror, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    before = os.stat(mirror)
    second = qem_here("export")
    assert second.returncode == 0 and "unchanged" in second.stderr
    after = os.stat(mirror)
    assert mirror.read_bytes() == data
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)
    assert data == expected_corpus()


def test_vacuum_changes_nothing(corpus_ws: Path, qem_here) -> None:
    mirror = corpus_ws / "MEMORY.md"
    assert qem_here("export").returncode == 0
    data = mirror.read_bytes()
    conn = sqlite3.connect(store_path(corpus_ws) / "index.db")
    conn.execute("VACUUM")
    conn.execute("REINDEX")
    conn.execute("ANALYZE")
    conn.close()
    assert qem_here("export", "--check").returncode == 0
    again = qem_here("export")
    assert "unchanged" in again.stderr
    assert mirror.read_bytes() == data


def _locales() -> list[str]:
    try:
        available = subprocess.run(["locale", "-a"], capture_output=True, text=True).stdout.split()
    except OSError:
        available = []
    wanted = ["C", "POSIX", "C.UTF-8", "en_US.UTF-8", "de_DE.UTF-8", "tr_TR.UTF-8", "ja_JP.UTF-8"]
    norm = {a.lower().replace("-", "") for a in available}
    return [w for w in wanted if w in ("C", "POSIX") or w.lower().replace("-", "") in norm]


ENVIRONMENTS = [
    {"TZ": "UTC"},
    {"TZ": "America/Los_Angeles"},
    {"TZ": "Pacific/Kiritimati"},  # UTC+14: every late-evening UTC time is the next day
    {"TZ": "XST+11"},  # POSIX rules, no tz database needed
    {"TZ": "YST-14", "PYTHONHASHSEED": "0"},
    {"PYTHONHASHSEED": "1"},
    {"PYTHONHASHSEED": "random"},
    {"PYTHONUTF8": "0", "LC_ALL": "C"},  # no UTF-8 mode: stdout is ASCII unless qem writes bytes
    {"PYTHONIOENCODING": "latin-1"},
    *({"LC_ALL": name, "LANG": name} for name in _locales()),
]

# In one child: load the corpus into a fresh store (the items qem caches are rendered at
# write time, so the write must run in the environment too), export, print --stdout.
_LOAD_EXPORT_PRINT = """
import contextlib, io, sys
from qem_edit.shells.cli import main

def run(*args):
    try:
        main(list(args))
    except SystemExit as exc:
        if exc.code:
            raise

with contextlib.redirect_stdout(io.StringIO()):
    run("load", sys.argv[1])
run("export")
run("export", "--stdout")
"""


def test_export_is_the_same_in_every_environment(tmp_path: Path) -> None:
    """Time zone, locale and hash seed cannot reach the bytes: the store written, the file
    exported and `--stdout` give the committed corpus rendering in every environment."""
    expected = expected_corpus()
    children = []
    for number, env in enumerate(ENVIRONMENTS):
        full = {k: v for k, v in os.environ.items() if k not in ("TZ", "LC_ALL", "LANG", "PYTHONHASHSEED")}
        full.update(env)
        root = tmp_path / str(number)
        root.mkdir()
        child = subprocess.Popen(
            [sys.executable, "-c", _LOAD_EXPORT_PRINT, str(CORPUS)], cwd=root, env=full,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        children.append((env, root, child))
    for env, root, child in children:
        stdout, stderr = child.communicate(timeout=120)
        assert child.returncode == 0, (env, stderr)
        assert stdout == expected, f"--stdout differs under {env}"
        assert (root / "MEMORY.md").read_bytes() == expected, f"the file differs under {env}"


def _permuted(events: list, rnd: random.Random) -> list:
    """The same events, the notes' creations in another order (lifecycle events after, in
    their order)."""
    created = [e for e in events if e.type == "created"]
    rest = [e for e in events if e.type != "created"]
    rnd.shuffle(created)
    return created + rest


@pytest.mark.parametrize("name", ["same_second", "every_state", "corpus-749"])
def test_insertion_order_is_irrelevant(name: str, tmp_path: Path) -> None:
    """Notes inserted in shuffled orders (ties in the same second, ids not in insertion
    order) still come out in the total order: kind rank, then id."""
    log = CORPUS if name == "corpus-749" else GOLDEN / f"{name}.jsonl"
    md = CORPUS_MD if name == "corpus-749" else GOLDEN / f"{name}.md"
    if not log.exists() or not md.exists():
        pytest.skip("golden not there")
    events, texts, memory = read_dump(log.read_bytes(), log.name)
    expected = md.read_bytes()
    for seed in range(3):
        with Store.open(store_path(tmp_path / str(seed)), create=True) as store:
            load(store, _permuted(events, random.Random(seed)), texts, memory)
            assert render_store(store)[1] == expected, f"seed {seed}"


# -- --check, --diff, --stdout, --path ---------------------------------------------------------


def test_check(corpus_ws: Path, qem_here) -> None:
    mirror = corpus_ws / "MEMORY.md"
    missing = qem_here("export", "--check")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    assert not mirror.exists()

    assert qem_here("export").returncode == 0
    current = qem_here("export", "--check")
    assert current.returncode == 0 and "matches" in current.stderr

    assert qem_here("add", "a new note", "--kind", "task").returncode == 0
    moved = qem_here("export", "--check")
    assert moved.returncode == 1 and "moved on" in moved.stderr
    assert "edited by hand" not in moved.stderr

    assert qem_here("export").returncode == 0
    text = mirror.read_text("utf-8")
    mirror.write_text(text.replace("Run tests inside the venv", "Run tests inside .venv", 1), "utf-8")
    edited = qem_here("export", "--check")
    assert edited.returncode == 1
    assert "edited by hand" in edited.stderr and "qem checkin" in edited.stderr
    assert "moved on" not in edited.stderr

    mirror.write_text("no header at all\n", "utf-8")
    assert qem_here("export", "--check").returncode == 1


def test_check_of_a_hand_edit_the_store_moved_past(corpus_ws: Path, qem_here) -> None:
    mirror = corpus_ws / "MEMORY.md"
    assert qem_here("export").returncode == 0
    text = mirror.read_text("utf-8")
    mirror.write_text(text.replace("Run tests inside the venv", "Run tests inside .venv", 1), "utf-8")
    assert qem_here("add", "another", "--kind", "task").returncode == 0
    both = qem_here("export", "--check")
    assert both.returncode == 1
    assert "edited by hand" in both.stderr and "moved on" in both.stderr and "qem checkin" in both.stderr


def test_check_of_a_file_from_another_store(ws: Path, qem_here) -> None:
    assert qem_here("add", "one", "--kind", "task").returncode == 0
    (ws / "MEMORY.md").write_text("<!-- qem memory=0another0000 -->\n", "utf-8")
    proc = qem_here("export", "--check")
    assert proc.returncode == 1 and "another memory" in proc.stderr


def test_check_after_forget_is_moved_on_not_edited(ws: Path, qem_here) -> None:
    """A forget erases the text from the log; the file still shows it, unedited."""
    added = [qem_here("add", text, "--kind", "gotcha") for text in ("the staging password is hunter2", "a second note")]
    assert [a.returncode for a in added] == [0, 0]
    assert qem_here("export").returncode == 0
    stale = (ws / "MEMORY.md").read_bytes()
    assert qem_here("forget", added[0].stdout.decode().strip(), "-m", "a secret", "--yes").returncode == 0
    (ws / "MEMORY.md").write_bytes(stale)  # a copy forget did not clean (say, from an older commit)
    proc = qem_here("export", "--check")
    assert proc.returncode == 1 and "moved on" in proc.stderr and "edited" not in proc.stderr
    assert qem_here("export").returncode == 0
    assert "hunter2" not in (ws / "MEMORY.md").read_text("utf-8")


def test_crlf_line_ends_are_not_an_edit(ws: Path, qem_here) -> None:
    """A checkout with git's autocrlf holds MEMORY.md with CRLF line ends: that is the
    same text, so --check passes and export leaves the file alone."""
    assert qem_here("add", "one", "--kind", "task").returncode == 0
    assert qem_here("export").returncode == 0
    mirror = ws / "MEMORY.md"
    crlf = mirror.read_bytes().replace(b"\n", b"\r\n")
    mirror.write_bytes(crlf)
    assert qem_here("export", "--check").returncode == 0
    assert "unchanged" in qem_here("export").stderr and mirror.read_bytes() == crlf
    mirror.write_bytes(crlf.replace(b"one", b"two"))
    assert qem_here("export", "--check").returncode == 1  # a real edit still shows


def test_export_does_not_overwrite_a_hand_edit(corpus_ws: Path, qem_here) -> None:
    mirror = corpus_ws / "MEMORY.md"
    assert qem_here("export").returncode == 0
    edited = mirror.read_text("utf-8").replace("Run tests inside the venv", "Run tests inside .venv", 1)
    mirror.write_text(edited, "utf-8")
    for moved in (False, True):
        if moved:
            assert qem_here("add", "meanwhile", "--kind", "task").returncode == 0
        refused = qem_here("export")
        assert refused.returncode == 3
        assert "edited by hand" in refused.stderr and "qem checkin" in refused.stderr
        assert "qem export --force" in refused.stderr and "unchanged" in refused.stderr
        assert mirror.read_text("utf-8") == edited
    check = qem_here("export", "--check")
    assert check.returncode == 1 and "qem export --force" in check.stderr
    forced = qem_here("export", "--force")
    assert forced.returncode == 0 and mirror.read_bytes() == render_store(Store.open(store_path(corpus_ws)))[1]


def test_export_does_not_overwrite_a_memory_md_it_did_not_write(ws: Path, qem_here) -> None:
    mine = "# My notes\n\n- things I wrote myself\n"
    (ws / "MEMORY.md").write_text(mine, "utf-8")
    assert qem_here("add", "one", "--kind", "task").returncode == 0
    refused = qem_here("export")
    assert refused.returncode == 3 and "no qem header" in refused.stderr
    assert (ws / "MEMORY.md").read_text("utf-8") == mine
    assert qem_here("export", "--force").returncode == 0


def test_auto_export_keeps_a_hand_edit_and_says_so(ws: Path, qem_here) -> None:
    (ws / ".qem").mkdir()
    (ws / ".qem" / "config.toml").write_text("[export]\nauto = true\n", "utf-8")
    assert qem_here("add", "one", "--kind", "task").returncode == 0
    mirror = ws / "MEMORY.md"
    edited = mirror.read_text("utf-8").replace("one", "uno")
    mirror.write_text(edited, "utf-8")
    done = qem_here("add", "two", "--kind", "task")
    assert done.returncode == 0  # the write stands
    assert "warning" in done.stderr and "edited by hand" in done.stderr
    assert mirror.read_text("utf-8") == edited


def test_forget_renders_the_mirror_again_and_names_git_history(ws: Path, qem_here) -> None:
    added = qem_here("add", "the password is hunter2", "--kind", "gotcha")
    assert added.returncode == 0
    assert qem_here("export").returncode == 0  # auto-export is off: forget cleans the mirror anyway
    done = qem_here("forget", added.stdout.decode().strip(), "-m", "secret", "--yes")
    assert done.returncode == 0 and "git" in done.stderr and "history" in done.stderr
    assert "hunter2" not in (ws / "MEMORY.md").read_text("utf-8")
    assert qem_here("export", "--check").returncode == 0


def test_diff_prints_and_writes_nothing(corpus_ws: Path, qem_here) -> None:
    mirror = corpus_ws / "MEMORY.md"
    fresh = qem_here("export", "--diff")
    assert fresh.returncode == 1 and not mirror.exists()
    assert fresh.stdout.startswith(b"--- ") and b"+## Directives" in fresh.stdout

    assert qem_here("export").returncode == 0
    same = qem_here("export", "--diff")
    assert (same.returncode, same.stdout) == (0, b"")

    assert qem_here("revoke", "25", "-m", "wrong (really)").returncode == 0  # its old number
    with Store.open(store_path(corpus_ws)) as store:
        short = shown(store, 25)
    before = mirror.read_bytes(), os.stat(mirror).st_mtime_ns
    proc = qem_here("export", "--diff")
    assert proc.returncode == 1
    diff = proc.stdout.decode("utf-8")
    removed = [line for line in diff.splitlines() if line.startswith(f"-- [#{short}]")]
    added = [line for line in diff.splitlines() if line.startswith(f"+- [#{short}]")]
    assert len(removed) == len(added) == 1
    assert "REVOKED" in added[0] and r"(wrong \(really\))" in added[0]
    assert (mirror.read_bytes(), os.stat(mirror).st_mtime_ns) == before


def test_stdout_writes_no_file(corpus_ws: Path, qem_here) -> None:
    proc = qem_here("export", "--stdout")
    assert proc.returncode == 0
    assert proc.stdout == expected_corpus()
    assert sorted(p.name for p in corpus_ws.iterdir()) == [".qem"]


def test_default_path_is_the_workspace_root_from_anywhere_inside(ws: Path, monkeypatch, qem_here) -> None:
    assert qem_here("add", "one", "--kind", "task").returncode == 0
    sub = ws / "src" / "deep"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["export"])
    assert exit_.value.code == 0
    assert (ws / "MEMORY.md").exists() and not (sub / "MEMORY.md").exists()


def test_path_option_and_configured_path(ws: Path, qem_here) -> None:
    assert qem_here("add", "one", "--kind", "task").returncode == 0
    (ws / "docs").mkdir()
    assert qem_here("export", "--path", "docs/AGENT.md").returncode == 0
    assert (ws / "docs" / "AGENT.md").exists() and not (ws / "MEMORY.md").exists()
    assert qem_here("export", "--check", "--path", "docs/AGENT.md").returncode == 0
    config = ws / ".qem" / "config.toml"  # it also names the memory: add to it
    config.write_text(config.read_text("utf-8") + '\n[export]\npath = "docs/MEM.md"\n', "utf-8")
    assert qem_here("export").returncode == 0
    assert (ws / "docs" / "MEM.md").read_bytes() == (ws / "docs" / "AGENT.md").read_bytes()


# -- writing safely ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["export", "check", "diff"])
def test_a_symlink_at_the_mirror_path_is_refused(ws: Path, qem_here, mode: str) -> None:
    assert qem_here("add", "one", "--kind", "task").returncode == 0
    target = ws / "elsewhere.txt"
    target.write_bytes(b"do not touch\n")
    (ws / "MEMORY.md").symlink_to(target)
    args = {"export": ["export"], "check": ["export", "--check"], "diff": ["export", "--diff"]}[mode]
    proc = qem_here(*args)
    assert proc.returncode == 2, proc.stderr
    assert "symbolic link" in proc.stderr
    assert target.read_bytes() == b"do not touch\n"
    assert (ws / "MEMORY.md").is_symlink()


def test_a_dangling_symlink_is_refused_too(ws: Path, qem_here) -> None:
    assert qem_here("add", "one", "--kind", "task").returncode == 0
    (ws / "MEMORY.md").symlink_to(ws / "nowhere" / "file.md")
    proc = qem_here("export")
    assert proc.returncode == 2 and "symbolic link" in proc.stderr
    assert not (ws / "nowhere").exists()


def test_the_write_is_atomic_and_leaves_no_temp_files(corpus_ws: Path, qem_here, monkeypatch) -> None:
    mirror = corpus_ws / "MEMORY.md"
    mirror.write_bytes(b"old contents\n")
    mirror.chmod(0o600)
    assert qem_here("export").returncode == 3  # not qem's file: kept unless --force
    assert qem_here("export", "--force").returncode == 0
    assert sorted(p.name for p in corpus_ws.iterdir()) == [".qem", "MEMORY.md"]
    assert mirror.read_bytes() == expected_corpus()
    assert mirror.stat().st_mode & 0o777 == 0o600  # replaced, but as private as it was

    # a write that fails before the rename leaves the old file whole, and no temp file
    assert qem_here("add", "one more", "--kind", "task").returncode == 0
    old = mirror.read_bytes()

    def broken_replace(src, dst):  # type: ignore[no-untyped-def]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with Store.open(store_path(corpus_ws)) as store, pytest.raises((OSError, errors.QemError)):
        export(store, mirror)
    monkeypatch.undo()
    assert mirror.read_bytes() == old
    assert sorted(p.name for p in corpus_ws.iterdir()) == [".qem", "MEMORY.md"]


_EXPORTER = """
import sys, time
from qem_edit.shells.cli import main
deadline = time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline:
    try:
        main(["export"])
    except SystemExit as e:
        if e.code:
            sys.exit(e.code)
"""

# The writer pauses 10 ms between notes: a writer that never pauses starves the exporters,
# each of which must take the index's write lock to catch it up with the log first.
_WRITER = """
import sys, time
from pathlib import Path
from qem_edit.base.decisions import NewNote
from qem_edit.storage.store import Store
deadline = time.monotonic() + float(sys.argv[1])
store = Store.open(Path(sys.argv[2]))
n = 0
while time.monotonic() < deadline:
    n += 1
    store.write(lambda tx: tx.create(NewNote("task", "low", "agent", f"written while exporting, {n}\\nsecond line"), "w"))
    time.sleep(0.01)
"""


def test_concurrent_exports_never_tear_the_file(corpus_ws: Path) -> None:
    """Several processes export while another writes notes; a reader polling the file
    only ever sees a complete rendering (a header, whole items, the final newline)."""
    mirror = corpus_ws / "MEMORY.md"
    seconds = "2.5"
    env = dict(os.environ)
    procs = [
        subprocess.Popen([sys.executable, "-c", _EXPORTER, seconds], cwd=corpus_ws, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    procs.append(subprocess.Popen([sys.executable, "-c", _WRITER, seconds, str(store_path(corpus_ws))],
                                  cwd=corpus_ws, env=env, stderr=subprocess.PIPE))
    reads = 0
    written: set[int] = set()  # how many of the writer's notes a whole file held
    while any(p.poll() is None for p in procs):
        try:
            data = mirror.read_bytes()
        except FileNotFoundError:
            continue
        reads += 1
        text = data.decode("utf-8")  # a torn multi-byte character fails here
        assert text.endswith("\n"), "torn at the end"
        parsed = parse(text)
        assert parsed.errors == [] and parsed.memory is not None, f"torn file: {parsed.errors[:3]}"
        assert [line for line in text.split("\n") if line.startswith("## ")] == SECTIONS
        # the writer adds notes 1, 2, 3, ... in turn: a whole file holds the corpus and the
        # writer's first k notes, for some k, and nothing else
        mine = sorted(int(i.text.split("\n")[0].rsplit(" ", 1)[1]) for i in parsed.items
                      if i.text and i.text.startswith("written while exporting, "))
        assert mine == list(range(1, len(mine) + 1)), "torn: the writer's notes are not whole"
        assert len(parsed.items) == 749 + len(mine), "torn: notes are missing"
        written.add(len(mine))
    for p in procs:
        assert p.wait() == 0, p.stderr.read().decode() if p.stderr else ""
    assert reads > 20 and len(written) > 1, (reads, written)
    with Store.open(store_path(corpus_ws)) as store:
        assert store.count() > 749
        export(store, mirror)
        assert mirror.read_bytes() == render_store(store)[1]
    assert sorted(p.name for p in corpus_ws.iterdir()) == [".qem", "MEMORY.md"]


# -- auto-export ------------------------------------------------------------------------------


def test_auto_export_rerenders_after_every_write(ws: Path, qem_here) -> None:
    (ws / ".qem").mkdir()
    (ws / ".qem" / "config.toml").write_text("[export]\nauto = true\n", "utf-8")
    mirror = ws / "MEMORY.md"
    made: list[str] = []  # the ids the add and supersede steps print, in turn: {0}, {1}, {2}
    steps = [
        ("add", "Run tests inside the venv", "--kind", "directive"),
        ("add", "The lock order is A then B", "--kind", "gotcha"),
        ("supersede", "{1}", "The lock order is B then A", "-m", "measured"),
        ("revoke", "{0}", "-m", "no venv any more"),
        ("reinstate", "{0}"),
        ("flag-stale", "{2}", "-m", "unverified"),
        ("promote", "{0}"),
        ("expire", "{2}"),
        ("forget", "{1}", "-m", "wrong", "--yes"),
    ]
    for args in steps:
        proc = qem_here(*(arg.format(*made) for arg in args))
        assert proc.returncode == 0, (args, proc.stderr)
        assert "re-rendered" in proc.stderr
        assert qem_here("export", "--check").returncode == 0, args
        if args[0] in ("add", "supersede"):
            made.append(proc.stdout.decode().strip())
    assert "FORGOTTEN" in mirror.read_text("utf-8")


def test_auto_export_after_load_and_to_the_configured_path(ws: Path, qem_here) -> None:
    (ws / ".qem").mkdir()
    (ws / "notes").mkdir()
    (ws / ".qem" / "config.toml").write_text('[export]\nauto = true\npath = "notes/MEM.md"\n', "utf-8")
    log = GOLDEN / "every_state.jsonl"
    assert qem_here("load", str(log)).returncode == 0
    assert (ws / "notes" / "MEM.md").read_bytes() == (GOLDEN / "every_state.md").read_bytes()
    assert not (ws / "MEMORY.md").exists()


def test_without_auto_export_writes_leave_the_mirror_alone(ws: Path, qem_here) -> None:
    assert qem_here("add", "one", "--kind", "task").returncode == 0
    assert not (ws / "MEMORY.md").exists()
    (ws / ".qem" / "config.toml").write_text("[export]\nauto = false\n", "utf-8")
    assert qem_here("add", "two", "--kind", "task").returncode == 0
    assert not (ws / "MEMORY.md").exists()


@pytest.mark.parametrize(
    "config, words",
    [
        ('[export]\nauto = "yes"\n', "auto must be true or false"),
        ("[export\nauto = true\n", "not valid TOML"),
        ("export = 3\n", "export must be a table (a `[export]` section), not 3"),
        ('git = "no"\n', "git must be a table"),
        ("delivery = [1]\n", "delivery must be a table"),
        ("[export]\npath = 7\n", "path must be a string"),
        (b"\xff\xfe[export]\n", "not valid TOML"),
    ],
)
def test_an_invalid_config_is_refused_before_anything_is_written(ws: Path, qem_here, config, words: str) -> None:
    added = qem_here("add", "one", "--kind", "task")
    assert added.returncode == 0
    path = ws / ".qem" / "config.toml"
    path.write_bytes(config if isinstance(config, bytes) else config.encode("utf-8"))
    for args in (("add", "two", "--kind", "task"), ("revoke", added.stdout.decode().strip(), "-m", "x"), ("export",)):
        proc = qem_here(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert str(path) in proc.stderr and words in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    with Store.open(store_path(ws)) as store:
        assert len(store.events()) == 1  # exit 2 means nothing was written
    assert not (ws / "MEMORY.md").exists()


def test_an_invalid_config_through_the_real_entry_point(qem, ws: Path) -> None:
    (ws / ".qem").mkdir()
    (ws / ".qem" / "config.toml").write_text("[export]\nauto = 1\n", "utf-8")
    proc = qem("add", "one", "--kind", "task")
    assert proc.returncode == 2
    assert "config.toml" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in store_path(ws).iterdir()) == ["config.toml"]  # no memory was made


def test_the_example_in_docs_format_md_is_the_real_rendering() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "FORMAT.md").read_text("utf-8")
    start = doc.index("````markdown\n") + len("````markdown\n")
    example = doc[start : doc.index("\n````\n", start) + 1]
    assert example == (GOLDEN / "format_example.md").read_text("utf-8")


def test_check_is_not_fooled_by_a_write_between_its_two_reads(ws: Path, monkeypatch) -> None:
    """`--check` reads the log, then the file: a writer in another process that commits
    and patches MEMORY.md in between leaves a file newer than the rendering read.  That
    is no hand edit: the check reads again and finds the file current."""
    from conftest import run_qem

    from qem_edit.mirror import export as exporting

    subprocess.run(["git", "init", "-q", str(ws)], check=True)  # a git work tree: writes keep MEMORY.md current
    assert run_qem("add", "the first note", "-k", "task", cwd=ws).returncode == 0
    assert run_qem("export", cwd=ws).returncode == 0
    real, raced = exporting.same_bytes, []

    def racing(path: Path, chunks):  # type: ignore[no-untyped-def]
        if os.path.basename(path) == "MEMORY.md" and not raced:  # the rendering is read: now the file
            raced.append(run_qem("add", "written meanwhile", "-k", "task", cwd=ws))
        return real(path, chunks)

    monkeypatch.setattr(exporting, "same_bytes", racing)
    os.utime(ws / "MEMORY.md")  # not known current by its stat: the check reads the log, then the file
    with Store.open(store_path(ws)) as store:
        verdict = exporting.check(store, ws / "MEMORY.md")
    assert raced and raced[0].returncode == 0, raced
    assert b"written meanwhile" in (ws / "MEMORY.md").read_bytes()  # the writer patched it in between
    assert verdict.clean, verdict.message
