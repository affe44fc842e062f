"""Drift: a note's anchored content changes, goes or moves, and memory says so where the
team sees it (docs/SHARING.md, "Anchors and drift"; qem_edit/reads/drift.py).

Real git and real `qem` subprocesses throughout; the hook runs through the real pre-commit
framework, and every scenario ends in a fresh clone.  `qem anchors check` compares each
anchor of the notes in force with the work tree, git's index (`--staged`: the paths the
commit changes) or a commit (`--rev`); `--flag` flags a changed or deleted anchor's note
stale and re-anchors a moved one, all in one check-in; a reinstatement re-anchors to the
content now; two clones flagging the same change agree; `qem verify` fails on drift
nobody flagged; another clone's malformed drift record is set aside.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from builders import code_repository, planted_created
from conftest import run_qem
from test_precommit import local_hooks, pre_commit

from qem_edit.base import ids
from qem_edit.base.decisions import Drifted, decide_drift
from qem_edit.base.replay import Event, fold
from qem_edit.storage.logtree import canonical
from qem_edit.system.anchors import WorkTree, revision_listing, staged_listing, worktree_oid

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

LOCK_NOTE = "Release the lock before the daemon restarts"


def git(cwd: Path, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)
    assert not check or done.returncode == 0, f"git {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


def qem(cwd: Path, *args: str, code: int | None = 0) -> subprocess.CompletedProcess:
    done = run_qem(*args, cwd=cwd, timeout=120)
    assert code is None or done.returncode == code, \
        f"qem {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    assert "Traceback" not in done.stderr
    return done


def short_of(root: Path, text: str) -> str:
    listed = json.loads(qem(root, "list", "--json").stdout)
    return next(n["short"] for n in listed if n["text"] == text)


def note(root: Path, short: str) -> dict:
    return json.loads(qem(root, "show", short, "--json").stdout)


def events_of(root: Path, short: str) -> list[dict]:
    return [json.loads(line) for line in qem(root, "dump", "-").stdout.splitlines()
            if json.loads(line).get("note") == note(root, short)["id"]]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with code, a memory holding a note anchored to a file and one to a
    folder, MEMORY.md tracked, all committed."""
    root = code_repository(tmp_path / "repo", {"src/lock.py": "LOCK = 1\n", "src/daemon/run.py": "RUN = 1\n",
                                               "README": "code\n"})
    qem(root, "add", LOCK_NOTE, "--kind", "gotcha", "--anchor", "src/lock.py")
    qem(root, "add", "The daemon restarts on SIGHUP", "--kind", "finding", "--anchor", "src/daemon")
    qem(root, "export")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "memory")
    return root


# -- the domain, pure ----------------------------------------------------------------------------


def _event(note_id: str, type_: str, clock: int, prev: tuple[str, ...], data: dict, event_id: str) -> Event:
    return Event(event_id, note_id, type_, f"2026-07-27T10:00:{clock:02d}Z", "t", None, None, data, clock, prev)


def test_a_re_anchoring_moves_the_anchor_and_two_branches_that_agree_merge() -> None:
    oid = "a" * 40
    created = _event("n" * 26, "created", 1, (), {"kind": "gotcha", "priority": "high", "provenance": "agent",
                                                  "anchors": [{"path": "old.py", "oid": oid}]}, "n" * 26)
    [draft] = decide_drift(fold([created]).note, [Drifted("old.py", oid, None, "new.py")])
    assert draft.type == "anchored" and draft.data["anchors"] == [{"path": "new.py", "oid": oid}]
    moved = _event(created.note, "anchored", 2, (created.id,), dict(draft.data), "m" * 26)
    assert fold([created, moved]).note.anchors == (("new.py", oid),)
    flag = decide_drift(fold([created]).note, [Drifted("old.py", oid, "b" * 40)])
    assert [d.type for d in flag] == ["stale_flagged"] and flag[0].data["drift"][0]["now"] == "b" * 40
    # two clones flag the same change, each its own event: they agree (stale), no rivals
    ours = _event(created.note, "stale_flagged", 2, (created.id,), dict(flag[0].data), "o" * 26)
    theirs = _event(created.note, "stale_flagged", 2, (created.id,), dict(flag[0].data), "p" * 26)
    both = fold([created, ours, theirs])
    assert both.note.state == "stale" and both.note.rivals == () and both.problems == []
    # one branch re-anchors, the other flags: the note is stale and follows the move
    mixed = fold([created, moved, ours]).note
    assert mixed.state == "stale" and mixed.anchors == (("new.py", oid),) and mixed.rivals == ()


# -- what a place holds: git's own ids -------------------------------------------------------------


def test_a_listing_gives_git_s_own_ids_for_files_and_folders(repo: Path) -> None:
    tree = WorkTree(repo.resolve(), True)
    (repo / "src" / "daemon" / "tool.sh").write_text("#!/bin/sh\n")
    (repo / "src" / "daemon" / "tool.sh").chmod(0o755)
    os.symlink("run.py", repo / "src" / "daemon" / "link")
    git(repo, "add", "-A")
    staged = staged_listing(tree)
    for folder in ("src", "src/daemon"):
        written = git(repo, "write-tree", f"--prefix={folder}/").stdout.strip()
        assert staged.oid(folder) == written == worktree_oid(tree, folder)
    assert staged.oid("src/lock.py") == git(repo, "hash-object", "src/lock.py").stdout.strip()
    assert staged.oid("src/nothing") is None
    git(repo, "commit", "-q", "-m", "more")
    at_head = revision_listing(tree, "HEAD")
    assert at_head.oid("src/daemon") == git(repo, "rev-parse", "HEAD:src/daemon").stdout.strip()
    assert at_head.holding(at_head.oid("src/lock.py")) == ["src/lock.py"]
    # `src` and `srcx`: a folder holds only what is under it
    (repo / "srcx").mkdir()
    (repo / "srcx" / "a").write_text("x\n")
    git(repo, "add", "-A")
    assert staged_listing(tree).under("src") == sorted(staged.under("src"))


# -- the check -------------------------------------------------------------------------------------


def test_the_check_names_changed_deleted_and_moved_anchors(repo: Path) -> None:
    clean = qem(repo, "anchors", "check")
    assert "no anchor drifted: 2 anchors checked against the work tree" in clean.stdout
    lock = short_of(repo, LOCK_NOTE)
    was = note(repo, lock)["anchors"][0]["oid"]
    (repo / "src" / "lock.py").write_text("LOCK = 2\n")
    found = qem(repo, "anchors", "check", "--json", code=1)
    report = json.loads(found.stdout)
    now = git(repo, "hash-object", "src/lock.py").stdout.strip()
    lock_drift = next(n for n in report["notes"] if n["short"] == lock)["drift"]
    assert lock_drift == [{"path": "src/lock.py", "what": "changed", "was": was, "now": now, "moved_to": None}]
    assert [n["short"] for n in report["notes"]] == [lock]  # src/daemon holds no lock.py: not drifted
    text = qem(repo, "anchors", "check", code=1).stdout
    assert f"anchor src/lock.py changed ({was[:12]} → {now[:12]})" in text and "qem anchors check --flag" in text
    git(repo, "checkout", "--", "src")
    git(repo, "mv", "src/lock.py", "src/locking.py")
    moved = json.loads(qem(repo, "anchors", "check", "--json", code=1).stdout)
    assert moved["notes"][0]["drift"][0] | {"now": None} == {"path": "src/lock.py", "what": "moved", "was": was,
                                                             "now": None, "moved_to": "src/locking.py"}
    (repo / "src" / "locking.py").write_text("LOCK = 3\n")  # moved and changed: nothing holds it any more
    gone = json.loads(qem(repo, "anchors", "check", "--json", code=1).stdout)
    assert gone["notes"][0]["drift"][0]["what"] == "deleted"
    assert qem(repo, "anchors", "check", "--staged", "--rev", "HEAD", code=2).stderr.count("give one") == 1


def test_flag_writes_one_check_in_and_reinstating_re_anchors(repo: Path) -> None:
    lock = short_of(repo, LOCK_NOTE)
    (repo / "src" / "lock.py").write_text("LOCK = 2\n")
    (repo / "src" / "daemon" / "run.py").unlink()
    written = json.loads(qem(repo, "anchors", "check", "--flag", "--json", code=1).stdout)
    assert len(written["flagged"]) == 2 and written["checkin"]
    flags = [e for short in (lock, short_of(repo, "The daemon restarts on SIGHUP"))
             for e in events_of(repo, short) if e["type"] == "stale_flagged"]
    assert {e["checkin"] for e in flags} == {written["checkin"]}
    lock_flag = next(e for e in flags if e["data"]["drift"][0]["path"] == "src/lock.py")
    assert "anchor src/lock.py changed" in lock_flag["reason"]
    assert note(repo, lock)["state"] == "stale"
    daemon = next(e for e in flags if e["data"]["drift"][0]["path"] == "src/daemon")
    assert daemon["data"]["drift"][0]["now"] is None and "was deleted" in daemon["reason"]
    again = qem(repo, "anchors", "check", "--flag")  # the flagged notes wait for a person
    assert "no anchor drifted" in again.stdout
    git(repo, "add", "src/lock.py")  # a reinstatement confirms what the next commit carries
    qem(repo, "reinstate", lock, "-m", "still true after the change")
    assert note(repo, lock)["anchors"] == [{"path": "src/lock.py",
                                            "oid": git(repo, "hash-object", "src/lock.py").stdout.strip()}]
    assert "no anchor drifted: 1 anchor checked" in qem(repo, "anchors", "check").stdout
    assert "@anchor: src/lock.py · " + git(repo, "hash-object", "src/lock.py").stdout.strip()[:12] \
        in (repo / "MEMORY.md").read_text()
    daemon_note = short_of(repo, "The daemon restarts on SIGHUP")
    git(repo, "add", "-A", "src/daemon")  # the deletion staged: what the next commit carries
    qem(repo, "reinstate", daemon_note, "-m", "true without the folder")  # its path went: the anchor goes
    assert note(repo, daemon_note)["anchors"] == []


def test_staged_judges_only_what_the_commit_changes(repo: Path) -> None:
    (repo / "src" / "lock.py").write_text("LOCK = 2\n")  # an edit not staged
    assert "0 anchors checked" in qem(repo, "anchors", "check", "--staged").stdout
    (repo / "README").write_text("more code\n")
    git(repo, "add", "README")
    assert "0 anchors checked" in qem(repo, "anchors", "check", "--staged").stdout
    git(repo, "add", "src/lock.py")
    staged = json.loads(qem(repo, "anchors", "check", "--staged", "--json", code=1).stdout)
    assert [n["text"] for n in staged["notes"]] == [LOCK_NOTE]
    (repo / "src" / "daemon" / "new.py").write_text("NEW = 1\n")
    git(repo, "add", "src/daemon/new.py")  # a file added under an anchored folder changes the folder
    staged = json.loads(qem(repo, "anchors", "check", "--staged", "--json", code=1).stdout)
    assert len(staged["notes"]) == 2
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    git(repo, "commit", "-q", "--no-verify", "-m", "code changed without the hook")
    assert json.loads(qem(repo, "anchors", "check", "--rev", head, "--json").stdout)["notes"] == []
    assert len(json.loads(qem(repo, "anchors", "check", "--rev", "HEAD", "--json", code=1).stdout)["notes"]) == 2
    assert "not a commit" in qem(repo, "anchors", "check", "--rev", "no-such-rev", code=2).stderr


def test_a_staged_file_whose_name_is_not_utf8_is_judged_as_any_other(repo: Path) -> None:
    """git names a file by its bytes: one whose name is not UTF-8, staged, is no anchor's
    (an anchor's path is UTF-8), and changes the anchored folder holding it.  Every
    commit hook answers (a traceback before), in full and from what it kept."""
    name = os.fsdecode(b"caf\xe9.txt")
    (repo / name).write_text("beside\n")
    git(repo, "add", "-A")
    for _ in range(2):  # (in full, then from the answer kept)
        assert "0 anchors checked" in qem(repo, "anchors", "check", "--staged").stdout
        qem(repo, "anchors", "check", "--staged", "--flag")
        qem(repo, "export", "--check", "--staged")
        qem(repo, "verify", "--staged")
    (repo / ".qem" / "index.db-commits").unlink()  # (the kept answers gone: verify from its seal)
    qem(repo, "verify", "--staged")
    assert "no anchor drifted" in qem(repo, "anchors", "check").stdout
    (repo / "src" / "daemon" / name).write_text("NEW = 1\n")
    git(repo, "add", "-A")
    staged = json.loads(qem(repo, "anchors", "check", "--staged", "--json", code=1).stdout)
    assert [n["text"] for n in staged["notes"]] == ["The daemon restarts on SIGHUP"]
    assert "src/daemon" in qem(repo, "verify", "--staged").stdout


def test_verify_lists_drift_nobody_flagged_and_fails_on_it_when_asked(repo: Path) -> None:
    qem(repo, "verify", "--fail-on-drift")
    (repo / "src" / "lock.py").write_text("LOCK = 2\n")
    git(repo, "commit", "-q", "-am", "code changed without the hook")
    listed = qem(repo, "verify", "--json")  # listed, as open disputes are: a work tree mid-edit drifts
    [line] = json.loads(listed.stdout)["drift"]
    assert line.startswith("drift: #") and "anchor src/lock.py changed" in line and "qem anchors check --flag" in line
    assert "1 anchor(s) drifted" in qem(repo, "verify").stderr
    failed = qem(repo, "verify", "--fail-on-drift", code=1)  # CI: a commit made without the hook
    assert "anchor src/lock.py changed" in failed.stdout
    qem(repo, "anchors", "check", "--flag", code=1)
    qem(repo, "verify", "--fail-on-drift")
    assert json.loads(qem(repo, "verify", "--json").stdout)["drift"] == []


def test_an_edit_that_reinstates_a_flagged_note_re_anchors_it(repo: Path, tmp_path: Path) -> None:
    lock = short_of(repo, LOCK_NOTE)
    (repo / "src" / "lock.py").write_text("LOCK = 2\n")
    qem(repo, "anchors", "check", "--flag", code=1)
    mine = tmp_path / "mine.md"
    qem(repo, "checkout", "--path", str(mine))
    edited = [line for line in mine.read_text().split("\n")]
    at = next(i for i, line in enumerate(edited) if f"[#{lock}]" in line)
    start = edited[at].index("STALE")
    end = edited[at].index(") · ", start) + len(") · ")
    edited[at] = edited[at][:start] + edited[at][end:]
    mine.write_text("\n".join(edited))
    git(repo, "add", "src/lock.py")  # a reinstatement confirms what the next commit carries
    done = qem(repo, "checkin", "--path", str(mine), "-m", "confirmed", "--yes", code=None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert note(repo, lock)["state"] == "active"
    assert note(repo, lock)["anchors"][0]["oid"] == git(repo, "hash-object", "src/lock.py").stdout.strip()
    assert "no anchor drifted" in qem(repo, "anchors", "check").stdout


# -- the hook, through the pre-commit framework ----------------------------------------------------


HOOKS = ("qem-anchors", "qem-export-check", "qem-verify")


@pytest.fixture
def hooked(repo: Path, tmp_path: Path) -> tuple[Path, Path, dict]:
    """The repository with the manifest's anchor hook and the checking hooks installed
    through pre-commit, pushed to a bare origin."""
    env = {"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    (repo / ".pre-commit-config.yaml").write_text(local_hooks(*HOOKS), "utf-8")
    git(repo, "add", ".pre-commit-config.yaml")
    git(repo, "commit", "-q", "-m", "hooks")
    installed = pre_commit("install", cwd=repo, env={**os.environ, **env})
    assert installed.returncode == 0, installed.stdout + installed.stderr
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    return repo, origin, env


def fresh_clone(origin: Path, name: str) -> Path:
    fresh = origin.parent / name
    git(origin.parent, "clone", "-q", str(origin), str(fresh))
    qem(fresh, "export", "--check")
    qem(fresh, "verify")
    return fresh


COMMIT_HABITS = {"commit -am": [["commit", "-am", "change the lock"]],
                 "add, commit": [["add", "src/lock.py"], ["commit", "-m", "change the lock"]]}


@pytest.mark.parametrize("habit", list(COMMIT_HABITS))
def test_the_hook_flags_in_the_commit_that_changed_the_code(hooked, habit: str) -> None:
    repo, origin, env = hooked
    (repo / "src" / "lock.py").write_text("LOCK = 2\n")
    steps = COMMIT_HABITS[habit]
    for step in steps[:-1]:
        git(repo, *step, env=env)
    first = git(repo, *steps[-1], check=False, env=env)
    assert first.returncode != 0 and "flagged stale" in first.stdout + first.stderr, first.stdout + first.stderr
    second = git(repo, *steps[-1], check=False, env=env)  # the same command again
    assert second.returncode == 0, second.stdout + second.stderr
    assert git(repo, "status", "--porcelain").stdout == ""
    git(repo, "push", "-q", "origin", "HEAD:main")
    fresh = fresh_clone(origin, f"fresh-{len(list(origin.parent.glob('fresh-*')))}")
    seen = note(fresh, short_of(fresh, LOCK_NOTE))
    assert seen["state"] == "stale" and "anchor src/lock.py changed" in seen["state_reason"]
    assert "STALE" in next(line for line in (fresh / "MEMORY.md").read_text().split("\n") if LOCK_NOTE in line)


def test_a_commit_of_named_paths_carries_its_flags_when_it_names_the_memory(hooked) -> None:
    """`git commit -- PATHS` (an IDE's commit of one file) commits those paths alone, from
    an index git builds for it: the flags the hook wrote are in .qem and MEMORY.md, so the
    commit made again names them, as any memory write committed that way must
    (docs/SHARING.md).  git then leaves its own index without the flag's file; the next
    commit's hooks refuse until it is staged, naming the command, and nothing is lost."""
    repo, origin, env = hooked
    (repo / "src" / "lock.py").write_text("LOCK = 2\n")
    first = git(repo, "commit", "-m", "change the lock", "--", "src/lock.py", check=False, env=env)
    assert first.returncode != 0 and "flagged stale" in first.stdout + first.stderr
    again = git(repo, "commit", "-m", "change the lock", "--", "src/lock.py", ".qem", "MEMORY.md", check=False, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    (repo / "other.py").write_text("print(1)\n")
    git(repo, "add", "other.py")
    refused = git(repo, "commit", "-m", "more code", check=False, env=env)
    assert refused.returncode != 0 and "git add .qem MEMORY.md" in refused.stdout + refused.stderr
    git(repo, "add", ".qem", "MEMORY.md")
    assert git(repo, "commit", "-m", "more code", check=False, env=env).returncode == 0
    git(repo, "push", "-q", "origin", "HEAD:main")
    fresh = fresh_clone(origin, "fresh")
    assert note(fresh, short_of(fresh, LOCK_NOTE))["state"] == "stale"


def test_the_hook_re_anchors_a_move_flags_a_deletion_and_passes_other_commits(hooked) -> None:
    repo, origin, env = hooked
    (repo / "other.py").write_text("print(1)\n")
    git(repo, "add", "other.py")
    plain = git(repo, "commit", "-m", "code no note is about", env=env, check=False)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "flagged" not in plain.stdout + plain.stderr
    git(repo, "mv", "src/lock.py", "src/locking.py")
    moved = git(repo, "commit", "-m", "rename", env=env, check=False)
    assert moved.returncode != 0 and "re-anchored" in moved.stdout + moved.stderr
    assert git(repo, "commit", "-m", "rename", env=env, check=False).returncode == 0
    git(repo, "rm", "-q", "-r", "src/daemon")
    deleted = git(repo, "commit", "-m", "no daemon", env=env, check=False)
    assert deleted.returncode != 0 and "flagged stale" in deleted.stdout + deleted.stderr
    assert git(repo, "commit", "-m", "no daemon", env=env, check=False).returncode == 0
    git(repo, "push", "-q", "origin", "HEAD:main")
    fresh = fresh_clone(origin, "fresh")
    lock = note(fresh, short_of(fresh, LOCK_NOTE))
    assert lock["state"] == "active" and [a["path"] for a in lock["anchors"]] == ["src/locking.py"]
    daemon = note(fresh, short_of(fresh, "The daemon restarts on SIGHUP"))
    assert daemon["state"] == "stale" and "src/daemon was deleted" in daemon["state_reason"]


def test_two_branches_flagging_the_same_change_merge_as_agreement(hooked, tmp_path: Path) -> None:
    repo, origin, env = hooked
    git(repo, "push", "-q", "origin", "HEAD:main")
    bob = tmp_path / "bob"
    git(tmp_path, "clone", "-q", str(origin), str(bob))
    assert pre_commit("install", cwd=bob, env={**os.environ, **env}).returncode == 0
    for clone in (repo, bob):
        (clone / "src" / "lock.py").write_text("LOCK = 2\n")
        assert git(clone, "commit", "-am", "the same fix", env=env, check=False).returncode != 0
        assert git(clone, "commit", "-am", "the same fix", env=env, check=False).returncode == 0
    git(bob, "push", "-q", "origin", "HEAD:main")
    pulled = git(repo, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main", check=False, env=env)
    if pulled.returncode != 0:  # MEMORY.md conflicted: qem renders it again
        qem(repo, "export")
        git(repo, "add", "MEMORY.md")
        assert git(repo, "commit", "-q", "--no-edit", env=env, check=False).returncode == 0
    lock = note(repo, short_of(repo, LOCK_NOTE))
    assert lock["state"] == "stale" and lock["rivals"] == []
    assert len([e for e in events_of(repo, lock["short"]) if e["type"] == "stale_flagged"]) == 2
    assert "DISPUTED" not in (repo / "MEMORY.md").read_text()
    qem(repo, "verify", "--fail-on-disputes")


# -- untrusted: another clone's drift record ---------------------------------------------------------


BAD_DRIFT = {
    "not a list": "src/lock.py",
    "empty": [],
    "no was": [{"path": "src/lock.py", "now": None}],
    "bad oid": [{"path": "src/lock.py", "was": "xyz", "now": None}],
    "path out of the tree": [{"path": "../etc/passwd", "was": "a" * 40, "now": None}],
}


@pytest.mark.parametrize("case", BAD_DRIFT, ids=list(BAD_DRIFT))
def test_a_clone_s_malformed_drift_record_is_set_aside_and_named(repo: Path, case: str) -> None:
    memory = repo / ".qem"
    name = planted_created(memory, "Mallory's note", "task")
    note_id = name.split("/")[1]
    event = canonical({"v": 1, "type": "stale_flagged", "note": note_id, "at": "2026-07-27T10:00:01Z",
                       "actor": "mallory", "reason": "drift", "checkin": None, "clock": 8, "prev": [note_id],
                       "data": {"drift": BAD_DRIFT[case]}})
    (memory / "events" / ids.content_id(event)).write_bytes(event)
    failed = qem(repo, "verify", code=1)
    assert ids.content_id(event) in failed.stdout + failed.stderr and "drift" in failed.stdout + failed.stderr
    assert note(repo, note_id[:8])["state"] == "active"  # the flag never applied


def test_an_anchor_through_a_link_is_never_followed(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the repository's\n")
    os.symlink(outside, repo / "linked")
    tree = WorkTree(repo.resolve(), True)
    assert worktree_oid(tree, "linked/secret.txt") is None
    planted_created(repo / ".qem", "About a file beyond a link", "task",
                    anchors=[{"path": "linked/secret.txt", "oid": "a" * 40}])
    report = json.loads(qem(repo, "anchors", "check", "--json", code=1).stdout)
    [found] = [n for n in report["notes"] if n["text"] == "About a file beyond a link"]
    assert found["drift"][0]["now"] is None  # read as absent, never through the link


FORGED = {
    "anchors on a promotion": ("promoted", {"from": "agent", "anchors": [{"path": "README", "oid": "0" * 40}]}),
    "a re-anchoring that drops every anchor": ("anchored", {"anchors": [], "moved": [{"from": "nowhere.py",
                                                                                     "to": "README"}]}),
    "a re-anchoring to a path it already holds": ("anchored", {"anchors": [{"path": "src/lock.py", "oid": "OID"}],
                                                               "moved": [{"from": "src/lock.py", "to": "src/lock.py"}]}),
    "a reinstatement anchoring a new path": ("reinstated", {"anchors": [{"path": "README", "oid": "0" * 40}]}),
    "a drift flag on a path the note does not hold": ("stale_flagged", {"drift": [{"path": "README", "was": "0" * 40,
                                                                                   "now": "1" * 40}]}),
    "a drift flag whose content did not change": ("stale_flagged", {"drift": [{"path": "src/lock.py", "was": "OID",
                                                                               "now": "OID"}]}),
}


@pytest.mark.parametrize("case", FORGED, ids=list(FORGED))
def test_a_clone_s_event_doing_what_no_write_does_changes_nothing(repo: Path, case: str) -> None:
    """An event a hand wrote, asking what no qem write asks: set aside or not applied,
    named by verify; the note keeps its anchors and its state."""
    type_, data = FORGED[case]
    if type_ == "reinstated":  # (a reinstatement follows a flag)
        qem(repo, "flag-stale", short_of(repo, LOCK_NOTE), "-m", "under review")
    lock = note(repo, short_of(repo, LOCK_NOTE))
    later = events_of(repo, lock["short"])  # (the created event names no note: it is the note)
    tip = later[-1]["id"] if later else lock["id"]
    data = json.loads(json.dumps(data).replace("OID", lock["anchors"][0]["oid"]))
    event = canonical({"v": 1, "type": type_, "note": lock["id"], "at": "2026-07-27T10:00:01Z", "actor": "mallory",
                       "reason": "forged", "checkin": None, "clock": 99, "prev": [tip], "data": data})
    (repo / ".qem" / "events" / ids.content_id(event)).write_bytes(event)
    failed = qem(repo, "verify", code=1)
    assert ids.content_id(event)[:8] in failed.stdout + failed.stderr
    after = note(repo, lock["short"])
    assert (after["anchors"], after["state"], after["provenance"]) == (lock["anchors"], lock["state"],
                                                                      lock["provenance"])


def test_an_identical_file_already_there_is_no_move(repo: Path) -> None:
    (repo / "src" / "empty.py").write_text("")
    (repo / "src" / "daemon" / "empty.py").write_text("")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two empty files")
    qem(repo, "add", "empty.py stays empty", "--kind", "gotcha", "--anchor", "src/empty.py")
    git(repo, "commit", "-q", "--no-verify", "-m", "the note")
    git(repo, "rm", "-q", "src/empty.py")
    [found] = json.loads(qem(repo, "anchors", "check", "--staged", "--json", code=1).stdout)["notes"]
    assert found["drift"][0]["what"] == "deleted"  # not "moved to src/daemon/empty.py", its twin


def test_the_rendering_is_no_anchor_and_rev_names_a_commit(repo: Path) -> None:
    refused = qem(repo, "add", "about the rendering", "--kind", "finding", "--anchor", "MEMORY.md", code=2)
    assert "the memory's own rendering" in refused.stderr
    for bad in ("HEAD:src", "--all", "no-such"):
        assert "not a commit" in qem(repo, "anchors", "check", "--rev", bad, code=2).stderr
    assert "only lists" in qem(repo, "anchors", "check", "--rev", "HEAD", "--flag", code=2).stderr


def test_a_flag_another_writer_made_first_is_not_reported_as_drift_left(repo: Path) -> None:
    """Two `--flag` runs at once: the one that finds the notes flagged under the write lock
    writes nothing, lists nothing, and exits 0."""
    from qem_edit.reads import drift
    from qem_edit.shells.opening import open_memory
    from qem_edit.writes import acts

    (repo / "src" / "lock.py").write_text("LOCK = 2\n")
    place, store, _ = open_memory(repo, None, write=True, create=False)
    with store:
        late = drift.check(store, drift.tree_of(place), drift.WORK_TREE)
        assert len(late.notes) == 1
        qem(repo, "anchors", "check", "--flag", code=1)  # the other writer, first
        store.sync()
        late = acts.flag_drift(store, place, late, "late")
    assert (late.notes, late.flagged, late.exit_code) == ([], [], 0)
    assert len([e for e in events_of(repo, short_of(repo, LOCK_NOTE)) if e["type"] == "stale_flagged"]) == 1


def test_a_file_git_stores_converted_has_the_id_git_stores(repo: Path) -> None:
    """Line endings converted on checkout (or LFS, or a clean filter): the anchor records
    the blob `git add` stores, so the work tree, git's index and a commit agree, and a
    fresh checkout is no drift."""
    (repo / ".gitattributes").write_text("*.txt text eol=crlf\n")
    (repo / "src" / "notes.txt").write_bytes(b"one\ntwo\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "text files checked out with CRLF")
    (repo / "src" / "notes.txt").unlink()
    git(repo, "checkout", "--", "src/notes.txt")
    assert (repo / "src" / "notes.txt").read_bytes() == b"one\r\ntwo\r\n"
    qem(repo, "add", "notes.txt has two lines", "--kind", "finding", "--anchor", "src/notes.txt", "--anchor", "src")
    anchors = dict((a["path"], a["oid"]) for a in note(repo, short_of(repo, "notes.txt has two lines"))["anchors"])
    assert anchors["src/notes.txt"] == git(repo, "ls-files", "-s", "src/notes.txt").stdout.split()[1]
    assert "no anchor drifted" in qem(repo, "anchors", "check").stdout
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", "the note")
    assert anchors["src"] == git(repo, "rev-parse", "HEAD:src").stdout.strip()
    assert json.loads(qem(repo, "anchors", "check", "--rev", "HEAD", "--json").stdout)["notes"] == []


def test_a_commit_lacking_what_its_new_note_is_about_is_refused(hooked) -> None:
    """A note anchored to a file the commit does not carry (never staged, or staged
    otherwise) would drift in every fresh clone: the hook refuses the commit, naming the
    note and the `git add` that completes it, and flags nothing."""
    repo, origin, env = hooked
    (repo / "src" / "retry.py").write_text("RETRIES = 3\n")
    qem(repo, "add", "Retries stop at three", "--kind", "decision", "--anchor", "src/retry.py")
    refused = git(repo, "commit", "-m", "the decision", env=env, check=False)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "does not carry" in said and "git add src/retry.py" in said
    assert "flagged" not in said and note(repo, short_of(repo, "Retries stop at three"))["state"] == "active"
    git(repo, "add", "src/retry.py")
    done = git(repo, "commit", "-m", "the decision", env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    git(repo, "push", "-q", "origin", "HEAD:main")
    qem(fresh_clone(origin, "fresh"), "verify", "--fail-on-drift")
