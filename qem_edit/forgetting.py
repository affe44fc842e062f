"""After a forget: the text leaves every file qem wrote, or each file still holding it is named.

`qem forget` erases a note's text from the store.  qem also wrote that text into files:
kept edits (`.qem/checkouts/*/MEMORY.md` and `base.md`), files written by
`qem checkout --path`, and the mirror.  Each of them has the note's item replaced by its
tombstone (the mirror is rendered again unless it holds hand edits); a file that still
holds the text afterwards (the text copied into another note, say) is named, and so is
what git history may still hold.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from . import errors
from .checkouts import kept
from .export import check, export
from .files import read_regular, write_atomic
from .model import Note
from .renderer import render_item
from .store import Store
from .workspace import Workspace

GIT_NOTE = (
    "the text is gone from the store and from the files qem wrote; a copy committed to git"
    " stays in its history until the history is rewritten (README: Forgetting a secret)"
)


def scrub(store: Store, place: Workspace, note: Note, text: str) -> list[str]:
    """Remove the forgotten `note`'s `text` from every file qem wrote; returns what the
    person must be told (each file that could not be cleaned, and git's history)."""
    tombstone = render_item(note)[0]
    files = [f for c in kept(place) for f in (c.base_file, c.file)]
    notices = [problem for path in files if (problem := _scrub_file(path, note.id, tombstone))]
    notices += _scrub_mirror(store, place, note.id, tombstone)
    checked = files + [place.mirror_path()]
    notices += [
        f"warning: the forgotten text still appears in {path} (outside note #{note.id}'s item); remove it by hand"
        for path in checked if _holds(path, text)
    ]
    return notices + [GIT_NOTE]


def _scrub_mirror(store: Store, place: Workspace, note_id: int, tombstone: str) -> list[str]:
    """The mirror is rendered again (the forget already changed the rendering), or, when
    it holds hand edits that must not be lost, only the note's item is replaced."""
    mirror = place.mirror_path()
    if not mirror.is_file():
        return []
    try:
        if not check(store, mirror).precious:
            export(store, mirror)
            return []
    except errors.QemError as exc:
        return [f"warning: {mirror} was not rendered again: {exc}"]
    problem = _scrub_file(mirror, note_id, tombstone)
    return [problem] if problem else []


def _scrub_file(path: Path, note_id: int, tombstone: str) -> str | None:
    """Replace every item of `note_id` in the file with its tombstone (a conflict block
    may show it more than once).  Returns a problem, or None."""
    try:
        data = read_regular(path)
        if data is None:
            return None
        lines = data.decode("utf-8", "surrogateescape").split("\n")
        cleaned = _without_items(lines, note_id, tombstone)
        if cleaned != lines:
            write_atomic(path, "\n".join(cleaned).encode("utf-8", "surrogateescape"), mode=os.stat(path).st_mode & 0o777)
    except (OSError, errors.QemError) as exc:
        return f"warning: could not scrub {path}: {getattr(exc, 'strerror', None) or exc}"
    return None


def _without_items(lines: list[str], note_id: int, tombstone: str) -> list[str]:
    start = re.compile(rf"- \[#{note_id}\](?: |\Z)")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not start.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        out.append(tombstone)
        i += 1
        while i < len(lines) and _continues(lines, i):
            i += 1
    return out


def _continues(lines: list[str], i: int) -> bool:
    """Whether line `i` still belongs to the item above: indented, or blank with more of
    the item below it."""
    if lines[i].startswith(("  ", "\t")):
        return True
    j = i
    while j < len(lines) and not lines[j].strip():
        j += 1
    return j > i and j < len(lines) and lines[j].startswith(("  ", "\t"))


def _holds(path: Path, text: str) -> bool:
    """Whether the file still holds the text: any of its lines of eight characters or
    more (the whole text, when it has none)."""
    try:
        data = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return False
    probes = [line.strip() for line in text.split("\n") if len(line.strip()) >= 8] or [text.strip()]
    return any(probe in data for probe in probes)
