"""`qem diff`: what memory learned between two revisions, as events.

A revision's memory is the set of events its committed log holds (read from git's tree at
that commit, never from history), so the change from A to B is the events B holds and A
does not: merges, rebases and cherry-picks keep an event's id (the hash of its bytes), and
the answer needs no merge base and no history, which a shallow clone lacks.  The working
tree is read from its files, uncommitted ones included.  `A..B` is A and B, `A...B` the
merge base of A and B, and B, as in `git diff`.

Events A holds and B lacks are either removed on B's side (a `git rm`, a revert, a dropped
commit: qem_edit.reads.removals) or A's own since B's side left it.  The merge base of A and B
(of A and HEAD, against the working tree) tells them apart: what it holds and B lacks was
removed.  Without one (a shallow clone), all of them are shown as removed, and a notice
says why.

The events are grouped into changes a reviewer reads (a supersession is its two events,
a dispute its pair, a stale flag a code change caused, its `drift`, apart from the other
flags); qem_edit.reads.diff_text writes them as text, markdown or JSON.  A forgotten note's text
is never shown, whichever side still holds it.

Beside what memory learned, the notes in force on the new side anchored to the code the
change touches (`git diff --name-only` between the same two sides; against the working
tree, its changes and its untracked files), whether or not memory changed: what a
reviewer of that code should read.  The memory's own files and MEMORY.md are not code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..base import errors, ids
from ..base.owing import NO, UNKNOWN, answered, is_request, owed_words
from ..base.replay import Event, Note, fold, sort_key
from ..base.stored_form import Drift, anchors_of, drift_of, utf8_named
from ..base.times import utc_now
from ..base.vocabulary import LogError
from ..storage.logtree import EVENTS, PACKS, TEXTS, LogFileError, LogTree, records_from
from ..system import gitrepo
from .removals import Removal, removals

WORK_TREE = "the working tree"
DRIFTED = "drifted"  # the group of the stale flags a code change caused (their data's `drift`)


@dataclass
class Side:
    """One revision's memory: its events by id and its notes' texts."""

    label: str  # the revision as given, or "the working tree"
    commit: str | None = None
    events: dict[str, Event] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    set_aside: list[str] = field(default_factory=list)  # log files that could not be read
    names: set[str] = field(default_factory=set)  # its log files

    def add_file(self, name: str, data: bytes) -> None:
        if name.partition("/")[0] not in (EVENTS, TEXTS, PACKS):
            return  # config.toml, .gitignore: not the log
        self.names.add(name)
        try:
            events, texts = records_from(name, data)
        except LogFileError as exc:
            self.set_aside.append(str(exc))
            return
        self.events.update((e.id, e) for e in events)
        self.texts.update((t.note, t.text) for t in texts)


@dataclass(frozen=True)
class Change:
    """One thing memory learned: its group, the note, the events that make it, and what
    a reader needs to see it (texts are None where forgotten)."""

    group: str
    note: str
    events: tuple[Event, ...]
    other: str | None = None  # superseded: the successor; disputed: the other note; ruled: the kept note
    text: str | None = None  # created: the text; superseded: the successor's text
    old_text: str | None = None  # superseded: the note's own text
    drift: tuple[Drift, ...] = ()  # drifted: each anchored path, the object id it was, and is (None: deleted)


@dataclass(frozen=True)
class Anchored:
    """A note in force on the new side anchored to code the change touches: each of its
    anchors the change touches, with the touched paths it covers (a file's own path, or
    the paths under a folder)."""

    note: Note
    touched: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class Debt:
    """What the range did to what is owed: a new request, an answer, or a request that
    became late between the two sides' moments (in force on the new side, not answered)."""

    what: str  # REQUESTED, ANSWERED or BECAME_LATE
    note: Note
    words: str  # owed by whom, due when (a request); the request it answers (an answer)


REQUESTED, ANSWERED, BECAME_LATE = "new request", "answer", "became late"


@dataclass
class MemoryDiff:
    old: Side
    new: Side
    added: list[Event]  # in new, not in old, in replay order
    missing: list[Event]  # in old, not in new
    changes: list[Change]
    kinds: dict[str, str]  # note id → its kind
    shorts: dict[str, str]  # note id → its short id
    notices: list[str]
    removed: list[Removal] = field(default_factory=list)  # the notes whose events new's side removed
    unsure: bool = False  # no merge base to tell removals from old's own events since
    anchored: list[Anchored] = field(default_factory=list)  # the notes about the code the change touches
    debts: list[Debt] = field(default_factory=list)  # new requests, answers, and what became late

    @property
    def changed(self) -> bool:
        return bool(self.added or self.missing)


def memory_diff(store_root: Path, revs: list[str], mirror: Path | None = None) -> MemoryDiff:
    """The memory changes from `revs[0]` (default HEAD) to `revs[1]` (default: the
    working tree), for the memory whose log lives at `store_root` and is rendered to
    `mirror` (default: MEMORY.md at the top); one `A..B` or `A...B` is the two revisions
    of a range, as git reads it."""
    top = gitrepo.toplevel(store_root if store_root.is_dir() else store_root.parent)
    if top is None:
        raise errors.BadInput(f"{store_root} is not in a git repository; qem diff compares git revisions")
    folder = _inside(top, store_root)
    revs, symmetric = _range(revs)
    if symmetric:
        revs = [_merge_base_of(top, revs[0], revs[1])[:12], revs[1]]
    notices: list[str] = []
    old = _side_at(top, folder, revs[0] if revs else "HEAD", notices)
    new = _side_at(top, folder, revs[1], notices) if len(revs) == 2 else _working(store_root)
    found = between(old, new, notices)
    touched = _code_touched(top, old.commit, new.commit, (folder, mirror or top / "MEMORY.md"))
    found.anchored = about_the_code(new, touched)
    then = gitrepo.commit_time(top, old.commit) if old.commit else None
    found.debts = debts(found, then, gitrepo.commit_time(top, new.commit) if new.commit else utc_now())
    return _with_removals(found, top, folder, symmetric)


def debts(diff: MemoryDiff, then: str | None, now: str | None) -> list[Debt]:
    """The requests and answers the range added (a successor is shown as its supersession),
    and the requests in force on the new side, not answered, whose deadline fell between
    `then` (the old side's moment; None: none) and `now` (the new side's)."""
    notes = _asking(diff.new)
    shown = lambda n: ids.shown(n, diff.shorts.get(n))  # noqa: E731
    out = []
    for event in diff.added:
        note = notes.get(event.id)
        if event.type != "created" or note is None or event.data.get("supersedes"):
            continue
        if is_request(note):
            out.append(Debt(REQUESTED, note, owed_words(note, now or note.created_at)))
        if note.answers is not None:
            out.append(Debt(ANSWERED, note, f"answers #{shown(note.answers)}"))
    answers: dict[str, list[Note]] = {}
    for note in notes.values():
        if note.answers is not None:
            answers.setdefault(note.answers, []).append(note)
    for note in sorted(notes.values(), key=sort_key):
        if not (now and is_request(note) and note.due and (then or "") <= note.due < now):
            continue
        if answered(note, answers.get(note.id, []), now).value in (NO, UNKNOWN):
            out.append(Debt(BECAME_LATE, note, owed_words(note, now)))
    return out


def _asking(side: Side) -> dict[str, Note]:
    """The requests and answers on `side`, folded from its events."""
    wanted = {e.note for e in side.events.values()
              if e.type == "created" and {"to", "due", "answers"} & set(e.data)}
    return _folded(side, wanted, live_only=False)


def _range(revs: list[str]) -> tuple[list[str], bool]:
    """The revisions as given, or the two ends of one range (an empty end is HEAD), and
    whether it is `A...B` (from their merge base)."""
    ranges = [r for r in revs if ".." in r and not r.startswith("-")]
    if not ranges:
        if len(revs) > 2:
            raise errors.BadInput(f"qem diff takes at most two revisions, not {len(revs)}")
        return revs, False
    if len(revs) > 1:
        raise errors.BadInput(f"qem diff takes a range ({ranges[0]}) or two revisions, not both")
    dots = "..." if "..." in revs[0] else ".."
    left, _, right = revs[0].partition(dots)
    return [left or "HEAD", right or "HEAD"], dots == "..."


def _merge_base_of(top: Path, left: str, right: str) -> str:
    commits = [gitrepo.commit_of(top, rev) for rev in (left, right)]
    for rev, commit in zip((left, right), commits):
        if commit is None:
            raise errors.BadInput(_bad_revision(top, rev))
    found = gitrepo.merge_base(top, commits[0], commits[1])  # type: ignore[arg-type]
    if found is None:
        raise errors.BadInput(f"{left}...{right}: {left} and {right} have no merge base this clone holds"
                              " (a shallow clone? git fetch --deepen=N, or git fetch --unshallow)")
    return found


def _with_removals(diff: MemoryDiff, top: Path, folder: Path, from_base: bool) -> MemoryDiff:
    """`diff` with the notes whose events the new side removed: the missing events the
    merge base of the two sides holds (of old and HEAD, against the working tree)."""
    if not diff.missing:
        return diff
    old, new = diff.old, diff.new
    base = old.commit if from_base else None
    if base is None and old.commit is not None:
        against = new.commit or gitrepo.commit_of(top, "HEAD")
        base = gitrepo.merge_base(top, old.commit, against) if against else None
    if base is None:
        diff.unsure = True
        diff.notices.append(f"{old.label} and {new.label} have no merge base this clone holds (a shallow clone?):"
                            f" every event {old.label} holds and {new.label} lacks is shown as removed; fetch"
                            " more history (git fetch --deepen=N, or --unshallow) to tell them from events"
                            f" written on {old.label} since")
    missing = {e.id: e for e in diff.missing}
    held = set(missing) if base in (None, old.commit) else _held_at(top, folder, base, new.names)
    forgotten = {e.note for side in (old, new) for e in side.events.values() if e.type == "forgotten"}
    texts = {n: t for n, t in {**new.texts, **old.texts}.items() if n not in forgotten}
    diff.removed = removals({i: e for i, e in missing.items() if i in held}, (), texts, diff.kinds)
    return diff


def _held_at(top: Path, folder: Path, commit: str, skip: set[str]) -> set[str]:
    """The ids of the events commit `commit` holds in log files not named in `skip`."""
    side = Side(commit, commit)
    for name, data in sorted(gitrepo.tree_files(top, commit, folder, skip=skip).items()):
        side.add_file(name, data)
    return set(side.events)


def between(old: Side, new: Side, notices: list[str] | None = None) -> MemoryDiff:
    added = sorted((e for i, e in new.events.items() if i not in old.events), key=lambda e: e.order)
    missing = sorted((e for i, e in old.events.items() if i not in new.events), key=lambda e: e.order)
    everything = {**old.events, **new.events}
    created = [e for e in everything.values() if e.type == "created"]
    kinds = {e.id: str(e.data.get("kind")) for e in created}
    lengths = {e.id: e.data.get("short", 4) for e in created}
    shorts = ids.short_ids({n: length if isinstance(length, int) and 1 <= length <= 26 else 4
                            for n, length in lengths.items()})
    forgotten = {e.note for e in everything.values() if e.type == "forgotten"}
    texts = {n: t for n, t in {**old.texts, **new.texts}.items() if n not in forgotten}
    notes = list(notices or [])
    for side in (old, new):
        notes += [f"{side.label}: set aside {problem}" for problem in side.set_aside]
    return MemoryDiff(old, new, added, missing, changes_of(added, texts), kinds, shorts, notes)


# -- the events grouped into changes --------------------------------------------------------


def changes_of(events: list[Event], texts: dict[str, str]) -> list[Change]:
    """The changes `events` (in replay order) make, in that order: a supersession takes
    its successor's creation with it, a dispute or a ruling between two notes is one."""
    successors = {str(e.data.get("by")) for e in events if e.type == "superseded"}
    seen_disputes: set[tuple[str, str]] = set()
    out = []
    for event in events:
        if event.type == "created" and event.id in successors:
            continue  # shown with the supersession
        if event.type in ("disputed", "ruled") and event.data.get("dispute") is not None:
            key = (event.type, str(event.data["dispute"]))
            if key in seen_disputes:
                continue
            seen_disputes.add(key)
        out.append(_change(event, texts))
    return out


def _change(event: Event, texts: dict[str, str]) -> Change:
    if event.type == "stale_flagged" and (drift := drift_of(event.data)):
        return Change(DRIFTED, event.note, (event,), text=texts.get(event.note), drift=drift)
    if event.type == "superseded":
        by = str(event.data.get("by"))
        return Change("superseded", event.note, (event,), by, texts.get(by), texts.get(event.note))
    if event.type == "disputed":
        return Change("disputed", event.note, (event,), str(event.data.get("with")))
    if event.type == "ruled":
        kept = event.data.get("kept") or event.data.get("keep")
        return Change("ruled", event.note, (event,), str(kept) if kept else None)
    if event.type == "forgotten":
        return Change("forgotten", event.note, (event,))
    return Change(event.type, event.note, (event,), text=texts.get(event.note))


# -- the notes about the code the change touches ---------------------------------------------


def _code_touched(top: Path, old: str | None, new: str | None, memory: tuple[Path, ...]) -> set[str]:
    """The code paths the change from commit `old` (None: nothing) to commit `new` (None:
    the working tree) touches: not the memory's own files (`memory`: its log's folder and
    its rendering), nor anything in a `.qem/`."""
    own = set()
    for path in memory:
        try:
            own.add(path.resolve().relative_to(top.resolve()).as_posix())
        except ValueError:
            continue  # outside the work tree: git names none of it
    # (a name git gives as bytes that are not UTF-8 is named with them escaped, so that what
    # is printed, JSON too, is UTF-8; no anchor's path is such a name, nor holds a backslash:
    # a folder anchor still finds it under it)
    return {utf8_named(path) for path in gitrepo.changed_paths(top, old, new)
            if path not in own and ".qem" not in path.split("/")
            and not any(path.startswith(folder + "/") for folder in own)}


def about_the_code(side: Side, touched: set[str]) -> list[Anchored]:
    """The notes in force on `side` with an anchor the change touches: a file anchor by its
    own path, a folder anchor by a path under it; in the projection's order.  A note is
    judged by its anchors as its history leaves them (`fold`), and only the notes some
    event of which names a touched anchor are folded."""
    under: dict[str, list[str]] = {}  # each folder a touched path is in → the touched paths in it
    for path in sorted(touched):
        parts = path.split("/")
        for depth in range(1, len(parts)):
            under.setdefault("/".join(parts[:depth]), []).append(path)

    def hits(anchors: tuple[tuple[str, str], ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
        found = ((path, tuple(([path] if path in touched else []) + under.get(path, []))) for path, _ in anchors)
        return tuple((path, paths) for path, paths in found if paths)

    named = {event.note for event in side.events.values() if "anchors" in event.data and hits(anchors_of(event.data))}
    found = [Anchored(note, hit) for note in _in_force(side, named).values() if (hit := hits(note.anchors))]
    return sorted(found, key=lambda a: sort_key(a.note))


def _in_force(side: Side, note_ids: set[str]) -> dict[str, Note]:
    """Those of these notes that are in force on `side`, folded from its events."""
    return _folded(side, note_ids, live_only=True)


def _folded(side: Side, note_ids: set[str], live_only: bool) -> dict[str, Note]:
    events: dict[str, list[Event]] = {note: [] for note in note_ids}
    for event in side.events.values():
        if event.note in events:
            events[event.note].append(event)
    out = {}
    for note_id, history in events.items():
        try:
            note = fold(history, side.texts.get(note_id)).note
        except LogError:
            continue  # a history that does not fold (qem verify names it): not shown as in force
        if note.live or not live_only:
            out[note_id] = note
    return out


# -- reading a side -----------------------------------------------------------------------


def _inside(top: Path, store_root: Path) -> Path:
    try:
        store_root.resolve().relative_to(top.resolve())
    except ValueError:
        raise errors.BadInput(f"the memory at {store_root} is outside the git work tree {top};"
                              " qem diff reads the log committed in that repository") from None
    return store_root


def _side_at(top: Path, folder: Path, rev: str, notices: list[str]) -> Side:
    commit = gitrepo.commit_of(top, rev)
    if commit is None:
        if rev == "HEAD" and not gitrepo.has_commits(top):
            notices.append("HEAD: the repository has no commit yet; compared with an empty memory")
            return Side("HEAD")
        raise errors.BadInput(_bad_revision(top, rev))
    side = Side(rev, commit)
    for name, data in sorted(gitrepo.tree_files(top, commit, folder).items()):
        side.add_file(name, data)
    return side


def _bad_revision(top: Path, rev: str) -> str:
    if gitrepo.is_shallow(top):
        return (f"{rev!r} is not a revision this clone holds: it is a shallow clone, and its history stops at"
                f" {', '.join(c[:10] for c in gitrepo.shallow_boundary(top))}; fetch what is missing"
                " (git fetch --deepen=N, git fetch --unshallow, or git fetch origin BRANCH)")
    return f"{rev!r} is not a git revision of this repository"


def _working(store_root: Path) -> Side:
    side = Side(WORK_TREE)
    tree = LogTree(store_root)
    for name in sorted(tree.names()):
        side.names.add(name)
        try:
            events, texts = tree.read(name)
        except LogFileError as exc:
            side.set_aside.append(str(exc))
            continue
        side.events.update((e.id, e) for e in events)
        side.texts.update((t.note, t.text) for t in texts)
    return side
