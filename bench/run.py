"""qem's benchmark harness: whole-process timings against floors measured in the same run.

    python bench/run.py                          # 749, 7,490, 74,900 notes; 5 runs
    python bench/run.py --quick                  # 749 and 7,490, 3 runs: a smoke check
    python bench/run.py --only add,fresh-clone   # some subjects only

Run it with the interpreter qem is installed in (the `qem` script beside it is what gets
timed).  Every subject is a whole process (subprocess, wall clock by time.perf_counter,
max RSS from os.wait4), run after a warm-up, several times, each run right after a run
of its floor (floor, subject, floor, subject, ...), so the ratio compares like with like
on a noisy machine:

    start-up floor  python -c "import typer"            (same interpreter as qem)
    render floor    the sqlite3 shell writing the same fields of the same rows, in the
                    same order, from the index (.qem/index.db) to a file
    merge floor     git merge-file -p on the check-in's three renderings (the edit, its
                    base, the memory now)
    clone floor     git clone --no-local of the repository holding the memory
    status floor    git status in a clone of that repository with .qem/ and MEMORY.md
                    removed (and that removal committed)

Memories are built once per size from fixtures/generate.py (JSONL, then `qem load`) and
cached under bench/out/stores/ as the `.qem` folder (the log's files and a caught-up,
checkpointed index.db), keyed by size, seed and a digest of the generator, the index's
schema and version and the renderer's format version.  A workspace is a copy of that
folder; the git subjects use repositories made from it once per size (the memory packed
with `qem pack`, MEMORY.md exported, committed).  Copying, cloning, checking out and
editing are not timed.  Any subject or floor exiting with an unexpected status aborts the
run with its stderr.  The harness writes docs/PERFORMANCE.md below its marker (the
hand-written intro above it is kept) and the raw samples to bench/out/results/.

Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))

import edits  # noqa: E402

MARKER = "<!-- bench/run.py writes everything below this line; edit only above it -->"
DEFAULT_INTRO = """# Performance

How fast qem's commands are as whole processes, measured by `bench/run.py` (see
bench/README.md). Every figure that matters is a ratio against a floor timed in the same
run, interleaved with the subject, so a slow or busy machine moves both.
"""
DEFAULT_SIZES = (749, 7_490, 74_900)
QUICK_SIZES = (749, 7_490)
RENDER_SQL = (
    "SELECT short, kind, priority, provenance, created_at, state, state_at, state_reason,"
    " supersedes, superseded_by, text FROM notes ORDER BY kind_rank, id"
)
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
    "GIT_AUTHOR_DATE": "2026-12-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-12-01T00:00:00Z",
}
SCRUB_ENV = ("QEM_STORE", "QEM_WORKSPACE", "QEM_EDITOR", "QEM_FAULT", "QEM_NOW", "VISUAL", "EDITOR")

FLOOR_NAMES = {
    "startup": "start-up",
    "render": "render (sqlite3)",
    "merge": "merge (git merge-file)",
    "clone": "clone (git clone --no-local)",
    "status": "git status (no .qem/)",
    "bare": "interpreter (python -c pass)",
}


CHANGED_NOTE = "qem's code changed while this row was measured"


class BenchError(Exception):
    pass


# -- processes ----------------------------------------------------------------------------


@dataclass
class Sample:
    wall: float  # seconds
    rss_kb: int  # max RSS, KiB (Linux ru_maxrss)


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUB_ENV}
    env["QEM_ACTOR"] = "bench"
    return env


GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def timed(argv: list[str], *, what: str, cwd: Path, env: dict[str, str], stdout: Path, stderr: Path,
          ok: Callable[[int], bool] = lambda rc: rc == 0, stdin: Path | None = None) -> tuple[Sample, int]:
    """Run one process; its wall time (spawn to reap) and max RSS.  The RSS comes from GNU
    time where there is one: a child forked from this harness starts with the harness's
    own RSS as its high-water mark, which os.wait4 would report (149 MB for `git status`
    at 74,900 notes), while GNU time's child is forked from a small process."""
    rss_file = stderr.with_suffix(".rss")
    wrapped = [GNU_TIME, "-f", "%M", "-o", str(rss_file), *argv] if GNU_TIME else argv
    os.sync()  # what the setup wrote is on disk first: no run pays for writing back another's files
    with open(stdout, "wb") as out, open(stderr, "wb") as err, open(stdin or os.devnull, "rb") as given:
        t0 = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdin=given, stdout=out, stderr=err, cwd=cwd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        t1 = time.perf_counter()
    proc.returncode = rc = os.waitstatus_to_exitcode(status)
    if not ok(rc):
        fail(what, argv, rc, stderr.read_bytes(), stdout.read_bytes())
    rss = usage.ru_maxrss
    if GNU_TIME:
        lines = rss_file.read_text().split()
        rss = int(lines[-1]) if lines and lines[-1].isdigit() else rss
    return Sample(t1 - t0, rss), rc


def call(argv: list[str], *, what: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run an untimed helper; its stdout."""
    proc = subprocess.run(argv, cwd=cwd, env=env or base_env(), stdin=subprocess.DEVNULL, capture_output=True)
    if proc.returncode != 0:
        fail(what, argv, proc.returncode, proc.stderr, proc.stdout)
    return proc.stdout.decode("utf-8", "replace")


def fail(what: str, argv: list[str], rc: int, err: bytes, out: bytes) -> None:
    def tail(data: bytes) -> str:
        text = data.decode("utf-8", "replace")
        return text if len(text) < 6000 else "...\n" + text[-6000:]

    raise BenchError(
        f"{what} failed: exit {rc}\n  command: {shlex.join(argv)}\n"
        f"--- stderr ---\n{tail(err)}\n--- stdout ---\n{tail(out)}"
    )


# -- memories -----------------------------------------------------------------------------


class Tools:
    def __init__(self, installed: bool = False) -> None:
        self.python = installed_python() if installed else sys.executable
        script = Path(self.python).parent / "qem"
        self.qem = [str(script)] if script.exists() else [self.python, "-m", "qem_edit"]
        self.sqlite3 = shutil.which("sqlite3")
        self.git = shutil.which("git")
        self.sh = shutil.which("sh") or "/bin/sh"
        if not self.sqlite3 or not self.git:
            raise BenchError("bench needs the `sqlite3` shell and `git` on PATH")
        where = call([self.python, "-c", "import qem_edit, typer; print(qem_edit.__file__)"], what="import qem_edit", cwd=REPO)
        if installed:
            return  # pip compiled the installed package's bytecode
        if Path(where.strip()).resolve().parent.parent != REPO:
            raise BenchError(f"{self.python} imports qem_edit from {where.strip()}, not from {REPO};"
                             " install this checkout (pip install -e .) or run with its venv's python")
        # Measure qem as installed: pip compiles an installed package's bytecode, and the
        # floor (`import typer`) runs on compiled bytecode too.  This checkout is installed
        # editable, and where PYTHONDONTWRITEBYTECODE is set (it is on these machines)
        # nothing would ever compile it: every run would compile qem's source (~45 ms).
        call([self.python, "-m", "compileall", "-q", "qem_edit", "renderer", "reconciler"],
             what="compile qem's bytecode", cwd=REPO)


def installed_python() -> str:
    """An interpreter with this checkout installed as a user installs it (`--installed`):
    its wheel, built offline, installed with pip (which compiles its bytecode) into a venv
    of its own, bench/out/installed/; qem's dependencies are read from the running
    interpreter's site-packages (a .pth file names it), so nothing is downloaded.  Unlike
    the editable install, its start-up imports no finder of setuptools' (which loads
    pathlib, re and urllib before qem starts)."""
    import sysconfig

    venv, wheels = OUT / "installed", OUT / "wheel"
    shutil.rmtree(venv, ignore_errors=True)
    shutil.rmtree(wheels, ignore_errors=True)
    call([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(REPO)],
         what="build qem's wheel", cwd=REPO)
    call([sys.executable, "-m", "venv", str(venv)], what="make a venv", cwd=REPO)
    python = venv / "bin" / "python"
    wheel = next(wheels.glob("qem_edit-*.whl"))
    call([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], what="install qem's wheel", cwd=REPO)
    site = call([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], what="find site-packages", cwd=REPO)
    Path(site.strip(), "bench_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return str(python)


def _constant(path: Path, pattern: str) -> str | None:
    """The text of a definition in a source file (None: the file or the definition is gone)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    found = re.search(pattern, text, re.S | re.M)
    return found.group(0) if found else None


def memory_key(size: int, seed: int) -> str:
    """The cached memory's name: size, seed, and a digest of what its bytes depend on (the
    generator, the index's schema and version, the renderer's format version).  A part
    that cannot be found by its definition is hashed whole."""
    digest = hashlib.sha256((REPO / "fixtures" / "generate.py").read_bytes())
    index_py = REPO / "qem_edit" / "index.py"
    parts = [
        (index_py, r'^SCHEMA = f?"""(.*?)"""'),
        (index_py, r"^INDEX_VERSION = .*?$"),
        (REPO / "renderer" / "format.py", r"^FORMAT_VERSION = .*?$"),
    ]
    for path, pattern in parts:
        found = _constant(path, pattern)
        if found is not None:
            digest.update(found.encode())
        else:
            for whole in sorted(path.parent.glob("*.py")) if path.name == "format.py" else [path]:
                digest.update(whole.read_bytes() if whole.exists() else b"")
    return f"n{size}-seed{seed}-{digest.hexdigest()[:10]}"


LOADS: list[float] = []  # the 1-minute load average, sampled before each run
BUILT: dict[int, float] = {}  # size -> seconds spent building it in this run
FILES: dict[int, dict[str, int]] = {}  # size -> files under .qem/ after `qem pack`


def checkpoint(index_db: Path) -> None:
    """Move the index's write-ahead log into the database file and check it is empty."""
    if not index_db.exists():
        raise BenchError(f"{index_db} does not exist")
    conn = sqlite3.connect(str(index_db))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()
    wal = Path(str(index_db) + "-wal")
    if wal.exists() and wal.stat().st_size:
        raise BenchError(f"{wal} is not empty after the checkpoint")


def build_memory(tools: Tools, size: int, seed: int) -> Path:
    """The cached memory (a `.qem` folder) for `size` notes, built (generate, load,
    checkpoint) if missing."""
    stores = OUT / "stores"
    stores.mkdir(parents=True, exist_ok=True)
    key = memory_key(size, seed)
    cached = stores / f"{key}.qem"
    if (cached / "index.db").is_file():
        return cached
    for old in stores.glob(f"n{size}-seed{seed}-*"):  # another generator or schema, or the old .db layout
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink()
    work = stores / f"{key}.building"
    shutil.rmtree(work, ignore_errors=True)
    (work / "ws").mkdir(parents=True)
    jsonl = work / "corpus.jsonl"
    env = base_env()
    env["QEM_NOW"] = "2026-12-01T00:00:00Z"
    print(f"building the {size:,}-note memory (cached as bench/out/stores/{cached.name}/) ...", flush=True)
    t0 = time.perf_counter()
    call([tools.python, str(REPO / "fixtures" / "generate.py"), "--notes", str(size), "--seed", str(seed),
          "-o", str(jsonl)], what=f"generate {size} notes", cwd=work, env=env)
    t1 = time.perf_counter()
    call(tools.qem + ["load", str(jsonl), "-w", str(work / "ws")], what=f"qem load ({size} notes)", cwd=work, env=env)
    t2 = time.perf_counter()
    built = work / "ws" / ".qem"
    checkpoint(built / "index.db")
    for lock in built.glob("*.lock"):
        lock.unlink()
    os.replace(built, cached)
    shutil.rmtree(work)
    BUILT[size] = time.perf_counter() - t0
    print(f"  generated in {t1 - t0:.1f} s, loaded in {t2 - t1:.1f} s", flush=True)
    return cached


def tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def fresh_workspace(ws: Path, memory: Path) -> Path:
    """A workspace holding a copy of the cached memory (no MEMORY.md)."""
    shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir(parents=True)
    shutil.copytree(memory, ws / ".qem")
    return ws


def settle(tools: Tools, ws: Path, cwd: Path) -> None:
    """Let the copy's index catch up with its log, untimed: the index notes the log
    folders by time and inode, and a copy's folders are new inodes, so the first command
    on a copy would list them once (a small cost, but not what a subject measures)."""
    script = ("import sys; from pathlib import Path; from qem_edit.storage.store import Store\n"
              "Store.open(Path(sys.argv[1])).close()\n")
    call([tools.python, "-c", script, str(ws / ".qem")], what="open the copied memory", cwd=cwd)


def git(tools: Tools, repo: Path, *args: str) -> str:
    return call([tools.git, "-C", str(repo), *args], what=f"git {args[0]}", cwd=repo.parent,
                env=base_env() | GIT_ENV)


def commit_all(tools: Tools, repo: Path, message: str) -> None:
    git(tools, repo, "add", "-A")
    git(tools, repo, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", message)


def clone(tools: Tools, src: Path, dst: Path) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    call([tools.git, "clone", "--no-local", "-q", str(src), str(dst)], what="git clone --no-local",
         cwd=dst.parent, env=base_env() | GIT_ENV)
    return dst


def count_files(repo: Path, tools: Tools) -> dict[str, int]:
    """Files under the memory's log folders, and what git tracks under .qem/."""
    qem = repo / ".qem"
    out = {folder: sum(1 for p in (qem / folder).iterdir() if p.is_file()) if (qem / folder).is_dir() else 0
           for folder in ("events", "texts", "packs")}
    out["log"] = out["events"] + out["texts"] + out["packs"]
    out["tracked"] = len([line for line in git(tools, repo, "ls-files", "--", ".qem").splitlines() if line])
    out["log_bytes"] = sum(tree_bytes(qem / folder) for folder in ("events", "texts", "packs") if (qem / folder).is_dir())
    return out


# -- subjects -----------------------------------------------------------------------------


@dataclass
class Subject:
    key: str
    name: str
    floor: str  # startup | render | merge | clone | status | bare
    argv: list[str] = field(default_factory=list)
    stdin: Path | None = None  # what the subject reads on stdin (a hook's input); else nothing
    env: dict[str, str] = field(default_factory=dict)
    ok: Callable[[int], bool] = lambda rc: rc == 0
    setup: Callable[[], list[str] | None] | None = None  # before each run (and its floor), untimed; may give the argv
    verify: Callable[[], None] | None = None  # after each run, untimed
    after: Callable[[], None] | None = None  # once, after the last run, untimed
    merge: tuple[Path, Path, Path] | None = None  # (edited, base, memory now) for the merge floor
    floor_argv: list[str] | None = None  # for the clone and status floors
    note: str = ""
    runs: int | None = None  # timed runs and warm-ups, where the size's default would take too long
    warmup: int | None = None


@dataclass
class Result:
    size: int
    key: str
    name: str
    floor: str
    samples: list[Sample]
    floor_samples: list[Sample]
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(s.wall for s in self.samples)

    @property
    def floor_median(self) -> float:
        return statistics.median(s.wall for s in self.floor_samples)

    @property
    def ratio(self) -> float:
        return self.median / self.floor_median

    @property
    def rss_mb(self) -> float:
        return max(s.rss_kb for s in self.samples) * 1024 / 1e6

    def to_json(self) -> dict:
        return {
            "size": self.size, "key": self.key, "name": self.name, "floor": self.floor, "note": self.note,
            "median_s": self.median, "floor_median_s": self.floor_median, "ratio": self.ratio,
            "max_rss_mb": self.rss_mb,
            "samples": [[s.wall, s.rss_kb] for s in self.samples],
            "floor_samples": [[s.wall, s.rss_kb] for s in self.floor_samples],
        }


SUBJECT_KEYS = ("export", "export-unchanged", "check", "check-stale", "checkin", "checkin-concurrent", "edit",
                "checkout-path", "checkin-path", "checkin-mirror", "checkin-moved",
                "add", "add-nomirror", "add-scanned", "stage-mirror", "fresh-clone", "fresh-clone-total", "git-status", "context", "mcp-call",
                "edit-query", "verify", "dump", "load", "owed",
                "verify-staged", "export-check-staged", "anchors-check-staged", "hook-edit", "hook-start")
EXPORT_KEYS = SUBJECT_KEYS[:4]
# At the export-only sizes (749,000): the export subjects, and what must stay bounded there.
SCALE_KEYS = EXPORT_KEYS + ("checkin", "edit", "checkout-path", "checkin-path", "checkin-mirror", "checkin-moved",
                             "edit-query", "verify", "dump", "load")
# `qem owed`: the memory with this many requests added (one transaction, untimed), every
# other one answered, a third of them late.
OWED_REQUESTS = 300
OWED_SETUP = """
import sys
from pathlib import Path
from qem_edit.base.decisions import NewNote
from qem_edit.storage.store import Store
count = int(sys.argv[2])
with Store.open(Path(sys.argv[1])) as store:
    def work(tx):
        for i in range(count):
            due = "2026-01-01T00:00:00Z" if i % 3 == 0 else "2099-01-01T00:00:00Z"
            asked = tx.create(NewNote("task", "medium", "agent", f"request {i}", to=f"seat-{i % 7}", due=due), "bench")
            if i % 2:
                tx.create(NewNote("finding", "medium", "agent", f"answer {i}", answers=asked.id), "bench")
    store.write(work)
"""
MOVED_WRITES = 100  # the moved store: this many writes by another process between checkout and check-in
SLOW_FROM = 74_900  # from this size on, verify and load run once, with no warm-up
COUNT_KEYS = ("files",)  # counted, not timed
ALL_KEYS = SUBJECT_KEYS + COUNT_KEYS


class SizeBench:
    """Every subject at one memory size."""

    def __init__(self, tools: Tools, size: int, memory: Path) -> None:
        self.tools, self.size, self.memory = tools, size, memory
        self.dir = OUT / "scratch" / str(size)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.out, self.err = self.dir / "stdout.txt", self.dir / "stderr.txt"
        self.env = base_env()
        self.plan_path = self.dir / "plan.json"
        self.plan: dict | None = None
        self._src: Path | None = None

    def qem(self, *args: str) -> list[str]:
        return self.tools.qem + list(args)

    # the floors
    def floor_argv(self, subject: Subject) -> tuple[list[str], Callable[[int], bool]]:
        if subject.floor_argv is not None:
            return subject.floor_argv, lambda rc: rc == 0
        if subject.floor == "startup":
            return [self.tools.python, "-c", "import typer"], lambda rc: rc == 0
        if subject.floor == "bare":
            return [self.tools.python, "-c", "pass"], lambda rc: rc == 0
        if subject.floor == "render":
            target = self.dir / "render-floor.txt"
            return [self.tools.sqlite3, "-batch", str(self.render_db), f".output {target}", RENDER_SQL], lambda rc: rc == 0
        assert subject.merge is not None
        edited, base, now = subject.merge
        # git merge-file exits with the number of conflicts (negative on error)
        return [self.tools.git, "merge-file", "-p", str(edited), str(base), str(now)], lambda rc: 0 <= rc < 128

    # the subjects
    def subjects(self, keys: tuple[str, ...]) -> list[Subject]:
        made = []
        for key in keys:
            if key in SUBJECT_KEYS:
                made.append(getattr(self, "make_" + key.replace("-", "_"))())
        return made

    def read_ws(self) -> Path:
        ws = self.dir / "read"
        if not (ws / ".qem").exists():
            fresh_workspace(ws, self.memory)
            call(self.qem("export", "-w", str(ws)), what="qem export (prepare)", cwd=self.dir)
        self.render_db = ws / ".qem" / "index.db"
        return ws

    def make_export(self) -> Subject:
        ws = self.read_ws()
        mirror = ws / "MEMORY.md"

        def setup() -> None:
            mirror.unlink(missing_ok=True)

        def verify() -> None:
            if not mirror.exists():
                raise BenchError(f"qem export exited 0 but wrote no {mirror}")

        return Subject("export", "qem export (absent → written)", "render", self.qem("export", "-w", str(ws)),
                       setup=setup, verify=verify)

    def make_export_unchanged(self) -> Subject:
        ws = self.read_ws()
        mirror = ws / "MEMORY.md"
        before: list[int] = []

        def setup() -> None:
            before[:] = [mirror.stat().st_mtime_ns]

        def verify() -> None:
            if mirror.stat().st_mtime_ns != before[0]:
                raise BenchError(f"qem export rewrote {mirror} although the memory did not change")

        return Subject("export-unchanged", "qem export (unchanged → no write)", "render",
                       self.qem("export", "-w", str(ws)), setup=setup, verify=verify)

    def make_check(self) -> Subject:
        ws = self.read_ws()
        return Subject("check", "qem export --check (clean)", "startup", self.qem("export", "--check", "-w", str(ws)))

    def make_check_stale(self) -> Subject:
        self.read_ws()
        ws = fresh_workspace(self.dir / "stale", self.memory)
        call(self.qem("export", "-w", str(ws)), what="qem export (prepare)", cwd=self.dir)
        # The scratch folder is inside this repository's work tree, where a write with
        # MEMORY.md present exports by itself: the write is made with the mirror aside.
        mirror, aside = ws / "MEMORY.md", ws / "MEMORY.md.aside"
        os.replace(mirror, aside)
        call(self.qem("add", "bench: one more write", "--kind", "task", "-w", str(ws)), what="qem add (prepare)", cwd=self.dir)
        os.replace(aside, mirror)
        return Subject("check-stale", "qem export --check (stale: one write since)", "startup",
                       self.qem("export", "--check", "-w", str(ws)), ok=lambda rc: rc == 1)

    def edit_plan(self) -> dict:
        if self.plan is None:
            self.plan = edits.choose(self.memory)
            self.plan_path.write_text(json.dumps(self.plan))
        return self.plan

    def checkout_and_edit(self, ws: Path, concurrent: bool, *, to: Path | None = None, adds: int = 0) -> Path:
        """A fresh copy of the memory, checked out (kept, or `to` a file of its own), the
        plan's 10 edits made to it; then, if `concurrent`, the plan's 10 writes by another
        process (and `adds` more notes)."""
        plan = self.edit_plan()
        fresh_workspace(ws, self.memory)
        where = ["--path", str(to)] if to is not None else []
        printed = call(self.qem("checkout", *where, "-w", str(ws)), what="qem checkout", cwd=self.dir).strip().splitlines()
        path = Path(printed[-1])
        if not path.is_absolute():
            path = self.dir / path
        edits.apply_file(path, plan)
        if concurrent:
            call([self.tools.python, str(HERE / "writer.py"), str(ws), str(self.plan_path), str(adds)],
                 what="concurrent writes (bench/writer.py)", cwd=self.dir)
        return path

    def verify_checkin(self, ws: Path, concurrent: bool) -> Callable[[], None]:
        def verify() -> None:
            plan = self.edit_plan()
            wanted = plan["change"] + plan["delete"] + [w[1] for w in plan["writes"]]
            conn = sqlite3.connect(f"file:{ws / '.qem' / 'index.db'}?mode=ro", uri=True)
            try:
                state = dict(conn.execute("SELECT id, state FROM notes WHERE id IN (%s)" % ",".join("?" * len(wanted)),
                                          wanted).fetchall())
                new = conn.execute("SELECT count(*) FROM notes WHERE provenance = 'human'"
                                   " AND text LIKE 'bench new note %'").fetchone()[0]
            finally:
                conn.close()
            want = {i: "superseded" for i in plan["change"]} | {i: "revoked" for i in plan["delete"]}
            if concurrent:
                after = {"revoke": "revoked", "flag-stale": "stale", "supersede": "superseded"}
                want |= {note_id: after[command] for command, note_id in plan["writes"]}
            wrong = {plan["shorts"][i]: state.get(i) for i, s in want.items() if state.get(i) != s}
            if wrong or new != len(plan["new"]):
                raise BenchError(f"the check-in did not land as planned: states {wrong}, {new} new notes"
                                 f" (want {len(plan['new'])}); see {self.err}")
        return verify

    def merge_inputs(self, name: str, path: Path, ws: Path, concurrent: bool,
                     base: Path | None = None) -> tuple[Path, Path, Path]:
        where = self.dir / f"merge-{name}"
        where.mkdir(exist_ok=True)
        source = base if base is not None else path.parent / "base.md"
        edited, base, now = where / "edited.md", where / "base.md", where / "now.md"
        shutil.copyfile(path, edited)
        shutil.copyfile(source, base)
        if concurrent:
            now.write_bytes(call(self.qem("export", "--stdout", "-w", str(ws)), what="qem export --stdout", cwd=self.dir).encode("utf-8"))
        else:
            shutil.copyfile(base, now)
        probe = subprocess.run([self.tools.git, "merge-file", "-p", str(edited), str(base), str(now)],
                               capture_output=True)
        if probe.returncode != 0:
            print(f"  warning: the merge floor's git merge-file reports {probe.returncode} conflict(s)", flush=True)
        return edited, base, now

    def make_checkin(self, concurrent: bool = False) -> Subject:
        name = "checkin-concurrent" if concurrent else "checkin"
        ws = self.dir / name
        path = self.checkout_and_edit(ws, concurrent)  # once, for the merge floor's inputs
        merge = self.merge_inputs(name, path, ws, concurrent)

        def setup() -> list[str]:
            p = self.checkout_and_edit(ws, concurrent)
            return self.qem("checkin", "--path", str(p), "-m", "bench", "--yes", "-w", str(ws))

        label = "qem checkin (10 edits, 10 concurrent writes)" if concurrent else "qem checkin (10 edits)"
        return Subject(name, label, "merge", setup=setup, verify=self.verify_checkin(ws, concurrent), merge=merge)

    def make_checkin_concurrent(self) -> Subject:
        return self.make_checkin(concurrent=True)

    # the other ways in (issue: every way in costs what the work costs)
    def make_checkout_path(self) -> Subject:
        ws = self.dir / "checkout-path"
        target = self.dir / "checkout-path.md"
        fresh_workspace(ws, self.memory)
        settle(self.tools, ws, self.dir)
        self.read_ws()  # the render floor's index

        def verify() -> None:
            if not target.is_file() or not target.read_bytes()[:4] == b"<!--":
                raise BenchError(f"qem checkout --path exited 0 but wrote no checkout at {target}")

        return Subject("checkout-path", "qem checkout --path FILE (whole store)", "render",
                       self.qem("checkout", "--path", str(target), "-w", str(ws)), verify=verify)

    def make_checkin_path(self) -> Subject:
        """The script path: `qem checkout --path FILE`, the 10 edits, `qem checkin --path
        FILE` (timed), which also makes FILE the rendering now again."""
        ws, target = self.dir / "checkin-path", self.dir / "checkin-path.md"
        path = self.checkout_and_edit(ws, False, to=target)
        merge = self.merge_inputs("checkin-path", path, ws, False, base=self.recorded_base(ws))

        def setup() -> list[str]:
            self.checkout_and_edit(ws, False, to=target)
            return self.qem("checkin", "--path", str(target), "-m", "bench", "--yes", "-w", str(ws))

        return Subject("checkin-path", "qem checkin --path FILE (checked out by --path, 10 edits)", "merge",
                       setup=setup, verify=self.verify_checkin(ws, False), merge=merge)

    def make_checkin_mirror(self) -> Subject:
        """A hand-edited MEMORY.md: `qem export`, the 10 edits to the file, `qem checkin
        --path MEMORY.md` (timed), which renders the mirror again."""
        ws = self.dir / "checkin-mirror"
        mirror = ws / "MEMORY.md"

        def prepare() -> None:
            fresh_workspace(ws, self.memory)
            call(self.qem("export", "-w", str(ws)), what="qem export (prepare)", cwd=self.dir)
            edits.apply_file(mirror, self.edit_plan())

        prepare()
        merge = self.merge_inputs("checkin-mirror", mirror, ws, False, base=ws / ".qem" / "mirror-base.md")

        def setup() -> list[str]:
            prepare()
            return self.qem("checkin", "--path", str(mirror), "-m", "bench", "--yes", "-w", str(ws))

        return Subject("checkin-mirror", "qem checkin --path MEMORY.md (hand-edited, 10 edits)", "merge",
                       setup=setup, verify=self.verify_checkin(ws, False), merge=merge)

    def make_checkin_moved(self) -> Subject:
        """A kept checkout, the 10 edits, then 100 writes by another process (the plan's 10
        moves and 90 new notes), then the check-in (timed)."""
        ws = self.dir / "checkin-moved"
        adds = MOVED_WRITES - len(self.edit_plan()["writes"])
        path = self.checkout_and_edit(ws, True, adds=adds)
        merge = self.merge_inputs("checkin-moved", path, ws, True)

        def setup() -> list[str]:
            p = self.checkout_and_edit(ws, True, adds=adds)
            return self.qem("checkin", "--path", str(p), "-m", "bench", "--yes", "-w", str(ws))

        return Subject("checkin-moved", f"qem checkin (10 edits, {MOVED_WRITES} writes since the checkout)", "merge",
                       setup=setup, verify=self.verify_checkin(ws, True), merge=merge)

    def recorded_base(self, ws: Path) -> Path:
        """The base.md of the one checkout recorded in `ws` (a `qem checkout --path`'s)."""
        found = sorted((ws / ".qem" / "checkouts").glob("*/base.md"))
        if len(found) != 1:
            raise BenchError(f"expected one recorded checkout in {ws}, found {len(found)}")
        return found[0]

    def make_edit(self) -> Subject:
        ws = self.dir / "edit"
        plan_ws = self.dir / "edit-probe"
        path = self.checkout_and_edit(plan_ws, False)
        merge = self.merge_inputs("edit", path, plan_ws, False)
        shutil.rmtree(plan_ws)

        def setup() -> None:
            fresh_workspace(ws, self.memory)
            settle(self.tools, ws, self.dir)

        editor = f"{shlex.quote(self.tools.python)} {shlex.quote(str(HERE / 'editor.py'))}"
        return Subject("edit", "qem edit (scripted editor, 10 edits)", "merge",
                       self.qem("edit", "-m", "bench", "--yes", "-w", str(ws)),
                       env={"QEM_EDITOR": editor, "BENCH_EDIT_PLAN": str(self.plan_path)},
                       setup=setup, verify=self.verify_checkin(ws, False), merge=merge)

    # a query's edit, and the whole-store passes
    def query_window(self) -> list[str]:
        """A 100-note query: the active gotchas created in a window around the middle of
        their creation times (the same filters at every size; the window's bounds differ)."""
        conn = sqlite3.connect(f"file:{self.memory / 'index.db'}?mode=ro&immutable=1", uri=True)
        try:
            times = [t for (t,) in conn.execute(
                "SELECT created_at FROM notes WHERE kind = 'gotcha' AND state = 'active' ORDER BY created_at")]
        finally:
            conn.close()
        start = max(0, len(times) // 2 - 50)
        return ["kind=gotcha", "state=active", f"since={times[start]}", f"until={times[min(start + 99, len(times) - 1)]}"]

    def make_edit_query(self) -> Subject:
        ws = self.dir / "edit-query"

        def setup() -> None:
            fresh_workspace(ws, self.memory)
            settle(self.tools, ws, self.dir)
            os.sync()  # the copy's dirty pages are not the command's to write back

        def verify() -> None:
            conn = sqlite3.connect(f"file:{ws / '.qem' / 'index.db'}?mode=ro", uri=True)
            try:
                got = conn.execute(
                    "SELECT sum(text LIKE '%(edited by bench)'), sum(text LIKE 'bench new note %: made in a query%'),"
                    " sum(state = 'revoked' AND state_reason = 'bench') FROM notes").fetchone()
            finally:
                conn.close()
            if tuple(got) != (4, 3, 3):
                raise BenchError(f"the query's edit did not land as planned: {got} (want 4 changed, 3 new, 3"
                                 f" revoked); see {self.err}")

        editor = f"{shlex.quote(self.tools.python)} {shlex.quote(str(HERE / 'query_editor.py'))}"
        return Subject("edit-query", "qem edit of a 100-note query (scripted editor, 10 edits)", "startup",
                       self.qem("edit", *self.query_window(), "-m", "bench", "--yes", "-w", str(ws)),
                       env={"QEM_EDITOR": editor}, setup=setup, verify=verify)

    def make_verify(self) -> Subject:
        once = 1 if self.size >= SLOW_FROM else None
        return Subject("verify", "qem verify (log, index and MEMORY.md)", "startup",
                       self.qem("verify", "-w", str(self.read_ws())), runs=once, warmup=0 if once else None)

    def make_owed(self) -> Subject:
        ws = self.dir / "owed"
        if not (ws / ".qem").exists():
            fresh_workspace(ws, self.memory)
            call([sys.executable, "-c", OWED_SETUP, str(ws / ".qem"), str(OWED_REQUESTS)], what="requests (prepare)",
                 cwd=self.dir)
        return Subject("owed", f"qem owed ({OWED_REQUESTS} requests among them, half answered)", "startup",
                       self.qem("owed", "-w", str(ws)))

    def make_dump(self) -> Subject:
        return Subject("dump", "qem dump FILE (the whole log)", "startup",
                       self.qem("dump", str(self.dir / "dump.jsonl"), "-w", str(self.read_ws())))

    def make_load(self) -> Subject:
        dumped = self.dir / "load-input.jsonl"
        call(self.qem("dump", str(dumped), "-w", str(self.read_ws())), what="qem dump (prepare)", cwd=self.dir)
        ws = self.dir / "load"

        def setup() -> None:
            shutil.rmtree(ws, ignore_errors=True)
            ws.mkdir()

        once = 1 if self.size >= SLOW_FROM else None
        return Subject("load", "qem load (the whole log, into an empty memory)", "startup",
                       self.qem("load", str(dumped), "-w", str(ws)), setup=setup, runs=once,
                       warmup=0 if once else None)

    # the memory in git
    def make_repo(self, name: str, *, mirror: bool) -> Path:
        """A git repository holding the memory (packed by `qem pack`) and, if `mirror`,
        the MEMORY.md exported from it, all committed; its index is built."""
        repo = fresh_workspace(self.dir / name, self.memory)
        git(self.tools, repo, "init", "-q")
        call(self.qem("pack", "-w", str(repo)), what="qem pack (prepare)", cwd=self.dir)
        if mirror:
            call(self.qem("export", "-w", str(repo)), what="qem export (prepare)", cwd=self.dir)
        commit_all(self.tools, repo, "the memory" + (" and MEMORY.md" if mirror else ""))
        return repo

    def src(self) -> Path:
        """The repository a fresh clone is cloned from (made once per size); the files
        count is taken here, after `qem pack`."""
        if self._src is None:
            self._src = self.make_repo("src", mirror=True)
            FILES[self.size] = count_files(self._src, self.tools)
        return self._src

    def count(self) -> dict[str, int]:
        self.src()
        return FILES[self.size]

    def make_add(self, mirror: bool = True, scanned: bool = False) -> Subject:
        """`qem add` of one note; `scanned`: a text the secret guard's pre-check passes to the
        detector (it imports detect-secrets and scans; the text holds no secret)."""
        key = "add-scanned" if scanned else "add" if mirror else "add-nomirror"
        repo = self.make_repo(key, mirror=mirror)
        words = "the session token is a JWT (its header starts eyJ), kept in the vault" if scanned else "added by the benchmark"
        path = repo / "MEMORY.md"
        runs = [0]
        before: list[int] = []

        def setup() -> list[str]:
            runs[0] += 1
            if mirror:
                before[:] = [path.stat().st_mtime_ns]
            return self.qem("add", f"bench: note {runs[0]} {words}", "--kind", "task", "-w", str(repo))

        def verify() -> None:
            if not self.out.read_text().strip():
                raise BenchError(f"qem add exited 0 but printed no id; see {self.err}")
            if mirror and path.stat().st_mtime_ns == before[0]:
                raise BenchError(f"qem add did not re-render {path} (auto-export); see {self.err}")
            if not mirror and path.exists():
                raise BenchError(f"qem add wrote {path} in a repository that had none")

        def after() -> None:  # the patched mirror is the whole rendering
            if mirror:
                call(self.qem("export", "--check", "-w", str(repo)), what="qem export --check after the adds", cwd=self.dir)

        if scanned:
            label = "qem add (no MEMORY.md), a text the secret detector scans"
        elif mirror:
            label = "qem add (MEMORY.md committed: auto-export)"
        else:
            label = "qem add (no MEMORY.md: no export)"
        return Subject(key, label, "startup", setup=setup, verify=verify, after=after)

    def make_add_nomirror(self) -> Subject:
        return self.make_add(mirror=False)

    def make_add_scanned(self) -> Subject:
        return self.make_add(mirror=False, scanned=True)

    def make_stage_mirror(self) -> Subject:
        """What git alone costs to stage a MEMORY.md of this size, as every write that keeps
        the mirror current stages it (`git hash-object -w`: hash and compress it into git's
        objects): part of `qem add` with MEMORY.md committed, no part of qem."""
        repo = self.make_repo("stage-mirror", mirror=True)
        runs = [0]

        def setup() -> None:  # a new object each run, as each write makes one
            runs[0] += 1
            with open(repo / "MEMORY.md", "ab") as handle:
                handle.write(f"- bench line {runs[0]}\n".encode())

        return Subject("stage-mirror", "git hash-object -w MEMORY.md (git staging the mirror: part of an add)",
                       "startup", [self.tools.git, "-C", str(repo), "hash-object", "-w", "MEMORY.md"], env=GIT_ENV,
                       setup=setup)

    def make_fresh_clone(self, total: bool = False) -> Subject:
        src = self.src()
        floor_dst, dst = self.dir / "clone-floor", self.dir / "clone"
        clone_argv = [self.tools.git, "clone", "--no-local", "-q", str(src)]
        check = self.qem("export", "--check", "-w", str(dst))

        def setup() -> None:
            shutil.rmtree(floor_dst, ignore_errors=True)
            shutil.rmtree(dst, ignore_errors=True)
            if not total:
                clone(self.tools, src, dst)

        def verify() -> None:
            if not (dst / ".qem" / "index.db").is_file():
                raise BenchError(f"qem export --check in a fresh clone built no index at {dst / '.qem'}")

        if total:
            argv = [self.tools.sh, "-c", shlex.join(clone_argv + [str(dst)]) + " && exec " + shlex.join(check)]
            key, label = "fresh-clone-total", "git clone --no-local + qem export --check"
        else:
            argv = check
            key, label = "fresh-clone", "qem export --check, first command in a fresh clone"
        return Subject(key, label, "clone", argv, env=GIT_ENV, setup=setup, verify=verify,
                       floor_argv=clone_argv + [str(floor_dst)])

    def make_fresh_clone_total(self) -> Subject:
        return self.make_fresh_clone(total=True)

    def make_git_status(self) -> Subject:
        src = self.src()
        repo = clone(self.tools, src, self.dir / "status")
        call(self.qem("export", "--check", "-w", str(repo)), what="qem export --check (builds the index)", cwd=self.dir)
        if not (repo / ".qem" / "index.db").is_file():
            raise BenchError(f"qem export --check built no index in {repo}")
        bare = clone(self.tools, src, self.dir / "status-floor")
        git(self.tools, bare, "rm", "-r", "-q", "--", ".qem", "MEMORY.md")
        git(self.tools, bare, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", "no memory")
        for where in (repo, bare):
            git(self.tools, where, "status")  # let git refresh its index's file times once
        return Subject("git-status", "git status (memory committed, its index built)", "status",
                       [self.tools.git, "-C", str(repo), "status"], env=GIT_ENV,
                       floor_argv=[self.tools.git, "-C", str(bare), "status"])

    def make_context(self) -> Subject:
        ws = self.read_ws()
        return Subject("context", "qem context (session start, 2,000-token budget)", "startup",
                       self.qem("context", "-w", str(ws)))

    def make_mcp_call(self) -> Subject:
        """An agent's MCP session: `qem mcp` spawned by the mcp client, the handshake and
        5 `add` calls, timed whole; each call's round trip is read from the client's output."""
        ws = fresh_workspace(self.dir / "mcp", self.memory)
        trips: list[float] = []
        subject = Subject("mcp-call", "MCP session: spawn, handshake, 5 add calls", "startup",
                          [self.tools.python, str(HERE / "mcp_client.py"), str(ws), "--calls", "5"])

        def verify() -> None:
            trips.extend(json.loads(self.out.read_text())[1:])  # the first call warms the server's imports

        def after() -> None:
            median = statistics.median(trips)
            subject.note = f"round trip of one add call in a running session: median {median * 1000:.1f} ms"
            print(f"  {subject.note}", flush=True)

        subject.verify, subject.after = verify, after
        return subject

    # the commit hooks and the agent hooks, against the bare interpreter
    def hook_repo(self) -> Path:
        """The repository the commit hooks judge (made once per size): the memory, its
        MEMORY.md and a code file committed, verified once as the commit that brought the
        memory would have been (the qem-verify hook), and a change to the code file staged:
        a commit that touches no memory."""
        if getattr(self, "_hook_repo", None) is None:
            repo = self.make_repo("hooks", mirror=True)
            (repo / "code.py").write_text("a = 1\n")
            commit_all(self.tools, repo, "code")
            call(self.qem("verify", "--staged", "-w", str(repo)), what="qem verify --staged (the memory's commit)",
                 cwd=repo)
            (repo / "code.py").write_text("a = 2\n")
            git(self.tools, repo, "add", "code.py")
            self._hook_repo = repo
        return self._hook_repo

    def commit_hook(self, key: str, name: str, *args: str) -> Subject:
        repo = self.hook_repo()
        return Subject(key, f"{name} (a commit touching no memory)", "bare", self.qem(*args, "-w", str(repo)), env=GIT_ENV)

    def make_verify_staged(self) -> Subject:
        return self.commit_hook("verify-staged", "qem verify --staged", "verify", "--staged")

    def make_export_check_staged(self) -> Subject:
        return self.commit_hook("export-check-staged", "qem export --check --staged", "export", "--check", "--staged")

    def make_anchors_check_staged(self) -> Subject:
        return self.commit_hook("anchors-check-staged", "qem anchors check --staged", "anchors", "check", "--staged")

    def agent_hook(self, key: str, name: str, event: str, given: Callable[[int], dict], quiet: bool) -> Subject:
        """`qem hook claude EVENT` with the harness's input on stdin (`given(run)`, each run
        its own); `quiet`: the reply must be empty (nothing due)."""
        repo = self.hook_repo()
        stdin = self.dir / f"{key}-input.json"
        runs = [0]

        def setup() -> None:
            runs[0] += 1
            stdin.write_text(json.dumps({"cwd": str(repo), "hook_event_name": event, **given(runs[0])}))

        def verify() -> None:
            said = self.out.read_text().strip()
            if quiet and said:
                raise BenchError(f"{name} gave context where nothing is due: {said[:200]}")
            if not quiet and "additionalContext" not in said:
                raise BenchError(f"{name} gave no context; see {self.err}")

        return Subject(key, name, "bare", self.qem("hook", "claude", event), stdin=stdin, setup=setup, verify=verify)

    def make_hook_edit(self) -> Subject:
        path = str(self.hook_repo() / "nothing-declares" / "this.py")
        return self.agent_hook("hook-edit", "qem hook claude PreToolUse (an Edit, nothing due)", "PreToolUse",
                               lambda run: {"session_id": "bench-edit", "tool_name": "Edit",
                                            "tool_input": {"file_path": path, "old_string": "a", "new_string": "b"}},
                               quiet=True)

    def make_hook_start(self) -> Subject:
        return self.agent_hook("hook-start", "qem hook claude SessionStart (a new session)", "SessionStart",
                               lambda run: {"session_id": f"bench-start-{run}", "source": "startup"}, quiet=False)

    # measuring
    def measure(self, subject: Subject, runs: int, warmup: int) -> Result:
        floor_argv, floor_ok = self.floor_argv(subject)
        env = self.env | subject.env
        samples: list[Sample] = []
        floor_samples: list[Sample] = []
        runs = subject.runs or runs
        warmup = warmup if subject.warmup is None else subject.warmup
        for i in range(warmup + runs):
            LOADS.append(os.getloadavg()[0])
            argv = subject.argv
            if subject.setup is not None:
                argv = subject.setup() or argv
            f, _ = timed(floor_argv, what=f"floor {subject.floor} for {subject.name} at {self.size:,}",
                         cwd=self.dir, env=env, stdout=self.dir / "floor-stdout.txt",
                         stderr=self.dir / "floor-stderr.txt", ok=floor_ok)
            s, _ = timed(argv, what=f"{subject.name} at {self.size:,} notes", cwd=self.dir, env=env,
                         stdout=self.out, stderr=self.err, ok=subject.ok, stdin=subject.stdin)
            if subject.verify is not None:
                subject.verify()
            if i >= warmup:
                samples.append(s)
                floor_samples.append(f)
        if subject.after is not None:
            subject.after()
        return Result(self.size, subject.key, subject.name, subject.floor, samples, floor_samples, subject.note)


# -- reporting ----------------------------------------------------------------------------


def fmt_s(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.2f} s"


def fmt_range(r: Result) -> str:
    walls = [s.wall for s in r.samples]
    lo, hi = min(walls), max(walls)
    if hi < 1:
        return f"{lo * 1000:.0f}–{hi * 1000:.0f} ms"
    return f"{lo:.2f}–{hi:.2f} s"


def machine() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 0
    info["nproc"] = str(cpus)
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info["cpu"] = model
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))  # type: ignore[union-attr]
        info["ram"] = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, AttributeError):
        info["ram"] = "unknown"
    info["os"] = f"{platform.system()} {platform.release()}"
    info["python"] = f"{platform.python_version()} ({sys.executable})"
    info["sqlite"] = f"{sqlite3.sqlite_version} (Python's sqlite3 module, what qem uses)"
    cli = subprocess.run([shutil.which("sqlite3") or "sqlite3", "--version"], capture_output=True, text=True)
    info["sqlite3 shell"] = cli.stdout.split()[0] if cli.stdout else "unknown"
    git = subprocess.run(["git", "--version"], capture_output=True, text=True)
    info["git"] = git.stdout.strip().removeprefix("git version ")
    return info


def code_fingerprint() -> str:
    """A digest of the code being measured, to notice it changing during a run."""
    digest = hashlib.sha256()
    for top in ("qem_edit", "renderer", "reconciler"):
        for path in sorted((REPO / top).rglob("*.py")):
            digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def code_state() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "qem_edit", "renderer", "reconciler"],
                           cwd=REPO, capture_output=True, text=True).stdout.split("\n")
    changed = sorted(line[3:] for line in dirty if line.strip())
    return f"{head or 'unknown'}" + (f" plus uncommitted changes to {', '.join(changed)}" if changed else " (clean)")


@dataclass
class Target:
    text: str
    status: str  # met | missed | not measured
    figure: str


def find(results: list[Result], size: int, key: str) -> Result | None:
    for r in results:
        if r.size == size and r.key == key:
            return r
    return None


def targets(results: list[Result], files: dict[int, dict[str, int]] | None = None) -> list[Target]:
    out: list[Target] = []

    def judge(text: str, r: Result | None, value: Callable[[Result], float], limit: float,
              show: Callable[[float], str], strict: bool = False) -> None:
        if r is None:
            out.append(Target(text, "not measured", "—"))
            return
        v = value(r)
        good = v < limit if strict else v <= limit
        out.append(Target(text, "met" if good else "missed", show(v)))

    ratio = lambda v: f"×{v:.2f}"  # noqa: E731
    judge("`qem export --check` (clean) on 749 notes ≤ 2.0× the start-up floor",
          find(results, 749, "check"), lambda r: r.ratio, 2.0, ratio)
    judge("`qem export` (absent → written) of 74,900 notes ≤ 3× the render floor",
          find(results, 74_900, "export"), lambda r: r.ratio, 3.0, ratio)
    big, small = find(results, 749_000, "export"), find(results, 74_900, "export")
    if big is None or small is None:
        out.append(Target("`qem export` of 749,000 notes: growth ≤ 11× from 74,900", "not measured", "—"))
    else:
        g = big.median / small.median
        out.append(Target("`qem export` of 749,000 notes: growth ≤ 11× from 74,900",
                          "met" if g <= 11 else "missed", f"×{g:.1f}"))
    for key, what in (("checkin-concurrent", "10 edits, 10 concurrent writes"), ("checkin", "10 edits")):
        judge(f"`qem checkin` ({what}) at 7,490 notes ≤ 10× the merge floor",
              find(results, 7_490, key), lambda r: r.ratio, 10.0, ratio)
    for key, what in (("checkin-concurrent", "10 edits, 10 concurrent writes"), ("checkin", "10 edits")):
        judge(f"`qem checkin` ({what}) at 74,900 notes < 0.84 s (a peer's in-process planning alone)",
              find(results, 74_900, key), lambda r: r.median, 0.84, fmt_s, strict=True)
    judge("`qem export` (absent → written) of 74,900 notes < 0.34 s (a peer's in-process render)",
          find(results, 74_900, "export"), lambda r: r.median, 0.34, fmt_s, strict=True)
    for key, what in (("checkin-concurrent", "10 edits, 10 concurrent writes"), ("checkin", "10 edits")):
        judge(f"peak RSS of `qem checkin` ({what}) at 74,900 notes ≤ 250 MB",
              find(results, 74_900, key), lambda r: r.rss_mb, 250.0, lambda v: f"{v:.0f} MB")
    # the memory in git: at every size measured (74,900 when none is)
    for key, text, limit in (
        ("add", "`qem add` (MEMORY.md committed: auto-export) at {} notes ≤ 1.5× the start-up floor", 1.5),
        ("add-nomirror", "`qem add` with the secret guard (no MEMORY.md) at {} notes ≤ 1.5× the start-up floor", 1.5),
        ("add-scanned", "`qem add` of a text the secret detector scans (no MEMORY.md) at {} notes"
                        " ≤ 1.5× the start-up floor", 1.5),
        ("fresh-clone", "`qem export --check` in a fresh clone (builds the index) at {} notes"
                        " ≤ 2× `git clone --no-local`", 2.0),
        ("git-status", "`git status` with the memory committed at {} notes ≤ 2× without it", 2.0),
    ):
        sizes = sorted({r.size for r in results if r.key == key}) or [74_900]
        for size in sizes:
            judge(text.format(f"{size:,}"), find(results, size, key), lambda r: r.ratio, limit, ratio)
    scale_targets(results, judge, out)
    counted = (files or {}).get(74_900)
    text = "files under `.qem/` (events/, texts/, packs/) after `qem pack` at 74,900 notes ≤ 1,000"
    if counted is None:
        out.append(Target(text, "not measured", "—"))
    else:
        out.append(Target(text, "met" if counted["log"] <= 1000 else "missed", f"{counted['log']:,}"))
    return out


WAYS_IN = (("checkin-path", "`qem checkin --path FILE` of a `qem checkout --path FILE`"),
           ("checkin-mirror", "`qem checkin --path MEMORY.md` (hand-edited)"),
           ("checkin-moved", f"`qem checkin` after {MOVED_WRITES} writes since the checkout"))


def scale_targets(results: list[Result], judge, out: list[Target]) -> None:  # type: ignore[no-untyped-def]
    """Cost follows the work: a query's edit at any size, the whole store in bounded memory."""
    ratio = lambda v: f"×{v:.2f}"  # noqa: E731
    growth = (("edit-query", 749_000, 749, "`qem edit` of a 100-note query at 749,000 notes ≤ 2× the same at 749"),
              ("checkin", 749_000, 74_900, "`qem checkin` (10 edits, whole store) at 749,000 notes ≤ 2× the same at 74,900"),
              *((key, 749_000, 74_900, f"{what} at 749,000 notes ≤ 2× the same at 74,900") for key, what in WAYS_IN))
    for key, big, small, text in growth:
        b, s = find(results, big, key), find(results, small, key)
        if b is None or s is None:
            out.append(Target(text, "not measured", "—"))
        else:
            g = b.median / s.median
            out.append(Target(text, "met" if g <= 2 else "missed", f"×{g:.2f}"))
    judge("`qem export` (absent → written) of 749,000 notes ≤ 3× the render floor",
          find(results, 749_000, "export"), lambda r: r.ratio, 3.0, ratio)
    judge("`qem export --check` (clean) on 74,900 notes ≤ 2× the start-up floor",
          find(results, 74_900, "check"), lambda r: r.ratio, 2.0, ratio)
    judge("`qem export --check` (clean) on 749 notes ≤ 1.5× the start-up floor",
          find(results, 749, "check"), lambda r: r.ratio, 1.5, ratio)
    judge("`qem owed` on 74,900 notes ≤ 1.5× the start-up floor",
          find(results, 74_900, "owed"), lambda r: r.ratio, 1.5, ratio)
    for key, what in WAYS_IN:  # every way in costs what the kept edit's check-in costs
        for size in (74_900, 749_000):
            b, s = find(results, size, key), find(results, size, "checkin")
            text = f"{what} at {size:,} notes ≤ 1.5× the kept edit's check-in (`qem checkin`, 10 edits)"
            if b is None or s is None:
                out.append(Target(text, "not measured", "—"))
            else:
                out.append(Target(text, "met" if b.median <= 1.5 * s.median else "missed", f"×{b.median / s.median:.2f}"))
    for key in ("export", "check", "check-stale", "checkin", "edit", "checkout-path", "checkin-path", "checkin-mirror",
                "checkin-moved", "verify", "dump", "load"):
        r = find(results, 749_000, key)
        judge(f"peak RSS of {r.name if r else key} at 749,000 notes ≤ 250 MB", r, lambda r: r.rss_mb, 250.0,
              lambda v: f"{v:.0f} MB")


def render_markdown(results: list[Result], info: dict, meta: dict) -> str:
    lines: list[str] = []
    add = lines.append
    built = meta["built_s"]
    extra = ""
    if built:
        which = ", ".join(f"{int(k):,}" for k in sorted(built, key=int))
        extra = (f" ({sum(built.values()):.0f} s of it building the {which}-note"
                 f" memor{'ies' if len(built) > 1 else 'y'}, cached since)")
    add(f"Generated {meta['finished']} in {meta['wall_s'] / 60:.1f} min of wall time{extra} by:")
    add("")
    add("```sh")
    add(meta["command"])
    add("```")
    add("")
    add(f"{meta['runs']} timed runs per subject after {meta['warmup']} warm-up run(s)"
        + (f" ({meta['export_runs']} at the export-only sizes)" if meta["export_only"] else "")
        + "; each run is a whole process, timed from spawn to exit, right after a run of its floor."
        " Median, min–max over the timed runs; ratio = subject median / floor median;"
        " max RSS = the largest over the timed runs (1 MB = 10^6 bytes).")
    add("")
    add("## Machine")
    add("")
    for k in ("nproc", "cpu", "ram", "os", "python", "sqlite", "sqlite3 shell", "git"):
        add(f"- {k}: {info[k]}")
    add(f"- load average (1 min) at start / end / highest seen: {meta['load_start']:.2f} /"
        f" {meta['load_end']:.2f} / {meta['load_max']:.2f}")
    add(f"- qem code: {meta['code']}; fingerprint {meta['fingerprint_start']}"
        + ("" if meta["fingerprint_start"] == meta["fingerprint_end"] else
           f" at the start, {meta['fingerprint_end']} at the end: **the code changed during the run,"
           " so these figures mix versions**"))
    add("")
    add("## Results")
    add("")
    add("| notes | command | median | min–max | floor | floor median | ratio | max RSS |")
    add("| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: |")
    for r in results:
        mark = " †" if r.note == CHANGED_NOTE else ""
        add(f"| {r.size:,} | {r.name}{mark} | {fmt_s(r.median)} | {fmt_range(r)} | {FLOOR_NAMES[r.floor]} |"
            f" {fmt_s(r.floor_median)} | ×{r.ratio:.2f} | {r.rss_mb:.0f} MB |")
    add("")
    if any(r.note == CHANGED_NOTE for r in results):
        add(f"† {CHANGED_NOTE}: its runs may mix versions.")
        add("")
    add("Floors: start-up = `python -c \"import typer\"` (the interpreter qem runs on);"
        " render = `sqlite3 -batch .qem/index.db \".output FILE\" \"" + RENDER_SQL + "\"`;"
        " merge = `git merge-file -p EDITED BASE NOW` on that check-in's three renderings"
        " (with no concurrent writes NOW is the base); clone = `git clone --no-local SRC DST` of the"
        " repository holding the memory (packed by `qem pack`) and its MEMORY.md, one commit; git status ="
        " `git status` in a clone of it with `.qem/` and MEMORY.md removed and the removal committed.")
    add("")
    add("The git subjects: `qem add` runs in a repository holding the memory, packed, with (auto-export"
        " patches it) or without MEMORY.md committed; `qem export --check` in a fresh clone, made untimed"
        " just before, builds the index from nothing (`git clone` + `qem export --check` times both"
        " together, in one `sh -c`); `git status` runs in a clone whose index a qem command built;"
        " `git hash-object -w MEMORY.md` is what git alone costs to stage a mirror of that size, as a write"
        " that keeps it current does.")
    add("")
    add("The ways in (each run on a fresh copy of the memory, the same 10 edits): `qem checkout --path FILE`"
        " writes the whole store's checkout to a file of its own; `qem checkin --path FILE` checks in such a"
        " file (and makes it the rendering now again, with its base); `qem checkin --path MEMORY.md` checks in"
        " a hand-edited mirror (and renders it again); the moved store is a kept checkout checked in after"
        f" {MOVED_WRITES} writes by another process (the 10 concurrent writes and 90 new notes). The merge"
        " floor of each is `git merge-file` on its edit, its base and the memory now.")
    add("")
    files = meta.get("files") or {}
    if files:
        add("## Files")
        add("")
        add("Files in the memory's log folders (`.qem/events/`, `texts/`, `packs/`) after `qem pack`, and"
            " every file git tracks under `.qem/` (the log, config.toml, .gitignore, .gitattributes); counted,"
            " not timed.")
        add("")
        add("| notes | events/ | texts/ | packs/ | log files | tracked under .qem/ | log size |")
        add("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for size in sorted(files, key=int):
            c = files[size]
            add(f"| {int(size):,} | {c['events']:,} | {c['texts']:,} | {c['packs']:,} | {c['log']:,} |"
                f" {c['tracked']:,} | {c['log_bytes'] / 1e6:.1f} MB |")
        add("")
    sizes = sorted({r.size for r in results})
    if len(sizes) > 1:
        add("## Growth")
        add("")
        add("Median at the larger size / median at the smaller (the note count grows 10× each step,"
            " so linear is ×10).")
        add("")
        steps = list(zip(sizes, sizes[1:]))
        add("| command | " + " | ".join(f"{a:,} → {b:,}" for a, b in steps) + " |")
        add("| --- |" + " ---: |" * len(steps))
        for key in SUBJECT_KEYS:
            row = []
            name = None
            for a, b in steps:
                ra, rb = find(results, a, key), find(results, b, key)
                if ra and rb:
                    name = ra.name
                    row.append(f"×{rb.median / ra.median:.1f}")
                else:
                    row.append("—")
            if name:
                add(f"| {name} | " + " | ".join(row) + " |")
        add("")
    add("## Targets")
    add("")
    add("| target | measured | status |")
    add("| --- | ---: | --- |")
    for t in targets(results, {int(k): v for k, v in files.items()}):
        mark = {"met": "**met**", "missed": "**missed**"}.get(t.status, t.status)
        add(f"| {t.text} | {t.figure} | {mark} |")
    add("")
    return "\n".join(lines)


def write_report(path: Path, body: str) -> None:
    intro = DEFAULT_INTRO
    source = path if path.exists() else REPO / "docs" / "PERFORMANCE.md"
    if source.exists():
        text = source.read_text()
        if MARKER in text:
            intro = text.split(MARKER, 1)[0].rstrip("\n") + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(intro + "\n" + MARKER + "\n\n" + body)


# -- main ---------------------------------------------------------------------------------


def parse_sizes(text: str) -> list[int]:
    sizes = []
    for part in text.replace("_", "").split(","):
        part = part.strip().lstrip("+")
        if part:
            sizes.append(int(part))
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=None, help="note counts to run every subject at (default 749,7490,74900)")
    parser.add_argument("--export-sizes", default="", help="extra note counts for the export subjects only,"
                        " e.g. 749000 (or +749000); building 749,000 takes minutes and a few GB once")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per subject (default 5; 3 with --quick)")
    parser.add_argument("--export-runs", type=int, default=3, help="timed runs at the export-only sizes (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed warm-up runs per subject (default 1)")
    parser.add_argument("--only", default="", help="comma-separated subjects: " + ",".join(ALL_KEYS))
    parser.add_argument("--seed", type=int, default=749, help="generator seed (default 749)")
    parser.add_argument("--quick", action="store_true", help="smoke check: 749 and 7,490 notes, 3 runs,"
                        " report to bench/out/PERFORMANCE-quick.md")
    parser.add_argument("--output", type=Path, default=None, help="the report (default docs/PERFORMANCE.md)")
    parser.add_argument("--installed", action="store_true", help="time qem installed from its wheel (a venv of its"
                        " own under bench/out/installed/), not the editable install of this checkout")
    args = parser.parse_args(argv)

    sizes = parse_sizes(args.sizes) if args.sizes else list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    export_sizes = [s for s in parse_sizes(args.export_sizes) if s not in sizes]
    runs = args.runs or (3 if args.quick else 5)
    output = args.output or (OUT / "PERFORMANCE-quick.md" if args.quick else REPO / "docs" / "PERFORMANCE.md")
    keys = tuple(k.strip() for k in args.only.split(",") if k.strip()) or ALL_KEYS
    unknown = [k for k in keys if k not in ALL_KEYS]
    if unknown:
        parser.error(f"unknown subject(s) {unknown}; choose from {','.join(ALL_KEYS)}")
    if runs < 1 or args.export_runs < 1 or args.warmup < 0:
        parser.error("--runs and --export-runs must be at least 1, --warmup at least 0")

    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    fingerprint = code_fingerprint()
    command = shlex.join([sys.executable, os.path.relpath(Path(__file__).resolve(), Path.cwd())] + sys.argv[1:]
                         if argv is None else [sys.executable, "bench/run.py"] + argv)
    results: list[Result] = []
    try:
        tools = Tools(args.installed)
        plan = [(s, keys, runs) for s in sorted(sizes)]
        plan += [(s, tuple(k for k in keys if k in SCALE_KEYS), args.export_runs) for s in sorted(export_sizes)]
        for size, size_keys, size_runs in plan:
            if not size_keys:
                continue
            memory = build_memory(tools, size, args.seed)
            bench = SizeBench(tools, size, memory)
            print(f"== {size:,} notes ({tree_bytes(memory) / 1e6:.0f} MB memory, index included):"
                  f" {size_runs} runs after {args.warmup} warm-up", flush=True)
            if "files" in size_keys:
                c = bench.count()
                print(f"  files after qem pack: {c['events']} in events/, {c['texts']} in texts/,"
                      f" {c['packs']} in packs/ ({c['log_bytes'] / 1e6:.1f} MB); {c['tracked']} tracked"
                      " under .qem/", flush=True)
            for subject in bench.subjects(size_keys):
                before = code_fingerprint()
                r = bench.measure(subject, size_runs, args.warmup)
                if code_fingerprint() != before:
                    r.note = CHANGED_NOTE
                    print(f"  warning: qem's code changed while {r.name} was measured", file=sys.stderr, flush=True)
                results.append(r)
                print(f"  {r.name}: {fmt_s(r.median)} ({fmt_range(r)}), floor {FLOOR_NAMES[r.floor]}"
                      f" {fmt_s(r.floor_median)}, ×{r.ratio:.2f}, max RSS {r.rss_mb:.0f} MB", flush=True)
            shutil.rmtree(bench.dir, ignore_errors=True)
    except BenchError as exc:
        print(f"\nbench: ABORTED: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nbench: interrupted", file=sys.stderr)
        return 130

    wall = time.perf_counter() - started
    meta = {
        "command": command,
        "runs": runs,
        "export_runs": args.export_runs,
        "export_only": bool(export_sizes),
        "warmup": args.warmup,
        "wall_s": wall,
        "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
        "code": code_state(),
        "fingerprint_start": fingerprint,
        "fingerprint_end": code_fingerprint(),
        "load_max": max(LOADS, default=load_start),
        "built_s": {str(k): v for k, v in BUILT.items()},
        "files": {str(k): v for k, v in FILES.items()},
    }
    info = machine()
    write_report(output, render_markdown(results, info, meta))
    raw = OUT / "results"
    raw.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    (raw / f"{stamp}.json").write_text(json.dumps(
        {"meta": meta, "machine": info, "results": [r.to_json() for r in results]}, indent=1))
    print(f"\nwrote {os.path.relpath(output, Path.cwd())} and bench/out/results/{stamp}.json"
          f" in {wall / 60:.1f} min", flush=True)
    for t in targets(results, FILES):
        print(f"  [{t.status}] {t.text}: {t.figure}")
    if meta["fingerprint_start"] != meta["fingerprint_end"]:
        print("bench: warning: qem's code changed during the run; the figures mix versions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
