"""The log's folders, and their fingerprint, taken without the log's reader.

A few stat calls tell a reader whether the log it knew is the log there is: a file
added to, removed from or renamed in a folder changes the folder's modification time, so
the times (and inode numbers) of the log's folders change whenever its file set does.
The index keeps the fingerprint it last caught up with (qem_edit.storage.index), and so
does what a hook keeps beside it (qem_edit.reads.quiet): each is trusted only while the
log's fingerprint is still the one it names.  Small and importing nothing of qem's, so
that a hook can take it without loading the log's reader.
"""

from __future__ import annotations

import os

EVENTS, TEXTS, PACKS = "events", "texts", "packs"
# The folder of this clone's own notes (vocabulary.LOCAL_SCOPES): its files are named
# `private/events/<id>` and `private/texts/<note>`, one record each.  A `.gitignore` of
# its own ignores everything in it, itself included, so no commit habit adds it (`git add
# -A`, `git commit -am`, `git add .`), whatever the memory's committed `.gitignore` says;
# it survives `git clean -fd` (which leaves ignored files), not `git clean -fdx`.
LOCAL = "private"
FOLDERS = (EVENTS, TEXTS, PACKS, f"{LOCAL}/{EVENTS}", f"{LOCAL}/{TEXTS}")


def stamp(root: str | os.PathLike[str]) -> tuple:
    """The fingerprint of the log under `root` (the memory's folder): each log folder's
    modification time and inode, or None twice for one that is not there."""
    out = []
    for folder in FOLDERS:
        try:
            info = os.stat(os.path.join(root, folder))
            out.append((folder, info.st_mtime_ns, info.st_ino))
        except OSError:
            out.append((folder, None, None))
    return tuple(out)
