"""Drift: the notes in force whose anchored content is not what they recorded.

A note's anchor holds the git object id its path had when the note was written (or last
confirmed: a reinstatement, a re-anchoring).  The check reads what each anchored path
holds in one place and compares: the work tree (the default), git's index (`--staged`,
what the next commit holds) or a commit (`--rev`).  An anchor is *changed* (another id),
*deleted* (nothing there, and no new path holds the same content) or *moved* (nothing
there, and exactly one path that did not hold it before, against HEAD or the revision's
first parent, holds the very same object id: a `git mv`, a rename; an identical twin that
was already there is not the file moved).

`--staged` judges the commit being made, not the whole tree: only the anchors on the paths
the staged tree changes against HEAD (and the folders holding them), so a commit that
touches no anchored file costs a `git diff --cached` and one lookup, and a note written
over unstaged edits is not flagged by a commit that does not carry them.  A note the
commit adds is judged whole, apart: what it is anchored to and the commit lacks is no
drift (the code did not change) but an incomplete commit (`Report.uncarried`).  `qem
verify` judges every anchor against the work tree and lists the drift (`--fail-on-drift`
fails on it), which is what catches a commit made without the hook.

Only notes `active` are judged: a stale one is already flagged and waits for a person
(`qem reinstate` re-anchors it to the content now; a supersession reads it anew).  The
writes (`--flag`) are qem_edit.writes.acts.flag_drift's; this module only reads.
"""

from __future__ import annotations

from collections.abc import Callable

from ..base import errors, ids
from ..base.records import Record
from ..base.replay import Note, sort_key
from ..system.anchors import Listing, WorkTree, WorkTreeContent, revision_listing, staged_listing
from ..system.files import name_within

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..base.decisions import Drifted
    from ..storage.store import Store
    from ..system.gitrepo import WorkTreeFiles

WORK_TREE, STAGED = "work tree", "staged"


class NoteDrift(Record):
    note: Note
    drifted: list[Drifted]


class Report:
    """What the check found (and, with --flag, what it wrote), as text and JSON.  (A plain
    class: the hook imports this module on every commit, and a dataclass costs its start-up
    a few milliseconds.)"""

    def __init__(self, judged: str) -> None:
        self.judged = judged  # WORK_TREE, STAGED, or the revision as given
        self.checked = 0  # anchors compared
        self.notes: list[NoteDrift] = []
        self.skipped: list[str] = []  # anchors not judged, and why
        self.flagged: list[Note] = []
        self.reanchored: list[Note] = []
        self.checkin: str | None = None
        self.staged_before: list[str] = []  # an earlier run's flags, staged into this commit
        self.touched: set[str] = set()  # --staged: the paths the commit changes, and their folders
        self.notices: list[str] = []
        # --staged: notes the commit adds whose anchored content it does not carry (not flagged:
        # the code did not change; the commit lacks it)
        self.uncarried: list[NoteDrift] = []

    @property
    def where(self) -> str:
        if self.judged == WORK_TREE:
            return "the work tree"
        return "the staged content" if self.judged == STAGED else f"revision {self.judged}"

    @property
    def wrote(self) -> bool:
        return bool(self.flagged or self.reanchored)

    @property
    def exit_code(self) -> int:
        """0: nothing drifted (or the drift's flags were written before and are committed
        with this commit); 1: something drifted, listed or written now, or the commit lacks
        what a note it adds is anchored to."""
        return 1 if self.notes or self.uncarried else 0

    def text(self) -> str:
        if not self.notes:
            said = f"no anchor drifted: {self.checked} anchor{_s(self.checked)} checked against {self.where}"
            return "\n".join([said, *self._staged_lines(), *self._uncarried_lines()])
        lines = [f"{len(self.notes)} note{_s(len(self.notes))} drifted from {'its' if len(self.notes) == 1 else 'their'}"
                 f" anchors ({self.checked} checked against {self.where}):"]
        for found in self.notes:
            lines.append(f"  #{found.note.shown} {found.note.kind} · {found.note.first_line()}")
            lines += [f"    {d.words()}" for d in found.drifted]
        lines += self._written_lines()
        return "\n".join(lines + self._uncarried_lines())

    def _uncarried_lines(self) -> list[str]:
        if not self.uncarried:
            return []
        lines = [f"{len(self.uncarried)} note{_s(len(self.uncarried))} this commit adds {'is' if len(self.uncarried) == 1 else 'are'}"
                 " anchored to content the commit does not carry:"]
        for found in self.uncarried:
            lines.append(f"  #{found.note.shown} {found.note.kind} · {found.note.first_line()}")
            lines += [f"    {d.path}: the note recorded {d.was[:12]}, the commit "
                      + (f"holds {d.now[:12]}" if d.now else "holds nothing there") for d in found.drifted]
        paths = " ".join(sorted({d.path for found in self.uncarried for d in found.drifted}))
        return lines + [f"stage what the notes are about (`git add {paths}`), or commit the notes with it later"]

    def _written_lines(self) -> list[str]:
        if not self.wrote:
            where = "" if self.judged == WORK_TREE else " --staged" if self.judged == STAGED else f" --rev {self.judged}"
            return [f"`qem anchors check{where} --flag` flags the changed and deleted ones stale and re-anchors"
                    " the moved ones"]
        out = [f"re-anchored (moved, the same content): {', '.join('#' + n.shown for n in self.reanchored)}"
               f" (check-in {self.checkin})"] if self.reanchored else []
        if self.flagged:
            out += [f"flagged stale: {', '.join('#' + n.shown for n in self.flagged)} (check-in {self.checkin});"
                    " a person confirms a note with `qem reinstate ID -m WHY` (so too if you drop the change),"
                    " or corrects it with `qem supersede ID TEXT`"]
        return out

    def _staged_lines(self) -> list[str]:
        if not self.staged_before:
            return []
        return [f"staged the drift flags written before, so this commit carries them: {' '.join(self.staged_before)}"]

    def data(self) -> object:
        return {"judged": self.judged, "checked": self.checked, "checkin": self.checkin,
                "notes": [{"id": f.note.id, "short": f.note.shown, "kind": f.note.kind, "text": f.note.first_line(),
                           "drift": [{"path": d.path, "what": d.what, "was": d.was, "now": d.now,
                                      "moved_to": d.moved_to} for d in f.drifted]} for f in self.notes],
                "flagged": [n.id for n in self.flagged], "reanchored": [n.id for n in self.reanchored],
                "uncarried": [{"id": f.note.id, "short": f.note.shown, "kind": f.note.kind,
                               "anchors": [{"path": d.path, "recorded": d.was, "committed": d.now} for d in f.drifted]}
                              for f in self.uncarried],
                "skipped": self.skipped, "staged_before": self.staged_before}

    def remark(self) -> str | None:
        return "\n".join(self.notices + self.skipped) or None


def _s(count: int) -> str:
    return "" if count == 1 else "s"


# -- the check ----------------------------------------------------------------------------------


def check(store: "Store", tree: WorkTree, judged: str = WORK_TREE, read: WorkTreeFiles | None = None) -> Report:
    """Every anchor of the notes `active` judged against `judged` (WORK_TREE, STAGED, or a
    revision), drifted ones grouped by note in the projection's order.  Judging a commit,
    the notes it adds are judged apart: one whose anchored content the commit does not
    carry (a file not staged, or staged otherwise) is no drift but an incomplete commit.
    `read`: the work tree as git listed it already in this run (anchors.WorkTreeContent)."""
    report = Report(judged)
    added: set[str] = set()
    if judged == STAGED:
        if not tree.git:
            raise errors.BadInput("--staged judges git's index, and this memory is not in a git work tree")
        changed, authored = _against_parents(tree)
        report.touched, added = with_folders(changed), _notes_added(store, tree, authored)
        anchors = [row for row in store.anchors_in_force(report.touched, states=("active",)) if row[0] not in added]
        anchors += store.anchors_of_notes(added, states=("active",))
    else:
        anchors = store.anchors_in_force(states=("active",))
    if not anchors:
        return report
    found = _drifted(store, report, _content(tree, judged, sorted({path for _, path, _ in anchors}), read), anchors)
    notes = store.notes_by_id(found)
    drifted = sorted((NoteDrift(notes[n], found[n]) for n in found if n in notes), key=lambda f: sort_key(f.note))
    report.notes = [f for f in drifted if f.note.id not in added]
    report.uncarried = [f for f in drifted if f.note.id in added]
    return report


def _drifted(store: "Store", report: Report, content: "_Content", anchors: list[tuple[str, str, str]]
             ) -> dict[str, list[Drifted]]:
    by_note: dict[str, list[tuple[str, str]]] = {}
    for note_id, path, oid in anchors:
        by_note.setdefault(note_id, []).append((path, oid))
    found: dict[str, list[Drifted]] = {}
    for note_id, held in by_note.items():
        for path, was in held:
            if content.unknown(path):
                named = ids.shown(note_id, store.shorts([note_id]).get(note_id))
                report.skipped.append(f"anchor {path} of #{named} not judged: git holds it mid-merge (unmerged)")
                continue
            report.checked += 1
            drifted = _judged(content, path, was, {p for p, _ in held})
            if drifted is not None:
                found.setdefault(note_id, []).append(drifted)
    return found


def _notes_added(store: "Store", tree: WorkTree, committed: list[str]) -> set[str]:
    """The notes whose creation is in a log file the commit adds or changes."""
    folder = name_within(tree.top, store.root)
    if folder is None:
        return set()
    names = [path[len(folder) + 1:] for path in committed if path.startswith(folder + "/")]
    if not names:
        return set()
    return {event for event, _, note in store.holders(names) if event == note}


def _judged(content: "_Content", path: str, was: str, held: set[str]) -> Drifted | None:
    """An anchor judged; gone, it moved where exactly one path that did not hold the same
    content before (a file new to the tree, not an identical twin already there) holds it."""
    now = content.oid(path)
    if now == was:
        return None
    from ..base.decisions import Drifted  # (here: a commit hook finding no drift loads no write's decisions)

    if now is not None:
        return Drifted(path, was, now)
    elsewhere = [p for p in content.holding(was) if p not in held and content.before(p) != was]
    return Drifted(path, was, None, elsewhere[0] if len(elsewhere) == 1 else None)


def tree_of(place) -> WorkTree:  # type: ignore[no-untyped-def]
    """The work tree a workspace's anchors are relative to (read as it is: the check
    reads no config, so a hook that finds nothing pays for none)."""
    from ..system.anchors import work_tree

    return work_tree(place.root_name)


def touched_notes(store: "Store", report: Report) -> set[str]:
    """The notes in force anchored to what the judged commit changes (--staged)."""
    return {note for note, _, _ in store.anchors_in_force(report.touched)} if report.touched else set()


def _against_parents(tree: WorkTree) -> tuple[list[str], list[str]]:
    """(the paths the staged tree changes against any parent of the commit being made,
    those it changes against every parent).  Outside a merge both are the change against
    HEAD.  A merge's commit changes, against the other side, the code this side changed:
    a note that arrived from there, anchored to it, is judged as drift; and a note whose
    log file the other side already committed is not this commit's to complete."""
    from ..system.gitrepo import merge_heads, staged_changes

    ours = staged_changes(tree.top)
    changed, authored = dict.fromkeys(ours), set(ours)
    for head in merge_heads(tree.top):
        theirs = staged_changes(tree.top, head)
        changed.update(dict.fromkeys(theirs))
        authored &= set(theirs)
    return list(changed), [path for path in ours if path in authored]


def with_folders(paths: list[str]) -> set[str]:
    """Each path and every folder holding it: the anchors a change to it touches."""
    out: set[str] = set()
    for path in paths:
        parts = path.split("/")
        out.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
    return out


class _Content:
    """One place's content, as the check asks it: a path's id, the paths holding an id
    (read from `whole`, the whole place, only when a path is gone), and whether git cannot
    say (a path mid-merge)."""

    def __init__(self, read: "Listing | WorkTreeContent", base: Callable[[], Listing], unknown: set[str] | None = None,
                 whole: "Callable[[], Listing] | None" = None) -> None:
        self.read, self._unknown, self._whole = read, unknown or set(), whole
        self._base: Callable[[], Listing] | Listing = base

    def oid(self, path: str) -> str | None:
        return self.read.oid(path)

    def before(self, path: str) -> str | None:
        """What `path` held before the change judged (HEAD; a revision's first parent)."""
        if callable(self._base):
            self._base = self._base()
        return self._base.oid(path)

    def holding(self, oid: str) -> list[str]:
        if self._whole is not None:
            self.read, self._whole = self._whole(), None
        return self.read.holding(oid)

    def unknown(self, path: str) -> bool:
        return path in self._unknown or any(u.startswith(path + "/") for u in self._unknown)


def _content(tree: WorkTree, judged: str, paths: list[str], read: WorkTreeFiles | None = None) -> _Content:
    base = _listed_or_empty(tree, "HEAD" if judged in (WORK_TREE, STAGED) else f"{judged}^")
    if judged == WORK_TREE:
        return _Content(WorkTreeContent(tree, read), base)
    if judged == STAGED:
        from ..system.anchors import unmerged

        if len(paths) > _NAMED_AT_MOST:
            return _Content(staged_listing(tree), base, unmerged(tree))
        return _Content(staged_listing(tree, paths), base, unmerged(tree), lambda: staged_listing(tree))
    return _Content(revision_listing(tree, judged), base)


def _listed_or_empty(tree: WorkTree, rev: str) -> Callable[[], Listing]:
    """What `rev` holds, read when first asked (nothing: no such commit, as before the first)."""
    def read() -> Listing:
        if not tree.git:
            return Listing({}, tree.object_format)
        try:
            return revision_listing(tree, rev)
        except errors.BadInput:
            return Listing({}, tree.object_format)
    return read


_NAMED_AT_MOST = 200  # more anchored paths than this: list git's whole index once rather than name them
