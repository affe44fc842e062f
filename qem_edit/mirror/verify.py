"""`qem verify`: what a CI job runs on a commit.

It fails (exit 1) when a log file is malformed or does not match its name, when an event
does not apply or names a note the log does not hold, when a note's text is missing or
does not match its hash, when a forgotten text is still in the tree, when two notes claim
one old number, when the local index disagrees with a fresh replay of the log, when the
supersession graph is broken (a cycle, a dangling or malformed pointer; qem_edit.storage.supersession),
or when MEMORY.md is not the rendering of the log, or when an agent took a note of a protected kind out of
force (qem_edit.storage.protect), or when events of a protected note that the base (HEAD, or the
merge base of `--base REV` and HEAD) holds are not in the log (qem_edit.reads.removals; another
note's removal is listed), or when a text or a reason holds a secret no person allowed
(qem_edit.storage.secrets), or when git tracks a file of the clone's private folder (a private
note committed by force).  Open disputes (forks, disputes between notes,
concurrent changes that disagree) are listed; `--fail-on-disputes` makes them fail too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..base import errors, ids
from ..system.db import Connection
from .export import lazily_managed

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..storage.store import Store
    from ..system.anchors import WorkTree
    from ..system.gitrepo import WorkTreeFiles

# (The checks of the log's content are imported where they run: `qem verify --staged` on a
# commit that touches no memory answers from a seal (qem_edit.mirror.staged) and runs none of them.)

# The fresh replay's page cache (KiB): it lives in a temporary file, not in memory.
FRESH_CACHE_KIB = 16 * 1024


class VerifyReport:
    """`qem verify`: the log, the index and the mirror checked; open disputes listed (an
    answer as qem_edit.reads.answers's are).  (A plain class, not a dataclass: `qem verify
    --staged` runs on every commit, and importing dataclasses costs it ~5 ms.)"""

    def __init__(self, notes: int, problems: list[str] | None = None, repaired: int | None = None,
                 disputes: list[str] | None = None, notices: list[str] | None = None,
                 drift: list[str] | None = None, late: list[str] | None = None) -> None:
        self.notes = notes
        self.problems = problems if problems is not None else []
        self.repaired = repaired  # notes in the index rebuilt by --repair
        self.disputes = disputes if disputes is not None else []  # listed; they fail only when asked
        self.notices = notices if notices is not None else []  # listed; they never fail
        self.drift = drift if drift is not None else []  # anchored content nobody flagged; fails only when asked
        self.late = late if late is not None else []  # requests past their deadline, not answered; fail only when asked

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0

    def text(self) -> str:
        lines = []
        if self.repaired is not None:
            lines.append(f"rebuilt the index from the log: {self.repaired} notes")
        return "\n".join(lines + self.problems + [f"open: {d}" for d in self.disputes] + self.drift + self.late
                         + [f"note: {n}" for n in self.notices])

    def data(self) -> object:
        return {"notes": self.notes, "ok": not self.problems, "problems": self.problems,
                "disputes": self.disputes, "drift": self.drift, "late": self.late, "notices": self.notices,
                "repaired": self.repaired}

    def remark(self) -> str | None:
        if not self.problems:
            open_ = f"; {len(self.disputes)} open dispute(s) listed" if self.disputes else ""
            drift = (f"; {len(self.drift)} anchor(s) drifted, nobody flagged them (listed; `--fail-on-drift` fails"
                     " on them)") if self.drift else ""
            late = f"; {len(self.late)} request(s) late (listed; `--fail-on-late` fails on them)" if self.late else ""
            return f"ok: the log replays cleanly to {self.notes} note{'' if self.notes == 1 else 's'}{open_}{drift}{late}"
        drifted = sum(problem.startswith("drift: ") for problem in self.problems)
        settle = ("`qem anchors check --flag` flags the drifted notes stale (a move re-anchors), then commit"
                  " what it wrote (`git add .qem MEMORY.md && git commit`)")
        if drifted == len(self.problems):  # --fail-on-drift, and nothing else wrong
            return f"verify: {drifted} anchor(s) drifted and nobody flagged them; {settle}"
        return (
            f"verify: {len(self.problems)} problem(s); `qem verify --repair` rebuilds the index; a"
            " malformed log file is set aside until it is fixed or removed; a cycle, dangling pointer"
            " or broken event is settled by new events (revoke, supersede, `qem rule`)"
            + (f"; {drifted} anchor(s) drifted: {settle}" if drifted else "")
        )


def verify_report(store: Store, place=None, *, repair: bool = False, disputes_fail: bool = False,  # type: ignore[no-untyped-def]
                  base: str | None = None, drift_fail: bool = False, late_fail: bool = False,
                  tree: WorkTree | None = None, read: WorkTreeFiles | None = None) -> VerifyReport:
    """Every check above; with `repair`, an index that disagrees with the log is rebuilt
    first (the log itself is never changed).  `base`: the revision whose merge base with
    HEAD the removals are judged against (default HEAD itself; qem_edit.reads.removals).
    Drift nobody flagged is listed, and fails only with `drift_fail` (as disputes do with
    `disputes_fail`): a work tree mid-edit drifts by nature, CI's checkout must not.  A
    request past its deadline and not answered is listed, and fails with `late_fail`.  `tree` and
    `read`: the work tree and what git listed of it, where the caller asked already (`finished`)."""
    with fresh_index(store) as fresh:
        problems, set_aside = _index_problems(store, fresh)
        if not (problems and repair):
            return late(_report(store, place, fresh, problems, set_aside, None, disputes_fail, base, drift_fail,
                                tree, read), store, late_fail)
    repaired = store.rebuild()
    with fresh_index(store) as fresh:
        problems, set_aside = _index_problems(store, fresh)
        return late(_report(store, place, fresh, problems, set_aside, repaired, disputes_fail, base, drift_fail,
                            tree, read), store, late_fail)


def late(report: VerifyReport, store: Store, fail: bool) -> VerifyReport:
    """The requests late and not answered yes (qem_edit.reads.owed), listed; problems with `fail`."""
    if not store.any_request_in_force():  # (none owed, none late: a commit hook loads no reading of what is owed)
        return report
    from ..reads.owed import build

    late = [f"late: {o.line()}" for o in build(store, late=True).owed]
    if fail:
        report.problems += late
    else:
        report.late = late
    return report


def _report(store: Store, place, fresh: Connection, index_problems: list[str], set_aside: list[str],  # type: ignore[no-untyped-def]
            repaired: int | None, disputes_fail: bool, base: str | None = None,
            drift_fail: bool = False, tree: WorkTree | None = None, read: WorkTreeFiles | None = None) -> VerifyReport:
    problems = set_aside + _log_problems(store) + index_problems
    found = store.verify_reads().graph_problems(fresh)
    broken = [p for p in found if not p.startswith(("fork:", "disputed:"))]
    disputes = [p for p in found if p.startswith(("fork:", "disputed:"))] + _open_disputes(store)
    from ..reads.removals import verify_findings as removal_findings
    from ..storage.protect import log_problems as protect_problems
    from ..storage.secrets import log_problems as secret_problems

    removed, removal_notices = removal_findings(store, fresh, base)
    problems += broken + protect_problems(store, fresh) + secret_problems(store, fresh) + removed
    problems += tracked_private(store)
    return finished(store, place, problems, disputes, removal_notices + _loose_texts(store) + _unflagged(store), repaired,
                    disputes_fail, drift_fail, tree, read)


def finished(store: Store, place, problems: list[str], disputes: list[str], notices: list[str],  # type: ignore[no-untyped-def]
             repaired: int | None = None, disputes_fail: bool = False, drift_fail: bool = False,
             tree: WorkTree | None = None, read: WorkTreeFiles | None = None) -> VerifyReport:
    """The report, from what the log and the index were found to hold: the work tree's
    drift and the mirror (where `place` is given, the memory's MEMORY.md judged as the
    work tree holds it) checked now, and the options that make disputes and drift fail.
    `tree`: the work tree (qem_edit.system.anchors.work_tree), where the caller has it already;
    `read`: what git listed of it (gitrepo.work_tree_files), where the caller asked already."""
    drift = _drift_problems(store, place, tree, read) if place is not None else []
    if place is not None:
        problems = problems + _mirror_problems(store, place)
    if disputes_fail:
        problems, disputes = problems + disputes, []
    if drift_fail:
        problems, drift = problems + drift, []
    return VerifyReport(store.count(), problems, repaired, disputes, notices, drift)


def tracked_private(store: Store) -> list[str]:
    """Files of this clone's private folder that git tracks: a private or session note
    committed all the same (`git add -f`), or brought by a pull of such a commit, where
    another clone reads it as its own.  Its folder ignores everything, so only a forced
    add puts one there; the fix is git's, not qem's."""
    from ..storage.logtree import LOCAL
    from ..system import gitrepo

    from pathlib import Path

    folder = Path(store.root, LOCAL)
    top = gitrepo.toplevel(store.root) if folder.is_dir() else None
    if top is None:
        return []
    try:
        relative = folder.resolve().relative_to(top.resolve()).as_posix()
        tracked = sorted(gitrepo.staged_files(top, [relative]))
    except (ValueError, errors.QemError):  # (a memory outside the work tree; no git index to read)
        return []
    return [f"{top / name}: a private file tracked by git (a private or session note committed with"
            f" `git add -f`, or pulled from such a commit); private notes never travel: `git rm -r --cached"
            f" {relative}` and commit" for name in tracked]


def _drift_problems(store: Store, place, tree: WorkTree | None = None,  # type: ignore[no-untyped-def]
                    read: WorkTreeFiles | None = None) -> list[str]:
    """Anchored content that changed under a note nobody flagged (a commit made without
    the qem-anchors hook): each drifted anchor named, with the command that flags it."""
    from ..reads.drift import check
    from ..system.anchors import work_tree

    report = check(store, tree or work_tree(place.root), "work tree", read if tree else None)  # (given: fewer git rounds for a hook)
    return [f"drift: #{found.note.shown} {found.note.kind}: {d.words()}, and the note is not flagged;"
            " `qem anchors check --flag` flags it (or re-anchors a move)" for found in report.notes for d in found.drifted]


def _log_problems(store: Store) -> list[str]:
    out, reads = [], store.verify_reads()
    for note_id, problems in reads.note_problems():
        out += [f"note #{note_id}: {p}" for p in __import__("json").loads(problems)]
    for event_id, note_id in reads.events_without_note():
        out.append(f"event {ids.shown(event_id)} names note {ids.shown(note_id)}, whose creation the log does not hold")
    for short in reads.textless():
        out.append(f"note #{short}: its text is missing from the log (or does not match its hash): text missing"
                   " from this commit; get it from the commit's author (`git add .qem && git commit` in their clone)")
    for note_id, name in store.forgotten_texts():
        out.append(f"{name}: still holds the text of forgotten note {ids.shown(note_id)} (any qem write removes it)")
    for alias, count in reads.claimed_numbers():
        out.append(f"{count} notes claim the old number #{alias} (two converted stores merged?)")
    return out


def _unflagged(store: Store) -> list[str]:
    """Notes in plain force resting on a base whose change is not settled for them (it came
    from another clone): listed, not failed; the next write flags them (qem_edit.base.resting)."""
    from ..base import resting

    out = []
    for note_id, base_id in store.owed_flags():
        notes = store.notes_by_id([note_id, base_id])
        change = store.event(str(notes[base_id].state_event))
        if change is not None and not resting.settled(store.events(note_id), base_id, change):
            out.append(f"#{notes[note_id].shown} rests on #{notes[base_id].shown}, which is {notes[base_id].state},"
                       " and is not flagged yet (the change came from another clone): the next write flags it")
    return out


def _loose_texts(store: Store) -> list[str]:
    """Texts whose note's creation the log does not hold: listed, not failed (a write
    killed before its event leaves one; so does a commit of a text without its event,
    whose event a later commit brings)."""
    return [f"{name}: the text of note {ids.shown(note_id)}, whose creation the log does not hold (a write"
            " interrupted before its event, or the event not committed yet); remove it if it is the former"
            for note_id, name in store.verify_reads().texts_without_note()]


@lazily_managed
def fresh_index(store: Store) -> Iterator[Connection]:
    """A replay of the log read afresh, built in a temporary SQLite file (in the system's
    temporary directory, with a modest cache) that is removed afterwards, also on error."""
    import tempfile

    try:
        handle, name = tempfile.mkstemp(prefix="qem-verify-", suffix=".db")
    except OSError as exc:
        raise errors.StoreUnwritable(f"cannot make a temporary file for a fresh replay of the log"
                                     f" ({tempfile.gettempdir()}): {exc.strerror}") from None
    os.close(handle)
    conn = None
    try:
        from ..storage.staging import build_fresh

        conn = build_fresh(name, store.tree, FRESH_CACHE_KIB)
        yield conn
    finally:
        if conn is not None:
            conn.close()
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.remove(name + suffix)
            except FileNotFoundError:
                pass


def _index_problems(store: Store, fresh: Connection) -> tuple[list[str], list[str]]:
    """Where the local index differs from `fresh`, a replay of the log read afresh; and
    the log files that fresh read set aside (a file changed in place since the index
    read it included: the index goes on serving what it read)."""
    reads = store.verify_reads()
    aside = reads.set_aside_in(fresh)
    return reads.differences_from(fresh), aside


def _open_disputes(store: Store) -> list[str]:
    """Each open dispute between two notes once, both sides by short id (qem_edit.reads.standing
    decides which are open, as every read does)."""
    from ..base.times import utc_now
    from ..reads.standing import Standings

    return [f"dispute {dispute}: #{a} and #{b} disagree (qem rule {dispute} --keep ONE)"
            for dispute, a, b in Standings.read(store, utc_now()).open_disputes()]


def _mirror_problems(store: Store, place) -> list[str]:  # type: ignore[no-untyped-def]
    from .export import check

    from ..system.files import is_regular

    mirror = place.mirror_name()
    if not is_regular(mirror):
        return []
    verdict = check(store, mirror)
    return [] if verdict.clean else [f"{mirror}: {verdict.message}"]
