"""Two installed copies of qem, timed as pairs of runs of one command, for a change too small
for bench/startup.py to resolve on a shared machine.

    python bench/paired.py before=VENV:REPO after=VENV:REPO                 # verify --staged in full, 60 pairs
    python bench/paired.py --pairs 80 before=VENV:REPO after=VENV:REPO
    python bench/paired.py --kept before=VENV:REPO after=VENV:REPO -- export --check --staged

Each NAME=VENV:REPO is a virtual environment with qem installed in it (a wheel, as a user
installs it) and a git repository of its own that copy runs in: two copies of one
repository, each verified once by its own copy (a copied work tree is stale in git's stat
cache: run `git status` in each copy first, or the first commits check every file).  A
round runs the first copy's `python -c pass` (the floor) and then the command once in each
repository, the two copies' order alternated round to round; before each run the commit
hooks' kept answer (`.qem/index.db-commits`) is removed, so that the command runs in full,
unless `--kept` (then it answers from what it kept).  The command is `qem verify --staged`
unless another follows `--`.

It prints each copy's median and its ratio to the floor's median, and the median of the
paired differences (second copy minus first) with a 95% interval from 2,000 bootstrap
resamples of the pairs: a difference whose interval holds zero is not one.  A pair shares
the machine's state of its moment, so a slowdown that lasts a round moves both of its runs;
the median of the differences is what a change did, where the medians of each alone, on a
busy machine, may not show it.  A difference whose interval holds zero is not resolved
(which is not to say there is none).  A run whose exit status is not the first run's
stops the bench: a copy that fails is not timed.  Standard library only.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time

KEPT = os.path.join(".qem", "index.db-commits")


def timed(argv: list[str], cwd: str) -> tuple[float, int]:
    """Wall milliseconds and exit status of one run, its output discarded."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return (time.perf_counter() - start) * 1e3, done.returncode


def run(copy: tuple[str, str], args: list[str], kept: bool, codes: list[int]) -> float:
    """One run of `args` in `copy`; its exit status must be the first run's (SystemExit else)."""
    venv, repo = copy
    if not kept:
        try:
            os.unlink(os.path.join(repo, KEPT))
        except FileNotFoundError:
            pass
    wall, code = timed([os.path.join(venv, "bin", "qem"), *args], repo)
    codes.append(code)
    if code != codes[0]:
        raise SystemExit(f"qem {' '.join(args)} in {repo} exited {code}, the first run {codes[0]}: not timed")
    return wall


def interval(differences: list[float], resamples: int = 2000, seed: int = 749) -> tuple[float, float]:
    """The 95% bootstrap interval of the differences' median."""
    draw = random.Random(seed)
    medians = sorted(statistics.median(draw.choices(differences, k=len(differences))) for _ in range(resamples))
    return medians[int(resamples * 0.025)], medians[int(resamples * 0.975) - 1]


def main() -> int:
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # (qem's arguments: everything after the first --)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="after --: qem's arguments (default: verify --staged)")
    parser.add_argument("--pairs", type=int, default=60, help="pairs kept after one warm-up pair (default 60)")
    parser.add_argument("--kept", action="store_true", help="answer from the kept answer (default: in full)")
    parser.add_argument("copies", nargs=2, metavar="NAME=VENV:REPO")
    given = parser.parse_args(argv[:cut])
    given.command = argv[cut + 1:] or ["verify", "--staged"]
    if given.pairs < 2 or given.pairs % 2:
        parser.error("--pairs: an even number, 2 or more (each copy runs first in half of them)")
    copies: list[tuple[str, tuple[str, str]]] = []
    for spec in given.copies:
        name, _, rest = spec.partition("=")
        venv, _, repo = rest.partition(":")
        if not (name and venv and repo and os.path.isdir(os.path.join(repo, ".qem"))):
            parser.error(f"{spec}: give NAME=VENV:REPO, REPO holding a memory")
        copies.append((name, (os.path.abspath(venv), os.path.abspath(repo))))
    (first, a), (second, b) = copies
    floor_argv = [os.path.join(a[0], "bin", "python"), "-c", "pass"]
    runs_a, runs_b, floors, differences = [], [], [], []
    codes: list[int] = []
    run(a, given.command, given.kept, codes), run(b, given.command, given.kept, codes)  # (warm-up)
    for n in range(given.pairs):
        floors.append(timed(floor_argv, a[1])[0])
        if n % 2:
            x = run(a, given.command, given.kept, codes)
            y = run(b, given.command, given.kept, codes)
        else:
            y = run(b, given.command, given.kept, codes)
            x = run(a, given.command, given.kept, codes)
        runs_a.append(x)
        runs_b.append(y)
        differences.append(y - x)
    floor = statistics.median(floors)
    low, high = interval(differences)
    print(f"qem {' '.join(given.command)} ({'from the kept answer' if given.kept else 'in full'}), {given.pairs} pairs,"
          f" exit {codes[0]}; load average at the end {os.getloadavg()[0]:.2f}")
    print(f"python -c pass  median {floor:6.1f} ms")
    for name, runs in ((first, runs_a), (second, runs_b)):
        print(f"{name:14s}  median {statistics.median(runs):6.1f} ms (×{statistics.median(runs) / floor:.2f}),"
              f" min {min(runs):6.1f} ms")
    print(f"{second} - {first}: median {statistics.median(differences):+.2f} ms, 95% interval {low:+.2f} to {high:+.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
