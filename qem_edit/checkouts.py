"""Kept edits: checkouts on disk and their life.

A checkout lives in a private directory `.qem/checkouts/<id>/` (0700): `MEMORY.md` (the
file you edit, 0600), `base.md` (the rendering as checked out, so a later `forget` cannot
hide what you changed) and `session.json` (base seq, selection, and the check-in ids that
started applying).  Nothing here locks the store: others keep writing, and the check-in
reconciles.  A checkout is removed only once its edit landed (or had nothing to do).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from . import errors
from .export import rendered_bytes
from .files import private_dir, write_atomic
from .renderer import Selection
from .store import Store
from .workspace import Workspace

RECORD_FILE = "session.json"
EDIT_FILE = "MEMORY.md"
BASE_FILE = "base.md"


@dataclass(frozen=True)
class Checkout:
    directory: Path

    @property
    def id(self) -> str:
        return self.directory.name

    @property
    def file(self) -> Path:
        return self.directory / EDIT_FILE

    @property
    def base_file(self) -> Path:
        return self.directory / BASE_FILE

    def discard(self) -> None:
        """Remove the checkout: its edit landed, or there was nothing to check in."""
        shutil.rmtree(self.directory, ignore_errors=True)

    def resume_hint(self) -> str:
        return f"your edit is kept in {self.file}; continue with `qem edit --resume {self.id}`"

    def _record(self) -> dict:
        try:
            return json.loads((self.directory / RECORD_FILE).read_text("utf-8"))
        except (OSError, ValueError):
            return {}

    def pending(self) -> tuple[int, list[str]]:
        """The checkout's first base, and the check-in ids it started applying."""
        data = self._record()
        return int(data.get("base") or 0), list(data.get("pending") or [])

    def add_pending(self, checkin_id: str) -> None:
        """Note `checkin_id` before applying it: if qem dies after the commit, the kept
        edit must not be checked in a second time (its new notes would be created twice)."""
        data = self._record()
        data["pending"] = [*data.get("pending", []), checkin_id]
        write_atomic(self.directory / RECORD_FILE, json.dumps(data).encode("utf-8"), mode=0o600)

    def replace(self, text: str, base_text: str | None = None) -> None:
        """Reopen the edit with new text (and a new base, when it was rebased)."""
        if base_text is not None:
            write_atomic(self.base_file, base_text.encode("utf-8"), mode=0o600)
        write_atomic(self.file, text.encode("utf-8"), mode=0o600)


def new_checkout(store: Store, place: Workspace, selection: Selection) -> Checkout:
    """Render the store (within `selection`) into a fresh checkout."""
    base, rendered = rendered_bytes(store, selection)
    return keep(place, base, selection, rendered, rendered)


def keep(place: Workspace, base: int, selection: Selection, base_text: str | bytes, text: str | bytes) -> Checkout:
    """A new checkout holding `text`, edited from `base_text` (rendered at seq `base`)."""
    root = private_dir(place.checkouts)
    directory = root / f"{base}-{os.urandom(4).hex()}"
    directory.mkdir(mode=0o700)
    checkout = Checkout(directory)
    write_atomic(checkout.base_file, _utf8(base_text), mode=0o600)
    write_atomic(checkout.file, _utf8(text), mode=0o600)
    record = {"base": base, "selection": {"kinds": list(selection.kinds) if selection.kinds else None, "active": selection.active_only}}
    write_atomic(directory / RECORD_FILE, json.dumps(record).encode("utf-8"), mode=0o600)
    return checkout


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
    """The kept edit whose file `path` is (None: a file of the user's own)."""
    root = place.checkouts
    if not root.is_symlink() and path.resolve().parent.parent == root.resolve():
        return Checkout(path.resolve().parent)
    return None


def write_checkout(store: Store, place: Workspace, selection: Selection, path: Path | None) -> Path:
    """`qem checkout`: a kept checkout (`path` None), or the rendering written to `path`."""
    if path is None:
        return new_checkout(store, place, selection).file
    write_atomic(path, rendered_bytes(store, selection)[1], mode=0o600)
    return path
