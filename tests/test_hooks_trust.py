"""The pre-commit hooks and merges held to a team's habits, through the real pre-commit
framework and real git (two clones and a bare origin where a teammate is in the story):

- every hook guards a memory kept in a subfolder, given the documented `args: [-w, app]`;
- no hook loses an edit a person did not stage: pre-commit sets it aside before the hooks
  run, and a hook that would render MEMORY.md over it refuses, naming the file;
- a merge that brings a note anchored to code this side changed flags it as drift (it is
  not refused as an incomplete commit), and after a clean pull that ran no hook, `qem
  verify` names the drift and `qem anchors check --flag` settles it.

Each scenario ends in a fresh clone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from builders import code_repository
from test_drift import LOCK_NOTE, fresh_clone, git, hooked, note, qem, repo, short_of  # noqa: F401
from test_precommit import MANIFEST, local_hooks, pre_commit
from test_secrets import UNGUARDED

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

TOKEN = "CI pushes with ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def committed(root: Path) -> int:
    return int(git(root, "rev-list", "--count", "HEAD").stdout)


def said(done: subprocess.CompletedProcess) -> str:
    return done.stdout + done.stderr


# -- a memory in a subfolder ----------------------------------------------------------------------


def subfolder_hooks(*hook_ids: str) -> str:
    """The manifest's hooks as local hooks, each given `args: [-w, app]` as docs/SHARING.md says."""
    config = yaml.safe_load(local_hooks(*hook_ids))
    for hook in config["repos"][0]["hooks"]:
        hook["args"] = ["-w", "app"]
    return yaml.safe_dump(config)


@pytest.fixture
def app(tmp_path: Path) -> tuple[Path, Path, dict]:
    """A repository whose memory lives in `app/` (MEMORY.md there too), a note anchored to
    app/src/lock.py, pushed to a bare origin."""
    root = code_repository(tmp_path / "repo", {"app/src/lock.py": "LOCK = 1\n", "README": "code\n"})
    qem(root, "add", LOCK_NOTE, "--kind", "gotcha", "--anchor", "app/src/lock.py", "-w", "app")
    qem(root, "export", "-w", "app")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "memory")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(root), str(origin))
    git(root, "remote", "add", "origin", str(origin))
    return root, origin, {"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}


def _secrets(root: Path, env: dict) -> None:
    made = subprocess.run([sys.executable, "-c", UNGUARDED, "add", TOKEN, "--kind", "task", "-w", "app"], cwd=root,
                          capture_output=True, text=True, timeout=60)  # as a clone's files would bring it
    assert made.returncode == 0, made.stderr
    git(root, "add", "-A")
    refused = git(root, "commit", "-m", "a note with a token", env=env, check=False)
    assert refused.returncode == 1 and "GitHub Token on line 1" in said(refused), said(refused)
    assert "app/.qem/texts/" in said(refused)  # the file named as the commit holds it
    assert "no files to check" not in said(refused) and TOKEN[-20:] not in said(refused)
    qem(root, "forget", made.stdout.strip(), "-m", "held a token", "--yes", "-w", "app")
    qem(root, "export", "-w", "app")
    git(root, "add", "-A")


def _anchors(root: Path, env: dict) -> None:
    (root / "app" / "src" / "lock.py").write_text("LOCK = 2\n")
    git(root, "add", "app/src/lock.py")
    flagged = git(root, "commit", "-m", "change the lock", env=env, check=False)
    assert flagged.returncode == 1 and "flagged stale" in said(flagged), said(flagged)
    assert "STALE" in (root / "app" / "MEMORY.md").read_text("utf-8")


def export_off(root: Path) -> None:
    """Auto-export off, so the log moves on without MEMORY.md, as when a pull brings events."""
    config = root / "app" / ".qem" / "config.toml"
    config.write_text(config.read_text("utf-8") + "\n[export]\nauto = false\n", "utf-8")
    git(root, "add", "app/.qem/config.toml")


def _export(root: Path, env: dict) -> None:
    export_off(root)
    qem(root, "add", "The lock order is A then B", "--kind", "finding", "-w", "app")  # MEMORY.md not rendered
    stale = git(root, "commit", "-m", "a finding", env=env, check=False)
    assert stale.returncode == 1 and "files were modified by this hook" in said(stale), said(stale)
    qem(root, "export", "--check", "-w", "app")  # the hook rendered it
    git(root, "add", "app/MEMORY.md")


def _verify(root: Path, env: dict) -> None:
    export_off(root)
    qem(root, "add", "The lock order is A then B", "--kind", "finding", "-w", "app")
    stale = git(root, "commit", "-m", "a finding", env=env, check=False)
    assert stale.returncode == 1 and "app/MEMORY.md" in said(stale) and "moved on" in said(stale), said(stale)
    qem(root, "export", "-w", "app")
    git(root, "add", "app/MEMORY.md")


SUBFOLDER = {"qem-secrets": _secrets, "qem-anchors": _anchors, "qem-export": _export, "qem-export-check": _verify,
             "qem-verify": _verify}


@pytest.mark.parametrize("hook_id", list(SUBFOLDER))
def test_every_hook_guards_a_memory_in_a_subfolder(app, hook_id: str) -> None:
    """`args: [-w, app]` as documented: each hook stops what it is there to stop (the secrets
    hook is given the log files under app/.qem/, not "no files to check"), then lets the
    commit through once it is put right; a fresh clone verifies clean."""
    root, origin, env = app
    (root / ".pre-commit-config.yaml").write_text(subfolder_hooks(hook_id), "utf-8")
    git(root, "add", ".pre-commit-config.yaml")
    git(root, "commit", "-q", "-m", "hooks")
    assert pre_commit("install", cwd=root, env={**os.environ, **env}).returncode == 0
    before = committed(root)
    SUBFOLDER[hook_id](root, env)
    assert committed(root) == before  # stopped
    done = git(root, "commit", "-m", "put right", env=env, check=False)
    assert done.returncode == 0, said(done)
    git(root, "push", "-q", "origin", "HEAD:main")
    fresh = origin.parent / "fresh"
    git(origin.parent, "clone", "-q", str(origin), str(fresh))
    qem(fresh, "export", "--check", "-w", "app")
    qem(fresh, "verify", "--fail-on-drift", "-w", "app")


def test_the_advice_on_an_unstaged_edit_names_a_memory_in_a_subfolder(app) -> None:
    """The refusal's command is run where git ran the hook, at the top: for `app/.qem` it
    names `-w app`, and run as given it checks the edit in (a successor, anchored to the
    code as staged); the commit then goes through."""
    root, origin, env = app
    (root / ".pre-commit-config.yaml").write_text(subfolder_hooks("qem-anchors"), "utf-8")
    git(root, "add", ".pre-commit-config.yaml")
    git(root, "commit", "-q", "-m", "hooks")
    assert pre_commit("install", cwd=root, env={**os.environ, **env}).returncode == 0
    mirror = root / "app" / "MEMORY.md"
    mirror.write_text(mirror.read_text("utf-8").replace(LOCK_NOTE, LOCK_NOTE + " (checked by hand)"), "utf-8")
    (root / "app" / "src" / "lock.py").write_text("LOCK = 2\n")
    git(root, "add", "app/src/lock.py")
    refused = git(root, "commit", "-m", "change the lock", env=env, check=False)
    assert refused.returncode == 1 and "app/MEMORY.md has changes you have not staged" in said(refused), said(refused)
    assert "`qem checkin -w app --path app/MEMORY.md`" in said(refused), said(refused)
    qem(root, "checkin", "-w", "app", "--path", "app/MEMORY.md", "-m", "by hand", "--yes")
    done = git(root, "commit", "-m", "change the lock", env=env, check=False)  # the successor holds the new code
    assert done.returncode == 0, said(done)
    assert "(checked by hand)" in git(root, "show", "HEAD:app/MEMORY.md").stdout
    assert git(root, "status", "--porcelain").stdout == ""


# -- an edit a person did not stage -----------------------------------------------------------------


def hand_edit(root: Path) -> str:
    """MEMORY.md edited by hand right under the anchored note (a gotcha typed in), not
    staged; the line typed."""
    mirror = root / "MEMORY.md"
    lines = mirror.read_text("utf-8").split("\n")
    at = next(n for n, line in enumerate(lines) if line.startswith("  @anchor: src/lock.py"))
    typed = "- Keep the lock file on a local disk"
    mirror.write_text("\n".join(lines[:at + 1] + [typed] + lines[at + 1:]), "utf-8")
    return typed.removeprefix("- ")


def test_the_anchor_hook_refuses_to_render_over_an_unstaged_edit(hooked) -> None:
    """qem-anchors and qem-export-check under pre-commit, MEMORY.md edited by hand and not
    staged, the anchored file changed and staged alone: pre-commit sets the edit aside, the
    hook would flag the note and render MEMORY.md again, so it refuses, naming the file; the
    edit is back in the work tree, nothing was flagged.  Checked in, the commit goes through."""
    repo, origin, env = hooked
    edited = hand_edit(repo)
    (repo / "src" / "lock.py").write_text("LOCK = 2\n")
    git(repo, "add", "src/lock.py")
    refused = git(repo, "commit", "-m", "change the lock", env=env, check=False)
    assert refused.returncode == 1, said(refused)
    assert "Unstaged files detected" in said(refused)  # the real stash
    assert "MEMORY.md has changes you have not staged" in said(refused), said(refused)
    assert "qem checkin --path MEMORY.md" in said(refused) and "patch does not apply" not in said(refused)
    assert edited in (repo / "MEMORY.md").read_text("utf-8")  # the edit is still in the work tree
    assert edited in git(repo, "diff", "MEMORY.md").stdout  # and still unstaged
    assert note(repo, short_of(repo, LOCK_NOTE))["state"] == "active"  # nothing written
    qem(repo, "checkin", "--path", "MEMORY.md", "-m", "SIGTERM too", "--yes")
    flagged = git(repo, "commit", "-m", "change the lock", env=env, check=False)
    assert flagged.returncode == 1 and "flagged stale" in said(flagged), said(flagged)
    done = git(repo, "commit", "-m", "change the lock", env=env, check=False)
    assert done.returncode == 0, said(done)
    git(repo, "push", "-q", "origin", "HEAD:main")
    fresh = fresh_clone(origin, "fresh")
    qem(fresh, "verify", "--fail-on-drift")
    assert edited in (fresh / "MEMORY.md").read_text("utf-8")
    assert note(fresh, short_of(fresh, LOCK_NOTE))["state"] == "stale"


def test_the_export_hook_refuses_to_render_over_an_unstaged_edit(repo: Path, tmp_path: Path) -> None:
    """qem-export, the log moved on and MEMORY.md edited by hand, not staged: the hook
    would render MEMORY.md, so it refuses, naming the file, and the edit stays."""
    env = {"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    (repo / ".pre-commit-config.yaml").write_text(local_hooks("qem-export"), "utf-8")
    config = repo / ".qem" / "config.toml"
    config.write_text(config.read_text("utf-8") + "\n[export]\nauto = false\n", "utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "hooks")
    assert pre_commit("install", cwd=repo, env={**os.environ, **env}).returncode == 0
    qem(repo, "add", "The lock order is A then B", "--kind", "decision")  # staged; MEMORY.md not rendered
    edited = hand_edit(repo)
    refused = git(repo, "commit", "-m", "a decision", env=env, check=False)
    assert refused.returncode == 1 and "MEMORY.md has changes you have not staged" in said(refused), said(refused)
    assert "files were modified by this hook" not in said(refused)
    assert edited in (repo / "MEMORY.md").read_text("utf-8") and edited in git(repo, "diff", "MEMORY.md").stdout
    assert "git stash push MEMORY.md" in said(refused)
    git(repo, "stash", "push", "-q", "MEMORY.md")  # one way out the refusal names
    rendered = git(repo, "commit", "-m", "a decision", env=env, check=False)
    assert rendered.returncode == 1 and "files were modified by this hook" in said(rendered), said(rendered)
    git(repo, "add", "MEMORY.md")
    done = git(repo, "commit", "-m", "a decision", env=env, check=False)
    assert done.returncode == 0, said(done)
    assert "The lock order is A then B" in git(repo, "show", "HEAD:MEMORY.md").stdout
    git(repo, "stash", "pop", "-q")
    assert edited in (repo / "MEMORY.md").read_text("utf-8") and edited in git(repo, "diff", "MEMORY.md").stdout


# -- merges ------------------------------------------------------------------------------------------


@pytest.fixture
def team(hooked) -> tuple[Path, Path, Path, dict]:
    """Alice (the hooked repository) and Bob (a clone of its origin, hooks installed): Alice
    pushes a decision anchored to src/lock.py; Bob, who has not pulled it, changes src/lock.py
    and commits (the hook flags the note his clone has about it)."""
    alice, origin, env = hooked
    bob = origin.parent / "bob"
    git(origin.parent, "clone", "-q", str(origin), str(bob))
    assert pre_commit("install", cwd=bob, env={**os.environ, **env}).returncode == 0
    qem(alice, "add", "Take the lock before the queue", "--kind", "decision", "--anchor", "src/lock.py")
    assert git(alice, "commit", "-m", "a decision", env=env, check=False).returncode == 0
    git(alice, "push", "-q", "origin", "HEAD:main")
    (bob / "src" / "lock.py").write_text("LOCK = 2\n")
    git(bob, "add", "src/lock.py")
    flagged = git(bob, "commit", "-m", "change the lock", env=env, check=False)  # the note Bob has
    assert flagged.returncode == 1 and "flagged stale" in said(flagged), said(flagged)
    assert git(bob, "commit", "-m", "change the lock", env=env, check=False).returncode == 0
    return alice, bob, origin, env


def test_a_merge_flags_a_note_from_the_other_side_about_code_this_side_changed(team) -> None:
    """A merge whose MEMORY.md conflicts, settled as docs/SHARING.md says (`qem export`, `git
    add MEMORY.md`, `git commit`): the note that arrived from Alice, anchored to the code Bob
    changed, is flagged as drift (the hook fails as a formatter does), not refused as an
    incomplete commit; the same command again commits the merge."""
    alice, bob, origin, env = team
    qem(bob, "add", "The queue drains before the restart", "--kind", "decision")  # the same section: a conflict
    assert git(bob, "commit", "-m", "a decision of Bob's", env=env, check=False).returncode == 0
    pulled = git(bob, "pull", "--no-rebase", "--no-edit", "origin", "main", check=False)
    assert pulled.returncode == 1 and "CONFLICT (content): Merge conflict in MEMORY.md" in said(pulled), said(pulled)
    qem(bob, "export")
    git(bob, "add", "MEMORY.md")
    flagged = git(bob, "commit", "--no-edit", env=env, check=False)
    assert flagged.returncode == 1, said(flagged)
    assert "does not carry" not in said(flagged) and "flagged stale" in said(flagged), said(flagged)
    assert "anchor src/lock.py changed" in said(flagged)
    done = git(bob, "commit", "--no-edit", env=env, check=False)
    assert done.returncode == 0, said(done)
    assert len(git(bob, "rev-list", "--parents", "-n1", "HEAD").stdout.split()) == 3  # the merge
    git(bob, "push", "-q", "origin", "HEAD:main")
    fresh = fresh_clone(origin, "fresh")
    qem(fresh, "verify", "--fail-on-drift")
    assert note(fresh, short_of(fresh, "Take the lock before the queue"))["state"] == "stale"


def test_a_merge_that_stops_on_code_flags_the_note_and_renders_what_git_merged(team) -> None:
    """A merge that stops on a code file alone: git merged MEMORY.md cleanly (Alice's decision,
    Bob's flag), the person resolves the code and commits.  The hook flags the note from
    Alice and renders MEMORY.md again over git's merge of the two renderings (no person's
    line is in it), not calling it a hand edit; the same command again commits the merge."""
    alice, bob, origin, env = team
    (alice / "README").write_text("code, as Alice has it\n")
    git(alice, "commit", "-q", "-am", "Alice's README", env=env)
    git(alice, "push", "-q", "origin", "HEAD:main")
    (bob / "README").write_text("code, as Bob has it\n")
    git(bob, "commit", "-q", "-am", "Bob's README", env=env)
    pulled = git(bob, "pull", "--no-rebase", "--no-edit", "origin", "main", check=False)
    assert pulled.returncode == 1 and "CONFLICT (content): Merge conflict in README" in said(pulled), said(pulled)
    assert "MEMORY.md" not in git(bob, "diff", "--name-only", "--diff-filter=U").stdout
    (bob / "README").write_text("code, as both have it\n")
    git(bob, "add", "README")
    flagged = git(bob, "commit", "--no-edit", env=env, check=False)
    assert flagged.returncode == 1 and "flagged stale" in said(flagged), said(flagged)
    assert "edited by hand" not in said(flagged) and "re-rendered" in said(flagged)
    done = git(bob, "commit", "--no-edit", env=env, check=False)
    assert done.returncode == 0, said(done)
    git(bob, "push", "-q", "origin", "HEAD:main")
    fresh = fresh_clone(origin, "fresh")
    qem(fresh, "verify", "--fail-on-drift")
    assert note(fresh, short_of(fresh, "Take the lock before the queue"))["state"] == "stale"


def test_a_clean_merge_stops_to_flag_the_drift_it_brings_under_pre_merge_commit(team) -> None:
    """With pre-commit installed for git's pre-merge-commit too, a merge git could make by
    itself (both sides changed MEMORY.md apart: Alice's decision, Bob's flag) is judged
    before it is committed: the note from Alice is flagged, MEMORY.md rendered again over
    git's merge of the two renderings, and the merge stops with them staged; `git commit`
    completes it."""
    alice, bob, origin, env = team
    installed = pre_commit("install", "--hook-type", "pre-merge-commit", cwd=bob, env={**os.environ, **env})
    assert installed.returncode == 0, said(installed)
    pulled = git(bob, "pull", "--no-rebase", "--no-edit", "origin", "main", env=env, check=False)
    assert "Not committing merge" in said(pulled) and "flagged stale" in said(pulled), said(pulled)
    assert "does not carry" not in said(pulled) and "edited by hand" not in said(pulled)
    done = git(bob, "commit", "--no-edit", env=env, check=False)
    assert done.returncode == 0, said(done)
    assert len(git(bob, "rev-list", "--parents", "-n1", "HEAD").stdout.split()) == 3  # the merge
    git(bob, "push", "-q", "origin", "HEAD:main")
    fresh = fresh_clone(origin, "fresh")
    qem(fresh, "verify", "--fail-on-drift")
    assert note(fresh, short_of(fresh, "Take the lock before the queue"))["state"] == "stale"


@pytest.mark.parametrize("how", ["--no-rebase", "--rebase"])
def test_a_clean_pull_leaves_drift_that_verify_names_and_the_flag_settles(team, how: str) -> None:
    """A merge git makes itself, or a rebase, runs no pre-commit hook: the note from Alice
    stays unflagged.  `qem verify` names it and the command; `--fail-on-drift` (CI) fails
    and its last word says what to run; `qem anchors check --flag` settles it, and the
    commit passes the hooks."""
    alice, bob, origin, env = team
    pulled = git(bob, "pull", how, "--no-edit", "origin", "main", check=False)
    assert pulled.returncode == 0, said(pulled)
    short = short_of(bob, "Take the lock before the queue")
    listed = qem(bob, "verify")
    assert f"drift: #{short} decision: anchor src/lock.py changed" in listed.stdout
    assert "`qem anchors check --flag`" in listed.stdout
    failed = qem(bob, "verify", "--fail-on-drift", code=1)
    last = failed.stderr.strip().splitlines()[-1]
    assert "`qem anchors check --flag`" in last and "--repair" not in last, last
    qem(bob, "anchors", "check", "--flag", code=1)
    done = git(bob, "commit", "-m", "flag the decision the merge left drifted", env=env, check=False)
    assert done.returncode == 0, said(done)
    qem(bob, "verify", "--fail-on-drift")
    git(bob, "push", "-q", "origin", "HEAD:main")
    fresh = fresh_clone(origin, "fresh")
    qem(fresh, "verify", "--fail-on-drift")
    assert note(fresh, short)["state"] == "stale"


# -- the manifest -------------------------------------------------------------------------------------


def test_the_manifest_declares_its_stages_and_the_pre_commit_it_needs() -> None:
    for hook in yaml.safe_load(MANIFEST.read_text("utf-8")):
        assert hook["stages"] == ["pre-commit", "pre-merge-commit", "manual"], hook["id"]
        assert hook["minimum_pre_commit_version"] == "3.2.0", hook["id"]  # the stage names are 3.2.0's


# -- how a hook finds pre-commit's patch -----------------------------------------------------------------


def test_a_hook_reads_the_patch_its_own_pre_commit_run_wrote(tmp_path: Path, monkeypatch) -> None:
    """pre-commit's patch is found by its process (the hook's parent) and its age: another
    process's, or one older than an hour (a process id used again), is not this run's."""
    import time

    from qem_edit.base import errors
    from qem_edit.system import unstaged

    root = code_repository(tmp_path / "repo", {"MEMORY.md": "rendered\n", "src/lock.py": "LOCK = 1\n"})
    (root / "MEMORY.md").write_text("rendered\nand a line typed in\n")
    tree = git(root, "write-tree").stdout.strip()
    patch = git(root, "diff-index", "--binary", "--no-color", "--no-ext-diff", tree, "--").stdout
    home = tmp_path / "pre-commit-home"
    home.mkdir()
    monkeypatch.setenv("PRE_COMMIT_HOME", str(home))
    monkeypatch.setattr(unstaged.os, "getppid", lambda: 4242)
    now = int(time.time())
    (home / f"patch{now - 7200}-4242").write_text(patch)  # an earlier run's, its pid used again
    (home / f"patch{now}-4343").write_text(patch)  # another run's
    for other in (f"patch{now}-42420", f"patch{now}x-4242", f"xpatch{now}-4242", f"apple{now + 5}-4242", "patch-4242",
                  f"patch{now}-4242.bak"):
        (home / other).write_text(patch)  # (not `patch<time>-<pid>`: never read as this run's)
    (home / f"patch{now + 1}-4242").mkdir()  # (a folder so named: not a patch)
    monkeypatch.setenv("PRE_COMMIT", "1")
    assert unstaged.set_aside(root) == (None, set())
    unstaged.guard(root / "MEMORY.md")
    (home / f"patch{now}-4242").write_text(patch)
    assert unstaged.set_aside(root) == (str(home / f"patch{now}-4242"), {"MEMORY.md"})
    with pytest.raises(errors.ConflictError) as refused:
        unstaged.guard(root / "MEMORY.md")
    assert refused.value.exit_code == 3 and str(refused.value).startswith("MEMORY.md has changes you have not staged")
    unstaged.guard(root / "MEMORY.md", lambda: False)  # a rendering that changes nothing writes nothing
    unstaged.guard(root / "src" / "lock.py")  # a file the patch does not hold
    monkeypatch.delenv("PRE_COMMIT")  # not a hook of pre-commit
    unstaged.guard(root / "MEMORY.md")
    monkeypatch.setenv("PRE_COMMIT", "1")
    for name in os.listdir(home):
        if name.endswith("-4242") and (home / name).is_file():
            (home / name).unlink()  # (nothing this run set aside: git is asked nothing)
    monkeypatch.setattr(unstaged.gitrepo, "_gits", lambda *args, **kwargs: pytest.fail("git asked"))
    unstaged.guard(root / "MEMORY.md")
