"""Builders shared by the tests: stores, notes and renderings made in-process, quickly.

Tests that are about the command line run the real `qem` in a child process (conftest's
`run_qem`); everything a test only needs as a starting point is built here.  Every write
goes through the store's own transaction (`Store.write`), as qem's commands do; the time
is pinned (`at`) unless a test passes `at=None` for the clock.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import FIXTURES
from qem_edit.renderer import Selection

from qem_edit.base import ids
from qem_edit.base.decisions import NewNote
from qem_edit.base.replay import Event, Note
from qem_edit.mirror.export import render_store
from qem_edit.storage.logtree import canonical
from qem_edit.storage.store import Store
from qem_edit.system.workspace import STATE_DIR, Workspace
from qem_edit.transfer.dump import load, read_dump

AT = "2026-07-27T10:00:00Z"
CASES = FIXTURES / "checkin"  # the check-in cases, and the logs they share
SEEDED_LOG = CASES / "seeded.jsonl"  # the standard seeded store (see _edit_support)


# -- where a workspace keeps its memory -----------------------------------------------------------


def store_path(root: Path) -> Path:
    """The memory directory of the workspace `root`: `<root>/.qem`."""
    return root / STATE_DIR


def workspace(root: Path) -> Workspace:
    """The workspace `root`, with its default memory."""
    return Workspace(root=root, store_path=store_path(root))


# -- stores ------------------------------------------------------------------------------------------


def load_store(path: Path, log: Path | bytes, name: str = "log") -> Store:
    """A new memory at `path` (a `.qem` directory) holding the JSON Lines `log` (a file,
    or its bytes named `name`), loaded as `qem load` loads it.  The caller closes it."""
    if isinstance(log, Path):
        raw, name = log.read_bytes(), str(log)
    else:
        raw = log
    store = Store.open(path, create=True)
    load(store, *read_dump(raw, name))
    return store


class NoteMap(dict):
    """Notes by full id; an int key finds the note of that old number (a store converted
    from a numbered log, as the fixtures are)."""

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        if isinstance(key, int):
            found = [n for n in self.values() if n.alias == key]
            if len(found) != 1:
                raise KeyError(key)
            return found[0]
        return super().__getitem__(key)

    def __contains__(self, key) -> bool:  # type: ignore[no-untyped-def]
        if isinstance(key, int):
            return any(n.alias == key for n in self.values())
        return super().__contains__(key)


def note_map(store: Store) -> NoteMap:
    return NoteMap((n.id, n) for n in store.notes())


def full_id(store: Store, key: int | str) -> str:
    """A note's full id from its old number or any prefix of its id."""
    return store.resolve(key)


# -- notes -------------------------------------------------------------------------------------------


def add(store: Store, text: str = "a note", kind: str = "gotcha", *, priority: str = "medium",
        provenance: str = "agent", supersedes: int | str | None = None, actor: str = "tester",
        at: str | None = AT) -> str:
    """A new note (its text as given: the store normalizes it); returns its full id."""
    parent = store.resolve(supersedes) if supersedes is not None else None
    new = NewNote(kind, priority, provenance, text, parent)
    return store.write(lambda tx: tx.create(new, actor), at=at).id


def emit(store: Store, note_id: int | str, type_: str, reason: str | None = "because", *,
         actor: str = "tester", at: str | None = AT) -> Event:
    """A lifecycle move (revoked, stale_flagged, reinstated, promoted, expired) on one note."""
    full = store.resolve(note_id)
    return store.write(lambda tx: tx.emit(full, type_, actor, reason), at=at)


def forget(store: Store, note_id: int | str, reason: str = "held a secret", *,
           actor: str = "tester", at: str | None = AT) -> Event:
    full = store.resolve(note_id)
    return store.write(lambda tx: tx.forget(full, actor, reason), at=at)


def shown(store: Store, key: int | str) -> str:
    """The short id MEMORY.md shows a note by (from its old number or an id prefix)."""
    return store.note(store.resolve(key)).shown


# -- clones ------------------------------------------------------------------------------------------


def pushed_feature(team, text: str = "the branch learned this"):  # type: ignore[no-untyped-def]
    """test_git's `Team` founded with one note on main, its founder on a branch `feature`
    holding one more note (`text`), committed and pushed; returns the founder's clone."""
    founder = team.founded("shared fact")
    founder.git("switch", "-q", "-c", "feature")
    founder.add(text)
    founder.commit("learned")
    founder.git("push", "-q", "origin", "feature")
    return founder


# -- renderings -------------------------------------------------------------------------------------


def render_text(store: Store, selection: Selection = Selection()) -> tuple[int, str]:
    """The index's generation and the memory's rendering, as text."""
    head, data = render_store(store, selection)
    return head, data.decode("utf-8")


def planted_created(memory: Path, text: str, kind: str, **data: object) -> str:
    """A created event and its text written by hand into a log, as another clone's writer
    would name them (the name is the hash), with `data` beside the usual fields; its file."""
    record = canonical({"key": "k" * 26, "text": text})
    event = canonical({
        "v": 1, "type": "created", "note": None, "at": "2026-07-27T10:00:00Z", "actor": "mallory", "reason": None,
        "checkin": None, "clock": 7, "prev": [],
        "data": {"kind": kind, "nonce": "n" * 26, "priority": "high", "provenance": "agent", "short": 4,
                 "supersedes": None, "text": ids.content_id(record), **data}})
    note_id = ids.content_id(event)
    for folder in ("events", "texts"):
        (memory / folder).mkdir(exist_ok=True)  # (git keeps no empty folder)
    (memory / "events" / note_id).write_bytes(event)
    (memory / "texts" / note_id).write_bytes(record)
    return f"events/{note_id}"


def code_repository(root: Path, files: dict[str, str], executable: tuple[str, ...] = ()) -> Path:
    """A git repository at `root` holding `files` (path → text; `executable` ones mode
    755), committed on `main`, with a git identity in the test's $HOME."""
    home = Path(os.environ["HOME"])
    (home / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.com\n[init]\n\tdefaultBranch = main\n")
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    for path in executable:
        (root / path).chmod(0o755)
    for args in (["init", "-q", str(root)], ["-C", str(root), "add", "-A"], ["-C", str(root), "commit", "-q", "-m", "code"]):
        subprocess.run(["git", *args], check=True, capture_output=True)
    return root
