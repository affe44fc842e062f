"""A check-in of a 4.5 MB note among 2,000 new notes that share their beginnings, timed
round after round in fresh copies of one memory: its spread is the measure.

    python bench/huge.py                          # the qem beside this interpreter, 10 rounds
    python bench/huge.py --qem VENV/bin/qem --runs 20

The memory is fixtures/corpus-749.jsonl, loaded once.  The edit is tests/test_hostile.py's
deep nesting: MEMORY.md with, under Tasks, one note of a list 3,000 levels deep (4.5 MB of
indentation) and 2,000 list items nested 2 to 51 deep (1,080 of them share their first 48
characters).  Each round copies the loaded memory afresh (its index as the load left it),
times `python -c pass` (the floor) and then `qem checkin --path EDIT -m big --yes` in the
copy, and checks that the check-in exited 0.  A search of the notes that reads the large note
again each time it passes it made the same check-in take 1.7 s in one copy and 92 s in
another (where the note's row lay in the table decided it), so the report gives the slowest
round beside the median, each against the floor's median.  Run it with an interpreter qem
is installed in (MEMORY.md's escaping is qem's own).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from qem_edit.renderer.format import INDENT, escape_first_line, escape_text_line  # MEMORY.md's escaping

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "fixtures" / "corpus-749.jsonl"


def edited(rendered: str) -> str:
    """MEMORY.md with the deep list and the nested items under Tasks (tests/test_hostile.py's)."""
    deep = "\n".join(["a list, deeper and deeper:"] + [" " * i + "- level %d" % i for i in range(3000)])
    nested = "\n".join("- " * (i % 50 + 2) + f"nested {i}" for i in range(2000))
    first, *more = deep.split("\n")
    item = "\n".join(["- " + escape_first_line(first)] + [INDENT + escape_text_line(line) for line in more])
    return rendered.replace("## Tasks\n", "## Tasks\n\n" + item + "\n" + nested + "\n", 1)


def timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode(errors='replace')[-500:]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--qem", default=str(Path(sys.executable).parent / "qem"), help="the qem to time")
    parser.add_argument("--runs", type=int, default=10, help="rounds (default 10)")
    args = parser.parse_args()
    python = str(Path(args.qem).resolve().parent / "python")
    root = Path(tempfile.mkdtemp(prefix="qem-huge-"))
    try:
        loaded = root / "loaded"
        loaded.mkdir()
        timed([args.qem, "load", str(CORPUS)], loaded)
        rendered = subprocess.run([args.qem, "export", "--stdout"], cwd=loaded, capture_output=True, text=True,
                                  check=True).stdout
        text = edited(rendered)
        edit = root / "edited.md"
        floors, walls = [], []
        for n in range(args.runs):
            work = root / f"round-{n}"
            shutil.copytree(loaded, work, symlinks=True)
            edit.write_text(text, encoding="utf-8")  # (a check-in writes the file back as the memory renders it now)
            os.sync()  # the copy on disk first: the check-in's fsyncs write back its own pages only
            floors.append(timed([python, "-c", "pass"], work))
            walls.append(timed([args.qem, "checkin", "--path", str(edit), "-m", "big", "--yes"], work))
            shutil.rmtree(work)
        floor = statistics.median(floors)
        median, slowest = statistics.median(walls), max(walls)
        print(f"{args.qem}: {args.runs} check-ins of a 4.5 MB note among 2,000 new notes (749 in the memory)")
        print(f"  python -c pass   median {floor * 1e3:8.1f} ms")
        print(f"  checkin          median {median * 1e3:8.1f} ms (x{median / floor:.0f}), slowest {slowest * 1e3:8.1f} ms"
              f" (x{slowest / floor:.0f}), fastest {min(walls) * 1e3:8.1f} ms")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
