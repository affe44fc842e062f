"""`qem export`: project the store to MEMORY.md, or check that the file matches.

The export path stays light on purpose (it runs in pre-commit hooks): it needs the store
and the renderer, and imports the file lock only when it actually has to write.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator

from ..base import errors
from ..base.records import Record
from ..base.stored_form import utf8_named
from ..base.vocabulary import KINDS
from ..storage.store import Store
from ..system.files import file_chunks, read_at, read_regular, same_bytes, write_atomic

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from pathlib import Path

    from ..renderer import Selection
    from ..system.files import AnyPath


def lazily_managed(function: Callable[..., Iterator]) -> Callable[..., AbstractContextManager]:
    """`contextlib.contextmanager(function)`, contextlib imported when the context is first
    asked for: a commit hook that renders nothing imports none (0.4 ms of its start-up)."""
    from functools import wraps  # (loaded already: SQLite's module imports it)

    @wraps(function)
    def managed(*args: object, **kwargs: object) -> AbstractContextManager:
        from contextlib import contextmanager

        return contextmanager(function)(*args, **kwargs)
    return managed

# (The renderer is imported where a rendering is made: `export --check` on a file the
# index's stat line vouches for, and `verify --staged`'s sealed answer, render nothing,
# and the grammar's regular expressions cost a commit hook ~4 ms.)


class Verdict(Record):
    """What `--check` found, and whether exporting over the file would lose an edit."""

    clean: bool
    message: str
    # the file holds something the store does not: a hand edit, a file qem did not write,
    # or another store's rendering; `qem export` keeps it unless told --force
    precious: bool = False


MIRROR_BASE = "mirror-base.md"  # under .qem/: what export last wrote (not committed)
EXPORT_LOCK = "export.lock"  # under .qem/: one export writes the mirror at a time


def render_store(store: Store, selection: Selection | None = None) -> tuple[int, bytes]:
    """The index's generation and the rendering (UTF-8), read in one snapshot.

    The common case joins the items the index rendered when it last caught up (one
    narrow table, read in order; for a query's checkout, only its notes' items, so
    the cost follows the query); disputes and forks, whose markers depend on other
    notes, and live-only checkouts take the full render (`selection`: none, every note).
    """
    from ..renderer import Selection, assemble_bytes, render

    selection = Selection() if selection is None else selection
    memory = store.memory_id()
    with store.reading():
        generation = store.head()
        if selection.notes is not None and not selection.active_only and not store.has_disagreements():
            return generation, assemble_bytes(memory, selection, store.items_of_notes(selection.notes))
        if not selection.active_only and not store.has_disagreements():
            kinds = KINDS if selection.kinds is None else selection.kinds
            return generation, assemble_bytes(memory, selection, store.export_items(kinds))
        notes = store.notes()  # every note: links to notes outside the selection show their short ids too
    return generation, render(notes, memory, selection).encode("utf-8")


@lazily_managed
def rendering(store: Store, selection: Selection | None = None) -> Iterator[tuple[int, Iterable[bytes]]]:
    """The index's generation and the rendering (within `selection`) as a stream of
    chunks, read in one snapshot, held while the stream is read: the items come from the
    index as the stream reaches them, so the rendering is never held whole (disputes and
    forks, whose markers depend on other notes, and live-only selections take the full
    render: see `calm`)."""
    with streamed(store, selection) as (generation, _, chunks):
        yield generation, chunks


@lazily_managed
def streamed(store: Store, selection: Selection | None = None) -> Iterator[tuple[int, bool, Iterable[bytes]]]:
    """`rendering`, and whether it is calm: every item as the index renders it alone (no
    dispute or fork marks one, and the selection takes whole items), so that what changed
    since is told by the items the index logged (`Store.items_changed_since`)."""
    from ..renderer import Selection, assemble_chunks

    selection = Selection() if selection is None else selection
    memory = store.memory_id()
    with store.reading():
        if not selection.active_only and not store.has_disagreements():
            if selection.notes is not None:
                sections = store.items_of_notes(selection.notes)
            else:
                sections = {k: store.iter_items(k) for k in (KINDS if selection.kinds is None else selection.kinds)}
            yield store.head(), True, assemble_chunks(memory, selection, sections)
            return
    generation, data = render_store(store, selection)
    yield generation, False, (data,)


PATCH_FROM_MOST = 2000  # past this many changed items since a base, it is rendered whole instead


@lazily_managed
def refreshed(store: Store, selection: Selection, base: Path, moment: str | None, calm: bool,
              heads: list[int] | None, end: int | None = None) -> Iterator[tuple[int, bool, Iterable[bytes]]]:
    """`streamed`, made from `base` (a calm rendering made at `moment`, up to `end`, its
    headings at `heads`) and the items that changed since, when the index can tell them
    (renderer.patch.patch_plan: the base is copied a stretch at a time, never read
    through); else the rendering made whole, streamed."""
    plan = _plan_from(store, selection, base, moment, calm, heads, end)
    if plan is None:
        with streamed(store, selection) as stream:
            yield stream
        return
    generation, pieces, heads_now = plan
    with open(base, "rb") as handle:
        yield generation, True, Patched(handle, pieces, heads_now)


def _plan_from(store: Store, selection: Selection, base: Path, moment: str | None, calm: bool,
               heads: list[int] | None, end: int | None):  # type: ignore[no-untyped-def]
    if moment is None or not calm or selection.active_only or selection.notes is not None:
        return None
    from ..renderer.format import HELP_OPEN
    from ..renderer.patch import SectionChange, headings_in, heads_after, patch_plan

    with store.reading():
        changed = store.items_changed_since(moment)
        if changed is None or len(changed) > PATCH_FROM_MOST or store.has_disagreements():
            return None
        now = store.items_now(changed)
        generation = store.head()
    vanished = [i for i in changed if i not in now]  # notes no longer in the memory (a reset, a switch): any section
    by_kind: dict[str, tuple[list[str], list[bytes]]] = {kind: (list(vanished), []) for kind in KINDS}
    for note_id, (kind, item) in now.items():
        gone, new = by_kind.setdefault(kind, ([], []))
        gone.append(note_id)
        if item is not None:
            new.append(item)
    try:
        with read_at(base) as (read, size):
            help_start = b"\n" + HELP_OPEN.encode("utf-8")  # where a checkout's help comment starts
            if end is not None and read(end, len(help_start)) != help_start:
                return None  # not a checkout's base as qem wrote it
            found = heads if heads is not None else headings_in(file_chunks(base))
            pieces = patch_plan(read, size if end is None else end, found, store.memory_id(), selection,
                                {k: SectionChange(g, n) for k, (g, n) in by_kind.items()})
    except (OSError, errors.QemError):
        return None
    return None if pieces is None else (generation, pieces, heads_after(pieces, found))


class Patched:
    """A patch plan's pieces as bytes (`_pieces_read`), and where the section headings of
    the rendering they make start (`heads`), known from the plan."""

    def __init__(self, handle, pieces, heads: list[int]) -> None:  # type: ignore[no-untyped-def]
        self.handle, self.pieces, self.heads = handle, pieces, heads

    def __iter__(self) -> Iterator[bytes]:
        return _pieces_read(self.handle, self.pieces)


def passing(chunks: Iterable[bytes], digest, headings) -> Iterator[bytes]:  # type: ignore[no-untyped-def]
    """A rendering's chunks on their way to a file: hashed into `digest`, their section
    headings noted in `headings` (renderer.patch.Headings): found as they pass, or, for a
    rendering made from a base (`Patched`), taken from its plan."""
    known = getattr(chunks, "heads", None)
    for chunk in chunks:
        digest.update(chunk)
        yield headings.feed(chunk) if known is None else headings.passed(chunk)
    if known is not None:
        headings.at.extend(known)


def _pieces_read(handle, pieces) -> Iterator[bytes]:  # type: ignore[no-untyped-def]
    """The pieces as bytes: each stretch of the base read a megabyte at a time."""
    for piece in pieces:
        if isinstance(piece, bytes):
            yield piece
            continue
        at, stop = piece
        handle.seek(at)
        while at < stop:
            chunk = handle.read(min(1 << 20, stop - at))
            if not chunk:
                raise errors.BadInput(f"{handle.name} changed while it was read; nothing was written")
            yield chunk
            at += len(chunk)


def _matches(store: Store, path: Path) -> tuple[int, bool | None]:
    """The generation, and whether the file is the rendering at it (None: no file):
    known without reading it when export wrote or compared this very file (same inode,
    size, modification and change times) at the same generation, else compared a chunk
    at a time; a file with CRLF line ends (git's autocrlf) is compared whole, as
    `same_text` does."""
    head = store.head()
    seen = _stat_line(path, head)
    if seen is not None and seen == store.remembered("mirror_stat"):
        return head, True
    with rendering(store) as (generation, chunks):
        same = same_bytes(path, chunks)
    if same is False and b"\r\n" in next(file_chunks(path, 1 << 16), b""):
        generation, data = render_store(store)
        current = read_regular(path)
        same = current is not None and same_text(current, data)
    if same:
        _remember(store, path, generation)
    return generation, same


def _stat_line(path: Path, generation: int) -> str | None:
    """What the index remembers of a mirror that is the rendering at `generation`."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    where = utf8_named(os.path.realpath(path))  # (a name not UTF-8: SQLite stores no surrogate)
    return f"{generation} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {where}"


def _remember(store: Store, path: Path, generation: int) -> None:
    """Remember that `path`, as it is now, is the rendering at `generation` (a local
    cache, as git's index caches a file's stat: a read-only index just keeps none)."""
    line = _stat_line(path, generation)
    if line is not None:
        store.remember("mirror_stat", line)


def render_as_of(store: Store, at: str) -> bytes:
    """The whole rendering as the memory was `--at` a date, or as committed at a git
    revision."""
    from ..reads.history import notes_as_of
    from ..renderer import render

    return render(notes_as_of(store, at).values(), store.memory_id()).encode("utf-8")


def export(store: Store, path: Path, *, force: bool = False) -> bool:
    """Write the mirror if its bytes would change.  True when the file was written.

    A file edited by hand (or not written by qem) is not overwritten unless `force`:
    its edits would be lost without a trace; ConflictError says how to keep them.  What
    was written is also kept privately (`.qem/mirror-base.md`): the base a later hand
    edit of the mirror is read against.
    """
    if not force:
        done = _export_patched(store, path)
        if done is not None:
            return done
    generation, same = _matches(store, path)
    if same:
        _keep_base_of(store, path, generation)
        return False  # unchanged: leave the file (and its mtime) alone
    from ..system.files import LockTimeout, locked

    lock = os.path.join(store.root, EXPORT_LOCK)
    try:
        with locked(lock, 60):
            store.sync()  # under the lock, the newest state wins
            generation, same = _matches(store, path)
            if same:
                return False
            if same is not None and not force:
                verdict = classify_file(store, path)
                if verdict.precious:
                    raise errors.ConflictError(verdict.message, hint=f"{path} is unchanged")
            generation, heads = _write_rendering(store, path)
            _remember(store, path, generation)
            _keep_base_of(store, path, generation, heads)
    except LockTimeout:
        raise errors.StoreBusy(f"another export held {lock} for over 60 s") from None
    except OSError as exc:  # e.g. the lock file cannot be made beside a read-only store
        raise errors.StoreUnwritable(
            f"cannot export: {exc.filename or path}: {exc.strerror or exc}; {path} is unchanged"
        ) from None
    return True


def _write_rendering(store: Store, path: Path) -> tuple[int, list[int]]:
    """Write the rendering to `path` (streamed, atomically: made from the kept base and the
    items that changed since, where the index can tell them) and return its generation and
    where its section headings start; its hash is recorded before it replaces the file, so
    that a kill between the two never leaves a mirror that looks hand-edited."""
    import hashlib

    from ..renderer import Selection
    from ..renderer.patch import Headings

    digest, headings = hashlib.sha256(), Headings()
    known = _base_record(store)
    source = (refreshed(store, Selection(), os.path.join(store.root, MIRROR_BASE), store.moment(known[0]), known[1], known[2])
              if known is not None else streamed(store))
    with source as (generation, _, chunks):
        write_atomic(path, passing(chunks, digest, headings), before_replace=lambda: _note_hash(store, digest.hexdigest()))
    return generation, headings.at


RENDERINGS_KEPT = 64  # how many past renderings export remembers by hash


def _note_writing(store: Store, data: bytes) -> None:
    """Record (in the local index, by hash) a rendering export is about to write: a file
    that is one of them later is a rendering qem wrote, not a person's edit (a kill before
    the write ended, or an older copy put back, say from before a forget)."""
    import hashlib

    _note_hash(store, hashlib.sha256(data).hexdigest())


def _note_hash(store: Store, digest: str) -> None:
    """Record a rendering's hash (see _note_writing), on a connection of its own: the
    store's may be inside the read transaction the rendering streams from."""
    store.note_rendering(digest, RENDERINGS_KEPT)  # failing that, such a file reads as hand-edited: `export --force`


def _was_written(store: Store, current: bytes) -> bool:
    import hashlib

    return store.rendered(hashlib.sha256(current).hexdigest())


def _keep_base(store: Store, data: bytes, generation: int, *, differs: bool = False, calm: bool | None = None) -> None:
    """Keep what export wrote (the rendering at `generation`) as `.qem/mirror-base.md`,
    and record in the index which generation it is, with the file's size and time (so a
    copy changed by anything else is not taken for it; nor is one a power cut left short,
    so it is written without waiting for the disk).  `differs`: the kept copy is known to
    be another rendering; `calm`: whether it is calm, where the caller knows."""
    base = os.path.join(store.root, MIRROR_BASE)
    try:
        if differs or not same_bytes(base, (data,)):
            write_atomic(base, data, mode=0o600, durable=False)
        _note_base(store, base, generation, calm)
    except (OSError, errors.QemError):
        pass  # a convenience for later check-ins and writes; a read-only place has none


def _note_base(store: Store, base: AnyPath, generation: int, calm: bool | None = None,
               heads: list[int] | None = None) -> None:
    """Record that `base` (as it is now: its size and time) is the rendering at
    `generation`, and whether that rendering is calm (qem_edit.mirror.export.streamed: known while
    the index is still at it, unless the caller knows), and where its headings start
    where the caller knows."""
    stat = os.stat(base)
    if calm is None:
        calm = store.head() == generation and not store.has_disagreements()
    at = ",".join(map(str, heads)) if heads else "-"
    store.remember("mirror_base", f"{generation} {stat.st_size} {stat.st_mtime_ns} {int(calm)} {at}")


def _keep_base_of(store: Store, path: Path, generation: int, heads: list[int] | None = None) -> None:
    """_keep_base for the rendering at `generation` that `path` holds, copied a chunk at a
    time (not at all when the kept base already is that rendering)."""
    if _base_generation(store) == generation:
        return
    from pathlib import Path  # (a copy's source is a path object; only a base copied anew asks)

    base = os.path.join(store.root, MIRROR_BASE)
    try:
        write_atomic(base, Path(path), mode=0o600, durable=False)
        _note_base(store, base, generation, heads=heads)
    except (OSError, errors.QemError):
        pass  # a convenience for later check-ins and writes; a read-only place has none


def _base_generation(store: Store) -> int | None:
    """The generation `.qem/mirror-base.md` is the rendering of, if the index knows it."""
    known = _base_record(store)
    return known[0] if known is not None else None


def _base_record(store: Store) -> tuple[int, bool, list[int] | None] | None:
    """The generation `.qem/mirror-base.md` is the rendering of, whether it is calm, and
    where its headings start (None: not recorded), if the index knows them (the file's
    size and time are the ones recorded)."""
    recorded = (store.remembered("mirror_base") or "").split()
    try:
        stat = os.stat(os.path.join(store.root, MIRROR_BASE))
    except OSError:
        return None
    if len(recorded) != 5 or recorded[1:3] != [str(stat.st_size), str(stat.st_mtime_ns)] or not recorded[0].isdigit():
        return None
    heads = [int(x) for x in recorded[4].split(",")] if recorded[4] != "-" and all(
        x.isdigit() for x in recorded[4].split(",")) else None
    return int(recorded[0]), recorded[3] == "1", heads


PATCH_MOST = 2000  # a write that changed more items than this renders the mirror whole


def _export_patched(store: Store, path: Path) -> bool | None:
    """After this process's own write: the mirror patched by the items the write changed
    (renderer.patch), byte-identical to a whole rendering at the cost of the write.  None
    where that cannot be known to be right (then the caller renders the whole file):
    another write came between, the mirror is not the rendering export last wrote, or a
    note is disputed or forked (items then show other notes)."""
    mark = store.last_write
    if mark is None or not mark.calm or len(mark.replaced) > PATCH_MOST:
        return None
    from ..renderer import Selection
    from ..renderer.patch import patched
    from ..system.files import locked

    try:
        with locked(os.path.join(store.root, EXPORT_LOCK), 60):
            store.sync()
            if store.head() != mark.after or _base_generation(store) != mark.before or store.has_disagreements():
                return None
            base = read_regular(os.path.join(store.root, MIRROR_BASE))
            if base is None or not _is_rendering_at(store, path, base, mark.before):
                return None
            data = patched(base, store.memory_id(), Selection(), _item_changes(store, mark.replaced))
            if data is None:
                return None
            if data != base:
                _note_writing(store, data)
                write_atomic(path, data)
                _remember(store, path, mark.after)
            _keep_base(store, data, mark.after, differs=data != base, calm=True)  # (no disagreement: checked above)
            return data != base
    except (OSError, errors.QemError):  # (a lock held too long among them)
        return None


def _is_rendering_at(store: Store, path: Path, base: bytes, generation: int) -> bool:
    """Whether the mirror is `base`, the rendering at `generation`: known from its stat when
    export last wrote or compared this very file at that generation, else read."""
    if _stat_line(path, generation) == store.remembered("mirror_stat"):
        return True
    return read_regular(path) == base


def _item_changes(store: Store, replaced: dict) -> list:  # type: ignore[type-arg]
    from ..renderer.patch import ItemChange

    now = store.index.changed_items(replaced)
    out = []
    for note_id, old in sorted(replaced.items()):
        new = now.get(note_id)
        if old != new:
            out.append(ItemChange(KINDS[old[0]] if old else None, old[1] if old else None,
                                  KINDS[new[0]] if new else None, new[1] if new else None))
    return out


class MirrorBase(Record):
    """The rendering a hand-edited mirror (or a copy of it) was made from: export's kept
    copy (a file, read a chunk at a time), with the moment it was rendered at and whether
    it is calm where the index knows them; or the file as the last git commit holds it."""

    base: Path | bytes
    moment: str | None = None
    calm: bool = False
    heads: list[int] | None = None  # where its section headings start, where recorded

    def same_as(self, data: bytes) -> bool:
        if not isinstance(self.base, bytes):  # (a Path: qem_edit.writes.checkin_plan reads one as a file)
            view = memoryview(data)
            return bool(same_bytes(self.base, (view[at:at + (1 << 20)] for at in range(0, len(data), 1 << 20))))
        return self.base == data


def mirror_base(store: Store, path: Path) -> MirrorBase | None:
    """The rendering a hand-edited mirror (or a copy of it) was made from: what export
    last wrote here, else the file as the last git commit holds it, if either is a
    rendering of this memory (None: neither)."""
    from pathlib import Path

    kept = Path(store.root, MIRROR_BASE)
    if _memory_of(next(file_chunks(kept, 1 << 16), b"")) == store.memory_id():
        known = _base_record(store)
        if known is None:
            return MirrorBase(kept)
        return MirrorBase(kept, store.moment(known[0]), known[1], known[2])
    from ..system import gitrepo

    top = gitrepo.toplevel(path)
    committed = gitrepo.show(top, "HEAD", path) if top is not None else None
    if committed is not None and _memory_of(committed) == store.memory_id():
        return MirrorBase(committed)
    return None


def same_text(current: bytes, rendered: bytes) -> bool:
    """The file says what the rendering says: byte for byte, or but for CRLF line ends
    (a checkout with git's autocrlf writes them, and that is no edit)."""
    return current == rendered or (b"\r\n" in current and current.replace(b"\r\n", b"\n") == rendered)


def check(store: Store, path: Path) -> Verdict:
    """Whether the file is the rendering now.  A writer in another process that commits
    and then patches the file between this reading of the log and of the file makes the
    file newer than the rendering: while the log moves meanwhile, the check is made again."""
    for _ in range(5):
        generation, same = _matches(store, path)
        if same is None:
            return Verdict(False, f"{path} does not exist; run `qem export` to write it")
        if same:
            return Verdict(True, f"{path} matches the memory")
        verdict = classify_file(store, path)
        if verdict.clean or store.head() == generation:
            break
    return verdict


def classify_file(store: Store, path: Path) -> Verdict:
    """`classify` of a file that is not the rendering, a chunk at a time in the common case
    (a rendering of this memory that qem wrote, and the log moved on); anything else is
    read whole."""
    first = next(file_chunks(path, 1 << 16), b"")
    if _memory_of(first) == store.memory_id() and b"\r\n" not in first and _written_here(store, path):
        # a rendering qem wrote holds no conflict markers: no line of one starts with them
        return _incomplete(store, path) or Verdict(False, f"the log moved on since {path} was rendered; run `qem export`")
    current = read_regular(path)
    if current is None:
        return Verdict(False, f"{path} does not exist; run `qem export` to write it")
    return classify(store, path, current, render_store(store)[1])


def _written_here(store: Store, path: Path) -> bool:
    """Whether the file is what export last wrote here, or a rendering it recorded."""
    import hashlib

    if same_bytes(os.path.join(store.root, MIRROR_BASE), file_chunks(path)):
        return True
    digest = hashlib.sha256()
    for chunk in file_chunks(path):
        digest.update(chunk)
    return store.rendered(digest.hexdigest())


def classify(store: Store, path: Path, current: bytes, data: bytes) -> Verdict:
    """Why the file at `path` (`current`) is or is not the memory's rendering (`data`)."""
    from ..base.gitconflict import has_markers

    if same_text(current, data):
        return Verdict(True, f"{path} matches the memory")
    current = current.replace(b"\r\n", b"\n")
    memory = _memory_of(current)
    conflicted = has_markers(current)
    if memory is None and not conflicted:
        return Verdict(False, f"{path} has no qem header line, so it was edited by hand (or not written by"
                              " qem); run `qem export --force` to discard the edits", precious=True)
    if memory is not None and memory != store.memory_id() and read_regular(os.path.join(store.root, MIRROR_BASE)) == current:
        return Verdict(False, f"{path} is what qem last wrote here, before this memory took the name"
                              f" {store.memory_id()} (a load); run `qem export`")
    if memory is not None and memory != store.memory_id():
        return Verdict(False, f"{path} is a rendering of another memory ({memory}), not this one"
                              f" ({store.memory_id()}); run `qem export --force` to replace it", precious=True)
    if conflicted:
        return _conflict_verdict(store, path, current, data)
    incomplete = _incomplete(store, path)
    if incomplete is not None:
        return incomplete
    if _behind(store, path, current):
        return Verdict(False, f"the log moved on since {path} was rendered; run `qem export`")
    if _merged(store, path, current, data):
        return Verdict(False, f"{path} is git's merge of two renderings; `qem export` renders it again from the"
                              " merged log")
    base = _base_generation(store)
    moved = ", and the log moved on since it was rendered" if base is not None and base != store.head() else ""
    return Verdict(False, f"{path} was edited by hand{moved}; run `qem checkin --path {path}` to turn the edits"
                          " into events (three-way, against the log as it is now), or `qem export --force` to"
                          " discard them", precious=True)


def _incomplete(store: Store, path: Path) -> Verdict | None:
    """A file that shows notes (or texts) the log lacks: an incomplete commit, which a
    rendering would delete lines of (see `incomplete`); None when it shows none."""
    from ..reads import incomplete

    found = incomplete.lacking(store, path)
    return Verdict(False, incomplete.message(store, path, found), precious=True) if found else None


def _conflict_verdict(store: Store, path: Path, current: bytes, data: bytes) -> Verdict:
    """Git's conflict markers: renderings on both sides (a merge of branches) are rendered
    again from the merged log; a side holding lines no rendering holds is a person's."""
    from ..base import gitconflict

    text = current.decode("utf-8", "replace")
    try:
        personal = gitconflict.personal_hunks(text, known_renderings(store, path, data))
    except gitconflict.Unbalanced as exc:
        return Verdict(False, f"{path} holds git's conflict markers that do not pair up ({exc}); resolve them"
                              " by hand, or run `qem export --force` to discard the file", precious=True)
    if personal:
        where = ", ".join(str(n) for n in personal)
        return Verdict(False, f"{path} holds git's conflict markers around lines no rendering holds (the"
                              f" conflict at line {where}: your edits?); run `qem checkin --path {path}` to"
                              " check them in, or `qem export --force` to discard them", precious=True)
    return Verdict(False, f"{path} holds git's conflict markers from a merge of renderings; `qem export`"
                          " renders it again from the merged log")


def _other_sides(top: Path) -> list[str]:
    """The other side of a merge, rebase, cherry-pick or revert in progress, as revisions
    (the heads git names to its pre-merge-commit hook too, before it writes MERGE_HEAD)."""
    from ..system import gitrepo

    return ["MERGE_HEAD", "REBASE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", *gitrepo.merge_heads(top)]


def known_renderings(store: Store, path: Path, data: bytes) -> frozenset[str]:
    """The lines of every rendering of this memory a conflicted mirror can hold: the log's
    now (`data`), the last export, and the file as HEAD and the other side of a merge,
    rebase, cherry-pick or revert in progress commit it."""
    from ..system import gitrepo

    found = [data, read_regular(os.path.join(store.root, MIRROR_BASE)) or b""]
    top = gitrepo.toplevel(path)
    if top is not None:
        for rev in ("HEAD", *_other_sides(top)):
            found.append(gitrepo.show(top, rev, path) or b"")
    lines: set[str] = set()
    for rendering in found:
        lines.update(rendering.decode("utf-8", "replace").replace("\r\n", "\n").split("\n"))
    return frozenset(lines)


def _behind(store: Store, path: Path, current: bytes) -> bool:
    """Whether the file is a rendering qem wrote (here, or in a commit), not since edited."""
    if read_regular(os.path.join(store.root, MIRROR_BASE)) == current or _was_written(store, current):
        return True
    from ..system import gitrepo

    top = gitrepo.toplevel(path)
    return top is not None and gitrepo.show(top, "HEAD", path) == current and gitrepo.unmodified(top, path)


def _merged(store: Store, path: Path, current: bytes, data: bytes) -> bool:
    """Whether, in a merge (or a rebase, cherry-pick or revert) in progress, the file is
    what git made of the two sides' renderings: as git staged it, every line one of a
    rendering's.  A merge that stopped on other files leaves it so, and one git is about to
    commit (its pre-merge-commit hook); the hooks then flag drift the merge brought, and the
    file is rendered again like a conflicted one (no person's line is in it)."""
    from ..system import gitrepo

    top = gitrepo.toplevel(path)
    if top is None or not any(gitrepo.show(top, rev, path) is not None for rev in _other_sides(top)):
        return False
    if not gitrepo.as_staged(top, path):  # changed since git merged it: a person's, whatever its lines
        return False
    known = known_renderings(store, path, data)
    return all(line in known for line in current.decode("utf-8", "replace").split("\n"))


def _memory_of(data: bytes) -> str | None:
    first = data.split(b"\n", 1)[0].lstrip(b"\xef\xbb\xbf").rstrip(b"\r")
    from ..renderer.format import HEADER_RE

    match = HEADER_RE.match(first.decode("utf-8", "replace"))
    return match["memory"] if match else None


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
    """Re-render the mirror after a write when the workspace asks for it, then stage what
    the write wrote (qem_edit.mirror.gitstage).  Returns what the writer should be told (the
    write itself is committed whatever happens here)."""
    from .gitstage import stage_written, without_git

    notices, rendered = _export_after_write(store, workspace)
    staged = stage_written(store, workspace, rendered)
    return notices + without_git(workspace, rendered) + staged  # after staging: it tried git, or needed none


def _export_after_write(store: Store, workspace) -> tuple[list[str], Path | None]:  # type: ignore[no-untyped-def]
    """auto_export's rendering: the notices, and the mirror when it is the rendering now."""
    try:
        wanted = workspace.auto_export()
    except errors.QemError as exc:
        # Commands check the config before they write; if it broke since, the write stands.
        return [f"warning: the write is saved, but auto-export was skipped: {exc}"], None
    if not wanted:
        return [], None
    path = workspace.mirror_path()
    try:
        return ([f"re-rendered {path}"] if export(store, path) else []), path
    except errors.QemError as exc:
        return [f"warning: the write is saved, but {path} was not re-rendered: {exc}"], None


# -- `qem export`'s decisions, which its shell (qem_edit.shells.shell.export) only prints ------------


def settle_unmerged(store_path: AnyPath) -> list[str]:
    """Before rendering after a merge: the log files git left unmerged in the memory at
    `store_path` get the bytes their names say, and are staged (qem_edit.mirror.gitsettle);
    the paths settled (none outside a git work tree holding the memory)."""
    from ..system import gitrepo
    from ..system.files import name_within
    from . import gitsettle

    top = gitrepo.top_name(store_path) if os.path.isdir(store_path) else None
    if top is None or name_within(top, store_path) is None:
        return []
    return gitsettle.settle(top, store_path)


def export_kept(store: Store, target: Path, force: bool, workspace: Path) -> bool:
    """`qem export`'s write, never over an edit the pre-commit run it is a hook of set
    aside (qem_edit.system.unstaged); whether it wrote."""
    from ..system.unstaged import guard

    guard(target, lambda: not check(store, target).clean, workspace)
    return export(store, target, force=force)


class Checked(Record):
    """`export --check` and/or `--diff`: the unified diff (`--diff`), the verdict
    (`--check`), and the exit status: 1 when the file differs from the rendering."""

    patch: str | None
    verdict: Verdict | None
    exit_code: int


def checked(store: Store, target: Path, check_it: bool, diff: bool) -> Checked:
    patch = unified_diff(store, target) if diff else None
    verdict = check(store, target) if check_it else None
    differs = bool(patch) or (verdict is not None and not verdict.clean)
    return Checked(patch, verdict, 1 if differs else 0)
