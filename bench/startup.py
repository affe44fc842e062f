"""Start-up cost of two or more installed copies of qem, interleaved, against `python -c pass`.

    python bench/startup.py before=/path/to/venv after=/path/to/other/venv   # 25 rounds
    python bench/startup.py --runs 40 a=VENV b=VENV c=VENV
    python bench/startup.py --notes 74900 a=VENV b=VENV     # fixtures/generate.py's memory of that size

Each NAME=VENV is a virtual environment with qem installed in it (a wheel, as a user
installs it: `python -m venv V && V/bin/pip install dist/qem_edit-*.whl`), so two commits
are compared by installing each into its own venv.  For every copy the bench loads the
749-note corpus (fixtures/corpus-749.jsonl; with `--notes N`, fixtures/generate.py's N notes,
seed 749) into a git repository, adds a gotcha anchored to a file of its own, exports and commits it
with a code file, seals it with `qem verify --staged`, then stages a change to the code
file: a commit touching no memory; and starts a Claude Code session in it (a SessionStart).
A second such repository takes `qem add`'s writes, so the first stays as committed.

A round runs, for every copy in turn, its interpreter's `python -c pass` (the floor) and
each subject once: `qem hook claude PreToolUse` on an Edit with nothing due, in the session
under way (the call an agent makes hundreds of times a session) and as a new session's
first hook (no ledger yet: answered from the digest, which begins the ledger, since the
call fires nothing; read in full before the digest said how many notes the memory holds),
and on an Edit of the file a gotcha is anchored to, as a new session's first hook (the
call held, the note its reason: read in full),
`qem hook claude UserPromptSubmit` naming nothing in that session, `qem hook claude SessionStart` (a new session
each time: answered from the reply the last new session was given, qem_edit.reads.starts;
and, with that reply removed first, read in full), `qem verify --staged`, `qem export --check
--staged`, `qem anchors check --staged`, and the hooks qem-export (`qem export --staged`)
and qem-anchors (`qem anchors check --staged --flag`), on the commit touching no memory:
answered from what each answered last, qem_edit.mirror.answered; and `verify --staged` with
that answer set aside first, in full from the seal of the last clean verify)
and `qem add` (MEMORY.md patched).  Copies and subjects alternate within a round,
so a machine that slows down slows all of them.  After one warm-up round, `--runs`
rounds are kept; it prints each subject's minimum and median wall time, its median CPU
time (user + system of the process and its children, `os.wait4`), and the medians
against the same copy's floor.  The minimum is the steadiest figure on a shared machine.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "QEM_ACTOR": "bench", "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
       "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid", "GIT_CONFIG_GLOBAL": "/dev/null"}
ENV.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user runs it: the installed package's bytecode is kept
FLOOR = "python -c pass"
UNDER_WAY = "bench-under-way"  # a session started when the repository is made


def timed(argv: list[str], cwd: Path, stdin: bytes | None) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the process and its children) and exit status of one run."""
    read, write = os.pipe()
    if stdin:
        os.write(write, stdin)  # (hook inputs are a few hundred bytes: within a pipe's buffer)
    os.close(write)
    start = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, cwd=cwd, env=ENV, stdin=read, stdout=null, stderr=null)
        os.close(read)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def repository(where: Path, qem: str, corpus: Path) -> Path:
    """The corpus loaded, exported, committed and sealed; a change to a code file staged."""
    where.mkdir(parents=True)

    def run(*argv: str) -> None:
        done = subprocess.run(argv, cwd=where, env=ENV, capture_output=True, text=True)
        if done.returncode != 0 and argv[1:3] != ("verify", "--staged"):
            raise SystemExit(f"{' '.join(argv)} in {where}: {done.stderr.strip()}")
    run("git", "init", "-q")
    run(qem, "load", str(corpus))
    (where / "other.py").write_text("b = 1\n")
    run(qem, "add", "other.py keeps b first: the parser reads it by position", "-k", "gotcha", "--anchor", "other.py")
    run(qem, "export")
    (where / "code.py").write_text("a = 1\n")
    run("git", "add", "-A")
    run("git", "commit", "-qm", "the memory", "--no-verify")
    run(qem, "verify", "--staged")  # the seal a commit's qem-verify hook leaves
    (where / "code.py").write_text("a = 2\n")
    run("git", "add", "code.py")
    started = json.dumps({"session_id": UNDER_WAY, "hook_event_name": "SessionStart", "cwd": str(where),
                          "source": "startup"}).encode()
    subprocess.run([qem, "hook", "claude", "SessionStart"], cwd=where, env=ENV, input=started, capture_output=True,
                   check=True)  # the session the calls "under way" are made in
    return where


def subjects(repo: Path, qem: str) -> dict[str, object]:
    edit = {"tool_name": "Edit", "tool_input": {"file_path": str(repo / "code.py"), "old_string": "a", "new_string": "b"}}
    held = {"tool_name": "Edit", "tool_input": {"file_path": str(repo / "other.py"), "old_string": "b", "new_string": "c"}}

    def hook(event: str, extra: dict, session: str) -> object:
        """A hook of `session` (a new session each round where it ends in `-`)."""
        return lambda n: ([qem, "hook", "claude", event],
                          json.dumps({"session_id": f"{session}{n}" if session.endswith("-") else session,
                                      "hook_event_name": event, "cwd": str(repo), **extra}).encode())
    return {
        "hook PreToolUse (an Edit, nothing due)": hook("PreToolUse", edit, UNDER_WAY),
        "hook PreToolUse (a session's first hook)": hook("PreToolUse", edit, "first-"),
        "hook PreToolUse (an Edit giving a note)": hook("PreToolUse", held, "gives-"),
        "hook UserPromptSubmit (nothing new)": hook("UserPromptSubmit", {"prompt": "Please go on."}, UNDER_WAY),
        "hook SessionStart (a new session)": hook("SessionStart", {"source": "startup"}, "start-"),
        "hook SessionStart (read in full)": hook("SessionStart", {"source": "startup"}, "full-"),
        "verify --staged (touching no memory)": lambda n: ([qem, "verify", "--staged"], None),
        "verify --staged (in full)": lambda n: ([qem, "verify", "--staged"], None),
        "export --check --staged": lambda n: ([qem, "export", "--check", "--staged"], None),
        "anchors check --staged": lambda n: ([qem, "anchors", "check", "--staged"], None),
        "export --staged (qem-export)": lambda n: ([qem, "export", "--staged"], None),
        "anchors check --staged --flag (qem-anchors)": lambda n: ([qem, "anchors", "check", "--staged", "--flag"], None),
        "add (MEMORY.md patched)": lambda n: ([qem, "add", f"timed note {n}", "-k", "finding"], None),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=25, help="rounds kept after one warm-up (default 25)")
    parser.add_argument("--notes", type=int, default=749,
                        help="notes in the memory (default 749: fixtures/corpus-749.jsonl; else fixtures/generate.py's)")
    parser.add_argument("copies", nargs="+", metavar="NAME=VENV")
    args = parser.parse_args()
    copies = dict(c.split("=", 1) for c in args.copies)
    root = Path(tempfile.mkdtemp(prefix="qem-startup-"))
    try:
        corpus = REPO / "fixtures" / "corpus-749.jsonl"
        if args.notes != 749:
            corpus = root / f"corpus-{args.notes}.jsonl"
            subprocess.run([sys.executable, str(REPO / "fixtures" / "generate.py"), "--notes", str(args.notes),
                            "--seed", "749", "-o", str(corpus)], check=True)
        made = {}
        for name, venv in copies.items():
            qem = str(Path(venv).resolve() / "bin" / "qem")
            made[name] = (repository(root / name, qem, corpus), repository(root / f"{name}-add", qem, corpus), qem,
                          str(Path(venv).resolve() / "bin" / "python"))
        found: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
        for n in range(args.runs + 1):
            for name, (repo, adding, qem, python) in made.items():
                runs = {FLOOR: lambda k: ([python, "-c", "pass"], None), **subjects(repo, qem)}
                for label, make in runs.items():
                    argv, stdin = make(f"{name}-{n}")
                    if label.endswith("(read in full)"):  # the start's reply kept from the last round goes
                        (repo / ".qem" / "index.db-starts.json").unlink(missing_ok=True)
                    answers, saved = repo / ".qem" / "index.db-commits", None
                    if label == "verify --staged (in full)" and answers.exists():  # the commit hooks' answers
                        saved = answers.read_bytes()  # set aside, and put back after (the other rows answer from them)
                        answers.unlink()
                    result = timed(argv, adding if label.startswith("add") else repo, stdin)
                    if saved is not None:
                        answers.write_bytes(saved)
                    if n:  # round 0 warms up
                        found.setdefault((label, name), []).append(result)
        print(f"{args.notes:,} notes, {args.runs} interleaved rounds; load average at the end {os.getloadavg()[0]:.2f}")
        for label in [FLOOR, *subjects(root, "qem")]:
            for name in copies:
                rows, floor = found[(label, name)], found[(FLOOR, name)]
                wall = [r[0] * 1e3 for r in rows]
                cpu = [r[1] * 1e3 for r in rows]
                ratio = statistics.median(wall) / statistics.median(r[0] * 1e3 for r in floor)
                cpu_ratio = statistics.median(cpu) / statistics.median(r[1] * 1e3 for r in floor)
                codes = ",".join(str(c) for c in sorted({r[2] for r in rows}))
                print(f"{label:44s} {name:12s} min {min(wall):6.1f} ms, median {statistics.median(wall):6.1f} ms"
                      f" (×{ratio:.2f}); CPU median {statistics.median(cpu):6.1f} ms (×{cpu_ratio:.2f}); exit {codes}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
