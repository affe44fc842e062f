"""A MEMORY.md that shows notes the log lacks: an incomplete commit.

A commit that carried MEMORY.md but not a new note's files under `.qem/` (`git commit -am`
leaves untracked files behind) reaches every other clone as a file that shows the note
and a log that has no such note, or has its event but not its text.  Rendering over such
a file would delete the note's line, so export refuses it and says where the files are:
in the clone the commit came from.  Read only where the file already differs from the
rendering: the ids its items show, each looked up in the index (short id, else prefix).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from ..renderer.format import HEADER_RE, ITEM_RE, TOMBSTONE_RE
from ..storage.store import Store
from ..system import db
from ..system.files import file_chunks

NAMED_MOST = 5  # notes a message names; the rest are counted
SHOWN_CHARS = 80  # how much of an item's first line a message quotes


@dataclass
class Lacking:
    """The items of a MEMORY.md whose notes the log lacks (short id → the line shown)."""

    absent: dict[str, str] = field(default_factory=dict)  # no note of the log has the id
    textless: dict[str, str] = field(default_factory=dict)  # the note is there, its text is not

    def __bool__(self) -> bool:
        return bool(self.absent or self.textless)


_ITEM_START = re.compile(rb"\n- \[#([0-9a-z]+)\]")  # searched in "\n" + a block of whole lines


def lacking(store: Store, path: Path, shown: dict[str, str] | None = None) -> Lacking:
    """The file's items whose notes (or texts) the log lacks; nothing when the index
    cannot be read (then the usual verdicts speak).  The file is scanned a chunk at a
    time, each chunk's ids looked up in the index in one query; only an id no note shows
    is looked up again, by prefix (a short id another clone shows longer).  `shown`: only
    these items (short id → the line), where the rest of the file is known to be the log's
    own rendering."""
    found = Lacking()
    try:
        if not _of_this_memory(store, path):
            return found  # a file of another memory is refused as such, not read against this log
        for short, line in _suspects(store, path) if shown is None else _suspects_among(store, shown):
            if short in found.absent or short in found.textless:
                continue
            item, missing = ITEM_RE.match(line), store.text_missing(short)
            if item is None and (missing is not None or TOMBSTONE_RE.match(line) is None):
                continue  # not a well-formed item (a hand edit's), or a tombstone of a note the log has
            if missing is None:
                found.absent[short] = line
            elif missing and item is not None:
                found.textless[short] = line
    except (*db.TRANSLATED, OSError):
        return Lacking()
    return _committed(found, path) if found else found


def _committed(found: Lacking, path: Path) -> Lacking:
    """Only the lines the last commit's file shows too: a commit carried them without
    their notes.  A line no commit shows (a hand edit that changed an id) is a person's,
    and keeps the hand-edit verdict; outside git there is no commit to blame."""
    from ..system import gitrepo

    top = gitrepo.toplevel(path)
    data = gitrepo.show(top, "HEAD", path) if top is not None else None
    if data is None:
        return Lacking()
    lines = set(data.decode("utf-8", "replace").replace("\r\n", "\n").split("\n"))
    return Lacking({k: v for k, v in found.absent.items() if v in lines},
                   {k: v for k, v in found.textless.items() if v in lines})


def _of_this_memory(store: Store, path: Path) -> bool:
    """Whether the file's header names this memory (or names none: a header cut off by a
    hand edit is read as this memory's)."""
    first = next(iter(file_chunks(path)), b"").split(b"\n", 1)[0].lstrip(b"\xef\xbb\xbf").rstrip(b"\r")
    match = HEADER_RE.match(first.decode("utf-8", "replace"))
    return match is None or match["memory"] == store.memory_id()


def _suspects(store: Store, path: Path) -> Iterator[tuple[str, str]]:
    """The item lines (column 0: no line of a text starts there) whose id is no note's
    short id, or a note's whose text is missing."""
    rest = b""
    for chunk in chain(file_chunks(path), (b"\n",)):
        block, _, rest = (rest + chunk).rpartition(b"\n")
        block = b"\n" + block
        shown = _ITEM_START.findall(block)
        if not shown:
            continue
        listed = (b'["' + b'","'.join(shown) + b'"]').decode("ascii")
        for short in store.shorts_not_shown(listed):
            line = re.search(rb"\n(- \[#" + short.encode("ascii") + rb"\][^\n]*)", block)
            if line is not None:
                yield short, line[1].rstrip(b"\r").decode("utf-8", "replace")


def _suspects_among(store: Store, shown: dict[str, str]) -> Iterator[tuple[str, str]]:
    if shown:
        import json

        for short in store.shorts_not_shown(json.dumps(sorted(shown))):
            yield short, shown[short]


def message(store: Store, path: Path, found: Lacking) -> str:
    """What `export --check`, `export` and `verify` say of such a file: which notes, which
    commit, and what to do (never a command that deletes the lines without saying so)."""
    parts = []
    if found.absent:
        parts.append(f"{_count(found.absent)} the log lacks ({_named(found.absent)})")
    if found.textless:
        parts.append(f"the text of {_count(found.textless)} the log holds without it (text missing from this"
                     f" commit: {_named(found.textless)})")
    commit = last_commit(path)
    by = f"commit {commit}" if commit else "the commit it came from"
    return (f"{path} shows {' and '.join(parts)}: an incomplete commit ({by} changed {os.path.basename(path)} without"
            " every file of the notes under .qem/). Rendering it would delete those lines: get the files"
            " from the commit's author (`git add .qem && git commit` in their clone, then push), or run"
            " `qem export --force` to drop the lines deliberately")


def _count(items: dict[str, str]) -> str:
    return f"{len(items)} note{'' if len(items) == 1 else 's'}"


def _named(items: dict[str, str]) -> str:
    named = [f"#{short} {_clip(line)!r}" for short, line in list(items.items())[:NAMED_MOST]]
    more = f", and {len(items) - NAMED_MOST} more" if len(items) > NAMED_MOST else ""
    return "; ".join(named) + more


def _clip(line: str) -> str:
    return line if len(line) <= SHOWN_CHARS else line[:SHOWN_CHARS - 1] + "…"


def last_commit(path: Path) -> str | None:
    """The last commit that changed `path` (None: not in git, or never committed)."""
    from ..system import gitrepo

    top = gitrepo.toplevel(path)
    return gitrepo.last_change(top, path) if top is not None else None


def event_commit(store: Store, note_id: str) -> str | None:
    """The commit that added the note's `created` event file (None: not in git, or the
    event came in a pack)."""
    from ..system import gitrepo

    path = Path(store.root, "events", note_id)
    top = gitrepo.toplevel(store.root)
    return gitrepo.last_change(top, path, added=True) if top is not None and path.is_file() else None
