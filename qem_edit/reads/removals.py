"""Removals: events a base revision's log holds and the log judged lacks.

The log is append-only: a note leaves force by an event (`qem revoke`, `qem forget`), and
its events stay.  A `git rm` of its files, a `git revert` of the commit that added them, a
rebase that drops that commit, take events away with no event saying so, and every other
command reads the memory that remains as if the note had never been.  So `qem diff` and
`qem verify` name what was removed, by note: its id, its kind and its text as the base
shows it (never a forgotten text).  Events are compared by id, not by file: packing
(the same events moved from loose files into a pack) removes nothing, nor does a forget
(the text goes, by an event; the note's events stay).

`qem verify` judges the log against a base: HEAD by default (a pre-commit hook sees a
staged `git rm`), or with `--base REV` the merge base of REV and HEAD (CI sees a removal
made in any commit of a branch).  Removing a note of a protected kind (qem_edit.storage.protect)
fails it; removing another note is named and does not fail: a `git revert` of a commit
that taught a mistaken note is an ordinary habit, and the memory that remains is the same
in every clone, though `qem revoke`/`qem forget` is the recorded way (who, when, why).
"""

from __future__ import annotations

import shlex
from collections.abc import Container, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..base import errors
from ..base.replay import Event
from ..storage.logtree import EVENTS, PACKS, TEXTS, LogFileError, records_from
from ..system import gitrepo
from ..system.db import Connection

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..system.files import AnyPath

SHOWN_FILES = 3  # files named in the command that restores a removed note's events


@dataclass(frozen=True)
class Removal:
    """One note whose events the base holds and the judged log lacks."""

    note: str
    kind: str | None  # None: its creation is in neither log
    text: str | None  # as the base shows it; None: forgotten, or not held
    events: tuple[Event, ...]  # the removed events, in replay order

    @property
    def whole(self) -> bool:
        """Whether the note's creation is among them (the note is gone, not only changed)."""
        return any(e.type == "created" for e in self.events)

    @property
    def types(self) -> str:
        return ", ".join(e.type for e in self.events)


def removals(base: Mapping[str, Event], judged: Container[str], texts: Mapping[str, str],
             kinds: Mapping[str, str]) -> list[Removal]:
    """The notes whose events `base` (id → event) holds and `judged` (a container of
    event ids) lacks, in the order of their first removed event; `texts` and `kinds` by
    note id (a forgotten note's text left out by the caller)."""
    by_note: dict[str, list[Event]] = {}
    for event in sorted((e for i, e in base.items() if i not in judged), key=lambda e: e.order):
        by_note.setdefault(event.note, []).append(event)
    return [Removal(note, kinds.get(note), texts.get(note), tuple(events)) for note, events in by_note.items()]


def read_base(files: Mapping[str, bytes]) -> tuple[dict[str, Event], dict[str, str], dict[str, list[str]]]:
    """The events (by id) and texts (by note) of a base's log files, and the files each
    note's events are in; a file that cannot be read is left out (its reader names it)."""
    events: dict[str, Event] = {}
    texts: dict[str, str] = {}
    where: dict[str, list[str]] = {}
    for name, data in sorted(files.items()):
        if name.partition("/")[0] not in (EVENTS, TEXTS, PACKS):
            continue
        try:
            found, records = records_from(name, data)
        except LogFileError:
            continue
        for event in found:
            events[event.id] = event
            where.setdefault(event.note, []).append(name)
        for record in records:
            texts[record.note] = record.text
            where.setdefault(record.note, []).append(name)
    return events, texts, where


# -- qem verify --------------------------------------------------------------------------------------


class _Held:
    """The event ids of an index of the judged log (`fresh`), asked of the store one at a time."""

    def __init__(self, store, conn: Connection) -> None:  # type: ignore[no-untyped-def]
        self.reads = store.verify_reads()
        self.conn = conn

    def __contains__(self, event_id: object) -> bool:
        return self.reads.has_event_in(self.conn, event_id)


def base_commit(store_root: AnyPath, base: str | None) -> tuple[Path, str, str] | None:
    """Where verify's base is: (git top, commit, how to name it); None when there is none
    to judge against (not in git, no commit yet).  `base` None: HEAD; else the merge base
    of `base` and HEAD (BadInput when either is missing)."""
    store_root = Path(store_root)
    top = gitrepo.toplevel(store_root if store_root.is_dir() else store_root.parent)
    if top is None or not _inside(top, store_root):
        if base is not None:
            raise errors.BadInput(f"--base {base}: the memory at {store_root} is not in a git work tree")
        return None
    if base is None:
        head = gitrepo.commit_of(top, "HEAD")
        return (top, head, "HEAD") if head is not None else None
    commit, head = gitrepo.commit_of(top, base), gitrepo.commit_of(top, "HEAD")
    if commit is None or head is None:
        raise errors.BadInput(f"--base {base}: {'HEAD' if commit else repr(base)} is not a commit of this repository")
    found = gitrepo.merge_base(top, commit, head)
    if found is None:
        raise errors.BadInput(f"--base {base}: {base} and HEAD have no merge base this clone holds (a shallow"
                              " clone? fetch the history: `git fetch --unshallow`, or actions/checkout's fetch-depth: 0)")
    return top, found, f"the merge base of {base} and HEAD ({found[:10]})"


def _inside(top: Path, store_root: Path) -> bool:
    try:
        store_root.resolve().relative_to(top.resolve())
    except ValueError:
        return False
    return True


def verify_findings(store, fresh: Connection, base: str | None,  # type: ignore[no-untyped-def]
                    judged_names: Container[str] | None = None) -> tuple[list[str], list[str]]:
    """`qem verify`'s check: (problems, notices) naming the notes whose events the base
    holds and the log judged (read afresh into the index `fresh`; its file names
    `judged_names`, by default the work tree's) lacks; a protected kind's removal is a
    problem.  Only the base's files whose names the judged log lacks are read (log files
    are named by their content)."""
    where = base_commit(store.root, base)
    if where is None:
        return [], []
    top, commit, label = where
    names = store.tree.names() if judged_names is None else judged_names
    events, texts, files = read_base(gitrepo.tree_files(top, commit, store.root, skip=names))
    kinds = {e.note: str(e.data.get("kind")) for e in events.values() if e.type == "created"}
    found = removals(events, _Held(store, fresh), texts, kinds)
    if not found:
        return [], []
    from ..storage.protect import rule_of

    protected = rule_of(store.root).kinds
    problems, notices = [], []
    for removal in found:
        removal = _completed(removal, store, fresh)
        words = _words(removal, label, commit, files.get(removal.note, []), Path(store.root).resolve().relative_to(top.resolve()))
        (problems if removal.kind in protected else notices).append(words)
    return problems, notices


def _completed(removal: Removal, store, fresh: Connection) -> Removal:  # type: ignore[no-untyped-def]
    """Its kind and text from the judged log where the base's removed files lack them;
    no text for a note forgotten on either side."""
    reads = store.verify_reads()
    kind, text, state = reads.kind_text_state_in(fresh, removal.note)
    forgotten = (state == "forgotten" or any(e.type == "forgotten" for e in removal.events)
                 or reads.was_forgotten_in(fresh, removal.note))
    return Removal(removal.note, removal.kind or kind, None if forgotten else (removal.text or text or None),
                   removal.events)


def _words(removal: Removal, label: str, commit: str, files: list[str], folder: Path) -> str:
    text = f": {_brief(removal.text)}" if removal.text is not None else ""
    count = len(removal.events)
    what = "the note is gone" if removal.whole else "the note reads as if they never happened"
    shown = " ".join(shlex.quote(f"{folder.as_posix()}/{name}") for name in files[:SHOWN_FILES]) + (" ..." if len(files) > SHOWN_FILES else "")
    return (f"removed: note {removal.note[:12]} ({removal.kind or 'unknown kind'}{text}): {count} event"
            f"{'' if count == 1 else 's'} ({removal.types}) that {label} holds {'is' if count == 1 else 'are'} not in"
            f" this log ({what});"
            f" restore them (`git checkout {commit[:10]} -- {shown}`), and take a note out of force the recorded"
            " way (`qem revoke ID -m WHY`, `qem forget ID -m WHY`)")


def _brief(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit - 1] + "…")
