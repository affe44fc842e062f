"""What flagging a base's dependents costs, against a single check-in timed in the same run
(bench/README.md).

    python bench/rests.py                        # 74,900 notes, 1,000 transitive dependents
    python bench/rests.py --notes 7490 --runs 3  # quicker

Builds a memory of NOTES generated notes (fixtures/generate.py) and, beside them, a base
note with DEPENDENTS notes resting on it transitively (a tree: dependent i rests on the
note i // FAN, the base first, so each level holds FAN times the last), loaded with
`qem load`, MEMORY.md exported, committed in a git repository.  Then, each run in a fresh
copy of that repository (copying is not timed), one after the other:

    single check-in  MEMORY.md with one note's text changed (a generated note no note rests
                     on), `qem checkin -m ... --yes`: one supersession
    flagging         MEMORY.md with the base's text changed, the same command: the base
                     superseded and its DEPENDENTS dependents flagged stale in the same
                     write, MEMORY.md re-rendered with their markers

and prints each median, min-max and the ratio; `--output FILE` keeps them as JSON.  Target
(issue 36): flagging within 2x the single check-in.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from run import GIT_ENV, REPO, Tools, base_env, call, git, timed  # bench/run.py: the same timing

FAN = 10  # notes resting on each note of the tree


def build(tools: Tools, where: Path, notes: int, dependents: int) -> tuple[Path, str, str]:
    """The repository: a memory of `notes` generated notes and a base with `dependents`
    notes resting on it, MEMORY.md, committed; the base's and a bystander's text."""
    repo = where / "repo"
    git(tools, where, "init", "-q", str(repo))
    dump = where / "notes.jsonl"
    call([tools.python, str(REPO / "fixtures" / "generate.py"), "--notes", str(notes), "-o", str(dump)],
         what="generate the notes", cwd=REPO)
    lines = dump.read_text("utf-8").splitlines()
    last = json.loads(lines[-1])
    seq, number, at = last["seq"], max(json.loads(line)["note_id"] for line in lines), last["at"]
    tree = []
    for i in range(dependents + 1):  # the base, then its dependents, as numbered notes of the log
        seq, number = seq + 1, number + 1
        data = {"kind": "finding" if i == 0 else "decision", "priority": "medium", "provenance": "agent",
                "text": "The base estimate is 2 days." if i == 0 else f"Derived figure {i}, from the note above it.",
                "supersedes": None}
        if i:
            data["rests_on"] = [tree[(i - 1) // FAN]]
        tree.append(number)
        lines.append(json.dumps({"seq": seq, "note_id": number, "type": "created", "at": at, "actor": "bench",
                                 "reason": None, "checkin": None, "data": data}, ensure_ascii=False))
    dump.write_text("\n".join(lines) + "\n", "utf-8")
    call(tools.qem + ["load", str(dump), "-w", str(repo)], what="qem load", cwd=repo)
    call(tools.qem + ["export", "-w", str(repo)], what="qem export", cwd=repo)
    git(tools, repo, "add", "-A")
    git(tools, repo, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", "memory")
    listed = json.loads(call(tools.qem + ["list", "--json", "--state", "active", "-w", str(repo)], what="qem list",
                             cwd=repo))
    resting = {b for n in listed for b in n["rests_on"]}
    bystander = next(n["text"] for n in listed if n["id"] not in resting and not n["rests_on"]
                     and "\n" not in n["text"] and n["kind"] == "finding" and not n["text"].startswith("\\"))
    return repo, "The base estimate is 2 days.", bystander


def edited(repo: Path, text: str) -> None:
    """MEMORY.md with the item showing `text` changed: a supersession on check-in."""
    memory = repo / "MEMORY.md"
    view = memory.read_text("utf-8")
    lines = view.split("\n")
    [at] = [i for i, line in enumerate(lines) if line.startswith("- [#") and line.endswith(" · " + text)]
    lines[at] += " (checked)"
    memory.write_text("\n".join(lines), "utf-8")


def measure(tools: Tools, repo: Path, subjects: dict[str, str], runs: int, dependents: int) -> dict[str, list]:
    """Each subject once a round, in a fresh copy of the repository (the first round warms up)."""
    env = {**base_env(), **GIT_ENV}
    times: dict[str, list] = {name: [] for name in subjects}
    for n in range(runs + 1):
        for name, text in subjects.items():
            ws = repo.parent / f"run-{name}"
            shutil.rmtree(ws, ignore_errors=True)
            shutil.copytree(repo, ws, symlinks=True)
            edited(ws, text)
            sample, _ = timed(tools.qem + ["checkin", "-m", "bench", "--yes"], what=name, cwd=ws, env=env,
                              stdout=repo.parent / "run.out", stderr=repo.parent / "run.err")
            if name == "flagging":
                stale = json.loads(call(tools.qem + ["list", "--json", "--state", "stale", "-w", str(ws)],
                                        what="qem list", cwd=ws))
                flagged = [s for s in stale if s["state_reason"].startswith("rests on #")]
                assert len(flagged) == dependents, f"{len(flagged)} flagged, not {dependents}"
            if n:
                times[name].append(sample)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=74_900)
    parser.add_argument("--dependents", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    tools = Tools()
    with tempfile.TemporaryDirectory(prefix="qem-bench-rests-") as tmp:
        where = Path(tmp)
        print(f"building: {args.notes:,} notes and a base with {args.dependents:,} transitive dependents", flush=True)
        repo, base, bystander = build(tools, where, args.notes, args.dependents)
        times = measure(tools, repo, {"single check-in": bystander, "flagging": base}, args.runs, args.dependents)
    rows = {name: {"median_s": statistics.median(s.wall for s in samples), "min_s": min(s.wall for s in samples),
                   "max_s": max(s.wall for s in samples), "rss_mb": max(s.rss_kb for s in samples) / 1024}
            for name, samples in times.items()}
    ratio = rows["flagging"]["median_s"] / rows["single check-in"]["median_s"]
    for name, row in rows.items():
        print(f"{name}: median {row['median_s'] * 1000:.0f} ms (min {row['min_s'] * 1000:.0f},"
              f" max {row['max_s'] * 1000:.0f}), peak {row['rss_mb']:.0f} MB")
    print(f"flagging {args.dependents:,} dependents at {args.notes:,} notes: x{ratio:.2f} a single check-in;"
          f" target <= 2x: {'met' if ratio <= 2 else 'missed'}")
    if args.output:
        args.output.write_text(json.dumps({"args": vars(args) | {"output": str(args.output)}, "rows": rows,
                                           "ratio": ratio}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
