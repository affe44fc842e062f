"""qem stages what it writes, as `git mv` and `git rm` do.

A write adds files to the log (events, texts, packs; config.toml, .gitignore and
.gitattributes when it creates the memory) and a pack or a forget deletes some.  Left to
git alone, `git commit -am` would commit the deletions and leave the new files behind:
the log wiped in the commit while MEMORY.md lists every note.  So after a write (the log
file is the commit point; it has landed) the files the write touched go into git's index
(new ones added, deleted ones removed), and so does MEMORY.md when the write's automatic
export left it the rendering and git already tracks it.  The next commit, whatever the
habit that makes it, carries the write whole.

Only in a git work tree where `.qem/` is not ignored (a memory kept out of git stays out),
and not when `.qem/config.toml` says `[git] stage = false`.  An explicit `qem export`
stages nothing: a hook that rewrites MEMORY.md fails the commit and the user restages.
Staging never fails a write: when git cannot take it (its index locked by another git
past a short wait, no git), the writer is warned with the command that stages by hand.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..base import errors
from ..system import gitrepo
from ..system.workspace import CONFIG_NAME, git_top

LOCK_TRIES = 10  # git's index.lock held by another git: tries, LOCK_WAIT_S apart
LOCK_WAIT_S = 0.1


def stage_written(store, place, mirror: Path | None = None) -> list[str]:  # type: ignore[no-untyped-def]
    """Stage what the store's log wrote since the last call, and `mirror` (the rendering
    the write left) when git tracks it; the warnings to tell the writer (none when it
    worked, or when there is nothing to stage here)."""
    touched = store.tree.take_touched()
    if not touched and mirror is None:
        return []
    try:
        if not place.stages():
            return []
    except errors.QemError:
        return []
    root = Path(store.root)
    wanted = _wanted(root, touched, mirror)
    if not wanted:
        return []
    problem = _update_index(root, wanted)
    if problem is None:
        return []
    import shlex  # only for a warning

    what = " ".join(shlex.quote(_shown(place.root, p)) for p in [root, *([mirror] if mirror is not None else [])])
    return [f"warning: the write is saved, but git's index was not updated ({problem}); stage it with"
            f" `git add {what}` before you commit"]


def without_git(place, rendered: Path | None) -> list[str]:  # type: ignore[no-untyped-def]
    """The one line a write in a git work tree says when no `git` is on the PATH: what it
    could not do there (re-render a tracked MEMORY.md, which needs git to tell it is
    tracked; stage what it wrote), and how to do it by hand.  None elsewhere, and where the
    write asked git nothing (then it needed nothing of it)."""
    if not gitrepo.missing() or git_top(place.root) is None:
        return []
    try:
        mirror = place.mirror_path()
        configured = place.config().get("export", {}).get("auto")
        stages = place.stages()
    except errors.QemError:
        return []
    skipped = []
    if rendered is None and configured is None and mirror.is_file():
        skipped.append(f"{_shown(place.root, mirror)} was not re-rendered (`qem export` does it)")
    if stages:
        skipped.append(f"nothing was staged (`git add {_shown(place.root, place.store_path)}"
                       f" {_shown(place.root, mirror)}` where git is)")
    if not skipped:
        return []
    return [f"warning: no `git` on this PATH, in a git work tree: the write is saved, but {' and '.join(skipped)}"]


def stage_notes_left_out(store, place, note_ids: set[str]) -> list[str]:  # type: ignore[no-untyped-def]
    """The log files holding these notes' events that git's index lacks (untracked, not
    ignored), staged: a write whose staging a failed `git commit -a` threw away.  The
    files staged (none where staging is off or nothing is left out)."""
    if not note_ids:
        return []
    events = [event.id for note in sorted(note_ids) for event in store.events(note)]
    return stage_left_out(store, place, store.files_of_events(events))


def stage_left_out(store, place, names: set[str]) -> list[str]:  # type: ignore[no-untyped-def]
    """Of these log files (paths under the memory's folder), stage those git's index lacks
    (untracked, not ignored), and with them MEMORY.md where git tracks it (the rendering
    that shows them: `git commit -- PATHS` builds its index from HEAD and those paths)."""
    try:
        if not names or not place.stages():
            return []
    except errors.QemError:
        return []
    root = Path(store.root)
    listed = gitrepo.tagged_files(root, sorted(names), _top_guess(root)) or {}
    left_out = sorted(name for name, tag in listed.items() if tag == "?")
    if not left_out:
        return []
    wanted = _wanted(root, set(left_out), place.mirror_path()) or left_out
    return wanted if _update_index(root, wanted) is None else []


def _wanted(root: Path, touched: set[str], mirror: Path | None) -> list[str] | None:
    """The paths (relative to the memory's folder) to stage: the touched log files when
    `.qem/` is not ignored, the mirror when git tracks it.  None: not in a git work tree
    (or no git).  One `git ls-files` tells both: a tracked file is tagged H, an untracked
    one that is not ignored `?`, an ignored one is not listed."""
    shown = os.path.relpath(mirror, root) if mirror is not None else None
    asked = [CONFIG_NAME] + ([shown] if shown is not None else [])
    listed = gitrepo.tagged_files(root, asked, _top_guess(root))
    if listed is None and shown is not None:  # a mirror outside the work tree: git refuses the path
        shown, listed = None, gitrepo.tagged_files(root, [CONFIG_NAME], _top_guess(root))
    if listed is None:
        return None
    out = sorted(touched) if CONFIG_NAME in listed else []
    if shown is not None and listed.get(shown) == "H":
        out.append(shown)
    return out


def _top_guess(root: Path) -> Path:
    """The work tree's top as far as can be told without asking git: the memory's
    folder's parent (where `.qem` lives), for gitrepo.index_env."""
    return root.resolve().parent


def _update_index(root: Path, paths: list[str]) -> str | None:
    """`git update-index --add --remove` of the paths (a present file is added or
    updated, an absent one removed); what went wrong, or None."""
    feed = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)
    extra = gitrepo.index_env(_top_guess(root))
    for attempt in range(LOCK_TRIES):
        try:
            message = gitrepo.update_index(root, feed, extra)
        except errors.BadInput as exc:
            return str(exc)
        if message is None:
            return None
        if "index.lock" not in message or attempt == LOCK_TRIES - 1:
            return (message.splitlines() or ["git update-index failed"])[0].removeprefix("fatal: ")
        time.sleep(LOCK_WAIT_S)
    return None


def _shown(base: Path, path: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(base).resolve()).as_posix() or "."
    except ValueError:
        return str(path)
