"""Builders shared by the tests: stores, notes and renderings made in-process, quickly.

Tests that are about the command line run the real `qem` in a child process (conftest's
`run_qem`); everything a test only needs as a starting point is built here.  Every write
goes through the store's own transaction (`Store.write`), as qem's commands do; the time
is pinned (`at`) unless a test passes `at=None` for the clock.
"""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES
from qem_edit.dump import load_events, read_dump
from qem_edit.export import render_store
from qem_edit.model import Event, NewNote
from qem_edit.renderer import Selection
from qem_edit.store import Store
from qem_edit.workspace import STATE_DIR, STORE_NAME, Workspace

AT = "2026-07-27T10:00:00Z"
CASES = FIXTURES / "checkin"  # the check-in cases, and the logs they share
SEEDED_LOG = CASES / "seeded.jsonl"  # the standard seeded store (see _edit_support)


# -- where a workspace keeps its store ------------------------------------------------------------


def store_path(root: Path) -> Path:
    """The default store of the workspace `root`: `<root>/.qem/memory.db`."""
    return root / STATE_DIR / STORE_NAME


def workspace(root: Path) -> Workspace:
    """The workspace `root`, with its default store."""
    return Workspace(root=root, store_path=store_path(root))


# -- stores ------------------------------------------------------------------------------------------


def load_store(path: Path, log: Path | bytes, name: str = "log") -> Store:
    """A new store at `path` holding the JSON Lines `log` (a file, or its bytes named `name`),
    loaded as `qem load` loads it.  The caller closes it."""
    if isinstance(log, Path):
        raw, name = log.read_bytes(), str(log)
    else:
        raw = log
    store = Store.open(path, create=True)
    load_events(store, read_dump(raw, name))
    return store


def write_events(store: Store, events: list[Event]) -> None:
    """Append `events` (each numbered on from the store's head) as their writers wrote them:
    a `forgotten` event as `qem forget` writes it, erasing the note's text from the log;
    every other event as `qem load` appends it."""
    for event in events:
        if event.type == "forgotten":
            store.write(lambda tx: tx.forget(event.note_id, event.actor, event.reason or ""), at=event.at)
        else:
            load_events(store, [event])


# -- notes -------------------------------------------------------------------------------------------


def add(store: Store, text: str = "a note", kind: str = "gotcha", *, priority: str = "medium",
        provenance: str = "agent", supersedes: int | None = None, actor: str = "tester",
        at: str | None = AT) -> int:
    """A new note (its text as given: the store normalizes it); returns its id."""
    new = NewNote(kind, priority, provenance, text, supersedes)
    return store.write(lambda tx: tx.create(new, actor), at=at).id


def emit(store: Store, note_id: int, type_: str, reason: str | None = "because", *,
         actor: str = "tester", at: str | None = AT) -> Event:
    """A lifecycle move (revoked, stale_flagged, reinstated, promoted, expired) on one note."""
    return store.write(lambda tx: tx.emit(note_id, type_, actor, reason), at=at)


def forget(store: Store, note_id: int, reason: str = "held a secret", *,
           actor: str = "tester", at: str | None = AT) -> Event:
    return store.write(lambda tx: tx.forget(note_id, actor, reason), at=at)


# -- renderings -------------------------------------------------------------------------------------


def render_text(store: Store, selection: Selection = Selection()) -> tuple[int, str]:
    """The store's head and its rendering, as text."""
    head, data = render_store(store, selection)
    return head, data.decode("utf-8")
