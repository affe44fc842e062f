"""A scripted $EDITOR for `qem edit FILTERS`: 10 edits to the query's checkout it is given
(4 text changes, 3 deletions, 3 new items at the top of its first section), wherever the
query's notes are.  Standard library only.

Usage (what run.py sets): QEM_EDITOR="python bench/query_editor.py" qem edit kind=gotcha
since=... until=... -m bench --yes
"""

import sys
from pathlib import Path

SUFFIX = " (edited by bench)"
MARKERS = (" · SUPERSEDED", " · REVOKED", " · EXPIRED", " · STALE", " FORGOTTEN", "supersedes #", "DISPUTED")


def edit(text: str) -> str:
    lines = text.split("\n")
    items = [i for i, line in enumerate(lines) if line.startswith("- [#")]
    plain = [i for i in items if not any(m in lines[i] for m in MARKERS)]
    alone = [i for i in plain if i + 1 < len(lines) and not lines[i + 1].startswith("  ")]  # one-line items
    changed, deleted = alone[:4], set(alone[4:7])
    for i in changed:
        lines[i] += SUFFIX
    heading = next(i for i, line in enumerate(lines) if line.startswith("## "))
    out = [line for i, line in enumerate(lines) if i not in deleted]
    out[heading + 1:heading + 1] = ["", *(f"- bench new note {n}: made in a query's checkout." for n in (1, 2, 3))]
    return "\n".join(out)


def main() -> int:
    path = Path(sys.argv[-1])
    path.write_bytes(edit(path.read_bytes().decode("utf-8")).encode("utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
