"""Starting a memory where none is committed, as on a branch cut before the memory existed.

On such a branch git removes the memory's committed files (`.qem/config.toml`,
`.gitignore`, `.gitattributes`, the log) and leaves the ignored ones (`.qem/index.db`).
A memory started there with a new id would make files that differ from the other branch's:
`git switch main` then refuses ("untracked working tree files would be overwritten") and a
merge would join two memories.  So the index remembers the memory's committed files (their
bytes, in its `meta` table, as every command opens it), and a memory started beside such an
index takes them: the same id, the same bytes.  In a git work tree they are staged, so
that git, which accepts a staged file identical to the one a switch brings, switches and
merges cleanly.  The memory's id (`[memory] id` in config.toml) is read here, and made
here when a memory starts new.
"""

from __future__ import annotations

import os

from ..base import errors, ids
from ..system.files import read_regular, read_text, write_atomic
from ..system.workspace import CONFIG_NAME, INDEX_NAME, settings_of
from .logtree import EVENTS, PACKS, TEXTS

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..system.files import AnyPath

COMMITTED = (CONFIG_NAME, ".gitignore", ".gitattributes")  # the memory's files beside its log
REMEMBERED_MOST = 1 << 16  # bytes of one such file the index keeps
_KEY = "committed:"  # meta keys: committed:<name>


def is_new(root: AnyPath) -> bool:
    """Whether no memory is here yet: no log folders, or no config.toml and no log file
    (what a branch from before the memory leaves: the ignored files, empty folders).  A
    config.toml naming a memory is one, log folders or not: git keeps no empty folder, so
    a clone of a memory committed before its first note holds only its committed files."""
    if not os.path.isdir(os.path.join(root, EVENTS)) and not os.path.isdir(os.path.join(root, PACKS)):
        return not _config_names_a_memory(root)  # (read only here: a hook imports no TOML reader)
    if os.path.exists(os.path.join(root, CONFIG_NAME)):
        return False
    return not any(_holds_files(os.path.join(root, folder)) for folder in (EVENTS, TEXTS, PACKS))


def _config_names_a_memory(root: AnyPath) -> bool:
    try:
        return _names_a_memory(read_regular(os.path.join(root, CONFIG_NAME)) or b"")
    except (OSError, errors.QemError):  # a link, a file where the folder is: whoever opens it says so
        return False


def _holds_files(folder: str) -> bool:
    try:
        return any(not name.startswith(".") for name in os.listdir(folder))
    except OSError:
        return False


def remember(store, root: AnyPath) -> None:  # type: ignore[no-untyped-def]
    """Keep the memory's committed files in the index (written only when they changed)."""
    known = store.remembered_under(_KEY)
    if known is None:
        return  # a convenience for a later branch; an index that cannot be read keeps nothing
    try:
        for name in COMMITTED:
            data = read_regular(os.path.join(root, name))
            if data is None or len(data) > REMEMBERED_MOST:
                continue
            text = data.decode("utf-8", "surrogateescape")
            if known.get(_KEY + name) != text:
                store.remember(_KEY + name, text)  # (a read-only index keeps nothing)
    except (OSError, UnicodeError):
        pass


def remembered(root: AnyPath) -> dict[str, bytes]:
    """The committed files the index left here remembers (none: no index, or an older one)."""
    from .index import read_meta

    path = os.path.join(root, INDEX_NAME)
    if not os.path.isfile(path):
        return {}
    files = {key[len(_KEY):]: value.encode("utf-8", "surrogateescape") for key, value in read_meta(path, _KEY).items()
             if key[len(_KEY):] in COMMITTED}
    return files if _names_a_memory(files.get(CONFIG_NAME, b"")) else {}


def _names_a_memory(config: bytes) -> bool:
    try:
        memory = settings_of(config.decode("utf-8")).get("memory", {})
    except ValueError:
        return False
    return isinstance(memory, dict) and isinstance(memory.get("id"), str) and bool(memory["id"])


def committed_elsewhere(root: AnyPath) -> tuple[dict[str, bytes], str | None]:
    """The memory's committed files as the newest commit of any branch holds them, and
    that commit's short hash (none: not in git, or no commit holds a memory here)."""
    from pathlib import Path  # (git's questions take Paths; only a memory's start asks them)

    from ..system import gitrepo

    root = Path(root)
    top = gitrepo.toplevel(root)
    if top is None:
        return {}, None
    commit = gitrepo.last_change(top, root / CONFIG_NAME, every_ref=True)
    if commit is None:
        return {}, None
    files = {name: data for name in COMMITTED if (data := gitrepo.show(top, commit, root / name)) is not None}
    return (files, commit) if _names_a_memory(files.get(CONFIG_NAME, b"")) else ({}, None)


def start(root: AnyPath) -> str:
    """Start the memory at `root`: the log folders and its committed files (those the index
    left here remembers, else those another branch commits, else new ones with a new id);
    what to tell the user.  The store that opened it stages them with its first write
    (qem_edit.mirror.gitstage)."""
    from .logtree import LogTree

    kept, commit = remembered(root), None
    if not kept:
        kept, commit = committed_elsewhere(root)
    os.makedirs(root, exist_ok=True)
    for name, data in kept.items():
        write_atomic(os.path.join(root, name), data)
    memory = ensure_memory_id(root)  # before the folders: a memory with folders has its id
    LogTree(root).ensure()
    if not kept:
        return f"created a new memory at {root} (memory {memory})"
    source = f"commit {commit} holds" if commit else f"{os.path.join(root, INDEX_NAME)} remembers"
    return (f"started the memory at {root} as memory {memory}, the one {source} (this branch holds no memory:"
            f" cut before it was committed?); its {', '.join(COMMITTED)} are that memory's, staged in git with"
            " this write, so switching branches and merging keep one memory")


def read_memory_id(root: AnyPath) -> str | None:
    try:
        config = settings_of(read_text(os.path.join(root, CONFIG_NAME)))
    except (OSError, ValueError):
        return None
    memory = config.get("memory", {})
    value = memory.get("id") if isinstance(memory, dict) else None
    return value if isinstance(value, str) and value else None


def ensure_memory_id(root: AnyPath, memory_id: str | None = None) -> str:
    """The memory's id, made (and written to config.toml, beside any settings there) when
    the memory is created."""
    existing = read_memory_id(root)
    if existing is not None:
        return existing
    path = os.path.join(root, CONFIG_NAME)
    try:
        before = read_text(path)
    except FileNotFoundError:
        before = ""
    made = memory_id or ids.nonce()[:12]
    block = f'[memory]\n# names this memory in MEMORY.md\'s header; made once, committed with the log\nid = "{made}"\n'
    write_atomic(path, ((before.rstrip("\n") + "\n\n") if before.strip() else "").encode() + block.encode())
    return made
