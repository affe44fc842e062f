"""A scripted $EDITOR for `qem edit`: makes the benchmark's 10 edits to the file it is given.

Usage (what run.py sets): QEM_EDITOR="python bench/editor.py" BENCH_EDIT_PLAN=plan.json
qem edit -m bench --yes.  The plan is the JSON that edits.choose() returns.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import edits  # noqa: E402


def main() -> int:
    edits.apply_file(Path(sys.argv[-1]), edits.load(os.environ["BENCH_EDIT_PLAN"]))  # a line at a time
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
