"""Memory in git, with real git: a bare origin, several clones, branches that merge.

Every scenario runs real `git` (merge-ort, `git merge-tree --write-tree` as a hosting
service merges, rebase, cherry-pick, octopus, worktrees, switch, stash) and the real `qem`
command line (in this process, for speed; `cli.main` is what the `qem` script runs).
After each: nothing under `.qem/` conflicted, every event of every branch is present once,
`qem verify` is clean, and MEMORY.md after `qem export` is byte-identical on every clone
at the same commit.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qem_edit.shells import cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


class Clone:
    """One clone (or worktree) of the team's repository, and who works in it."""

    def __init__(self, team: "Team", path: Path, actor: str) -> None:
        self.team, self.path, self.actor = team, path, actor

    # -- git ---------------------------------------------------------------------------------

    def git(self, *args: str, ok: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
        done = subprocess.run(["git", *args], cwd=self.path, capture_output=True, text=True, input=input,
                              env=self.team.git_env, timeout=60)
        if ok and done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed in {self.path.name}:\n{done.stdout}{done.stderr}")
        return done

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.head()

    def publish(self, message: str) -> str:
        """Commit everything and push it to origin's main."""
        commit = self.commit(message)
        self.git("push", "-q", "origin", "main")
        return commit

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").stdout.strip()

    def conflicted(self) -> list[str]:
        return self.git("diff", "--name-only", "--diff-filter=U").stdout.split()

    def settle_merge(self, done: subprocess.CompletedProcess) -> None:
        """A merge (or rebase step, or cherry-pick) that stopped: only MEMORY.md may have
        conflicted; `qem export` re-renders it from the merged log, and the merge goes on."""
        if done.returncode == 0:
            return
        conflicted = self.conflicted()
        assert conflicted == ["MEMORY.md"], f"conflicts beyond MEMORY.md: {conflicted}\n{done.stdout}{done.stderr}"
        assert all(not name.startswith(".qem/") for name in conflicted)
        self.qem("export")
        assert b"<<<<<<<" not in self.memory_md()
        self.git("add", "MEMORY.md")

    def merge(self, *branches: str) -> None:
        done = self.git("merge", "--no-edit", "-q", *branches, ok=False)
        self.settle_merge(done)
        if done.returncode != 0:
            self.git("commit", "-q", "--no-edit")

    def rebase(self, onto: str) -> None:
        """Rebase onto `onto`, settling each step that stopped on MEMORY.md."""
        done = self.git("rebase", onto, ok=False)
        while done.returncode != 0:
            self.settle_merge(done)
            done = self.git("-c", "core.editor=true", "rebase", "--continue", ok=False)

    def pull(self) -> None:
        self.git("fetch", "-q", "origin")
        branch = self.git("branch", "--show-current").stdout.strip()
        if self.git("rev-parse", "--verify", "-q", f"origin/{branch}", ok=False).returncode == 0:
            self.merge(f"origin/{branch}")

    # -- qem ---------------------------------------------------------------------------------

    def qem(self, *args: str, code: int | None = 0, stdin: str = "") -> subprocess.CompletedProcess:
        return self.team.run_qem(self, args, code, stdin)

    def add(self, text: str, kind: str = "finding") -> str:
        return self.qem("add", text, "-k", kind).stdout.strip()

    def memory_md(self) -> bytes:
        return (self.path / "MEMORY.md").read_bytes()

    def event_ids(self) -> list[str]:
        """Every event of the log as `qem dump` writes it: ids, in the dump's order."""
        rows = [json.loads(line) for line in self.qem("dump").stdout.splitlines()]
        return [row["id"] for row in rows if "type" in row]

    def notes(self) -> list[dict]:
        return json.loads(self.qem("list", "--json").stdout)

    def texts(self) -> dict[str, str]:
        """Every note's text, by full id."""
        return {row["id"]: row["text"] for row in self.notes()}

    def texts_short(self, text: str) -> str:
        """The short id of the one note holding `text`."""
        found = [row["short"] for row in self.notes() if row["text"] == text]
        assert len(found) == 1, f"{len(found)} notes hold {text!r}"
        return found[0]

    def dispute_side(self, short: str, kind: str) -> str:
        """How the DISPUTED marker of note `short` names its side of type `kind`."""
        row = next(row for row in self.notes() if row["short"] == short)
        sides = [rival for rival in row["rivals"] if rival["type"] == kind]
        assert len(sides) == 1, row["rivals"]
        return sides[0]["tip"][:6]

    def check(self) -> None:
        """The log is whole and the committed view is its render."""
        ids = self.event_ids()
        assert len(ids) == len(set(ids)), "an event is counted twice"
        self.qem("verify")
        self.qem("export", "--check")


class Team:
    def __init__(self, root: Path, monkeypatch, capsysbinary) -> None:
        self.root, self.monkeypatch, self.capture = root, monkeypatch, capsysbinary
        home = Path(os.environ["HOME"])
        (home / ".gitconfig").write_text(
            "[user]\n\tname = Team\n\temail = team@example.com\n[init]\n\tdefaultBranch = main\n"
            "[advice]\n\tdetachedHead = false\n[core]\n\tautocrlf = false\n", "utf-8")
        self.git_env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        self.git_env.update(GIT_CONFIG_NOSYSTEM="1", GIT_EDITOR="true", GIT_MERGE_AUTOEDIT="no")
        self.origin = root / "origin.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(self.origin)], check=True, env=self.git_env)

    def clone(self, name: str, actor: str | None = None) -> Clone:
        path = self.root / name
        subprocess.run(["git", "clone", "-q", str(self.origin), str(path)], check=True, env=self.git_env,
                       capture_output=True)
        return Clone(self, path, actor or name)

    def founded(self, *texts: str) -> Clone:
        """The first clone: a repository with a README, a memory holding `texts` and its
        MEMORY.md, pushed to origin."""
        first = self.clone("founder")
        (first.path / "README").write_text("a project\n", "utf-8")
        first.git("add", "README")
        first.git("commit", "-q", "-m", "start")
        first.qem("init")
        for text in texts:
            first.add(text)
        first.qem("export")
        first.publish("memory")
        return first

    def run_qem(self, clone: Clone, args: tuple, code: int | None, stdin: str) -> subprocess.CompletedProcess:
        self.monkeypatch.chdir(clone.path)
        self.monkeypatch.setenv("QEM_ACTOR", clone.actor)
        self.monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8"))
        self.capture.readouterr()
        try:
            cli.main(list(args))
            status = 0
        except SystemExit as exit_:
            status = exit_.code or 0
        out = self.capture.readouterr()
        done = subprocess.CompletedProcess(args, status, out.out.decode("utf-8"), out.err.decode("utf-8"))
        if code is not None:
            assert status == code, f"qem {' '.join(args)} in {clone.path.name} exited {status}:\n{done.stdout}{done.stderr}"
        return done


@pytest.fixture
def team(tmp_path, monkeypatch, capsysbinary) -> Team:
    return Team(tmp_path, monkeypatch, capsysbinary)


def same_view(*clones: Clone) -> bytes:
    """Every clone, at the same commit, renders the same MEMORY.md, and it is committed."""
    heads = {c.head() for c in clones}
    assert len(heads) == 1, "the clones are not at one commit"
    views = set()
    for clone in clones:
        clone.qem("export")
        views.add(clone.memory_md())
        clone.check()
    assert len(views) == 1, "two clones render one commit differently"
    return views.pop()


# -- a fresh clone ------------------------------------------------------------------------------


def test_a_fresh_clone_works_with_no_setup(team):
    founder = team.founded("the build needs python 3.11", "ci runs on two cores")
    mate = team.clone("mate")
    assert not (mate.path / ".qem" / "index.db").exists()
    # any command works at once; the index is built from the committed log
    listing = mate.qem("list").stdout
    assert "the build needs python 3.11" in listing and "ci runs on two cores" in listing
    mate.qem("export", "--check")  # the committed MEMORY.md is the render of the committed log
    mate.qem("verify")
    assert mate.memory_md() == founder.memory_md()
    # the index is local: nothing qem made shows in git status
    assert mate.git("status", "--porcelain").stdout == ""
    # from a subdirectory too
    (mate.path / "src").mkdir()
    team.monkeypatch.chdir(mate.path / "src")
    assert "ci runs on two cores" in mate.qem("list").stdout


def test_a_memory_starts_at_the_top_of_the_work_tree(team):
    first = team.clone("first")
    (first.path / "src").mkdir()
    (first.path / "src" / "main.py").write_text("print()\n", "utf-8")
    first.git("add", "-A")
    first.git("commit", "-q", "-m", "code")
    sub = Clone(team, first.path / "src", "first")
    sub.add("a note made from a subdirectory")
    assert (first.path / ".qem" / "events").is_dir()
    assert not (first.path / "src" / ".qem").exists()


def test_writes_are_staged_changes(team):
    """A write stages what it wrote (as `git mv` does): its new log files and MEMORY.md,
    kept current by default, are in git's index, so any commit habit carries them."""
    founder = team.founded("the old fact")
    before = founder.memory_md()
    short = founder.add("a new fact")
    status = founder.git("status", "--porcelain", "--untracked-files=all").stdout.splitlines()
    assert "M  MEMORY.md" in status, status  # MEMORY.md is kept current by default
    added_files = sorted(line[3:] for line in status if line.startswith("A  "))
    assert [p.split("/")[1] for p in added_files] == ["events", "texts"], status
    assert not [line for line in status if line.startswith("??")], status
    diff = founder.git("diff", "--cached", "MEMORY.md").stdout
    added = [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == [] and len(added) == 1 and f"[#{short}]" in added[0] and "a new fact" in added[0]
    # one more export changes nothing: no line of MEMORY.md depends on the moment
    founder.qem("export")
    assert founder.memory_md() != before
    again = founder.memory_md()
    founder.qem("export")
    assert founder.memory_md() == again


# -- merges ------------------------------------------------------------------------------------


def two_branches(team) -> tuple[Clone, Clone, Clone]:
    founder = team.founded("shared fact one", "shared fact two")
    ann, bob = team.clone("ann"), team.clone("bob")
    return founder, ann, bob


def test_two_clones_add_notes_and_merge(team):
    founder, ann, bob = two_branches(team)
    a1 = ann.add("ann found the cache is cold on monday")
    ann.publish("ann's note")
    b1 = bob.add("bob found the disk fills on friday", kind="gotcha")
    b2 = bob.add("bob's second note")
    bob.commit("bob's notes")
    bob.pull()  # merge-ort: .qem/ merges with no conflict, MEMORY.md re-rendered if it conflicts
    bob.git("push", "-q", "origin", "main")
    ann.pull()
    founder.pull()
    view = same_view(founder, ann, bob)
    for short in (a1, b1, b2):
        assert f"[#{short}]".encode() in view
    assert set(ann.event_ids()) == set(bob.event_ids()) == set(founder.event_ids())
    assert len(ann.event_ids()) == 5


def test_a_server_side_merge_with_no_configuration(team):
    """What a hosting service does: `git merge-tree --write-tree` in a bare repository,
    no drivers, no attributes honoured beyond the committed ones."""
    founder, ann, bob = two_branches(team)
    ann.git("switch", "-q", "-c", "ann-work")
    ann.add("from ann's branch")
    ann.qem("supersede", ann.texts_short("shared fact one"), "shared fact one, corrected")
    ann.commit("ann")
    ann.git("push", "-q", "origin", "ann-work")
    bob.add("from bob on main")
    bob.publish("bob")
    origin = Clone(team, team.origin, "server")
    done = origin.git("merge-tree", "--write-tree", "--name-only", "main", "ann-work", ok=False)
    lines = done.stdout.splitlines()
    tree, rest = lines[0], lines[1:]
    conflicted = [line for line in rest if line and not line.startswith(("Auto-merging", "CONFLICT"))]
    conflicted = conflicted[: conflicted.index("") if "" in conflicted else len(conflicted)]
    assert all(not path.startswith(".qem/") for path in conflicted), done.stdout
    # the service records the merge as it is (with MEMORY.md conflicted, if it is)
    commit = origin.git("commit-tree", tree, "-p", "main", "-p", "ann-work", "-m", "merged on the server").stdout.strip()
    origin.git("update-ref", "refs/heads/main", commit)
    for clone in (founder, ann, bob):
        clone.git("fetch", "-q", "origin")
        clone.git("switch", "-q", "main")
        clone.git("reset", "-q", "--hard", "origin/main")
    for clone in (founder, ann, bob):
        clone.qem("export")  # re-rendered from the merged log, conflict markers or not
        assert b"<<<<<<<" not in clone.memory_md()
    texts = set(bob.texts().values())
    assert {"from ann's branch", "from bob on main", "shared fact one, corrected"} <= texts
    views = {c.memory_md() for c in (founder, ann, bob)}
    assert len(views) == 1
    for clone in (founder, ann, bob):
        ids = clone.event_ids()
        assert len(ids) == len(set(ids)) == 6
        clone.qem("verify")


def test_rebase_keeps_every_event(team):
    founder, ann, bob = two_branches(team)
    ann.add("ann one")
    ann.commit("ann one")
    ann.add("ann two", kind="task")
    ann.commit("ann two")
    bob.add("bob one")
    bob.publish("bob one")
    ann.git("fetch", "-q")
    ann.rebase("origin/main")
    assert {"ann one", "ann two", "bob one"} <= set(ann.texts().values())
    ann.git("push", "-q", "origin", "main")
    bob.pull()
    same_view(ann, bob)
    assert len(ann.event_ids()) == 5


def test_a_cherry_picked_event_counts_once(team):
    founder, ann, bob = two_branches(team)
    ann.git("switch", "-q", "-c", "fix")
    short = ann.add("the fix's finding")
    picked = ann.commit("the fix")
    ann.add("later on the branch")
    ann.commit("more")
    ann.git("switch", "-q", "main")
    done = ann.git("cherry-pick", picked, ok=False)
    ann.settle_merge(done)
    if done.returncode != 0:
        ann.git("-c", "core.editor=true", "cherry-pick", "--continue")
    ann.merge("fix")  # the picked event arrives a second time
    ids = ann.event_ids()
    assert len(ids) == len(set(ids)) == 4
    assert [line.split()[-3] for line in ann.qem("log", short).stdout.splitlines()] == ["created"]
    ann.qem("show", short)
    ann.check()


def test_an_octopus_merge(team):
    """Three branches at once; the octopus strategy gives up on any textual conflict, so
    this repository does not commit MEMORY.md (the log merges alone)."""
    founder = team.clone("founder")
    founder.qem("init")
    founder.add("the root note")
    founder.commit("memory")
    branches = ["one", "two", "three"]
    for name in branches:
        founder.git("switch", "-q", "-c", name, "main")
        founder.add(f"note from branch {name}")
        founder.add(f"second note from branch {name}", kind="task")
        founder.commit(name)
    founder.git("switch", "-q", "main")
    founder.git("merge", "--no-ff", "--no-edit", "-q", *branches)
    assert len(founder.git("log", "-1", "--format=%P").stdout.split()) == 4
    texts = set(founder.texts().values())
    assert {f"note from branch {n}" for n in branches} <= texts and "the root note" in texts
    ids = founder.event_ids()
    assert len(ids) == len(set(ids)) == 7
    founder.qem("verify")


def test_packs_made_on_two_branches_merge(team):
    founder, ann, bob = two_branches(team)
    for i in range(3):
        ann.add(f"ann note {i}")
        bob.add(f"bob note {i}")
    ann.qem("pack")
    bob.qem("pack")
    for clone in (ann, bob):
        assert list((clone.path / ".qem" / "events").iterdir()) == []
    ann.publish("ann packs")
    bob.commit("bob packs")
    bob.pull()  # both packs hold the founder's two events: counted once
    ids = bob.event_ids()
    assert len(ids) == len(set(ids)) == 8
    bob.git("push", "-q", "origin", "main")
    ann.pull()
    same_view(ann, bob)
    # and packing again after the merge folds the two packs' duplicates away
    bob.qem("pack")
    assert len(bob.event_ids()) == 8
    bob.check()


# -- branches are isolated, the index follows the work tree ------------------------------------


def test_a_branch_note_does_not_leak_into_main(team):
    founder, ann, _ = two_branches(team)
    main_view = ann.memory_md()
    ann.git("switch", "-q", "-c", "feature")
    ann.add("only on the feature branch")
    ann.commit("feature note")
    ann.git("switch", "-q", "main")
    assert "only on the feature branch" not in ann.qem("list").stdout
    ann.qem("export", "--check")
    assert ann.memory_md() == main_view
    ann.add("an unrelated main note")  # the write renders main's memory only
    assert b"only on the feature branch" not in ann.memory_md()
    assert ann.git("switch", "-q", "feature", ok=False).returncode != 0  # git keeps the uncommitted MEMORY.md
    ann.git("stash", "-q", "-u")
    ann.git("switch", "-q", "feature")
    assert "only on the feature branch" in ann.qem("list").stdout
    assert "an unrelated main note" not in ann.qem("list").stdout
    ann.git("switch", "-q", "main")
    ann.git("stash", "pop", "-q")
    assert "an unrelated main note" in ann.qem("list").stdout


def test_switch_with_uncommitted_memory(team):
    founder, ann, _ = two_branches(team)
    ann.git("switch", "-q", "-c", "other")
    ann.add("a note on the other branch")
    ann.commit("other")
    ann.git("switch", "-q", "main")
    # an uncommitted note is staged (its log files and MEMORY.md), so it moves as any
    # staged change does: `git stash` takes the whole write, and `stash pop` on the other
    # branch brings it back (git may conflict on MEMORY.md; `qem export` settles it)
    ann.add("not committed yet", kind="task")
    ann.git("stash", "-q")
    assert "not committed yet" not in ann.qem("list").stdout
    ann.git("switch", "-q", "other")
    done = ann.git("stash", "pop", ok=False)
    ann.settle_merge(done)
    listing = ann.qem("list").stdout
    assert "not committed yet" in listing and "a note on the other branch" in listing
    ann.qem("export", "--check")
    ann.qem("verify")
    # a reset that drops the branch's commit drops its note from the next answer
    ann.qem("export")
    ann.commit("the task, on other")
    ann.git("reset", "-q", "--hard", "main")
    listing = ann.qem("list").stdout
    assert "a note on the other branch" not in listing and "not committed yet" not in listing
    ann.check()


def test_worktrees_have_their_own_view(team):
    founder, ann, _ = two_branches(team)
    wt = Clone(team, team.root / "ann-wt", "ann")
    ann.git("worktree", "add", "-q", "-b", "side", str(wt.path))
    short = wt.add("written in the worktree")
    assert "written in the worktree" not in ann.qem("list").stdout
    assert (wt.path / ".qem" / "index.db").exists()
    wt.commit("side")
    ann.merge("side")
    assert "written in the worktree" in ann.qem("list").stdout
    ann.qem("show", short)
    ann.check()


def test_the_index_follows_git_reset_and_stash(team):
    founder, ann, _ = two_branches(team)
    base = ann.head()
    ann.add("committed then undone")
    ann.commit("to undo")
    assert "committed then undone" in ann.qem("list").stdout
    ann.git("reset", "-q", "--hard", base)
    assert "committed then undone" not in ann.qem("list").stdout
    ann.qem("export", "--check")
    ann.add("stashed away")
    ann.git("stash", "-q", "-u")
    assert "stashed away" not in ann.qem("list").stdout
    ann.qem("export", "--check")
    ann.git("stash", "pop", "-q")
    assert "stashed away" in ann.qem("list").stdout
    ann.check()


# -- concurrent changes to one note: disputes ------------------------------------------------


def settled_everywhere(settler: Clone, other: Clone) -> None:
    """The settling clone's log holds no open dispute; pushed and pulled, neither clone's
    MEMORY.md shows one."""
    settler.qem("verify", "--fail-on-disputes")
    settler.publish("settled")
    other.pull()
    assert b"DISPUTED" not in same_view(other, settler)


def diverge(team, left: tuple, right: tuple) -> tuple[Clone, Clone, str]:
    """Ann and Bob change the founder's first note concurrently (`left`, `right` are qem
    arguments after the note id); both push, and Bob's merge brings them together."""
    founder, ann, bob = two_branches(team)
    note = ann.texts_short("shared fact one")
    ann.qem(left[0], note, *left[1:])
    ann.publish("ann")
    bob.qem(right[0], note, *right[1:])
    bob.commit("bob")
    bob.pull()
    bob.git("push", "-q", "origin", "main")
    ann.pull()
    return ann, bob, note


def test_revoke_against_supersede_is_a_dispute(team):
    ann, bob, note = diverge(team, ("revoke", "-m", "no longer true"), ("supersede", "shared fact one, revised"))
    view = same_view(ann, bob)
    assert b"DISPUTED" in view
    assert note in bob.qem("query", "disputed=yes").stdout
    status = bob.qem("status", note, code=None)
    assert "unknown" in status.stdout
    report = bob.qem("verify").stdout
    assert note in report and "dispute" in report.lower()
    bob.qem("verify", "--fail-on-disputes", code=1)
    # settled by a ruling: the revocation stands
    keep = bob.dispute_side(note, "revoked")
    marker = next(line for line in view.decode().splitlines() if "DISPUTED" in line)
    assert f"revoked {keep}" in marker  # the side as MEMORY.md shows it
    bob.qem("rule", note, "--keep", keep, "-m", "it was wrong")
    assert note not in bob.qem("query", "disputed=yes").stdout
    assert "no" in bob.qem("status", note, code=None).stdout
    settled_everywhere(bob, ann)


def test_two_supersessions_fork(team):
    ann, bob, note = diverge(team, ("supersede", "ann's version"), ("supersede", "bob's version"))
    view = same_view(ann, bob)
    assert view.count(b"DISPUTED") == 2  # each successor is marked
    texts = set(bob.texts().values())
    assert {"ann's version", "bob's version"} <= texts  # nothing a branch wrote is missing
    bob.qem("verify", "--fail-on-disputes", code=1)
    disputed = bob.qem("query", "disputed=yes").stdout
    anns, bobs = bob.texts_short("ann's version"), bob.texts_short("bob's version")
    assert anns in disputed and bobs in disputed
    assert "unknown" in bob.qem("status", anns, code=None).stdout
    # the fork is ruled on the note it forked from: one successor stands
    bob.qem("rule", note, "--keep", anns, "-m", "ann measured it")
    assert "yes" in bob.qem("status", anns, code=None).stdout
    assert "no" in bob.qem("status", bobs, code=None).stdout
    settled_everywhere(bob, ann)


def test_revoke_against_reinstate_is_a_dispute(team):
    founder, ann, bob = two_branches(team)
    note = founder.texts_short("shared fact one")
    founder.qem("flag-stale", note, "-m", "may be old")
    founder.publish("flagged")
    ann.pull()
    bob.pull()
    ann.qem("revoke", note, "-m", "it is old")
    ann.publish("ann")
    bob.qem("reinstate", note, "-m", "checked, still true")
    bob.commit("bob")
    bob.pull()
    assert note in bob.qem("query", "disputed=yes").stdout
    bob.git("push", "-q", "origin", "main")
    ann.pull()
    founder.pull()
    same_view(founder, ann, bob)


def test_the_same_change_on_two_branches_is_no_dispute(team):
    ann, bob, note = diverge(team, ("revoke", "-m", "wrong"), ("revoke", "-m", "wrong too"))
    view = same_view(ann, bob)
    assert b"DISPUTED" not in view
    assert note not in bob.qem("query", "disputed=yes").stdout
    assert "no" in bob.qem("status", note, code=None).stdout


def test_different_notes_on_two_branches_never_dispute(team):
    founder, ann, bob = two_branches(team)
    one, two = ann.texts_short("shared fact one"), ann.texts_short("shared fact two")
    ann.qem("supersede", one, "fact one, revised by ann")
    ann.publish("ann")
    bob.qem("flag-stale", two, "-m", "bob doubts it")
    bob.commit("bob")
    bob.pull()
    view = same_view(bob)
    assert b"DISPUTED" not in view
    bob.qem("verify", "--fail-on-disputes")


def test_a_ruling_is_reopened_by_a_competitor_it_did_not_see(team):
    founder, ann, bob = two_branches(team)
    carol = team.clone("carol")
    note = ann.texts_short("shared fact one")
    carol.git("switch", "-q", "-c", "late")
    carol.qem("flag-stale", note, "-m", "carol doubted it long ago")
    carol.commit("carol, not pushed yet")
    ann.qem("supersede", note, "ann's version")
    ann.publish("ann")
    bob.qem("revoke", note, "-m", "bob thinks it is wrong")
    bob.commit("bob")
    bob.pull()
    bob.qem("rule", note, "--keep", bob.dispute_side(note, "superseded"), "-m", "ann is right")
    assert note not in bob.qem("query", "disputed=yes").stdout
    bob.publish("ruled")
    carol.git("fetch", "-q")
    carol.git("switch", "-q", "main")
    carol.git("reset", "-q", "--hard", "origin/main")
    carol.merge("late")
    # the ruling never saw carol's change: the note is in dispute again, with carol's side
    assert note in carol.qem("query", "disputed=yes").stdout
    row = next(row for row in carol.notes() if row["short"] == note)
    assert sorted(r["type"] for r in row["rivals"]) == ["stale_flagged", "superseded"]
    assert "unknown" in carol.qem("status", note, code=None).stdout
    carol.qem("verify", "--fail-on-disputes", code=1)
    carol.check()


def test_an_edit_settles_concurrent_changes(team):
    ann, bob, note = diverge(team, ("flag-stale", "-m", "ann doubts it"), ("revoke", "-m", "bob is sure"))
    assert note in bob.qem("query", "disputed=yes").stdout
    # a move made after seeing both sides settles them
    bob.qem("revoke", note, "-m", "checked: it is wrong")
    assert note not in bob.qem("query", "disputed=yes").stdout
    assert "no" in bob.qem("status", note, code=None).stdout
    settled_everywhere(bob, ann)


def test_short_ids_that_collide_across_clones_stay_distinct(team):
    """Short ids forced to one character (QEM_SHORT_LENGTH=1), so that notes made on two
    clones share shown prefixes once merged: every note keeps its own id, the ones that
    collide lengthen, and every shown id names its note."""
    team.monkeypatch.setenv("QEM_SHORT_LENGTH", "1")
    founder, ann, bob = two_branches(team)
    for i in range(24):
        ann.add(f"ann's note {i}")
        bob.add(f"bob's note {i}")
    before = {row["id"]: row["short"] for row in ann.notes() + bob.notes()}
    ann.publish("ann")
    bob.commit("bob")
    bob.pull()
    rows = bob.notes()
    assert len(rows) == 50
    shorts = [row["short"] for row in rows]
    assert len(set(shorts)) == 50  # distinct
    assert any(before[row["id"]] != row["short"] for row in rows), "no short id had to lengthen"
    for row in rows:  # each shown id, and the full id, names its note
        assert not any(other != row["id"] and other.startswith(row["short"]) for other in before)
        assert f"id {row['id']}" in bob.qem("show", row["short"]).stdout
    view = bob.memory_md().decode()
    assert sorted(line.split("]")[0][4:] for line in view.splitlines() if line.startswith("- [#")) == sorted(shorts)
    # a prefix several notes share is refused, naming them
    letter = next(c for c in "abcdefghjkmnpqrstvwxyz" if sum(row["id"].startswith(c) for row in rows) > 1)
    done = bob.qem("show", letter, code=2)
    assert f"#{letter} could be any of" in done.stderr
    for row in rows:
        if row["id"].startswith(letter):
            assert f"#{row['short']} " in done.stderr
    bob.git("push", "-q", "origin", "main")
    ann.pull()
    same_view(ann, bob)


# -- MEMORY.md as a view --------------------------------------------------------------------


def test_memory_md_of_another_memory_is_refused(team):
    founder = team.founded("ours")
    other = team.root / "other"
    other.mkdir()
    stranger = Clone(team, other, "stranger")
    stranger.qem("init")
    stranger.add("theirs")
    stranger.qem("export")
    before = founder.event_ids()
    done = founder.qem("checkin", "--path", str(other / "MEMORY.md"), code=2)
    assert "memory" in done.stderr and "another" in done.stderr.lower() or "belongs" in done.stderr.lower(), done.stderr
    assert founder.event_ids() == before
    # and export does not overwrite it with ours
    shutil.copyfile(other / "MEMORY.md", founder.path / "MEMORY.md")
    founder.qem("export", code=None)
    assert (founder.path / "MEMORY.md").read_bytes() == (other / "MEMORY.md").read_bytes()


def hand_edit_then_pull(team, change) -> tuple[Clone, subprocess.CompletedProcess]:
    """Ann fixes a line of MEMORY.md by hand; meanwhile Bob pushed `change(bob)`; Ann
    stashes, pulls and pops her edit back, as git users do."""
    founder, ann, bob = two_branches(team)
    ann.qem("export")  # ann's last rendering: the pull will move the file past it
    assert (ann.path / ".qem" / "mirror-base.md").exists()
    change(bob)
    bob.publish("bob")
    md = ann.path / "MEMORY.md"
    md.write_text(md.read_text("utf-8").replace("shared fact two", "shared fact two, fixed by hand"), "utf-8")
    ann.git("stash", "-q")
    ann.pull()
    return ann, ann.git("stash", "pop", ok=False)


def test_a_hand_edit_after_a_pull_checks_in_only_the_edit(team):
    ann, popped = hand_edit_then_pull(team, lambda bob: bob.add("bob's new gotcha", kind="gotcha"))
    assert popped.returncode == 0, popped.stderr  # the edit and the new note are far apart
    text = (ann.path / "MEMORY.md").read_text("utf-8")
    assert "bob's new gotcha" in text and "fixed by hand" in text
    ann.qem("export", "--check", code=1)
    ann.qem("checkin", "--path", "MEMORY.md", "--yes", "-m", "fixed by hand")
    texts = list(ann.texts().values())
    assert "shared fact two, fixed by hand" in texts
    assert texts.count("bob's new gotcha") == 1  # not taken for a new note of ann's
    assert len(ann.event_ids()) == 5  # the three notes, the successor, the supersession
    ann.qem("export", "--check")


def test_a_hand_edit_that_git_conflicts_on_is_never_lost(team):
    def change(bob):
        bob.qem("flag-stale", bob.texts_short("shared fact two"), "-m", "bob doubts it")

    ann, popped = hand_edit_then_pull(team, change)
    assert popped.returncode != 0 and ann.conflicted() == ["MEMORY.md"]  # the same line, both sides
    md = ann.path / "MEMORY.md"
    conflicted = md.read_bytes()
    # a fresh rendering would throw the hand edit away: export refuses and names the conflict
    done = ann.qem("export", code=3)
    assert "conflict" in done.stderr and "checkin" in done.stderr
    assert md.read_bytes() == conflicted
    ann.qem("export", "--check", code=1)
    # check-in takes the side with the edit and plans it against the log as it is now: bob
    # flagged the note ann rewrote, so that is a conflict, named, and the edit is kept
    note = ann.texts_short("shared fact two")
    done = ann.qem("checkin", "--path", "MEMORY.md", "--yes", "-m", "fixed by hand", code=3)
    assert f"conflict on #{note}" in done.stderr and "stale by bob" in done.stderr
    assert md.read_bytes() == conflicted
    kept = list((ann.path / ".qem" / "checkouts").glob("*/MEMORY.md"))
    assert len(kept) == 1 and "shared fact two, fixed by hand" in kept[0].read_text("utf-8")
    assert "shared fact two, fixed by hand" not in ann.texts().values()
    assert "stale" in ann.qem("show", note).stdout


def test_a_merge_of_two_renderings_is_rendered_again(team):
    """Both sides of MEMORY.md's conflict are renderings (each branch exported its own
    notes): nobody's edit is in it, so export renders it again, and check-in finds nothing."""
    founder, ann, bob = two_branches(team)
    for i in range(6):  # enough neighbours that the two sides touch
        ann.add(f"ann's finding {i}")
        bob.add(f"bob's finding {i}")
    ann.publish("ann")
    bob.commit("bob")
    bob.git("fetch", "-q")
    done = bob.git("merge", "--no-edit", "origin/main", ok=False)
    assert done.returncode != 0 and bob.conflicted() == ["MEMORY.md"], done.stdout
    before = len(bob.event_ids())
    done = bob.qem("checkin", "--path", "MEMORY.md", "--dry-run", code=None)
    assert done.returncode == 0, done.stderr
    bob.qem("export")
    assert len(bob.event_ids()) == before == 14
    bob.git("add", "MEMORY.md")
    bob.git("commit", "-q", "--no-edit")
    bob.check()


def test_export_at_a_revision(team):
    founder = team.founded("first fact")
    first = founder.head()
    first_view = founder.memory_md()
    short = founder.add("second fact")
    founder.qem("supersede", short, "second fact, revised")
    founder.commit("more")
    assert founder.qem("export", "--at", first, "--stdout").stdout.encode() == first_view
    assert founder.qem("export", "--at", "HEAD~1", "--stdout").stdout.encode() == first_view
    assert founder.qem("export", "--at", "HEAD", "--stdout").stdout.encode() == founder.memory_md()
    founder.qem("show", short, "--at", "HEAD", code=0)
    assert "not" in founder.qem("show", short, "--at", first, code=None).stderr + founder.qem("show", short, "--at", first, code=None).stdout
    done = founder.qem("export", "--at", "no-such-rev", "--stdout", code=2)
    assert "no-such-rev" in done.stderr


# -- forget ----------------------------------------------------------------------------------


def test_forget_removes_the_text_from_the_tree_and_says_history_holds_it(team):
    founder, ann, bob = two_branches(team)
    secret = ann.add("the token is hunter2")
    ann.publish("oops")
    bob.pull()
    bob.git("switch", "-q", "-c", "bob-work")
    bob.add("bob works on")
    bob.commit("bob")
    done = ann.qem("forget", secret, "-m", "a secret", "--yes")
    assert "git" in (done.stdout + done.stderr) and "history" in (done.stdout + done.stderr)
    ann.publish("forget")
    bob.git("fetch", "-q")
    bob.merge("origin/main")  # a branch that still held the text merges the forget in
    tracked = bob.git("grep", "-l", "hunter2", ok=False).stdout
    assert tracked == ""
    bob.qem("list")  # the first command after the merge catches the index up
    for path in (bob.path / ".qem").rglob("*"):  # the log, the index, the last export's copy
        if path.is_file():
            assert b"hunter2" not in path.read_bytes(), path
    fresh = team.clone("fresh")
    assert all(b"hunter2" not in p.read_bytes() for p in fresh.path.rglob("*") if p.is_file() and ".git" not in p.parts)
    assert "hunter2" not in fresh.qem("export", "--stdout").stdout
    fresh.qem("verify")


# -- migration -------------------------------------------------------------------------------


LEGACY = Path(__file__).resolve().parent.parent / "fixtures" / "legacy-store.sql"


def test_migrating_a_single_file_store(team):
    """fixtures/legacy-store.sql is a store written by qem before memory lived in git (one
    SQLite file): a load, a supersession, a revocation, a forget, a flag, a dispute, a
    promotion.  `qem migrate` converts it once; the notes keep their history and numbers."""
    import sqlite3

    founder = team.clone("founder")
    old = founder.path / ".qem" / "memory.db"
    old.parent.mkdir()
    with sqlite3.connect(old) as conn:
        conn.executescript(LEGACY.read_text("utf-8"))
    conn.close()
    done = founder.qem("list", code=2)  # not read as if it were the new layout
    assert "qem migrate" in done.stderr
    founder.qem("migrate")
    assert (founder.path / ".qem" / "memory.db.converted").exists()
    founder.qem("export")
    founder.publish("migrated")
    # old numbers keep resolving, and the history is whole
    assert "The lock order is A then B" in founder.qem("show", "2").stdout
    assert "superseded" in founder.qem("show", "2").stdout
    assert "The lock order is B then A" in founder.qem("show", "12").stdout
    assert "not true any more" in founder.qem("show", "3").stdout
    log = founder.qem("log", "2").stdout
    assert "created" in log and "superseded" in log
    assert "Review the retry PR" in founder.qem("query", "disputed=yes").stdout
    assert "human" in founder.qem("show", "4").stdout
    mate = team.clone("mate")
    assert mate.qem("show", "12").stdout == founder.qem("show", "12").stdout
    assert b"sk-legacy-secret" not in mate.memory_md()  # forgotten before the conversion: still forgotten
    assert all(b"sk-legacy-secret" not in path.read_bytes() for path in (mate.path / ".qem").rglob("*") if path.is_file())
    same_view(founder, mate)
