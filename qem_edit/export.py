"""`qem export`: project the store to MEMORY.md, or check that the file matches.

The export path stays light on purpose (it runs in pre-commit hooks): it needs the store
and the renderer, and imports the file lock only when it actually has to write.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from renderer import Scope, render
from renderer.format import HEADER_RE

from . import errors
from .files import read_regular, write_atomic
from .store import Store


@dataclass(frozen=True)
class Verdict:
    """What `--check` found."""

    clean: bool
    message: str


def rendering(store: Store, scope: Scope = Scope()) -> tuple[int, str]:
    with store.reading():
        head = store.head()
        notes = store.notes(kinds=scope.kinds)
    return head, render(notes, head, scope)


def export(store: Store, path: Path) -> bool:
    """Write the mirror if its bytes would change.  True when the file was written."""
    _, text = rendering(store)
    data = text.encode("utf-8")
    if read_regular(path) == data:
        return False  # unchanged bytes: leave the file (and its mtime) alone
    from filelock import FileLock, Timeout

    lock = FileLock(str(store.path) + ".export.lock")
    try:
        with lock.acquire(timeout=60):
            # Under the lock, render again: the last writer must write the newest state.
            _, text = rendering(store)
            data = text.encode("utf-8")
            if read_regular(path) == data:
                return False
            write_atomic(path, data)
    except Timeout:
        raise errors.StoreBusy(f"another export held {lock.lock_file} for over 60 s") from None
    return True


def check(store: Store, path: Path) -> Verdict:
    head, text = rendering(store)
    current = read_regular(path)
    if current is None:
        return Verdict(False, f"{path} does not exist; run `qem export` to write it")
    if current == text.encode("utf-8"):
        return Verdict(True, f"{path} matches the store (head {head})")
    base = file_base(current)
    if base is None:
        return Verdict(
            False,
            f"{path} has no qem header line, so it was edited by hand; run `qem export` to"
            " discard the edits",
        )
    if base > head:
        return Verdict(
            False,
            f"{path} names base {base}, past this store's head {head}: it comes from another"
            " store; run `qem export` to replace it",
        )
    as_rendered = render(store.state_at(base).values(), base) if base != head else text
    edited = current.decode("utf-8", "replace") != as_rendered
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
        " edits into events, or `qem export` to discard them",
    )


def file_base(data: bytes) -> int | None:
    first = data.split(b"\n", 1)[0].lstrip(b"\xef\xbb\xbf").rstrip(b"\r")
    match = HEADER_RE.match(first.decode("utf-8", "replace"))
    return int(match["base"]) if match else None


def unified_diff(store: Store, path: Path) -> str:
    import difflib

    _, text = rendering(store)
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


def auto_export(store: Store, workspace) -> None:  # type: ignore[no-untyped-def]
    """Re-render the mirror after a write when the workspace asks for it."""
    if not workspace.auto_export():
        return
    path = workspace.mirror_path()
    try:
        if export(store, path):
            print(f"qem: re-rendered {path}", file=sys.stderr)
    except errors.QemError as exc:
        # The write itself is committed; a mirror that could not be written is reported.
        print(f"qem: warning: the write is saved, but {path} was not re-rendered: {exc}", file=sys.stderr)
