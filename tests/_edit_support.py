"""Helpers shared by the edit tests (test_plan.py, test_edit.py, test_edit_tty.py).

Stores are seeded in-process (fast); the edit itself always goes through the real CLI in a
child process, with a scripted editor: a small Python program that qem runs, the way it
runs a person's editor, on the checkout file given as its last argument.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from builders import SEEDED_LOG, NoteMap, load_store, note_map, store_path

from qem_edit.base.replay import Event, Note
from qem_edit.storage.store import Store

# The standard seeded store: one note per interesting case, ids fixed by creation order.
ACTIVE_DIRECTIVE = 1  # directive · high · "Run the tests inside the venv"
ACTIVE_GOTCHA = 2  # gotcha · medium · "The lock order is A then B"
ACTIVE_FINDING = 3  # finding · low · "The cache misses on cold start"
ACTIVE_TASK = 4  # task · medium · "Review the retry PR"
REVOKED = 5  # gotcha · revoked (fixed upstream)
STALE = 6  # finding · stale (CI changed)
SUPERSEDED = 7  # decision · superseded by 8
SUCCESSOR = 8  # decision · active, supersedes 7
FORGOTTEN = 9  # reference · forgotten
EXPIRED = 10  # operational · expired
MULTILINE = 11  # reference · low · two lines of text
SEED_HEAD = 16  # 11 created, 7 superseded, revoked, stale_flagged, forgotten, expired

TEXTS = {
    ACTIVE_DIRECTIVE: "Run the tests inside the venv",
    ACTIVE_GOTCHA: "The lock order is A then B",
    ACTIVE_FINDING: "The cache misses on cold start",
    ACTIVE_TASK: "Review the retry PR",
    REVOKED: "Old flaky test note",
    STALE: "Builds take 41 s",
    SUPERSEDED: "Use JSON for the dump",
    SUCCESSOR: "Use JSON Lines for the dump",
    EXPIRED: "Deploy freeze until Friday",
    MULTILINE: "The API docs live at docs/api\n  and the schema in docs/schema",
}


def seed(ws: Path) -> None:
    """Write the standard memory into workspace `ws` (in-process, no CLI): the log
    fixtures/checkin/seeded.jsonl (numbered; converted on load, each note keeping its
    number as an alias), which the check-in cases share."""
    with load_store(store_path(ws), SEEDED_LOG) as store:
        assert len(store.events()) == SEED_HEAD
        assert {n.alias: n.text for n in store.notes() if n.alias in TEXTS} == TEXTS


def notes(ws: Path) -> NoteMap:
    """Every note, by full id, or by its old number (an int key)."""
    with Store.open(store_path(ws)) as store:
        return note_map(store)


def events(ws: Path, after: int = 0) -> list[Event]:
    """The events in the order every clone agrees on, from the `after`-th on (new events
    come last: their clocks are higher)."""
    with Store.open(store_path(ws)) as store:
        return store.events()[after:]


def head(ws: Path) -> int:
    """How many events the log holds (a write that lands adds some)."""
    with Store.open(store_path(ws)) as store:
        return len(store.events())


def shorts(ws: Path) -> dict:  # type: ignore[type-arg]
    """The short ids MEMORY.md shows, by old number and by full id."""
    with Store.open(store_path(ws)) as store:
        out: dict = {n.id: n.shown for n in store.notes()}
        out.update({n.alias: n.shown for n in store.notes() if n.alias is not None})
        return out


EDITOR_PRELUDE = r'''
import json, os, subprocess, sys
path = sys.argv[-1]
args = sys.argv[1:-1]
with open(path, encoding="utf-8", newline="") as handle:
    text = handle.read()


def qem(*argv):
    """Run qem as another process would, while this editor is still open."""
    done = subprocess.run([sys.executable, "-m", "qem_edit", *argv], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"editor-side qem {argv} failed: {done.stderr}")
    return done.stdout


def sub(old, new, count=1):
    global text
    assert text.count(old) == count, f"{old!r} occurs {text.count(old)} times in:\n{text}"
    text = text.replace(old, new)


def drop(fragment):
    """Delete the item whose first line holds `fragment`, with its indented lines."""
    global text
    lines = text.split("\n")
    hits = [i for i, line in enumerate(lines) if fragment in line]
    assert len(hits) == 1, f"{fragment!r} on {len(hits)} lines in:\n{text}"
    i = j = hits[0]
    j += 1
    while j < len(lines) and (lines[j].startswith("  ") or (lines[j] == "" and j + 1 < len(lines) and lines[j + 1].startswith("  "))):
        j += 1
    text = "\n".join(lines[:i] + lines[j:])


def under(heading, *new_lines):
    """Put `new_lines` right under the section heading `## heading`."""
    global text
    sub(f"## {heading}\n", f"## {heading}\n\n" + "\n".join(new_lines) + "\n")


def line_with(fragment):
    lines = text.split("\n")
    hits = [i for i, line in enumerate(lines) if fragment in line]
    assert len(hits) == 1, (fragment, text)
    return lines[hits[0]]


def resolve(keep):
    """Resolve every conflict block qem wrote, keeping `yours` or `theirs`."""
    global text
    out, side = [], None
    for line in text.split("\n"):
        for prefix, name in (("<<<<<<<", "yours"), ("|||||||", "base"), ("=======", "theirs"), (">>>>>>>", None)):
            if line.startswith(prefix):
                side = name
                break
        else:
            if side is None or side == keep:
                out.append(line)
    text = "\n".join(out)


def record(name, value):
    with open(os.environ["QEM_TEST_RECORD"] + "." + name, "w") as out:
        json.dump(value, out)

'''

EDITOR_EPILOGUE = r'''
with open(path, "w", encoding="utf-8", newline="") as handle:
    handle.write(text)
sys.exit(int(os.environ.get("QEM_TEST_EDITOR_EXIT", "0")))
'''


def make_editor(directory: Path, body: str, name: str = "editor.py") -> str:
    """A QEM_EDITOR command that runs `body` (Python) on the checkout file.

    `body` sees `text` (the file, read without newline translation), `path`, `args` (the
    editor command's own arguments) and helpers `sub`, `drop`, `under`, `line_with`,
    `qem` and `record`; whatever `text` holds at the end is written back.
    """
    script = directory / name
    script.write_text(EDITOR_PRELUDE + body + "\n" + EDITOR_EPILOGUE, encoding="utf-8")
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


RESUME_RE = re.compile(r"qem edit --resume (\S+?)`")


def resume_id(stderr: str) -> str:
    found = RESUME_RE.findall(stderr)
    assert found, f"no `qem edit --resume ID` hint in:\n{stderr}"
    return found[-1]


def aliases(ws: Path) -> dict:  # type: ignore[type-arg]
    """Each note's old number by its full id (notes made since have none: their id)."""
    with Store.open(store_path(ws)) as store:
        return {n.id: (n.alias if n.alias is not None else n.id) for n in store.notes()}
