"""`qem export`: project the store to MEMORY.md, or check that the file matches.

The export path stays light on purpose (it runs in pre-commit hooks): it needs the store
and the renderer, and imports the file lock only when it actually has to write.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .renderer import Selection, assemble_bytes, item_text, render
from .renderer.format import HEADER_RE

from . import errors
from .files import read_regular, write_atomic
from .model import KINDS
from .store import Store


@dataclass(frozen=True)
class Verdict:
    """What `--check` found, and whether exporting over the file would lose an edit."""

    clean: bool
    message: str
    # the file holds something the store does not: a hand edit, a file qem did not write,
    # or another store's rendering; `qem export` keeps it unless told --force
    precious: bool = False


def render_store(store: Store, selection: Selection = Selection()) -> tuple[int, bytes]:
    """The store's head and its rendering (UTF-8), read in one snapshot.

    The common case joins the items the store cached at write time (one narrow table,
    read in order); disputes and forks, whose markers depend on other notes, and
    live-only checkouts take the full render.
    """
    with store.reading():
        head = store.head()
        if not selection.active_only and store.items_fresh() and not store.has_disagreements():
            kinds = KINDS if selection.kinds is None else selection.kinds
            return head, assemble_bytes(head, selection, store.export_items(kinds))
        notes = store.notes(kinds=selection.kinds)
    return head, render(notes, head, selection).encode("utf-8")


def render_as_of(store: Store, at: str) -> bytes:
    """The whole rendering as the store was `--at` a seq or moment."""
    from .query import seq_at

    seq = seq_at(store, at)
    return render(store.state_at(seq).values(), seq).encode("utf-8")


def export(store: Store, path: Path, *, force: bool = False) -> bool:
    """Write the mirror if its bytes would change.  True when the file was written.

    A file edited by hand (or not written by qem) is not overwritten unless `force`:
    its edits would be lost without a trace; ConflictError says how to keep them.
    """
    head, data = render_store(store)
    current = read_regular(path)
    if current is not None and same_text(current, data):
        return False  # unchanged: leave the file (and its mtime) alone
    from filelock import FileLock, Timeout

    lock = FileLock(str(store.path) + ".export.lock")
    try:
        with lock.acquire(timeout=60):
            # Under the lock, the newest state wins: render again if the store moved.
            if store.head() != head:
                head, data = render_store(store)
            current = read_regular(path)
            if current is not None and same_text(current, data):
                return False
            if current is not None and not force:
                verdict = classify(store, path, current, head, data)
                if verdict.precious:
                    raise errors.ConflictError(verdict.message, hint=f"{path} is unchanged")
            write_atomic(path, data)
    except Timeout:
        raise errors.StoreBusy(f"another export held {lock.lock_file} for over 60 s") from None
    except OSError as exc:  # e.g. the lock file cannot be made beside a read-only store
        raise errors.StoreUnwritable(
            f"cannot export: {exc.filename or path}: {exc.strerror or exc}; {path} is unchanged"
        ) from None
    return True


def same_text(current: bytes, rendered: bytes) -> bool:
    """The file says what the rendering says: byte for byte, or but for CRLF line ends
    (a checkout with git's autocrlf writes them, and that is no edit)."""
    return current == rendered or (b"\r\n" in current and current.replace(b"\r\n", b"\n") == rendered)


def check(store: Store, path: Path) -> Verdict:
    head, data = render_store(store)
    current = read_regular(path)
    if current is None:
        return Verdict(False, f"{path} does not exist; run `qem export` to write it")
    return classify(store, path, current, head, data)


def classify(store: Store, path: Path, current: bytes, head: int, data: bytes) -> Verdict:
    """Why the file at `path` (`current`) is or is not the store's rendering (`data`)."""
    if same_text(current, data):
        return Verdict(True, f"{path} matches the store (head {head})")
    current = current.replace(b"\r\n", b"\n")
    base = file_base(current)
    if base is None:
        return Verdict(
            False,
            f"{path} has no qem header line, so it was edited by hand (or not written by"
            " qem); run `qem export --force` to discard the edits",
            precious=True,
        )
    if base > head:
        return Verdict(
            False,
            f"{path} names base {base}, past this store's head {head}: it comes from another"
            " store; run `qem export --force` to replace it",
            precious=True,
        )
    if base == head:
        edited = True
    else:
        as_rendered = cached_render_at(store, base)
        if as_rendered is None:  # the general case: replay the whole log up to the base
            at_base = store.state_at(base)
            fill_forgotten_texts(at_base, current)
            as_rendered = render(at_base.values(), base).encode("utf-8")
        edited = current != as_rendered
    if base != head and not edited:
        return Verdict(
            False,
            f"the store moved on since {path} was rendered (file base {base}, store head"
            f" {head}); run `qem export`",
        )
    moved = f" and the store moved on (base {base}, head {head})" if base != head else ""
    return Verdict(
        False,
        f"{path} was edited by hand{moved}; run `qem checkin --path {path}` to turn the"
        " edits into events, or `qem export --force` to discard them",
        precious=True,
    )


def cached_render_at(store: Store, base: int) -> bytes | None:
    """The rendering as of `base`, from the cached items with only the notes touched since
    the base rendered again: cost follows what changed, not the size of the store.  None
    where that shortcut does not hold (disputes or forks, a stale cache, text forgotten
    since the base)."""
    with store.reading():
        if not store.items_fresh() or store.has_disagreements():
            return None
        since, past = store.rewind(base)
        if any(n is not None and n.text is None and n.state != "forgotten" for n in past.values()):
            return None
        sections = store.export_items(KINDS, with_ids=True)
    replaced = {note_id: note for note_id, note in past.items()}
    out: dict[str, list[bytes]] = {}
    for kind, rows in sections.items():
        items = []
        for note_id, item in rows:
            if note_id in replaced:
                note = replaced[note_id]
                if note is not None:
                    items.append(item_text(note).encode("utf-8"))
            else:
                items.append(item)
        out[kind] = items
    return assemble_bytes(base, Selection(), out)


def fill_forgotten_texts(notes: dict, data: bytes) -> None:
    """Texts forgotten since a file's base are erased from the log; the file (a mirror, a
    checkout's base.md) still has them.  Take them from it, so a note forgotten since is
    not taken for an edit."""
    missing = [n for n in notes.values() if n.text is None and n.state != "forgotten"]
    if not missing:
        return
    from dataclasses import replace

    from .reconciler.parse import parse

    shown = {i.note_id: i.text for i in parse(data.decode("utf-8", "replace")).items if i.note_id}
    for note in missing:
        if shown.get(note.id) is not None:
            notes[note.id] = replace(note, text=shown[note.id])


def file_base(data: bytes) -> int | None:
    first = data.split(b"\n", 1)[0].lstrip(b"\xef\xbb\xbf").rstrip(b"\r")
    match = HEADER_RE.match(first.decode("utf-8", "replace"))
    return int(match["base"]) if match else None


def unified_diff(store: Store, path: Path) -> str:
    import difflib

    text = render_store(store)[1].decode("utf-8")
    current = read_regular(path)
    old = current.decode("utf-8", "replace") if current is not None else ""
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=f"{path} (on disk)",
            tofile=f"{path} (qem export)",
        )
    )


def auto_export(store: Store, workspace) -> list[str]:  # type: ignore[no-untyped-def]
    """Re-render the mirror after a write when the workspace asks for it.  Returns what
    the writer should be told (the write itself is committed whatever happens here)."""
    try:
        wanted = workspace.auto_export()
    except errors.QemError as exc:
        # Commands check the config before they write; if it broke since, the write stands.
        return [f"warning: the write is saved, but auto-export was skipped: {exc}"]
    if not wanted:
        return []
    path = workspace.mirror_path()
    try:
        return [f"re-rendered {path}"] if export(store, path) else []
    except errors.QemError as exc:
        return [f"warning: the write is saved, but {path} was not re-rendered: {exc}"]
