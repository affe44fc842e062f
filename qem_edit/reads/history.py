"""The memory as it was at a date or a git revision.

The memory as it was: `--at` a date (the events written by then) or a git revision
(the log as committed there).  A text forgotten since stays forgotten."""

from __future__ import annotations

from ..base import errors, ids
from ..base.replay import Note, replay
from ..base.times import is_time, parse_time
from ..storage.logtree import EVENTS, PACKS, TEXTS, LogFileError, records_from
from ..storage.store import Store
from ..system import gitrepo


def notes_as_of(store: Store, at: str, set_aside: list[str] | None = None) -> dict[str, Note]:
    """Every note as of `at`: a date or UTC time (a date means its end), else a git
    revision of the repository the memory lives in.  `set_aside`, where given, is told the
    log files the read left out (a date reads the index: the files set aside here; a
    revision its own files: those untrusted or unreadable as committed there)."""
    if is_time(at):
        if set_aside is not None:
            set_aside += store.set_aside()
        return _with_shorts(store, store.state_at(parse_time(at, "--at", end=True)))
    top = gitrepo.toplevel(store.root)
    if top is None:
        raise errors.BadInput(f"--at {at!r}: not a date, and {store.root} is not in a git repository")
    commit = gitrepo.commit_of(top, at)
    if commit is None:
        raise errors.BadInput(f"{at!r} is neither a date nor a git revision of this repository")
    return notes_of_files(store, gitrepo.tree_files(top, commit, store.root), set_aside)


def note_at(store: Store, note_id: str, at: str) -> Note:
    """One note as it was `--at` a date or git revision."""
    past = notes_as_of(store, at)
    if note_id not in past:
        raise errors.NoSuchNote(f"note #{ids.shown(note_id)} did not exist at {at}")
    return past[note_id]


def notes_of_files(store: Store, files: dict[str, bytes], set_aside: list[str] | None = None) -> dict[str, Note]:
    """Every note the log files `files` (name → bytes, from a commit or git's index) hold,
    read by the rules the work tree's files are read by: a file that is not a log file's
    form, or holds an event following another note's, is left out (as the index sets it
    aside), and named in `set_aside` where given."""
    read: dict[str, tuple[list, list]] = {}
    aside = [] if set_aside is None else set_aside
    for name, data in sorted(files.items()):
        folder, _, base = name.partition("/")
        if folder not in (EVENTS, TEXTS, PACKS) or base.startswith("."):
            continue  # config.toml, .gitignore: beside the log, as the work tree's listing leaves them
        try:
            read[name] = records_from(name, data)
        except LogFileError as exc:
            aside.append(str(exc))  # set aside there as it would be here (qem verify names such files)
    note_of = {e.id: e.note for found, _ in read.values() for e in found}
    events, texts = [], {}
    for name, (found, records) in read.items():
        crossing = next((e for e in found for p in e.prev if note_of.get(p, e.note) != e.note), None)
        if crossing is not None:
            aside.append(f"{name}: event {crossing.id} follows an event of another note")
            continue
        events += found
        texts.update((t.note, t.text) for t in records)
    forgotten = {n.id for n in store.notes(states=["forgotten"])}  # not brought back by an old revision
    kept = {note: text for note, text in texts.items() if note not in forgotten}
    return _with_shorts(store, replay(_unique(events), kept))


def _unique(events: list) -> list:  # type: ignore[type-arg]
    return list({e.id: e for e in events}.values())


def _with_shorts(store: Store, notes: dict[str, Note]) -> dict[str, Note]:
    """The notes with the short ids the memory shows them by now (or, for notes it no
    longer holds, the shortest unique prefix among these)."""

    from ..base import ids

    known = store.index.shorts(notes)
    computed = ids.short_ids({n: note.short_len for n, note in notes.items()})
    erased = {n.id for n in store.notes(states=["forgotten"])}  # a tombstone then too, not a missing text
    return {n: note._replace(short=known.get(n, computed[n]), erased_since=n in erased and note.text is None)
            for n, note in notes.items()}
