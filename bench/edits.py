"""The benchmark's edit: which notes a check-in touches, and the text change that does it.

Shared by the harness (run.py, which edits a `qem checkout`) and the scripted editor
(editor.py, which `qem edit` runs as $QEM_EDITOR), so both check in the same 10 edits:
4 text changes, 3 deletions of active notes, 3 new items.  The 10 concurrent writes
(writer.py) go to other notes, spread between the edited ones, so that the three-way
check-in merges without conflicts (and so does `git merge-file`, the merge floor).

Standard library only.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Iterable, Iterator

CHANGED = 4
DELETED = 3
NEW_ITEMS = (
    ("Tasks", "high", "bench new note 1: rerun the benchmark after the incremental check-in lands."),
    ("Gotchas", "medium", "bench new note 2: copy the store before timing a check-in."),
    ("Findings", "low", "bench new note 3: ratios against a floor measured in the same run."),
)
CHANGE_SUFFIX = " (edited by bench)"
# Concurrent writes: (command, how many), applied to notes the edit does not touch.
CONCURRENT = (("revoke", 4), ("flag-stale", 3), ("supersede", 3))
EDGE = 3  # skip this many notes at each end of a section: new items go at a section's top


def choose(memory: Path) -> dict:
    """Pick the notes from a memory's index (`<memory>/index.db`): 20 active notes spread
    evenly through the rendering (kind rank, then id), alternately for the edit and for
    the concurrent writes.  Notes are named by their ids; `shorts` maps each to the short
    id MEMORY.md shows (`[#k3f9]`), which is how the edit finds its lines."""
    # immutable: the cached memory is checkpointed and never written; leave no -shm beside it
    conn = sqlite3.connect(f"file:{Path(memory) / 'index.db'}?mode=ro&immutable=1", uri=True)
    try:
        rows = conn.execute(
            "SELECT id, short, kind_rank FROM notes WHERE state = 'active' AND supersedes IS NULL"
            " AND superseded_by IS NULL AND text IS NOT NULL AND disputes = '[]' AND rivals = '[]'"
            " ORDER BY kind_rank, id"
        ).fetchall()
    finally:
        conn.close()
    by_rank: dict[int, list[str]] = {}
    shorts: dict[str, str] = {}
    for note_id, short, rank in rows:
        by_rank.setdefault(rank, []).append(note_id)
        shorts[note_id] = short
    eligible = [i for rank in sorted(by_rank) for i in by_rank[rank][EDGE:-EDGE]]
    need = 2 * max(CHANGED + DELETED, sum(n for _, n in CONCURRENT))
    if len(eligible) < need:
        raise SystemExit(f"bench: {memory} has only {len(eligible)} eligible active notes; need {need}")
    step = len(eligible) / need
    picks = [eligible[int((k + 0.5) * step)] for k in range(need)]
    mine, theirs = picks[0::2], picks[1::2]
    writes = []
    for command, count in CONCURRENT:
        for _ in range(count):
            writes.append([command, theirs.pop(0)])
    return {
        "change": mine[:CHANGED],
        "delete": mine[CHANGED : CHANGED + DELETED],
        "new": [list(item) for item in NEW_ITEMS],
        "writes": writes,
        "shorts": {i: shorts[i] for i in picks},
    }


def apply(text: str, plan: dict) -> str:
    """The rendering with the plan's 10 edits made, as a person would make them."""
    lines = text.split("\n")
    starts: dict[str, int] = {}
    by_short = {plan["shorts"][i]: i for i in plan["change"] + plan["delete"]}
    for i, line in enumerate(lines):
        if line.startswith("- [#"):
            note_id = by_short.get(line[4 : line.index("]")])
            if note_id is not None:
                starts[note_id] = i
    missing = set(by_short.values()) - set(starts)
    if missing:
        raise SystemExit(f"bench: notes {sorted(plan['shorts'][i] for i in missing)} are not in the rendering")
    for note_id in plan["change"]:
        lines[starts[note_id]] += CHANGE_SUFFIX
    drop: set[int] = set()  # line numbers
    for note_id in plan["delete"]:
        i = starts[note_id]
        end = i + 1
        while end < len(lines) and (lines[end].startswith("  ") or lines[end] == ""):
            end += 1
        while end > i + 1 and lines[end - 1] == "":
            end -= 1  # keep the blank line that ends a section
        drop.update(range(i, end))
    out: list[str] = []
    headings = {f"## {title}": (priority, body) for title, priority, body in plan["new"]}
    pending: tuple[str, str] | None = None
    for i, line in enumerate(lines):
        if i in drop:
            continue
        out.append(line)
        if pending is not None and line == "":
            out.append(f"- {pending[0]} · {pending[1]}")
            pending = None
        if line in headings:
            pending = headings.pop(line)
    if headings or pending:
        raise SystemExit(f"bench: sections {sorted(headings)} are not in the rendering")
    return "\n".join(out)


def apply_stream(lines: Iterable[str], plan: dict) -> Iterator[str]:
    """`apply` a line at a time (lines without their newlines), holding no more than a
    run of blank lines: the scripted editor of a 749,000-note checkout must not hold the
    file whole, or the peak memory measured would be its own, not qem's."""
    by_short = {plan["shorts"][i]: i for i in plan["change"] + plan["delete"]}
    change, delete = set(plan["change"]), set(plan["delete"])
    headings = {f"## {title}": (priority, body) for title, priority, body in plan["new"]}
    seen: set[str] = set()
    deleting, blanks, pending = False, 0, None
    for line in lines:
        if deleting:
            if line == "":
                blanks += 1
                continue
            if line.startswith("  "):
                blanks = 0  # blank lines inside the deleted item go with it
                continue
            deleting = False
            for _ in range(blanks):  # the blank lines that end a section stay
                yield from _emitted("", headings, pending)
                if pending is not None:
                    pending = None
            blanks = 0
        if line.startswith("- [#"):
            note_id = by_short.get(line[4:line.index("]")])
            if note_id is not None:
                seen.add(note_id)
                if note_id in delete:
                    deleting, blanks = True, 0
                    continue
                if note_id in change:
                    line += CHANGE_SUFFIX
        yield line
        if pending is not None and line == "":
            yield f"- {pending[0]} · {pending[1]}"
            pending = None
        if line in headings:
            pending = headings.pop(line)
    for _ in range(blanks):
        yield ""
    missing = set(by_short.values()) - seen
    if missing:
        raise SystemExit(f"bench: notes {sorted(plan['shorts'][i] for i in missing)} are not in the rendering")
    if headings or pending:
        raise SystemExit(f"bench: sections {sorted(headings)} are not in the rendering")


def _emitted(line: str, headings: dict, pending: tuple[str, str] | None) -> Iterator[str]:
    yield line
    if pending is not None and line == "":
        yield f"- {pending[0]} · {pending[1]}"


def apply_file(path: Path, plan: dict) -> None:
    """`apply_stream` over a file, in place (through a temporary file beside it)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".bench-tmp")
    with open(path, encoding="utf-8", newline="") as src, open(tmp, "w", encoding="utf-8", newline="") as out:
        first = True
        for line in apply_stream((raw[:-1] if raw.endswith("\n") else raw for raw in _lines(src)), plan):
            out.write(line if first else "\n" + line)
            first = False
    os.replace(tmp, path)


def _lines(handle) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The file's lines, each with its newline, and a last empty one after a final newline
    (as str.split("\\n") gives them)."""
    last = ""
    for last in handle:
        yield last
    if last.endswith("\n") or last == "":
        yield ""


def load(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())
