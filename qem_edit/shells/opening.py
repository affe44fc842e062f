"""The memory a command names, opened the same way for every shell.

Opening the memory a command names, the same way for every shell (the CLI, the MCP
server): the workspace resolved, the store opened and caught up with the log, and what
opening it did told (a memory started, a forget that arrived scrubbed from this clone's
files, log files set aside)."""

from __future__ import annotations

from ..storage.store import Store
from ..system.workspace import Workspace, resolve

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from pathlib import Path


def open_memory(workspace_dir: Path | None, store_dir: Path | None, *, write: bool, create: bool,
                name_set_aside: bool = True, placed=None) -> tuple[Workspace, Store, list[str]]:  # type: ignore[no-untyped-def]
    """The workspace, its store (caught up with the log) and what opening it did, for
    every shell: a writer has its config checked first (a bad .qem/config.toml is refused
    before anything is written); a forget that arrived from another clone leaves this
    clone's private files too; log files set aside are named, by every command that
    meets them, until they are fixed (`qem verify` lists them itself).  `placed`: called
    with the workspace before its store opens (a commit hook's first git question, asked
    then, is answered while the store opens)."""
    place = resolve(workspace_dir, store_dir)
    if placed is not None:
        placed(place)
    if write:
        place.config()
    store = Store.open(place.store_name, create=create, write=write)
    notices = [store.started] if store.started else []
    if store.caught.forgotten:
        from ..writes.forgetting import scrub_arrived

        notices += scrub_arrived(store, place, store.caught.forgotten)
    return place, store, notices + (set_aside_notice(store) if name_set_aside else [])


def unmade(store: Store) -> None:
    """A memory this command made for a write that was then refused (a bad kind, an end
    in the past, a secret): its folder taken away again while the log holds nothing, so a
    refused command leaves nothing behind and has said nothing of a new memory."""
    from pathlib import Path

    from ..storage.logtree import EVENTS, PACKS, TEXTS

    root = Path(store.root)
    if not store.made or any(any((root / folder).iterdir()) for folder in (EVENTS, PACKS, TEXTS)
                             if (root / folder).is_dir()):
        return
    import shutil

    store.close()
    shutil.rmtree(root, ignore_errors=True)


SET_ASIDE_NAMED = 3  # files named by the one line; `qem verify` names the rest


def set_aside_notice(store: Store) -> list[str]:
    """One line naming the log files the index set aside (a query of the index's list of
    files, no read of the log): the count, the first few, and where the rest are."""
    aside = [problem.split(": ", 1)[0] for problem in store.set_aside()]
    if not aside:
        return []
    more = f" and {len(aside) - SET_ASIDE_NAMED:,} more" if len(aside) > SET_ASIDE_NAMED else ""
    files = "file is" if len(aside) == 1 else "files are"
    return [f"{len(aside):,} malformed log {files} set aside, not read: {', '.join(aside[:SET_ASIDE_NAMED])}{more};"
            " `qem verify` says what is wrong with each"]
