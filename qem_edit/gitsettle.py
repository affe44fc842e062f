"""Log files a git merge left unmerged, settled by their names.

No log file is ever changed (a file's name is the hash of its bytes), so git never has a
content conflict under `.qem/`.  But git's rename detection pairs a deleted file with a
new one of similar bytes: a pack of one event and the event file it replaced, a text pack
written again without a forgotten text and the pack it replaced.  When the other side
deleted (or "renamed") the same file, the merge (or rebase, cherry-pick, revert) stops on
it, and where both sides renamed it git writes both sides' bytes merged into each new path,
a file its name no longer describes.

Each such path has exactly one right answer, because names are hashes: the bytes that
hash to its name, from whichever side of the merge holds the file, or no file when
neither side does (both deleted it).  `settle` writes that answer and stages it, so the
next `git commit` (or `--continue`) carries the union of both sides' log, as a merge of
files that were only ever added or deleted must.
"""

from __future__ import annotations

from pathlib import Path

from . import gitrepo
from .files import write_atomic
from .logtree import EVENTS, PACKS, TEXTS, LogFileError, records_from

# the commits a stopped merge, rebase, cherry-pick or revert puts its sides at
SIDES = ("HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD")


def unmerged(top: Path, log_root: Path) -> list[str]:
    """The log files git left unmerged (paths relative to the top of the work tree)."""
    relative = log_root.resolve().relative_to(top.resolve()).as_posix()
    done = gitrepo._git(top, "ls-files", "-u", "-z", "--", *(f"{relative}/{f}" for f in (EVENTS, TEXTS, PACKS)))
    if done.returncode != 0:
        return []
    return sorted({record.partition(b"\t")[2].decode("utf-8", "surrogateescape")
                   for record in done.stdout.split(b"\0") if record})


def settle(top: Path, log_root: Path) -> list[str]:
    """Every unmerged log file given the bytes its name says (or removed), and staged;
    returns the paths settled."""
    paths = unmerged(top, log_root)
    if not paths:
        return []
    prefix = log_root.resolve().relative_to(top.resolve()).as_posix() + "/"
    sides = [side for side in SIDES if gitrepo.resolve_commit(top, side)]
    keep, drop = [], []
    for path in paths:
        data = _right_bytes(top, sides, path, path[len(prefix):])
        if data is None:
            (top / path).unlink(missing_ok=True)
            drop.append(path)
        else:
            write_atomic(top / path, data)
            keep.append(path)
    if keep:
        gitrepo._git(top, "add", "--", *keep)
    if drop:
        gitrepo._git(top, "rm", "-q", "--cached", "--ignore-unmatch", "--", *drop)
    return paths


def _right_bytes(top: Path, sides: list[str], path: str, name: str) -> bytes | None:
    """The bytes one side holds at `path` that are what the log file `name` must hold."""
    for side in sides:
        data = gitrepo.show(top, side, top / path)
        if data is None:
            continue
        try:
            records_from(name, data)
        except LogFileError:
            continue
        return data
    return None
