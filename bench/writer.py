"""The 10 concurrent writes of a check-in benchmark, made through qem's own CLI in one process.

Usage: python bench/writer.py WORKSPACE PLAN.json [ADDS]
Each write is one `qem revoke|flag-stale|supersede ID ... -w WORKSPACE` run in-process (one
interpreter start for all ten, so setting up a run stays cheap), naming the note by its
id, then ADDS `qem add` of new notes (the moved-store subject: 100 writes in all); any
failure aborts.  The workspace has no MEMORY.md, so no write exports.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench/ for edits; qem_edit as the interpreter has it installed (editable, or --installed)

import edits  # noqa: E402

from qem_edit.shells.cli import main as qem  # noqa: E402


def main() -> int:
    workspace, plan = sys.argv[1], edits.load(sys.argv[2])
    adds = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    lines = []
    for command, note_id in plan["writes"]:
        argv = [command, note_id]
        if command == "supersede":
            argv.append(f"bench concurrent successor of #{plan['shorts'][note_id]}")
        lines.append(argv + ["-m", "bench concurrent write"])
    lines += [["add", f"bench concurrent note {i}: written while the checkout was out", "--kind", "finding"]
              for i in range(adds)]
    for argv in lines:
        argv = argv + ["-w", workspace, "--actor", "bench-other"]
        try:
            qem(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code != 0:
            print(f"bench: concurrent write `qem {' '.join(argv)}` exited {code}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
