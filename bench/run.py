"""qem's benchmark harness: whole-process timings against floors measured in the same run.

    python bench/run.py                          # 749, 7,490, 74,900 notes; 5 runs
    python bench/run.py --export-sizes 749000    # also export at 749,000 notes
    python bench/run.py --quick                  # 749 and 7,490, 3 runs: a smoke check

Run it with the interpreter qem is installed in (the `qem` script beside it is what gets
timed).  Every subject is a whole process (subprocess, wall clock by time.perf_counter,
max RSS from os.wait4), run after a warm-up, several times, each run right after a run
of its floor (floor, subject, floor, subject, ...), so the ratio compares like with like
on a noisy machine:

    start-up floor  python -c "import typer"            (same interpreter as qem)
    render floor    the sqlite3 shell writing the same fields of the same rows, in the
                    same order, to a file
    merge floor     git merge-file -p on the check-in's three renderings (the edit, its
                    base, the store now)

Stores are built once per size from fixtures/generate.py (JSONL, then `qem load`) and
cached under bench/out/stores/, keyed by size, seed and a digest of the generator and the
store schema.  Each check-in run gets a fresh copy of the store; copying, checking out and
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
    "SELECT id, kind, priority, provenance, created_at, state, state_at, state_reason,"
    " supersedes, superseded_by, text FROM notes ORDER BY kind_rank, id"
)
SCRUB_ENV = ("QEM_STORE", "QEM_WORKSPACE", "QEM_EDITOR", "QEM_FAULT", "QEM_NOW", "VISUAL", "EDITOR")

FLOOR_NAMES = {
    "startup": "start-up",
    "render": "render (sqlite3)",
    "merge": "merge (git merge-file)",
}


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


def timed(argv: list[str], *, what: str, cwd: Path, env: dict[str, str], stdout: Path, stderr: Path,
          ok: Callable[[int], bool] = lambda rc: rc == 0) -> tuple[Sample, int]:
    """Run one process; its wall time (spawn to reap) and max RSS, from os.wait4."""
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        t1 = time.perf_counter()
    proc.returncode = rc = os.waitstatus_to_exitcode(status)
    if not ok(rc):
        fail(what, argv, rc, stderr.read_bytes(), stdout.read_bytes())
    return Sample(t1 - t0, usage.ru_maxrss), rc


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


# -- stores -------------------------------------------------------------------------------


class Tools:
    def __init__(self) -> None:
        self.python = sys.executable
        script = Path(sys.executable).parent / "qem"
        self.qem = [str(script)] if script.exists() else [self.python, "-m", "qem_edit"]
        self.sqlite3 = shutil.which("sqlite3")
        self.git = shutil.which("git")
        if not self.sqlite3 or not self.git:
            raise BenchError("bench needs the `sqlite3` shell and `git` on PATH")
        where = call([self.python, "-c", "import qem_edit, typer; print(qem_edit.__file__)"], what="import qem_edit", cwd=REPO)
        if Path(where.strip()).resolve().parent.parent != REPO:
            raise BenchError(f"{self.python} imports qem_edit from {where.strip()}, not from {REPO};"
                             " install this checkout (pip install -e .) or run with its venv's python")
        # Measure qem as installed: pip compiles an installed package's bytecode, and the
        # floor (`import typer`) runs on compiled bytecode too.  This checkout is installed
        # editable, and where PYTHONDONTWRITEBYTECODE is set (it is on these machines)
        # nothing would ever compile it: every run would compile qem's source (~45 ms).
        call([self.python, "-m", "compileall", "-q", "qem_edit", "renderer", "reconciler"],
             what="compile qem's bytecode", cwd=REPO)


def store_key(size: int, seed: int) -> str:
    digest = hashlib.sha256((REPO / "fixtures" / "generate.py").read_bytes())
    store_py = (REPO / "qem_edit" / "store.py").read_text()
    schema = re.search(r'_SCHEMA = """(.*?)"""', store_py, re.S)
    version = re.search(r"^SCHEMA_VERSION = .*$", store_py, re.M)
    digest.update((schema.group(1) if schema else store_py).encode())
    digest.update((version.group(0) if version else "").encode())
    return f"n{size}-seed{seed}-{digest.hexdigest()[:10]}"


LOADS: list[float] = []  # the 1-minute load average, sampled before each run
BUILT: dict[int, float] = {}  # size -> seconds spent building it in this run


def build_store(tools: Tools, size: int, seed: int) -> Path:
    """The cached store for `size` notes, built (generate, load, checkpoint) if missing."""
    stores = OUT / "stores"
    stores.mkdir(parents=True, exist_ok=True)
    key = store_key(size, seed)
    db = stores / f"{key}.db"
    if db.exists():
        refresh_items(tools, db)
        return db
    for old in stores.glob(f"n{size}-seed{seed}-*.db*"):
        old.unlink()  # built from another generator or schema (and its -wal/-shm)
    work = stores / f"{key}.building"
    shutil.rmtree(work, ignore_errors=True)
    (work / "ws").mkdir(parents=True)
    jsonl = work / "corpus.jsonl"
    env = base_env()
    env["QEM_NOW"] = "2026-12-01T00:00:00Z"
    print(f"building the {size:,}-note store (cached as bench/out/stores/{db.name}) ...", flush=True)
    t0 = time.perf_counter()
    call([tools.python, str(REPO / "fixtures" / "generate.py"), "--notes", str(size), "--seed", str(seed),
          "-o", str(jsonl)], what=f"generate {size} notes", cwd=work, env=env)
    t1 = time.perf_counter()
    call(tools.qem + ["load", str(jsonl), "-w", str(work / "ws")], what=f"qem load ({size} notes)", cwd=work, env=env)
    t2 = time.perf_counter()
    built = work / "ws" / ".qem" / "memory.db"
    call([tools.sqlite3, "-batch", str(built), "PRAGMA wal_checkpoint(TRUNCATE)"], what="checkpoint", cwd=work)
    for extra in ("-wal", "-shm"):
        side = Path(str(built) + extra)
        if side.exists() and side.stat().st_size:
            raise BenchError(f"{side} is not empty after the checkpoint")
    os.replace(built, db)
    shutil.rmtree(work)
    BUILT[size] = time.perf_counter() - t0
    print(f"  generated in {t1 - t0:.1f} s, loaded in {t2 - t1:.1f} s", flush=True)
    return db


def refresh_items(tools: Tools, db: Path) -> None:
    """A cached store's rendered items were made by the renderer of its day; a change to
    the renderer since makes qem fall back to a full render (correct, but not what is
    being measured), until a write re-renders them.  Make that write here, untimed."""
    script = (
        "import sys; from qem_edit.store import Store\n"
        "s = Store.open(sys.argv[1])\n"
        "if not s.items_fresh():\n"
        "    print('re-rendering the cached items of', sys.argv[1], flush=True)\n"
        "    s.write(lambda tx: None)\n"
    )
    out = call([tools.python, "-c", script, str(db)], what="refresh cached items", cwd=REPO)
    if out.strip():
        print(out.strip(), flush=True)
    call([tools.sqlite3, "-batch", str(db), "PRAGMA wal_checkpoint(TRUNCATE)"], what="checkpoint", cwd=REPO)


def fresh_workspace(ws: Path, db: Path) -> Path:
    shutil.rmtree(ws, ignore_errors=True)
    (ws / ".qem").mkdir(parents=True)
    shutil.copyfile(db, ws / ".qem" / "memory.db")
    return ws


# -- subjects -----------------------------------------------------------------------------


@dataclass
class Subject:
    key: str
    name: str
    floor: str  # startup | render | merge
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    ok: Callable[[int], bool] = lambda rc: rc == 0
    setup: Callable[[], list[str] | None] | None = None  # before each run, untimed; may give the argv
    verify: Callable[[], None] | None = None  # after each run, untimed
    merge: tuple[Path, Path, Path] | None = None  # (edited, base, store now) for the merge floor
    note: str = ""


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


SUBJECT_KEYS = ("export", "export-unchanged", "check", "check-stale", "checkin", "checkin-concurrent", "edit")
EXPORT_KEYS = SUBJECT_KEYS[:4]


class SizeBench:
    """Every subject at one store size."""

    def __init__(self, tools: Tools, size: int, db: Path) -> None:
        self.tools, self.size, self.db = tools, size, db
        self.dir = OUT / "scratch" / str(size)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.out, self.err = self.dir / "stdout.txt", self.dir / "stderr.txt"
        self.env = base_env()
        self.plan_path = self.dir / "plan.json"
        self.plan: dict | None = None

    def qem(self, *args: str) -> list[str]:
        return self.tools.qem + list(args)

    # the floors
    def floor_argv(self, subject: Subject) -> tuple[list[str], Callable[[int], bool]]:
        if subject.floor == "startup":
            return [self.tools.python, "-c", "import typer"], lambda rc: rc == 0
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
            made.append(getattr(self, "make_" + key.replace("-", "_"))())
        return made

    def read_ws(self) -> Path:
        ws = self.dir / "read"
        if not (ws / ".qem").exists():
            fresh_workspace(ws, self.db)
            call(self.qem("export", "-w", str(ws)), what="qem export (prepare)", cwd=self.dir)
        self.render_db = ws / ".qem" / "memory.db"
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
                raise BenchError(f"qem export rewrote {mirror} although the store did not change")

        return Subject("export-unchanged", "qem export (unchanged → no write)", "render",
                       self.qem("export", "-w", str(ws)), setup=setup, verify=verify)

    def make_check(self) -> Subject:
        ws = self.read_ws()
        return Subject("check", "qem export --check (clean)", "startup", self.qem("export", "--check", "-w", str(ws)))

    def make_check_stale(self) -> Subject:
        self.read_ws()
        ws = fresh_workspace(self.dir / "stale", self.db)
        call(self.qem("export", "-w", str(ws)), what="qem export (prepare)", cwd=self.dir)
        call(self.qem("add", "bench: one more write", "--kind", "task", "-w", str(ws)), what="qem add (prepare)", cwd=self.dir)
        return Subject("check-stale", "qem export --check (stale: one write since)", "startup",
                       self.qem("export", "--check", "-w", str(ws)), ok=lambda rc: rc == 1)

    def edit_plan(self) -> dict:
        if self.plan is None:
            self.plan = edits.choose(self.db)
            self.plan_path.write_text(json.dumps(self.plan))
        return self.plan

    def checkout_and_edit(self, ws: Path, concurrent: bool) -> Path:
        plan = self.edit_plan()
        fresh_workspace(ws, self.db)
        printed = call(self.qem("checkout", "-w", str(ws)), what="qem checkout", cwd=self.dir).strip().splitlines()
        path = Path(printed[-1])
        if not path.is_absolute():
            path = self.dir / path
        path.write_bytes(edits.apply(path.read_bytes().decode("utf-8"), plan).encode("utf-8"))
        if concurrent:
            call([self.tools.python, str(HERE / "writer.py"), str(ws / ".qem" / "memory.db"), str(self.plan_path)],
                 what="concurrent writes (bench/writer.py)", cwd=self.dir)
        return path

    def verify_checkin(self, ws: Path, concurrent: bool) -> Callable[[], None]:
        def verify() -> None:
            plan = self.edit_plan()
            conn = sqlite3.connect(f"file:{ws / '.qem' / 'memory.db'}?mode=ro", uri=True)
            try:
                state = dict(conn.execute("SELECT id, state FROM notes WHERE id IN (%s)" % ",".join(
                    str(i) for i in plan["change"] + plan["delete"] + [w[1] for w in plan["writes"]])))
                new = conn.execute("SELECT count(*) FROM notes WHERE provenance = 'human'"
                                   " AND text LIKE 'bench new note %'").fetchone()[0]
            finally:
                conn.close()
            want = {i: "superseded" for i in plan["change"]} | {i: "revoked" for i in plan["delete"]}
            if concurrent:
                after = {"revoke": "revoked", "flag-stale": "stale", "supersede": "superseded"}
                want |= {note_id: after[command] for command, note_id in plan["writes"]}
            wrong = {i: state.get(i) for i, s in want.items() if state.get(i) != s}
            if wrong or new != len(plan["new"]):
                raise BenchError(f"the check-in did not land as planned: states {wrong}, {new} new notes"
                                 f" (want {len(plan['new'])}); see {self.err}")
        return verify

    def merge_inputs(self, name: str, path: Path, ws: Path, concurrent: bool) -> tuple[Path, Path, Path]:
        where = self.dir / f"merge-{name}"
        where.mkdir(exist_ok=True)
        edited, base, now = where / "edited.md", where / "base.md", where / "now.md"
        shutil.copyfile(path, edited)
        shutil.copyfile(path.parent / "base.md", base)
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

    def make_edit(self) -> Subject:
        ws = self.dir / "edit"
        plan_ws = self.dir / "edit-probe"
        path = self.checkout_and_edit(plan_ws, False)
        merge = self.merge_inputs("edit", path, plan_ws, False)
        shutil.rmtree(plan_ws)

        def setup() -> None:
            fresh_workspace(ws, self.db)

        editor = f"{shlex.quote(self.tools.python)} {shlex.quote(str(HERE / 'editor.py'))}"
        return Subject("edit", "qem edit (scripted editor, 10 edits)", "merge",
                       self.qem("edit", "-m", "bench", "--yes", "-w", str(ws)),
                       env={"QEM_EDITOR": editor, "BENCH_EDIT_PLAN": str(self.plan_path)},
                       setup=setup, verify=self.verify_checkin(ws, False), merge=merge)

    # measuring
    def measure(self, subject: Subject, runs: int, warmup: int) -> Result:
        floor_argv, floor_ok = self.floor_argv(subject)
        env = self.env | subject.env
        samples: list[Sample] = []
        floor_samples: list[Sample] = []
        for i in range(warmup + runs):
            LOADS.append(os.getloadavg()[0])
            argv = subject.argv
            if subject.setup is not None:
                argv = subject.setup() or argv
            f, _ = timed(floor_argv, what=f"floor {subject.floor} for {subject.name} at {self.size:,}",
                         cwd=self.dir, env=self.env, stdout=self.dir / "floor-stdout.txt",
                         stderr=self.dir / "floor-stderr.txt", ok=floor_ok)
            s, _ = timed(argv, what=f"{subject.name} at {self.size:,} notes", cwd=self.dir, env=env,
                         stdout=self.out, stderr=self.err, ok=subject.ok)
            if subject.verify is not None:
                subject.verify()
            if i >= warmup:
                samples.append(s)
                floor_samples.append(f)
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


def targets(results: list[Result]) -> list[Target]:
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
    return out


def render_markdown(results: list[Result], info: dict, meta: dict) -> str:
    lines: list[str] = []
    add = lines.append
    built = meta["built_s"]
    extra = ""
    if built:
        which = ", ".join(f"{int(k):,}" for k in sorted(built, key=int))
        extra = (f" ({sum(built.values()):.0f} s of it building the {which}-note"
                 f" store{'s' if len(built) > 1 else ''}, cached since)")
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
        add(f"| {r.size:,} | {r.name} | {fmt_s(r.median)} | {fmt_range(r)} | {FLOOR_NAMES[r.floor]} |"
            f" {fmt_s(r.floor_median)} | ×{r.ratio:.2f} | {r.rss_mb:.0f} MB |")
    add("")
    add("Floors: start-up = `python -c \"import typer\"` (the interpreter qem runs on);"
        " render = `sqlite3 -batch STORE \".output FILE\" \"" + RENDER_SQL + "\"`;"
        " merge = `git merge-file -p EDITED BASE NOW` on that check-in's three renderings"
        " (with no concurrent writes NOW is the base).")
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
    for t in targets(results):
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
    parser.add_argument("--only", default="", help="comma-separated subjects: " + ",".join(SUBJECT_KEYS))
    parser.add_argument("--seed", type=int, default=749, help="generator seed (default 749)")
    parser.add_argument("--quick", action="store_true", help="smoke check: 749 and 7,490 notes, 3 runs,"
                        " report to bench/out/PERFORMANCE-quick.md")
    parser.add_argument("--output", type=Path, default=None, help="the report (default docs/PERFORMANCE.md)")
    args = parser.parse_args(argv)

    sizes = parse_sizes(args.sizes) if args.sizes else list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    export_sizes = [s for s in parse_sizes(args.export_sizes) if s not in sizes]
    runs = args.runs or (3 if args.quick else 5)
    output = args.output or (OUT / "PERFORMANCE-quick.md" if args.quick else REPO / "docs" / "PERFORMANCE.md")
    keys = tuple(k.strip() for k in args.only.split(",") if k.strip()) or SUBJECT_KEYS
    unknown = [k for k in keys if k not in SUBJECT_KEYS]
    if unknown:
        parser.error(f"unknown subject(s) {unknown}; choose from {','.join(SUBJECT_KEYS)}")
    if runs < 1 or args.export_runs < 1 or args.warmup < 0:
        parser.error("--runs and --export-runs must be at least 1, --warmup at least 0")

    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    fingerprint = code_fingerprint()
    command = shlex.join([sys.executable, os.path.relpath(Path(__file__).resolve(), Path.cwd())] + sys.argv[1:]
                         if argv is None else [sys.executable, "bench/run.py"] + argv)
    results: list[Result] = []
    try:
        tools = Tools()
        plan = [(s, keys, runs) for s in sorted(sizes)]
        plan += [(s, tuple(k for k in keys if k in EXPORT_KEYS), args.export_runs) for s in sorted(export_sizes)]
        for size, size_keys, size_runs in plan:
            if not size_keys:
                continue
            db = build_store(tools, size, args.seed)
            bench = SizeBench(tools, size, db)
            print(f"== {size:,} notes ({db.stat().st_size / 1e6:.0f} MB store): {size_runs} runs after"
                  f" {args.warmup} warm-up", flush=True)
            for subject in bench.subjects(size_keys):
                r = bench.measure(subject, size_runs, args.warmup)
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
    for t in targets(results):
        print(f"  [{t.status}] {t.text}: {t.figure}")
    if meta["fingerprint_start"] != meta["fingerprint_end"]:
        print("bench: warning: qem's code changed during the run; the figures mix versions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
