"""A soak of team histories, with real git and the real pre-commit framework running this
repository's hooks (as local hooks, from `.pre-commit-hooks.yaml`): two clones of one
origin add, supersede and revoke notes, pack, commit by the habits people have (`git
commit -am`, `git add MEMORY.md && git commit`, `git add .`, `git add -p`, `git commit --
MEMORY.md`), unstage everything (`git reset`), pull (merging), push, revert their own last
commit, and a third person clones afresh.  After every step:

- every commit the hooks let through carries a memory consistent with its MEMORY.md (the
  committed tree alone, put in a folder of its own, passes `qem export --check`);
- every hook verdict matches the tree being committed: a commit is refused exactly when
  that tree (worked out beforehand in a scratch git index, the way git builds it for the
  habit) is inconsistent; following the hook's advice (`git add .qem MEMORY.md`, commit
  again) then lands a consistent commit;
- no note that reached origin is lost (but for those a revert took out on purpose), in a
  fresh clone;
- every clone renders the same bytes for the same commit, and those are a fresh clone's.

The histories are random with a fixed seed each.  `QEM_SOAK=N` runs 3N seeds and N times
the steps (the default is one short history, for CI).
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from test_git import Clone, Team
from test_precommit import local_hooks

pytest.importorskip("pre_commit")
pytest.importorskip("yaml")
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

SOAK = max(1, int(os.environ.get("QEM_SOAK", "1") or 1))
SEEDS = range(3 * SOAK if os.environ.get("QEM_SOAK") else 1)  # one history in CI; QEM_SOAK=N: 3N
STEPS = 30 * SOAK
KINDS = ("directive", "task", "gotcha", "finding", "reference", "decision", "operational")
HABITS = ("commit -am", "add MEMORY.md", "add .", "add -p", "commit -- MEMORY.md")


class Member(Clone):
    """A clone whose commits go through the pre-commit hooks, judged against the tree each
    habit commits."""

    def __init__(self, history: "History", path: Path, actor: str) -> None:
        super().__init__(history.team, path, actor)
        self.history = history

    def live(self) -> list[dict]:
        return [row for row in self.notes() if row["state"] == "active"]

    def predicted_tree(self, habit: str) -> str:
        """The tree `habit` would commit, built in a scratch index as git builds it."""
        scratch = self.path / ".git" / "soak-index"
        env = dict(self.team.git_env, GIT_INDEX_FILE=str(scratch))
        if habit == "commit -- MEMORY.md":
            self._git_env(env, "read-tree", "HEAD")
            self._git_env(env, "add", "--", "MEMORY.md")
        else:
            shutil.copyfile(self.path / ".git" / "index", scratch)
            if habit == "commit -am":
                self._git_env(env, "add", "-u")
        tree = self._git_env(env, "write-tree").stdout.strip()
        scratch.unlink()
        return tree

    def _git_env(self, env: dict, *args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(["git", *args], cwd=self.path, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"git {args}: {done.stdout}{done.stderr}"
        return done

    def stage(self, habit: str) -> None:
        if habit == "add MEMORY.md":
            self.git("add", "MEMORY.md")
        elif habit == "add .":
            self.git("add", ".")
        elif habit == "add -p":
            self.git("add", "-p", input="y\n" * 200, ok=False)

    def commit_by(self, habit: str, message: str) -> None:
        """Commit as `habit` does, through the hooks; checked as the module says."""
        if not self.git("status", "--porcelain").stdout.strip():
            return
        self.stage(habit)
        tree = self.predicted_tree(habit)
        if tree == self.git("rev-parse", "HEAD^{tree}").stdout.strip():
            return  # nothing to commit this way: git says so, and no hook runs
        fine, why = self.history.consistent(self, tree)
        before = self.head()
        paths = ("--", "MEMORY.md") if habit == "commit -- MEMORY.md" else ()
        done = self.git("commit", *(("-a",) if habit == "commit -am" else ()), "-m", message, *paths, ok=False)
        landed = self.head() != before
        said = done.stdout + done.stderr
        self.history.say(f"{self.actor}: {habit}: {'landed' if landed else 'refused'} (tree {'whole' if fine else why})")
        if landed:
            assert fine, f"the hooks let through a commit whose memory is not whole: {why}\n{said}"
            self.history.check_commit(self, "HEAD")
            return
        assert not fine, f"the hooks refused a commit whose memory is whole ({habit}):\n{said}"
        self.follow_advice(message)

    def follow_advice(self, message: str) -> None:
        """What the hooks tell a person: stage the memory and commit again."""
        for _ in range(2):
            self.git("add", ".qem", "MEMORY.md")
            done = self.git("commit", "-m", message, ok=False)
            if done.returncode == 0:
                self.history.check_commit(self, "HEAD")
                return
        raise AssertionError(f"following the hooks' advice did not land the commit:\n{done.stdout}{done.stderr}")

    def settle(self, done: subprocess.CompletedProcess, finish: tuple[str, ...]) -> None:
        """A merge or revert that stopped on MEMORY.md: rendered again, staged, finished."""
        if done.returncode == 0:
            return
        conflicted = self.conflicted()
        assert set(conflicted) <= {"MEMORY.md"} | {p for p in conflicted if p.startswith(".qem/")}, conflicted
        self.qem("export")  # settles the log files git's rename detection left unmerged, and renders
        assert self.conflicted() in ([], ["MEMORY.md"]), f"left unmerged: {self.conflicted()}"
        self.git("add", "MEMORY.md")
        self.git(*finish)

    def sync(self) -> None:
        """Pull (a merge) and push, as a person does before going home."""
        self.commit_by(self.history.rng.choice(HABITS), "before the pull")
        self.git("fetch", "-q", "origin")
        if self.git("rev-parse", "--verify", "-q", "origin/main", ok=False).returncode == 0:
            done = self.git("merge", "--no-edit", "-q", "origin/main", ok=False)
            self.settle(done, ("commit", "-q", "--no-edit"))
            self.rerender("after the merge")
        self.git("push", "-q", "origin", "HEAD:main")
        self.history.pushed(self)

    def rerender(self, message: str) -> None:
        """A merged or reverted MEMORY.md may not be the merged log's rendering (short ids
        lengthen, a line both sides changed): render it and commit that through the hooks."""
        self.qem("export")
        if self.git("status", "--porcelain", "--", "MEMORY.md").stdout.strip():
            self.commit_by("add MEMORY.md", message)

    def revert_own(self) -> None:
        """Undo one's last commit, not yet pushed: the notes it made go, on purpose."""
        if self.git("status", "--porcelain").stdout.strip():
            return
        unpushed = self.git("rev-list", "--no-merges", "HEAD", "^origin/main").stdout.split()
        if not unpushed or unpushed[0] != self.head():
            return
        made = self.history.notes_at(self, "HEAD") - self.history.notes_at(self, "HEAD~1")
        done = self.git("revert", "--no-edit", "HEAD", ok=False)
        self.settle(done, ("-c", "core.editor=true", "revert", "--continue"))
        self.history.reverted |= made
        self.history.say(f"{self.actor}: reverted its last commit ({len(made)} note(s) made there)")
        self.history.check_commit(self, "HEAD", hooks=False)
        self.rerender("after the revert")


class History:
    """One random team history: the origin, two members, and what reached origin."""

    def __init__(self, root: Path, team: Team, seed: int) -> None:
        self.root, self.team, self.rng = root, team, random.Random(seed)
        self.log: list[str] = [f"seed {seed}"]
        self.seen: set[str] = set()
        self.reverted: set[str] = set()
        self.counter = 0
        env = team.git_env
        env["PRE_COMMIT_HOME"] = str(root / "pre-commit-home")
        founder = self.member("founder", hooks=False)
        (founder.path / ".pre-commit-config.yaml").write_text(local_hooks("qem-export", "qem-verify"), "utf-8")
        founder.qem("init")
        founder.add("Run the tests inside the venv", "directive")
        founder.qem("export")
        founder.git("add", "-A")
        founder.git("commit", "-q", "-m", "start, with a memory")
        founder.git("push", "-q", "origin", "main")
        self.members = [self.member("ann"), self.member("bob")]

    def member(self, name: str, hooks: bool = True) -> Member:
        path = self.root / name
        done = subprocess.run(["git", "clone", "-q", str(self.team.origin), str(path)], env=self.team.git_env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        member = Member(self, path, name)
        if not hooks:
            return member
        installed = subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=path, env=self.team.git_env,
                               capture_output=True, text=True, timeout=120)
        assert installed.returncode == 0, installed.stdout + installed.stderr
        return member

    def say(self, line: str) -> None:
        self.log.append(line)

    def text(self) -> str:
        self.counter += 1
        return f"note {self.counter}: {self.rng.choice(['lock', 'cache', 'index', 'daemon'])} {self.rng.randrange(10**6)}"

    # -- the oracle ----------------------------------------------------------------------

    def materialize(self, clone: Clone, tree: str) -> Path:
        """The memory a tree (or commit) holds, alone in a folder of its own."""
        self.counter += 1
        folder = self.root / "trees" / f"t{self.counter}"
        folder.mkdir(parents=True)
        listed = clone.git("ls-tree", "--name-only", tree, "--", ".qem", "MEMORY.md").stdout.split()
        if not listed:  # the tree holds no memory at all
            return folder
        archive = subprocess.run(["git", "archive", "--format=tar", tree, "--", *listed], cwd=clone.path,
                                 env=self.team.git_env, capture_output=True, check=True)
        raw = archive.stdout
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            tar.extractall(folder, filter="data")
        return folder

    def consistent(self, clone: Clone, tree: str) -> tuple[bool, str]:
        """Whether the memory a tree of `clone` holds is whole: its MEMORY.md is its log's
        rendering."""
        folder = self.materialize(clone, tree)
        if not (folder / "MEMORY.md").exists() and not (folder / ".qem").exists():
            return True, "no memory"
        if not (folder / ".qem").exists():
            return False, "MEMORY.md without its log"
        done = self.team.run_qem(Clone(self.team, folder, "oracle"), ("export", "--check"), None, "")
        return done.returncode == 0, (done.stdout + done.stderr).strip()[:300]

    def check_commit(self, clone: Clone, rev: str, hooks: bool = True) -> None:
        tree = clone.git("rev-parse", f"{rev}^{{tree}}").stdout.strip()
        fine, why = self.consistent(clone, tree)
        if hooks:
            assert fine, f"{clone.actor} committed a memory that is not whole: {why}\n" + "\n".join(self.log)

    def notes_at(self, clone: Clone, rev: str) -> set[str]:
        folder = self.materialize(clone, clone.git("rev-parse", f"{rev}^{{tree}}").stdout.strip())
        if not (folder / ".qem").exists():
            return set()
        done = self.team.run_qem(Clone(self.team, folder, "oracle"), ("list", "--json"), 0, "")
        return {row["id"] for row in json.loads(done.stdout)}

    def pushed(self, member: Member) -> None:
        """What reached origin: a fresh clone has every note that ever did (but the
        reverted), renders what origin's MEMORY.md holds, and so does every member at
        that commit."""
        self.counter += 1
        fresh = self.team.clone(f"fresh{self.counter}")
        check = fresh.qem("export", "--check", code=None)
        assert check.returncode == 0, f"a fresh clone's MEMORY.md is not its log's:\n{check.stdout}{check.stderr}\n" + "\n".join(self.log)
        now = {row["id"] for row in fresh.notes()}
        lost = self.seen - self.reverted - now
        assert not lost, f"notes lost on origin: {sorted(lost)}\n" + "\n".join(self.log)
        self.seen |= now
        view = fresh.qem("export", "--stdout").stdout
        for other in self.members:
            if other.head() == fresh.head() and not other.git("status", "--porcelain").stdout.strip():
                assert other.qem("export", "--stdout").stdout == view, "two clones render one commit differently"
        shutil.rmtree(fresh.path)
        self.say(f"{member.actor}: pushed; origin holds {len(now)} notes")

    # -- the steps -----------------------------------------------------------------------

    def step(self) -> None:
        member = self.rng.choice(self.members)
        action = self.rng.choice(["add", "add", "add", "supersede", "revoke", "pack", "commit", "commit",
                                  "sync", "revert", "unstage"])
        self.say(f"{member.actor}: {action}")
        if action == "add":
            for _ in range(self.rng.randint(1, 3)):
                member.add(self.text(), self.rng.choice(KINDS))
        elif action in ("supersede", "revoke"):
            live = [row for row in member.live() if row["kind"] != "directive"]
            if live:
                target = self.rng.choice(live)["short"]
                if action == "supersede":
                    member.qem("supersede", target, self.text(), "-m", "measured again")
                else:
                    member.qem("revoke", target, "-m", "no longer holds")
        elif action == "pack":
            member.qem("pack")
        elif action == "unstage":  # `git reset`: what qem staged is untracked (or deleted) again
            member.git("reset", "-q")
        elif action == "commit":
            member.commit_by(self.rng.choice(HABITS), f"work {self.counter}")
        elif action == "sync":
            member.sync()
        else:
            member.revert_own()

    def finish(self) -> None:
        for member in self.members + self.members:  # twice: the first to push is merged by the second
            member.sync()


@pytest.mark.parametrize("seed", SEEDS)
def test_a_team_history_loses_nothing(tmp_path, monkeypatch, capsysbinary, seed):
    team = Team(tmp_path, monkeypatch, capsysbinary)
    history = History(tmp_path, team, seed)
    for _ in range(STEPS):
        history.step()
    history.finish()
    verdicts = [line for line in history.log if ": landed" in line or ": refused" in line]
    assert verdicts and len(history.seen) > 1, "\n".join(history.log)  # the history did commit and push
