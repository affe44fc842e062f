"""`qem migrate`: a store from before memory lived in git, converted into the log.

The old single SQLite file (`.qem/memory.db`) is read in seq order and written as one
pack of events (and packs of texts) under `.qem/`; every note keeps its history, times,
actors, reasons and check-ins, and its old number resolves on the command line.  The old
file is renamed `memory.db.converted` (ignored by git), not deleted.
"""

from __future__ import annotations

from pathlib import Path

from ..base import errors
from ..storage.convert import convert, read_old_store
from ..storage.logtree import TEXTS_PER_PACK, LogTree
from ..storage.starting import ensure_memory_id
from ..storage.store import LEGACY_NAME, Store
from ..system.workspace import CONFIG_NAME, Workspace


def migrate(place: Workspace) -> str:
    root = place.store_path
    old = root / LEGACY_NAME
    if not old.is_file():
        raise errors.BadInput(f"no store from an older qem at {old}; nothing to convert")
    converted = convert(read_old_store(old))
    tree = LogTree(root)
    tree.ensure()
    ensure_memory_id(root, converted.memory_id)
    if converted.events:
        tree.write_event_packs(converted.events)
    ordered = sorted(converted.texts, key=lambda t: t.note)
    tree.write_text_packs(ordered, TEXTS_PER_PACK)
    _set_aside(old)
    from ..mirror.gitstage import stage_written

    with Store.open(root) as store:  # the index, built from the converted log
        store.tree.touched |= tree.take_touched() | {CONFIG_NAME}
        warnings = stage_written(store, place)
    done = (f"converted {len(converted.events)} events of {len(converted.ids)} notes into {root}"
            f" (their old numbers still work, e.g. `qem show 1`); the old store is kept as"
            f" {old.name}.converted; commit .qem/ with your code")
    return "\n".join([*warnings, done])


def _set_aside(old: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        path = Path(str(old) + suffix)
        if path.exists():
            path.rename(Path(str(old) + ".converted" + suffix))
