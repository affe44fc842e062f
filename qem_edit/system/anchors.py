"""Anchors: the files and folders a note is about, and what they held.

An anchor is a path from the top of the work tree (`/`-separated) and the git object id of
what it holds: for a file, the id of the blob `git add` would store (git hashes it, applying
the filters its attributes and config name: line endings, LFS, a clean filter, so the work
tree, git's index and a commit agree; outside git, `sha1(b"blob %d\\0" % len(data) + data)`
over the bytes as they are, which is the same where no filter applies); for a
folder, the id of its tree as `git write-tree` would make it of the files git sees there
(tracked, or untracked and not ignored; outside git, every file), each blob hashed the
same way; a symbolic link inside the tree is, as git keeps it, a blob of where it points.
A repository whose objects are SHA-256 gets SHA-256 ids.

Three places hold a path's content, and one function reads each: the work tree
(`worktree_oid`), git's index (`index_oid`, what the next commit holds) and a commit
(`revision_oid`).  Each gives None where the path is not there.  `checked_path` is the one
judgment of a path a person or an agent names, refusing (exit 2) what is not an anchor;
`named_path` the reading of a path a reader names to find notes by (nothing is read).
"""

from __future__ import annotations

import bisect
import os
import stat
from collections.abc import Callable, Iterable

from ..base import errors
from ..base.records import Record
from ..base.stored_form import UNANCHORABLE, anchor_path_problem
from .files import name_within

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from .files import AnyPath
    from .gitrepo import WorkTreeFiles


class WorkTree(Record):
    """The tree anchors are relative to: git's work tree top (else the workspace), whether
    git keeps it, the object format its ids are in, and the paths in it no note may be
    anchored to beside .git/ and .qem/ (the memory's rendering, MEMORY.md, which every
    write changes).  Its top is a string, resolved (os.path joins it: the commit hooks
    import no pathlib)."""

    top: str
    git: bool = False
    object_format: str = "sha1"
    unanchorable: tuple[str, ...] = ()

    def path(self, anchor: str) -> str:
        return os.path.join(self.top, anchor)


def place_tree(place) -> WorkTree:  # type: ignore[no-untyped-def]
    """The work tree of a workspace (qem_edit.system.workspace.Workspace), its mirror unanchorable."""
    tree = work_tree(place.root_name)
    try:
        mirror = name_within(tree.top, place.mirror_name())
    except (OSError, errors.QemError):
        return tree
    return tree if mirror is None else tree._replace(unanchorable=(mirror,))


def work_tree(root: AnyPath) -> WorkTree:
    """The work tree holding `root` (a workspace): git's top and object format where git
    keeps it, else `root` itself, its ids SHA-1 as a new git repository's are."""
    from . import gitrepo

    found = gitrepo.top_and_object_format(root)  # one git call: a hook pays for each
    if found is None:
        return WorkTree(os.path.realpath(root))
    return WorkTree(found[0], True, found[1])


# -- the path a writer names ----------------------------------------------------------------


def checked_path(tree: WorkTree, typed: str, cwd: AnyPath | None = None) -> str:
    """The anchor a writer names as `typed`, as stored: relative to `cwd` when that is in
    the work tree (as a shell completes it), else to the top; `/`-separated, normalized.
    Refused (BadInput, naming the path and why) unless it names an existing file or
    folder inside the tree, reached through no symbolic link out of it."""
    if not typed or "\x00" in typed:
        raise errors.BadInput(f"anchor {typed!r}: an empty path, or one holding a NUL")
    if os.path.isabs(typed) or typed.startswith("\\"):
        raise errors.BadInput(f"anchor {typed!r}: an absolute path; name it from the top of the work tree")
    base = _base(tree, cwd)
    joined = os.path.normpath(os.path.join(base, typed)) if base else os.path.normpath(typed)
    if joined == ".":
        raise errors.BadInput(f"anchor {typed!r}: names the whole work tree; anchor a file or folder inside it")
    if joined == ".." or joined.startswith("../"):
        raise errors.BadInput(f"anchor {typed!r}: `..` leads out of the work tree ({tree.top})")
    path = joined.replace(os.sep, "/")
    problem = anchor_path_problem(path)
    if problem:
        raise errors.BadInput(f"anchor {typed!r}: {problem}")
    if path in tree.unanchorable:
        raise errors.BadInput(f"anchor {typed!r}: the memory's own rendering, which every write changes;"
                              " anchor the code a note is about")
    _refuse_links_out(tree, typed, path)
    if not os.path.lexists(tree.path(path)):
        raise errors.BadInput(f"anchor {typed!r}: no such file or folder in the work tree ({tree.top})")
    _refuse_submodule(tree, typed, path)
    where = tree.path(path)
    if not os.path.islink(where) and not (os.path.isfile(where) or os.path.isdir(where)):
        raise errors.BadInput(f"anchor {typed!r}: neither a file nor a folder (a device, a pipe, a socket)")
    if os.path.isdir(where) and not os.path.islink(where) and _holds_memory(where):
        raise errors.BadInput(f"anchor {typed!r}: holds the memory's own log (.qem/), which every write changes;"
                              " anchor the folders inside it instead")
    return path


def _base(tree: WorkTree, cwd: AnyPath | None) -> str:
    """Where a typed path starts: `cwd` as a path from the top, when it is inside the tree."""
    from pathlib import Path

    here = Path(cwd or os.getcwd()).resolve()
    try:
        relative = here.relative_to(tree.top)
    except ValueError:
        return ""
    return "" if str(relative) == "." else relative.as_posix()


def _refuse_links_out(tree: WorkTree, typed: str, path: str) -> None:
    """Each part of the path, walked from the top: a symbolic link among its folders is
    refused (git keeps no file beyond one), and so is a link, the path itself, pointing
    out of the tree."""
    from pathlib import Path

    top = Path(tree.top)
    parts = path.split("/")
    for depth in range(1, len(parts) + 1):
        here = top.joinpath(*parts[:depth])
        if not here.is_symlink():
            continue
        target = Path(os.path.realpath(here))
        if target != top and top not in target.parents:
            raise errors.BadInput(f"anchor {typed!r}: {'/'.join(parts[:depth])} is a symbolic link pointing out of"
                                  f" the work tree (to {target})")
        if depth < len(parts):
            inside = target.relative_to(top).as_posix()
            raise errors.BadInput(f"anchor {typed!r}: {'/'.join(parts[:depth])} is a symbolic link (to {inside});"
                                  " name the path it points to")


def _refuse_submodule(tree: WorkTree, typed: str, path: str) -> None:
    """A submodule (a folder holding a repository of its own, `.git` a file or a folder),
    or a path inside one: this repository keeps only the commit it is at, no files there."""
    parts = path.split("/")
    for depth in range(1, len(parts) + 1):
        if os.path.lexists(os.path.join(tree.top, *parts[:depth], ".git")):
            where = "/".join(parts[:depth])
            inside = "" if depth == len(parts) else f"inside the submodule {where}, which"
            raise errors.BadInput(f"anchor {typed!r}: {inside or 'a submodule, which'} this repository keeps as the"
                                  " commit it is at, not as files; anchor a file or folder of this repository,"
                                  " or write the note in the submodule's own memory")


def _holds_memory(folder: str) -> bool:
    return any(os.path.isdir(os.path.join(folder, name)) for name in UNANCHORABLE[1:])


def anchored(tree: WorkTree, typed: Iterable[str], cwd: AnyPath | None = None) -> tuple[tuple[str, str], ...]:
    """The anchors of a write: each typed path checked, and its content's object id now,
    in path order (a path named twice counts once)."""
    paths = sorted({checked_path(tree, t, cwd) for t in typed})
    out = []
    for path in paths:
        oid = worktree_oid(tree, path)
        if oid is None:
            raise errors.BadInput(f"anchor {path!r}: it went while it was read, or is a folder holding no file"
                                  " git would keep; nothing was written")
        out.append((path, oid))
    return tuple(out)


# -- the path a reader names ----------------------------------------------------------------


def named_path(typed: str, what: str) -> str:
    """A path a reader names to find notes by their anchors (`anchor=PATH`, `qem anchors
    list PATH`), as anchors are stored: from the top of the work tree, `/`-separated, a
    trailing `/` dropped.  Nothing is read; BadInput, naming `what`, for a path no anchor
    can have (absolute, `..`, inside `.git/`, ...)."""
    path = typed.rstrip("/") if typed.strip("/") else typed
    problem = anchor_path_problem(path)
    if problem:
        raise errors.BadInput(f"{what}: {problem}")
    return path


def under(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or inside the folder it names (`src` holds `src` and
    `src/a.py`, never `srcx/b.py`)."""
    return path == folder or path.startswith(folder + "/")


def folder_range(folder: str) -> tuple[str, str]:
    """The bounds (both exclusive) between which, in byte order, lie exactly the paths
    inside `folder`: `folder/` and `folder0` (`0` follows `/`), so an index on paths finds
    them without a scan."""
    return folder + "/", folder + "0"


# -- object ids -----------------------------------------------------------------------------


def blob_oid(data: bytes, object_format: str = "sha1") -> str:
    """Git's id of a blob holding `data`."""
    import hashlib  # here, not at the top: OpenSSL's start-up is paid only by what hashes (ids.content_id)

    return hashlib.new(object_format, b"blob %d\0" % len(data) + data).hexdigest()


def worktree_oid(tree: WorkTree, path: str) -> str | None:
    """The object id of what `path` holds in the work tree now (None: nothing there, or
    what is there is neither a file, a link nor a folder)."""
    entry = None if _through_link(tree, path) else _entry(tree, tree.path(path), hash_file=False)
    if entry is None:
        return None
    if entry[0] != _TREE:
        found = _entries(tree, [path]).get(path)
        return found[1].hex() if found is not None else None
    files = _tracked_files(tree, path) if tree.git else _every_file(tree, path)
    entries = _entries(tree, files)
    found = tree_id(path, files, entries.get, tree.object_format, empty=None)
    return found.hex() if found is not None else None  # a folder of no file: git holds nothing there


def _entries(tree: WorkTree, names: list[str]) -> dict[str, tuple[bytes, bytes]]:
    """(git's mode, binary id) of each file or link of `names` (paths from the top) that is
    there.  In git, a file's id is the blob `git add` would store: git hashes it (one
    `git hash-object --stdin-paths` for them all), applying the filters its attributes and
    config name (line endings, LFS, a clean filter), so the same content has the same id
    in the work tree, in git's index and in a commit.  Outside git: the bytes as they are."""
    out: dict[str, tuple[bytes, bytes]] = {}
    to_git: list[tuple[str, bytes]] = []
    for name in names:
        entry = _entry(tree, tree.path(name), hash_file=not tree.git or "\n" in name)
        if entry is None or entry[0] == _TREE:
            continue
        if entry[1]:
            out[name] = entry
        else:
            to_git.append((name, entry[0]))
    hashed = _git_hashed(tree, [name for name, _ in to_git]) if to_git else None
    for n, (name, mode) in enumerate(to_git):
        oid = hashed[n] if hashed is not None else _file_oid(tree.path(name), tree.object_format)
        if oid is not None:
            out[name] = (mode, oid)
    return out


def _git_hashed(tree: WorkTree, names: list[str]) -> list[bytes] | None:
    """The blob ids git stores for these files, filters applied (None: git could not say,
    as when a file went meanwhile: then the bytes are hashed as they are)."""
    from . import gitrepo

    return gitrepo.hashed_blobs(tree.top, names)


def _through_link(tree: WorkTree, path: str) -> bool:
    """Whether a folder on the way to `path` is a symbolic link: what lies beyond it is
    not in the tree (git keeps no file there), and an anchor from another clone must never
    lead a read out of it."""
    parts = path.split("/")
    return any(os.path.islink(os.path.join(tree.top, *parts[:depth])) for depth in range(1, len(parts)))


def index_oid(tree: WorkTree, path: str) -> str | None:
    """The object id `path` has in git's index (what the next commit holds): a file's
    blob, or a folder's tree as `git write-tree --prefix` makes it (None: not staged)."""
    from . import gitrepo

    staged = gitrepo.staged_files(tree.top, [path])
    if path in staged:
        return staged[path]
    if not staged:
        return None
    return gitrepo.staged_tree(tree.top, path)


def revision_oid(tree: WorkTree, path: str, rev: str) -> str | None:
    """The object id of `path` in revision `rev` (None: not there)."""
    from . import gitrepo

    return gitrepo.object_at(tree.top, rev, path)


_BLOB, _EXEC, _LINK, _TREE = b"100644", b"100755", b"120000", b"40000"
_FILE_MODES = (_BLOB, _EXEC, _LINK)  # what a listing keeps: no nested repository (160000)


def _entry(tree: WorkTree, where: AnyPath, hash_file: bool = True) -> tuple[bytes, bytes] | None:
    """(git's mode, binary id) of a file, a link or (its mode alone) a folder; a file's id
    over its bytes as they are, or none (b"") unless `hash_file`."""
    try:
        info = os.lstat(where)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return _LINK, bytes.fromhex(blob_oid(os.fsencode(os.readlink(where)), tree.object_format))
    if stat.S_ISDIR(info.st_mode):
        return _TREE, b""
    if not stat.S_ISREG(info.st_mode):
        return None
    mode = _EXEC if info.st_mode & stat.S_IXUSR else _BLOB
    if not hash_file:
        return mode, b""
    oid = _file_oid(where, tree.object_format)
    return None if oid is None else (mode, oid)


def file_digests(tree: WorkTree, path: str, other: str) -> tuple[str, str] | None:
    """The blob id of the file `path` holds in the work tree and the `other` digest of its
    bytes (e.g. sha256, as another tool hashed it), from one read, never through a link
    (None: no regular file there).  `path` is one `checked_path` took."""
    digests = _hashed_file(tree.path(path), tree.object_format, other)
    if digests is None:
        return None
    blob = _entries(tree, [path]).get(path) if tree.git else None  # (as git stores it: worktree_oid)
    return (blob[1].hex() if blob is not None else digests[0].hexdigest()), digests[1].hexdigest()


def _file_oid(where: AnyPath, object_format: str) -> bytes | None:
    digests = _hashed_file(where, object_format)
    return None if digests is None else digests[0].digest()


def _hashed_file(where: AnyPath, object_format: str, *others: str) -> list | None:
    """A file's blob digest (and `others`' digests of its bytes), read a block at a time,
    never through a link."""
    try:
        fd = os.open(where, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None
        import hashlib

        digests = [hashlib.new(object_format, b"blob %d\0" % info.st_size), *(hashlib.new(o) for o in others)]
        for block in iter(lambda: handle.read(1 << 20), b""):
            for digest in digests:
                digest.update(block)
        return digests


def _tracked_files(tree: WorkTree, folder: str) -> list[str]:
    """The files of `folder` git sees: tracked ones still there, and untracked ones it does
    not ignore (paths from the top; a nested repository is left out)."""
    from . import gitrepo

    return sorted(n for n in gitrepo.files_seen(tree.top, folder) if n.startswith(folder + "/"))


def _every_file(tree: WorkTree, folder: str) -> list[str]:
    """Every file and link under `folder` (outside git: nothing is ignored), `.git` and
    `.qem` folders aside, as paths from the top."""
    out = []
    for here, dirs, files in os.walk(tree.path(folder)):
        links = [d for d in dirs if os.path.islink(os.path.join(here, d))]  # kept as links, never followed
        dirs[:] = [d for d in dirs if d not in UNANCHORABLE and d not in links]
        out += [os.path.relpath(os.path.join(here, name), tree.top).replace(os.sep, "/") for name in files + links]
    return sorted(out)


def tree_id(folder: str, files: Iterable[str], entry: Callable[[str], tuple[bytes, bytes] | None],
            object_format: str, empty: bytes | None = None) -> bytes | None:
    """The id of the tree git makes of these files of `folder` (paths from the top), each
    file's (mode, binary id) given by `entry` (None: not a file after all); `empty` where
    no file is there (git keeps no empty folder)."""
    nested: dict = {}
    for name in files:
        *folders, leaf = name[len(folder) + 1:].split("/")
        node = nested
        for part in folders:
            node = node.setdefault(part, {})
        node[leaf] = name
    return _hashed_tree(nested, entry, object_format) or empty


def _hashed_tree(node: dict, entry: Callable[[str], tuple[bytes, bytes] | None], object_format: str) -> bytes | None:
    """A tree object's id from its entries (None: no file under it, so git has no tree)."""
    entries = []
    for name, child in node.items():
        if isinstance(child, dict):
            mode, oid = _TREE, _hashed_tree(child, entry, object_format)
        else:
            mode, oid = entry(child) or (_TREE, None)
            oid = None if mode == _TREE else oid  # gone, a folder now, or no file at all: not in the tree
        if oid is not None:
            raw = os.fsencode(name)
            entries.append((raw + b"/" if mode == _TREE else raw, mode + b" " + raw + b"\0" + oid))
    if not entries:
        return None
    body = b"".join(entry for _, entry in sorted(entries))
    import hashlib

    return hashlib.new(object_format, b"tree %d\0" % len(body) + body).digest()


# -- what a whole place holds: the drift check's reading ------------------------------------------


class Listing:
    """The files one place holds as git lists them (git's index, or a commit): each file's
    mode and object id, so that a file's id, and a folder's tree id, are answered without
    reading a file; and, for a move, the paths that hold a given id."""

    def __init__(self, files: dict[str, tuple[bytes, bytes]], object_format: str) -> None:
        self.files = files
        self.object_format = object_format
        self._sorted = sorted(files)
        self._trees: dict[str, str | None] = {}
        self._by_oid: dict[str, list[str]] | None = None

    def oid(self, path: str) -> str | None:
        """What `path` holds here: a file's blob id, a folder's tree id (None: nothing)."""
        if path in self.files:
            return self.files[path][1].hex()
        if path not in self._trees:
            under = self.under(path)
            found = tree_id(path, under, self.files.get, self.object_format)
            self._trees[path] = found.hex() if found is not None else None
        return self._trees[path]

    def under(self, folder: str) -> list[str]:
        """The files inside `folder`, in order."""
        start = bisect.bisect_left(self._sorted, folder + "/")
        end = bisect.bisect_left(self._sorted, folder + "0")  # "0" follows "/" in byte order
        return self._sorted[start:end]

    def holding(self, oid: str) -> list[str]:
        """The files and folders whose content is `oid`, in path order."""
        if self._by_oid is None:
            self._by_oid = {}
            folders = {name.rsplit("/", i)[0] for name in self._sorted for i in range(1, name.count("/") + 1)}
            for path in [*self._sorted, *sorted(folders)]:
                found = self.oid(path)
                if found is not None:
                    self._by_oid.setdefault(found, []).append(path)
        return self._by_oid.get(oid, [])


def staged_listing(tree: WorkTree, paths: list[str] | None = None) -> Listing:
    """What git's index holds (the next commit), `paths` alone (files, or every file under
    folders) where named; a path mid-merge (unmerged) and a nested repository left out."""
    from . import gitrepo

    return _listing(tree, gitrepo.index_entries(tree.top, paths))


def _listing(tree: WorkTree, entries: list[tuple[bytes, str, str, str]]) -> Listing:
    files = {name: (mode, bytes.fromhex(oid)) for mode, oid, stage, name in entries
             if stage == "0" and mode in _FILE_MODES}
    return Listing(files, tree.object_format)


def unmerged(tree: WorkTree) -> set[str]:
    """The paths git's index holds mid-merge (no one content to judge)."""
    from . import gitrepo

    return gitrepo.unmerged_paths(tree.top)


def revision_listing(tree: WorkTree, rev: str) -> Listing:
    """What commit `rev` holds (a nested repository left out, as the work tree's reading
    leaves it out)."""
    from . import gitrepo

    commit = gitrepo.commit_of(tree.top, rev)
    if commit is None:
        raise errors.BadInput(f"--rev {rev!r}: not a commit of this repository")
    try:
        entries = gitrepo.commit_entries(tree.top, commit)
    except gitrepo.GitFailed as exc:
        raise errors.BadInput(f"--rev {rev!r}: git cannot list it ({exc})") from None
    files = {name: (mode, bytes.fromhex(oid)) for mode, oid, name in entries if mode in _FILE_MODES}
    return Listing(files, tree.object_format)


class WorkTreeContent:
    """What the work tree holds, read the way `git status` reads it: git's index for what
    its stat cache says is unchanged, the files themselves for what it does not (changed,
    untracked, or not in git's index at all); outside git, the files themselves."""

    def __init__(self, tree: WorkTree, read: WorkTreeFiles | None = None) -> None:
        """`read`: what `gitrepo.work_tree_files` answered already, in this run (else asked now)."""
        self.tree = tree
        self.listing: Listing | None = None
        self.changed: list[str] = []
        if tree.git:
            from . import gitrepo

            entries, unstaged, untracked = read if read is not None else gitrepo.work_tree_files(tree.top)
            self.listing = _listing(tree, entries)
            self.changed = sorted(unstaged | set(untracked))

    def oid(self, path: str) -> str | None:
        if self.listing is None or self._touched(path):
            return worktree_oid(self.tree, path)
        return self.listing.oid(path) or worktree_oid(self.tree, path)

    def _touched(self, path: str) -> bool:
        """Whether `path` is, or holds, a file git's stat cache cannot vouch for."""
        at = bisect.bisect_left(self.changed, path)
        if at < len(self.changed) and self.changed[at] == path:
            return True
        at = bisect.bisect_left(self.changed, path + "/")
        return at < len(self.changed) and self.changed[at].startswith(path + "/")

    def holding(self, oid: str) -> list[str]:
        """The files and folders holding `oid` in the work tree now."""
        found = set(self.listing.holding(oid)) if self.listing is not None else set()
        found |= {name for name in self.changed if worktree_oid(self.tree, name) == oid}
        return sorted(path for path in found if self.oid(path) == oid)

