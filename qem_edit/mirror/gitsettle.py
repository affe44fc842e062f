"""Log files a git merge left unmerged, settled by their names.

No log file is ever changed (a file's name is the hash of its bytes), so git never has a
content conflict under `.qem/`.  But git's rename detection pairs a deleted file with a
new one of similar bytes: a pack of one event and the event file it replaced, a text pack
written again without a forgotten text and the pack it replaced.  When the other side
deleted (or "renamed") the same file, the merge (or rebase, cherry-pick, revert) stops on
it, and where both sides renamed it git writes both sides' bytes merged into each new path,
a file its name no longer describes.

Git's directory rename detection goes further: when every file one side renamed out of
`events/` went to `packs/`, it moves the other side's new `events/<id>` to `packs/<id>`,
a name no log file has.

Each such path has exactly one right answer, because names are hashes: the bytes that
hash to its name, from whichever side of the merge (or stage of the index) holds the
file; for a moved file, its own folder's name for those bytes; or no file when neither
side has one (both deleted it).  `settle` writes that answer and stages it, so the
next `git commit` (or `--continue`) carries the union of both sides' log, as a merge of
files that were only ever added or deleted must.
"""

from __future__ import annotations

from ..base import errors
from ..storage.logtree import EVENTS, PACKS, TEXTS, LogFileError, records_from
from ..system import gitrepo
from ..system.files import leads_out, name_within, write_atomic

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from pathlib import Path

    from ..system.files import AnyPath

# the commits a stopped merge, rebase, cherry-pick or revert puts its sides at
SIDES = ("HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD")


def unmerged(top: AnyPath, log_root: AnyPath) -> dict[str, list[str]]:
    """The log files git left unmerged (paths relative to the top of the work tree), each
    with the blobs its index stages hold."""
    relative = name_within(top, log_root)
    if relative is None:
        raise ValueError(f"{log_root} is not inside {top}")
    out: dict[str, list[str]] = {}
    for path, blob, stage in gitrepo.unmerged_stages(top, [f"{relative}/{f}" for f in (EVENTS, TEXTS, PACKS)]):
        blobs = out.setdefault(path, [])
        if stage != "1":  # the sides' stages (2, 3), never the merge base's (1): a file both deleted stays deleted
            blobs.append(blob)
    return dict(sorted(out.items()))


def settle(top: AnyPath, log_root: AnyPath) -> list[str]:
    """Every unmerged log file given the bytes its name says, or put back where its name
    belongs (git's directory rename detection moves a side's new `events/<id>` into
    `packs/`), or removed; staged.  Returns the paths settled (none, and no pathlib
    loaded, where git left none: a commit hook's qem-export asks on every commit)."""
    paths = unmerged(top, log_root)
    if not paths:
        return []
    from pathlib import Path

    top = Path(top)
    prefix = f"{name_within(top, log_root)}/"
    sides = [side for side in SIDES if gitrepo.commit_of(top, side)]
    keep, drop = [], []
    for path, staged in paths.items():
        found = _right_bytes(top, sides, staged, path, path[len(prefix):])
        if found is None or found[0] != path[len(prefix):]:
            (top / path).unlink(missing_ok=True)
            drop.append(path)
        if found is not None:
            if leads_out(top, prefix + found[0]):  # a log folder a clone made a link out of the tree
                raise errors.BadInput(f"{prefix + found[0]} leads outside the work tree ({top}) through a symbolic"
                                      " link; qem writes its log only into folders of its own; settle it by hand")
            (top / prefix / found[0]).parent.mkdir(exist_ok=True)  # (git removes a folder it emptied)
            write_atomic(top / prefix / found[0], found[1])
            keep.append(prefix + found[0])
    if drop:
        gitrepo.remove_from_index(top, drop)
    if keep:
        gitrepo.add_to_index(top, keep)
    return list(paths)


def _right_bytes(top: Path, sides: list[str], staged: list[str], path: str, name: str) -> tuple[str, bytes] | None:
    """The log file's name and bytes: a side's (or a stage's) bytes at `path` that are
    what `name` must hold, or, for a file git moved out of its folder, what the same name
    in its own folder must hold."""
    candidates = [data for side in sides if (data := gitrepo.show(top, side, top / path)) is not None]
    candidates += gitrepo.blobs(top, {str(i): blob for i, blob in enumerate(staged)}).values()
    base = name.rpartition("/")[2]
    names = [name] + [f"{folder}/{base}" for folder in (EVENTS, TEXTS) if f"{folder}/{base}" != name]
    for data in candidates:
        for where in names:
            try:
                records_from(where, data)
            except LogFileError:
                continue
            return where, data
    return None
