"""Kept edits: checkouts on disk and their life.

A checkout lives in a private directory `.qem/checkouts/<id>/` (0700): `MEMORY.md` (the
file you edit, 0600), `base.md` (the rendering as checked out: what the check-in reads
your edit against) and `session.json` (selection, and the check-in ids that started
applying).  `qem checkout --path FILE` writes the edit to FILE instead and keeps
only the record (base.md and session.json naming FILE), so that checking FILE in later
reads it against the rendering it was made from.  Nothing here locks the store: others
keep writing, and the check-in reconciles.  A kept checkout is removed only once its edit
landed (or had nothing to do); a recorded FILE is rendered again instead.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..base import errors
from ..mirror.export import passing, refreshed, streamed
from ..renderer import Selection
from ..renderer.format import CHECKOUT_HELP, HELP_OPEN
from ..renderer.patch import Headings, headings_in
from ..storage.store import Store
from ..system.files import private_dir, write_atomic
from ..system.workspace import Workspace

RECORD_FILE = "session.json"
HEADS = "base_heads"  # where base.md's section headings are, and the file they were found in
EDIT_FILE = "MEMORY.md"
BASE_FILE = "base.md"
DRAFT_FILE = "draft.md"  # the draft as an editor got it, while the editor runs (a resumed edit's)
MADE = "made"  # the edit file's identity as the checkout made it (a copy of base.md)


@dataclass(frozen=True)
class Checkout:
    directory: Path

    @property
    def id(self) -> str:
        return self.directory.name

    @property
    def file(self) -> Path:
        """The file being edited: the kept MEMORY.md, or the recorded FILE."""
        external = self._record().get("file")
        return Path(external) if isinstance(external, str) else self.directory / EDIT_FILE

    @property
    def external(self) -> bool:
        return isinstance(self._record().get("file"), str)

    @property
    def base_file(self) -> Path:
        return self.directory / BASE_FILE

    @property
    def draft_file(self) -> Path:
        return self.directory / DRAFT_FILE

    def base_heads(self) -> list[int] | None:
        """Where base.md's section headings start (each "\\n## "), as found when it was
        written; None when the file is not that one any more (its inode, size and
        modification time differ: a rebase, a forget's scrub) or nothing was recorded."""
        hint, identity = self._record().get(HEADS), _identity(self.base_file)
        if not isinstance(hint, dict) or identity is None or hint.get("file") != identity:
            return None
        at = hint.get("at")
        return at if isinstance(at, list) and all(isinstance(x, int) for x in at) else None

    def discard(self) -> None:
        """Remove the checkout (never a recorded FILE, which is the user's)."""
        shutil.rmtree(self.directory, ignore_errors=True)

    def resume_hint(self) -> str:
        return f"your edit is kept in {self.file}; continue with `qem edit --resume {self.id}`"

    def _record(self) -> dict:
        try:
            return json.loads((self.directory / RECORD_FILE).read_text("utf-8"))
        except (OSError, ValueError):
            return {}

    def moment(self) -> str | None:
        """When the base is the store's rendering unchanged: the moment it was made at."""
        moment = self._record().get("moment")
        return moment if isinstance(moment, str) else None

    def calm(self) -> bool:
        """Whether the base is made of the index's items alone (see render_base)."""
        return self._record().get(CALM) is True

    def _write_record(self, data: dict) -> None:
        write_atomic(self.directory / RECORD_FILE, json.dumps(data).encode("utf-8"), mode=0o600)

    def pending(self) -> list[str]:
        """The check-in ids this edit started applying."""
        return list(self._record().get("pending") or [])

    def add_pending(self, checkin_id: str) -> None:
        """Note `checkin_id` before applying it: if qem dies after the commit, the kept
        edit must not be checked in a second time (its new notes would be created twice)."""
        data = self._record()
        data["pending"] = [*data.get("pending", []), checkin_id]
        self._write_record(data)

    def forgotten(self) -> list[str]:
        """The notes forgotten since this edit's base was written (their items in it were
        scrubbed; an editor open at the time writes them back on save)."""
        return list(self._record().get("forgotten") or [])

    def add_forgotten(self, note_ids: set[str]) -> None:
        data = self._record()
        data["forgotten"] = sorted({*data.get("forgotten", []), *note_ids})
        self._write_record(data)

    def replace(self, text: str, base_text: str | None = None) -> None:
        """Reopen the edit with new text (and a new base, when it was rebased)."""
        if base_text is not None:
            self._write_record({k: v for k, v in self._record().items() if k not in ("moment", HEADS, CALM)} | {"forgotten": []})
            base = base_text.encode("utf-8")
            write_atomic(self.base_file, base, mode=0o600)
            self._write_record(self._record() | {HEADS: _heads(self.base_file, headings_in((base,)))})
        write_atomic(self.file, text.encode("utf-8"), mode=0o600)

    def keep_draft(self) -> Path:
        """Where the draft as it is now stays while an editor has it (to be put back if
        the editor empties it): the base itself while the file is the checkout as made,
        else a private copy (`draft.md`, copied by the kernel, never read into memory)."""
        made = self._record().get(MADE)
        if made is not None and made == _identity(self.file):
            return self.base_file
        write_atomic(self.draft_file, self.file, mode=0o600, durable=False)
        return self.draft_file

    def restore(self, draft: Path) -> None:
        """Put the draft back as it was (an editor emptied it)."""
        write_atomic(self.file, draft, mode=_mode(self.file))

    def refresh(self, store: Store, selection: Selection) -> None:
        """A recorded FILE that was checked in starts again from the store now (within
        `selection`): its base made from the old one and the items that changed since
        (`export.refreshed`), else rendered, a chunk at a time either way."""
        since = self.as_base()
        data = {k: v for k, v in self._record().items() if k not in ("moment", HEADS, CALM)}
        data.update(pending=[], forgotten=[])
        self._write_record(data)  # (killed from here on, the file is rendered afresh next time)
        made = render_base(store, selection, self.base_file, since=since)
        self._write_record(data | made)
        write_atomic(self.file, self.base_file, mode=_mode(self.file))

    def as_base(self) -> tuple:  # type: ignore[type-arg]
        """Its base as a rendering to make another from (`export.refreshed`'s arguments
        after the selection): the file, its moment, whether it is calm, where its
        headings start, where its rendering ends."""
        return (self.base_file, self.moment(), self.calm(), self.base_heads(), self.rendering_end())

    def rendering_end(self) -> int | None:
        """Where the rendering in base.md ends and the help comment begins."""
        try:
            size = os.stat(self.base_file).st_size
        except OSError:
            return None
        return size - HELP_SIZE if size >= HELP_SIZE else None


CALM = "calm"  # the base's items are the index's own (qem_edit.mirror.export.streamed): what changed since is logged
HELP_SIZE = len(("\n" + CHECKOUT_HELP.replace(HELP_OPEN, f"{HELP_OPEN} base={'0' * 16}", 1)).encode("utf-8"))


def render_base(store: Store, selection: Selection, path: Path, since: tuple | None = None) -> dict:  # type: ignore[type-arg]
    """Write the store's rendering (within `selection`) as a checkout to `path`, a chunk
    at a time, with how to edit it in a comment at the end that names the rendering
    (renderer.for_editing, byte for byte); returns what the checkout's record keeps of
    it: its moment, whether it is calm, and where its section headings start.  `since`:
    an earlier base (its file, moment, calmness, headings, where its rendering ends), to
    make this one from (`export.refreshed`)."""
    import hashlib

    digest, headings = hashlib.sha256(), Headings()

    def tapped(chunks):  # type: ignore[no-untyped-def]
        yield from passing(chunks, digest, headings)
        yield headings.feed(b"\n" + CHECKOUT_HELP.replace(HELP_OPEN, f"{HELP_OPEN} base={digest.hexdigest()[:16]}", 1)
                            .encode("utf-8"))

    source = refreshed(store, selection, *since) if since is not None else streamed(store, selection)
    with source as (generation, calm, chunks):
        write_atomic(path, tapped(chunks), mode=0o600)
        moment = store.moment(generation)
    return {"moment": moment, CALM: calm, HEADS: _heads(path, headings.at)}


def _identity(path: Path) -> list[int] | None:
    """A file's identity as git's index keeps it (inode, size, modification time)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_ino, info.st_size, info.st_mtime_ns]


def _heads(path: Path, at: list[int]) -> dict:
    """Where the section headings of the file just written to `path` start, with its
    identity: a check-in then knows them without searching 100 MB for them."""
    return {"at": at, "file": _identity(path)}


def _mode(path: Path) -> int:
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        return 0o600


def query_selection(store: Store, filters: list[str]) -> Selection:
    """The selection of a query's checkout: the notes the filters (as `qem query` takes
    them) match now, and only their kind's section when the query names one kind.  A
    query that matches nothing is refused: there would be nothing to edit."""
    from ..reads.query import parse_filters, select

    parsed = parse_filters(filters, events=False)
    selected = select(store, parsed)
    described = " ".join(str(f) for f in parsed)
    if not selected.ids:
        gaps = "" if selected.scope.complete else f" ({'; '.join(selected.scope.gaps)})"
        raise errors.BadInput(f"no notes match {described} in this memory's {selected.scope.notes:,} notes{gaps};"
                              " nothing was written")
    kind = next((f.value for f in parsed if f.key == "kind"), None)
    return Selection(kinds=(kind,) if kind else None, query=tuple(str(f) for f in parsed), notes=frozenset(selected.ids))


def requery(store: Store, selection: Selection) -> Selection:
    """A query's selection as the query matches now (an empty one when nothing does):
    what a checkout file starts again from once its edit landed."""
    if not selection.query:
        return selection
    try:
        return query_selection(store, list(selection.query))
    except errors.BadInput:
        return Selection(kinds=selection.kinds, query=selection.query, notes=frozenset())


def new_checkout(store: Store, place: Workspace, selection: Selection) -> Checkout:
    """Render the store (within `selection`) into a fresh checkout, a chunk at a time."""
    return keep(place, selection, None, None, store=store)


def keep(place: Workspace, selection: Selection, base_text: str | bytes | None, text: str | bytes | None,
         *, external: Path | None = None, store: Store | None = None) -> Checkout:
    """A new checkout holding `text`, edited from `base_text`; or, with `store`, holding
    the store's rendering now as both (the edit a copy of the base); with `external`, the
    record of a checkout written to that file (the base copied there, with `store`).  On a
    failure (a full disk) nothing is left behind and the error names the place."""
    root = private_dir(place.checkouts)
    directory = root / os.urandom(5).hex()
    record: dict = {"selection": {"kinds": list(selection.kinds) if selection.kinds else None,
                                  "active": selection.active_only}}
    if selection.query:  # the notes themselves are those base.md shows
        record["selection"].update(query=list(selection.query), notes=len(selection.notes or ()))
    if external is not None:
        record["file"] = str(external.resolve())
    try:
        directory.mkdir(mode=0o700)
        if store is not None:
            record.update(render_base(store, selection, directory / BASE_FILE))
        else:
            base = _utf8(base_text or b"")
            write_atomic(directory / BASE_FILE, base, mode=0o600)
            record[HEADS] = _heads(directory / BASE_FILE, headings_in((base,)))
        if external is not None and store is not None:
            write_atomic(external, directory / BASE_FILE, mode=0o600)
        elif store is not None:
            write_atomic(directory / EDIT_FILE, directory / BASE_FILE, mode=0o600)
            record[MADE] = _identity(directory / EDIT_FILE)
        elif text is not None:
            write_atomic(directory / EDIT_FILE, _utf8(text), mode=0o600)
        write_atomic(directory / RECORD_FILE, json.dumps(record).encode("utf-8"), mode=0o600)
    except (OSError, errors.QemError) as exc:
        shutil.rmtree(directory, ignore_errors=True)
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise errors.StoreUnwritable(f"cannot keep a checkout in {root}: {why}; nothing was kept") from None
    return Checkout(directory)


def _overwrites(store: Store, place: Workspace, path: Path, earlier: Checkout | None) -> None:
    """BadInput where writing a checkout to `path` would lose what it holds: an edit of the
    earlier checkout there (`earlier`) not checked in, a MEMORY.md edited by hand (or not
    qem's: `qem export --check` says which), or a file qem did not write.  A file that is
    not there or empty, an earlier checkout unchanged, or the mirror as qem renders it are
    written."""
    from ..system.files import file_chunks, same_bytes

    if not os.path.lexists(path) or (not path.is_symlink() and path.is_file() and path.stat().st_size == 0):
        return  # (nothing there to lose: a script's `mktemp`, say)
    keep_it = "; nothing was written (give --force to write the checkout over it, or name a new file)"
    if earlier is not None:
        if same_bytes(path, file_chunks(earlier.base_file)):
            return
        raise errors.BadInput(f"{path} holds edits of the checkout {earlier.id} that are not checked in: check them"
                              f" in with `qem checkin --path {path}`{keep_it}")
    if os.path.realpath(path) == os.path.realpath(place.mirror_name()) and not path.is_symlink():
        from ..mirror.export import check

        verdict = check(store, path)
        if not verdict.precious:
            return
        raise errors.BadInput(f"{path} holds what the memory does not (`qem export --check` says why: a hand edit is"
                              f" checked in with `qem checkin --path {path}`){keep_it}")
    raise errors.BadInput(f"{path} is there already, and is not a checkout qem wrote{keep_it}")


def _utf8(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8")


def kept(place: Workspace) -> list[Checkout]:
    """The kept edits, oldest first (by when their record last changed)."""
    root = place.checkouts
    if root.is_symlink():
        raise errors.BadInput(f"{root} is a symbolic link; qem keeps edits only in a private directory of its own")
    if not root.is_dir():
        return []
    found = [d for d in root.glob("*") if not d.is_symlink() and (d / RECORD_FILE).is_file()]
    return [Checkout(d) for d in sorted(found, key=lambda d: (d / RECORD_FILE).stat().st_mtime)]


def find_checkout(place: Workspace, which: str | None) -> Checkout:
    """A kept edit by id, or the latest one (`which` None or "last")."""
    candidates = kept(place)
    if which in (None, "last"):
        if not candidates:
            raise errors.BadInput("no kept edit to resume; start one with `qem edit`")
        return candidates[-1]
    for checkout in candidates:
        if checkout.id == which:
            return checkout
    names = ", ".join(c.id for c in candidates) or "none"
    raise errors.BadInput(f"no kept edit {which!r} (kept edits: {names})")


def owning(place: Workspace, path: Path) -> Checkout | None:
    """The checkout whose file `path` is: a kept edit's MEMORY.md, or a FILE recorded by
    `qem checkout --path` (None: a file of the user's own, such as the mirror)."""
    root = place.checkouts
    if root.is_symlink() or not root.is_dir():
        return None
    resolved = path.resolve()
    if resolved.parent.parent == root.resolve():
        return Checkout(resolved.parent)
    for checkout in kept(place):
        if checkout.external and checkout.file == resolved:
            return checkout
    return None


def write_checkout(store: Store, place: Workspace, selection: Selection, path: Path | None,
                   force: bool = False) -> Path:
    """`qem checkout`: a kept checkout (`path` None), or the checkout written to `path`
    and recorded (a record of the same file made earlier is replaced), never over what
    `path` holds that nothing else does, unless `force` (`_overwrites`)."""
    if path is None:
        return new_checkout(store, place, selection).file
    earlier = owning(place, path)
    if not force:
        _overwrites(store, place, path, earlier)
    keep(place, selection, None, None, external=path, store=store)
    if earlier is not None:
        earlier.discard()
    return path
