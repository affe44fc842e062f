"""What the next commit carries, judged for the commit hooks (`--staged`).

What the next commit carries, judged for the hooks (`--staged` on `export`,
`export --check` and `verify`).

A hook that reads the work tree sees files the commit will not carry: the pre-commit
framework stashes unstaged changes to tracked files, but untracked files stay, so a note
whose log files were never staged looks present while MEMORY.md, staged, shows it.  Here
the log as staged (the log files in git's index, `GIT_INDEX_FILE` respected: `commit -a`
and `commit -- PATHS` build the commit in an index of their own) is set beside the work
tree's.  When every event and text of the work tree is in a staged file as the work tree
holds it (the usual case, known from the file names and git's own stat cache: log files
are named by their bytes), the work tree's judgment is the commit's.  Otherwise the
commit lacks notes the work tree has: it is whole only if the staged MEMORY.md renders
the staged log (a commit of part of the work, its MEMORY.md with it); if not, it is
refused, naming the notes, the files and the command that adds them, and nothing is
rendered over (a re-render would delete the missing notes' lines from MEMORY.md).
"""

from __future__ import annotations

import os
from collections.abc import Sized

from ..storage.logtree import EVENTS, PACKS, TEXTS
from ..storage.store import Store
from ..system import gitrepo
from ..system.files import name_within
from .export import Verdict, same_text

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..system.anchors import WorkTree
    from ..system.gitrepo import CommitFiles, WorkTreeFiles

SHOWN_MOST = 8  # notes and files named in a refusal; the rest are counted


def staged_verdict(store: Store, place) -> Verdict | None:  # type: ignore[no-untyped-def]
    """The commit's verdict where it differs from the work tree's; None when the staged
    memory is the work tree's (or this is no git work tree): judge the work tree."""
    top = gitrepo.top_name(store.root)
    folder = name_within(top, store.root) if top is not None else None
    if top is None or folder is None:
        return None
    mirror = place.mirror_name()
    mirror_name = name_within(top, mirror)
    paths = [f"{folder}/{d}" for d in (EVENTS, TEXTS, PACKS)] + ([mirror_name] if mirror_name else [])
    staged = gitrepo.staged_files(top, paths)
    log = {n[len(folder) + 1:]: blob for n, blob in staged.items() if n.startswith(folder + "/")}
    changed = gitrepo.unstaged_files(top, paths)
    good = {n for n in store.tree.names() & set(log) if f"{folder}/{n}" not in changed}
    notes, files = _missing(store, good)
    if not notes or _ignored(store, top):
        return None  # (a memory git ignores is never committed: the work tree is what there is)
    if mirror_name is None or mirror_name not in staged:
        return Verdict(True, f"the commit carries no {os.path.basename(mirror)}; {_count(notes)} of the work tree are not"
                             " staged and stay out of it")
    held = gitrepo.blobs(top, {mirror_name: staged[mirror_name]})[mirror_name]
    if same_text(held, _rendering(store, top, folder, log)):
        return Verdict(True, f"{mirror_name} as staged matches the log as staged; {_count(notes)} of the work"
                             " tree are not staged and stay out of this commit")
    return Verdict(False, _incomplete(store, notes, files, folder, mirror_name), precious=True)


def _ignored(store: Store, top: str) -> bool:
    """Whether git ignores the memory's folder (its config.toml is neither tracked nor
    addable), as qem_edit.mirror.gitstage asks before it stages."""
    from ..system.workspace import CONFIG_NAME

    listed = gitrepo.tagged_files(store.root, [CONFIG_NAME], top)
    return listed is not None and CONFIG_NAME not in listed


def _count(notes: Sized) -> str:
    return f"{len(notes)} note{'' if len(notes) == 1 else 's'}"


def _missing(store: Store, good: set[str]) -> tuple[dict[str, str], list[str]]:
    """The notes with an event or text that no file in `good` holds (the commit lacks
    it; "its text" when that is all it lacks), and the work tree's files that hold them."""
    outside = sorted(store.tree.names() - good)
    held: dict[str, set[str]] = {}  # an event (or `t:` and a note, its text) → the files holding it
    note_of: dict[str, str] = {}
    for key, name, note in store.holders(outside):
        held.setdefault(key, set()).add(name)
        note_of[key] = note
    lacking = {key for key, names in held.items() if not names & good}
    notes = {note_of[key]: "its text" for key in lacking if key.startswith("t:")}
    notes.update((note_of[key], "") for key in lacking if not key.startswith("t:"))
    files = sorted({name for key in lacking for name in held[key] if name not in good})
    return notes, files


def _rendering(store: Store, top: str, folder: str, log: dict[str, str]) -> bytes:
    """The MEMORY.md a fresh clone of the commit renders: the staged log's notes."""
    from ..reads.history import notes_of_files
    from ..renderer import render

    files = gitrepo.blobs(top, log)
    return render(notes_of_files(store, files).values(), store.memory_id()).encode("utf-8")


def _incomplete(store: Store, notes: dict[str, str], files: list[str], folder: str, mirror: str) -> str:
    import shlex

    newest = sorted(store.notes_by_id(notes).values(), key=lambda n: (n.created_at, n.id), reverse=True)
    shown = []
    for note in newest[:SHOWN_MOST]:
        line = ((note.text or "(forgotten)").splitlines() or [""])[0][:60]
        shown.append(f"#{note.shown} {note.kind} \"{line}\"" + (f" ({notes[note.id]})" if notes[note.id] else ""))
    more = f" and {len(notes) - SHOWN_MOST} more" if len(notes) > SHOWN_MOST else ""
    named = ", ".join(f"{folder}/{f}" for f in files[:SHOWN_MOST])
    named += f" and {len(files) - SHOWN_MOST} more" if len(files) > SHOWN_MOST else ""
    return (f"this commit is incomplete: {mirror} as staged is not the rendering of the log as staged, and"
            f" {_count(notes)} of the work tree {'is' if len(notes) == 1 else 'are'} missing from the commit: {'; '.join(shown)}{more}; their"
            f" log files are not staged: {named}; add them with `git add {shlex.quote(folder)} {shlex.quote(mirror)}` and commit again"
            f" (`git commit -- PATHS` commits only those paths: name {folder} too)")


def verify_staged(store: Store, place, **options):  # type: ignore[no-untyped-def]
    """`qem verify --staged`: verify's checks, MEMORY.md judged as the commit carries it.
    A commit that touches nothing verify reads from git (see `_quiet`), on a memory
    verified clean as it stands (`VERIFIED`), is answered without replaying the log."""
    from .verify import finished, late, verify_report

    tree, folder, asked, read = _asked(store, place)
    seal = _seal(store, folder, asked) if asked is not None else None
    if seal is not None and seal == _sealed(store) and _quiet(store, place, tree, options, folder, asked[2]):
        return late(finished(store, place, [], [], [], None, options.get("disputes_fail", False),
                             options.get("drift_fail", False), tree, read), store, options.get("late_fail", False))
    verdict = staged_verdict(store, place)
    report = verify_report(store, place if verdict is None else None, **options, tree=tree, read=read)
    if verdict is not None and not verdict.clean:
        report.problems.append(f"{place.mirror_path()}: {verdict.message}")
    if seal is not None and verdict is None and report.repaired is None and not (
            report.problems or report.disputes or report.notices):
        _seal_with(store, seal)
    return report


def _asked(store: Store, place  # type: ignore[no-untyped-def]
           ) -> tuple[WorkTree, str | None, CommitFiles | None, WorkTreeFiles | None]:
    """The work tree (anchors.WorkTree), the memory's folder from its top, what git says of
    the commit's files (gitrepo.commit_files) and, where a note in force is anchored, of the
    work tree (gitrepo.work_tree_files, for the drift check): asked in one round of git starts
    where the files name the top git names (in turn else, and None for a folder outside it)."""
    from ..system.anchors import WorkTree, work_tree
    from ..system.workspace import git_top

    guess = git_top(place.root_name)
    folder = name_within(guess, store.root) if guess is not None else None
    if folder is not None:
        whole = store.any_anchor_in_force(states=("active",))  # (as the drift check reads them)
        found = gitrepo.commit_round(guess, place.root_name, folder, whole)
        if found is not None:
            (top, object_format), asked, read = found
            return WorkTree(top, True, object_format), folder, asked, read
    tree = work_tree(place.root_name)
    folder = name_within(tree.top, store.root) if tree.git else None
    asked = gitrepo.commit_files(tree.top, folder) if folder is not None else None  # (git's three answers at once)
    return tree, folder, asked, None


# -- the memory verified clean, and a commit that cannot change that --------------------------------
#
# A full `verify --staged` that finds the log and the index clean records what it judged
# (`_seal`): the memory's files as git's index holds them (each file's blob id: a hash of its
# bytes), only when the work tree's log is exactly those files; the index's moment (its id and
# generation: a rebuild is another index, and every change to it moves the generation); qem's
# version.  A later `verify --staged` with the same seal, on a commit that changes against HEAD
# nothing under the memory's folder, not MEMORY.md and no anchored path, skips the checks whose
# inputs are the sealed ones (each found clean on these very bytes): the log's files, its
# events and texts, the fresh replay against the index, the supersession graph, the protected
# kinds, secrets, open disputes and loose texts; and the removals against HEAD, which cannot
# fail when HEAD's memory is the commit's and the work tree's (every event HEAD holds is in the
# log).  The work tree's drift and MEMORY.md are checked as the full check checks them.

VERIFIED = "index.db-verified"  # under .qem/, ignored by git with the index (`/index.db-*`)


def _seal(store: Store, folder: str, asked: tuple[set[str], dict[str, str], list[str] | None]) -> bytes | None:
    """What a clean verify of this memory vouches for, written out whole (qem's version, the
    index's moment, each staged file under the memory's folder with its blob id: compared
    as it is, so nothing is hashed and no hashing module loaded); None where git's index is
    not what the work tree holds under the memory's folder (`folder`, from the work tree's
    top).  `asked`: what git said of the commit's files (gitrepo.commit_files)."""
    from .. import __version__

    unstaged, staged, _ = asked
    if unstaged:
        return None
    names = {n[len(folder) + 1:] for n in staged if n.startswith(folder + "/")}
    if f"{folder}/config.toml" not in staged or not store.tree.names() <= names:
        return None  # an untracked log file (or an untracked memory): the commit does not hold what is read
    listed = "".join(f"{blob} {name}\n" for name, blob in sorted(staged.items()))
    # (how many files, first: a seal cut short at a line's end does not read as the seal of fewer files)
    return (f"qem-seal 2\n{__version__}\n{store.moment(store.head())}\n{len(staged)}\n{listed}"
            .encode("utf-8", "surrogateescape"))


def _sealed(store: Store) -> bytes | None:
    try:  # (as bytes: a text file's codec lookup imports the ascii codec's module, on every commit)
        with open(os.path.join(store.root, VERIFIED), "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _seal_with(store: Store, seal: bytes) -> None:
    from ..system.files import write_atomic

    try:
        write_atomic(os.path.join(store.root, VERIFIED), seal, durable=False)
    except OSError:
        pass  # a memory that cannot be written is verified in full each time


def _quiet(store: Store, place, tree, options: dict, folder: str,  # type: ignore[no-untyped-def]
           touched: list[str] | None) -> bool:
    """Whether the commit being made in `tree` (anchors.WorkTree) changes, against HEAD,
    nothing under the memory's folder (`folder`, from the work tree's top), not MEMORY.md,
    no anchored file or folder (and no `--base` or `--repair` asks for more than the
    commit).  `touched`: the paths it changes, where git listed them already
    (gitrepo.commit_files)."""
    from ..reads.drift import with_folders

    if options.get("base") is not None or options.get("repair"):
        return False
    mirror = name_within(tree.top, place.mirror_name())
    touched = touched if touched is not None else gitrepo.staged_changes(tree.top)
    if any(p == mirror or p.startswith(folder + "/") for p in touched):
        return False
    return not store.anchors_in_force(with_folders(touched)) if touched else True
