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

from ..base import errors
from ..base.replay import Note
from ..mirror.export import MIRROR_BASE, check, export
from ..renderer import render_item
from ..storage.store import Store
from ..system.files import read_regular, write_atomic
from ..system.workspace import Workspace
from .kept_edits import Checkout, kept

GIT_NOTE = (
    "the text is gone from the log and from the files qem wrote; commit .qem/ so that every clone"
    " drops it too.  Git's history still holds every commit that had it until the history is"
    " rewritten (docs/SHARING.md, Forgetting a secret: git filter-repo)"
)
# A private or session note was never in a committed file: there is nothing to commit, and
# no history to rewrite (telling the person to commit .qem/ would commit nothing of it).
LOCAL_NOTE = (
    "the text is gone from the log and from the files qem wrote; it was a {scope} note, kept in"
    " this clone alone and never committed: there is nothing to commit"
)


def scrub(store: Store, place: Workspace, note: Note, text: str) -> list[str]:
    """Remove the forgotten `note`'s `text` from every file qem wrote; returns what the
    person must be told (each file that could not be cleaned, and git's history)."""
    tombstone = render_item(note)[0]
    files = [f for c in kept(place) for f in (c.base_file, c.file, c.draft_file)] + [Path(store.root, MIRROR_BASE)]
    edits = _edits_of_bases(store, place)
    notices = [problem for path in files if (problem := _scrub_file(path, {note.id: tombstone}, edits.get(path)))]
    _remember(place, {note.id})
    notices += _scrub_mirror(store, place, note.id, tombstone)
    checked = files + [place.mirror_path()]
    notices += [
        f"warning: the forgotten text still appears in {path} (outside note #{note.id}'s item); remove it by hand"
        for path in checked if _holds(path, text)
    ]
    return notices + [LOCAL_NOTE.format(scope=note.scope) if note.local else GIT_NOTE]


def scrub_arrived(store: Store, place: Workspace, note_ids: set[str]) -> list[str]:
    """A forget that arrived from another clone (a pull, a merge, a switch): the notes'
    texts leave this clone's private files too (kept edits, the last export's copy);
    returns the problems."""
    files = [f for c in kept(place) for f in (c.base_file, c.file, c.draft_file)] + [Path(store.root, MIRROR_BASE)]
    tombstones = {n: render_item(store.note(n))[0] for n in sorted(note_ids)}
    edits = _edits_of_bases(store, place)
    problems = [problem for path in files if (problem := _scrub_file(path, tombstones, edits.get(path)))]
    _remember(place, set(note_ids))
    return problems


def _remember(place: Workspace, note_ids: set[str]) -> None:
    """Each kept edit records the notes forgotten while it was kept (see scrub_again)."""
    for checkout in kept(place):
        try:
            checkout.add_forgotten(note_ids)
        except (OSError, errors.QemError):
            pass  # then an editor open now may write the text back, and the check-in names it


def scrub_again(store: Store, checkout: Checkout) -> None:
    """Before a kept edit is checked in: an editor that was open while notes were
    forgotten writes their items back on save; they become tombstones again (and where the
    edit deleted one, it leaves the base too), so the forget merges with the edit."""
    tombstones = {}
    for note_id in checkout.forgotten():
        try:
            note = store.note(note_id)
        except errors.NoSuchNote:
            continue
        if note.state == "forgotten":
            tombstones[note_id] = render_item(note)[0]
    if tombstones:
        _scrub_file(checkout.file, tombstones)
        _scrub_file(checkout.base_file, tombstones, checkout.file)


def _edits_of_bases(store: Store, place: Workspace) -> dict[Path, Path]:
    """Each base qem keeps (a checkout's base.md, the mirror's kept base) → the file edited from it."""
    edits = {c.base_file: c.file for c in kept(place)}
    edits[Path(store.root, MIRROR_BASE)] = place.mirror_path()
    return edits


def _scrub_mirror(store: Store, place: Workspace, note_id: str, tombstone: str) -> list[str]:
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
    problem = _scrub_file(mirror, {note_id: tombstone})
    return [problem] if problem else []


def _scrub_file(path: Path, tombstones: dict[str, str], edit: Path | None = None) -> str | None:
    """Replace every item of each note in `tombstones` (note id → its tombstone line) in
    the file (a conflict block may show one more than once).  `edit`: the file edited from
    this one (a base); where the edit deleted the note's item, the item leaves the base
    too, for a tombstone in the base alone would read as the edit deleting a forgotten
    note (refused), not as the edit and the forget both taking it out.  Returns a problem,
    or None."""
    try:
        data = read_regular(path)
        if data is None:
            return None
        lines = data.decode("utf-8", "surrogateescape").split("\n")
        cleaned = lines
        for note_id, tombstone in tombstones.items():
            cleaned = _without_items(cleaned, note_id, None if _deleted_in(edit, note_id) else tombstone)
        if cleaned != lines:
            write_atomic(path, "\n".join(cleaned).encode("utf-8", "surrogateescape"), mode=os.stat(path).st_mode & 0o777)
    except (OSError, errors.QemError) as exc:
        return f"warning: could not scrub {path}: {getattr(exc, 'strerror', None) or exc}"
    return None


def _item_start(note_id: str) -> re.Pattern[str]:
    # the file may show the note by a shorter prefix than its id (any of 4 characters or more)
    return re.compile(rf"- \[#({'|'.join(re.escape(note_id[:n]) for n in range(len(note_id), 3, -1))})\](?: |\Z)")


def _deleted_in(edit: Path | None, note_id: str) -> bool:
    """Whether `edit` (a file qem can read) holds no item of the note."""
    try:
        data = read_regular(edit) if edit is not None else None
    except (OSError, errors.QemError):
        return False
    if data is None:
        return False
    start = _item_start(note_id)
    return not any(start.match(line) for line in data.decode("utf-8", "surrogateescape").split("\n"))


def _without_items(lines: list[str], note_id: str, tombstone: str | None) -> list[str]:
    """`lines` with each item of the note replaced by `tombstone` (None: removed)."""
    start = _item_start(note_id)
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not start.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        if tombstone is not None:
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
