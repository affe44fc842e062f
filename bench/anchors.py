"""The drift check's cost, against floors timed in the same run (bench/README.md).

    python bench/anchors.py                    # 20,000 files, 74,900 notes, 20,000 anchored
    python bench/anchors.py --files 2000 --notes 7490 --anchored 2000 --runs 3   # quicker
    python bench/anchors.py --installed        # qem as a user installs it (bench/run.py --installed)

Builds a git repository of FILES files in folders of 100, a memory of NOTES generated notes
(fixtures/generate.py) of which ANCHORED are anchored to a file each, spread over half the
files (the created events given `anchors` before `qem load`), MEMORY.md, all committed; then times, each run after its
floor (floor, subject, floor, subject, ...):

    staged check   `qem anchors check --staged` with one anchored file changed and staged
                   (exit 1: it lists the note)          against `git status` in that repository
    quiet hook     `qem anchors check --staged --flag`, the pre-commit hook, on a commit
                   that touches no anchored file (exit 0, nothing written)
                                                        against the start-up floor (`import typer`)

and prints each median, min-max and the ratio; `--output FILE` keeps them as JSON.  Targets
(issue: anchors and drift): the staged check <= 2x `git status`, the quiet hook <= 1.5x the
start-up floor.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from run import GIT_ENV, REPO, Tools, base_env, call, git, timed  # bench/run.py: the same timing

sys.path.insert(0, str(REPO))
from qem_edit.system.anchors import blob_oid  # noqa: E402  (git's own id of a file's bytes)

FOLDER = 100  # files per folder


def build(tools: Tools, where: Path, files: int, notes: int, anchored: int) -> list[str]:
    """The repository: code, the memory (ANCHORED notes anchored to a file each), MEMORY.md,
    committed.  The paths the notes in force are anchored to."""
    repo = where / "repo"
    paths = []
    for n in range(files):
        path = f"src/m{n // FOLDER:04d}/f{n % FOLDER:03d}.py"
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(f"VALUE_{n} = {n}\n")
        paths.append(path)
    git(tools, repo.parent, "init", "-q", str(repo))
    git(tools, repo, "add", "-A")
    git(tools, repo, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "code")
    dump = where / "notes.jsonl"
    call([tools.python, str(REPO / "fixtures" / "generate.py"), "--notes", str(notes), "-o", str(dump)],
         what="generate the notes", cwd=REPO)
    lines, given = [], []
    for line in dump.read_text("utf-8").splitlines():
        event = json.loads(line)
        if event["type"] == "created" and len(given) < anchored:
            path = paths[(len(given) * 7919) % (files // 2)]  # spread over half the tree, the rest un-anchored
            event["data"]["anchors"] = [{"path": path, "oid": blob_oid((repo / path).read_bytes())}]
            given.append(path)
        lines.append(json.dumps(event, ensure_ascii=False))
    dump.write_text("\n".join(lines) + "\n", "utf-8")
    call(tools.qem + ["load", str(dump), "-w", str(repo)], what="qem load", cwd=repo)
    call(tools.qem + ["export", "-w", str(repo)], what="qem export", cwd=repo)
    git(tools, repo, "add", "-A")
    git(tools, repo, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", "memory")
    git(tools, repo, "status")  # git refreshes its index's file times once
    listed = json.loads(call(tools.qem + ["list", "--json", "--state", "active", "-w", str(repo)], what="qem list",
                             cwd=repo))
    in_force = sorted({a["path"] for n in listed for a in n["anchors"]})
    print(f"  {len(given):,} notes anchored, {len(in_force):,} paths anchored by notes in force", flush=True)
    return in_force


def measure(name: str, subject: list[str], floors: dict[str, list[str]], repo: Path, runs: int, ok: int) -> dict:
    """Each run of the subject after a run of each floor; medians, and the ratio to each floor."""
    env = {**base_env(), **GIT_ENV}
    out, err = repo.parent / "run.out", repo.parent / "run.err"
    times: dict[str, list[float]] = {floor: [] for floor in floors}
    mine, rss = [], 0
    for n in range(runs + 1):  # the first round warms up, uncounted
        for floor, argv in floors.items():
            f, _ = timed(argv, what=f"{floor} floor", cwd=repo, env=env, stdout=out, stderr=err)
            if n:
                times[floor].append(f.wall)
        s, _ = timed(subject, what=name, cwd=repo, env=env, stdout=out, stderr=err, ok=lambda rc: rc == ok)
        if n:
            mine.append(s.wall)
            rss = max(rss, s.rss_kb)
    median = statistics.median(mine)
    return {"name": name, "median_s": median, "min_s": min(mine), "max_s": max(mine), "rss_mb": rss / 1024,
            "floors": {floor: {"median_s": statistics.median(t), "ratio": median / statistics.median(t)}
                       for floor, t in times.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--notes", type=int, default=74_900)
    parser.add_argument("--anchored", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--installed", action="store_true", help="time qem installed from its wheel, as bench/run.py"
                        " --installed does, not the editable install of this checkout (whose finder loads pathlib)")
    args = parser.parse_args()
    tools = Tools(installed=args.installed)
    with tempfile.TemporaryDirectory(prefix="qem-bench-anchors-") as tmp:
        where = Path(tmp)
        print(f"building: {args.files:,} files, {args.notes:,} notes, {args.anchored:,} anchored", flush=True)
        anchored = build(tools, where, args.files, args.notes, args.anchored)
        repo = where / "repo"
        floors = {"git status": [tools.git, "status"], "start-up": [tools.python, "-c", "import typer"]}
        (repo / anchored[0]).write_text("CHANGED = 1\n")
        git(tools, repo, "add", anchored[0])
        rows = [measure("staged check (one anchored file changed)", tools.qem + ["anchors", "check", "--staged"],
                        floors, repo, args.runs, ok=1)]
        git(tools, repo, "reset", "-q", "--hard")
        everything = {a["path"] for n in json.loads(call(tools.qem + ["list", "--json", "-w", str(repo)],
                                                         what="qem list", cwd=repo)) for a in n["anchors"]}
        quiet = next(f"src/m{n // FOLDER:04d}/f{n % FOLDER:03d}.py" for n in range(args.files)
                     if f"src/m{n // FOLDER:04d}/f{n % FOLDER:03d}.py" not in everything)
        (repo / quiet).write_text("UNRELATED = 1\n")
        git(tools, repo, "add", quiet)
        rows.append(measure("quiet hook (a commit touching no anchored file)",
                            tools.qem + ["anchors", "check", "--staged", "--flag"], floors, repo, args.runs, ok=0))
    for row, (target_floor, target) in zip(rows, (("git status", 2.0), ("start-up", 1.5))):
        ratios = ", ".join(f"{floor} {f['median_s'] * 1000:.0f} ms: x{f['ratio']:.2f}" for floor, f in row["floors"].items())
        verdict = "met" if row["floors"][target_floor]["ratio"] <= target else "missed"
        print(f"{row['name']}: median {row['median_s'] * 1000:.0f} ms (min {row['min_s'] * 1000:.0f},"
              f" max {row['max_s'] * 1000:.0f}), peak {row['rss_mb']:.0f} MB; floors: {ratios};"
              f" target <= {target}x {target_floor}: {verdict}")
    if args.output:
        args.output.write_text(json.dumps({"args": vars(args) | {"output": str(args.output)}, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
