"""`qem verify --staged` (the qem-verify commit hook) on a commit that touches no memory
answers from git's index and the seal of the last clean verify, without replaying the log;
its answer is the full check's, and any commit that touches the memory's folder, MEMORY.md
or an anchored path (or a memory not sealed as it stands) gets the full check.

Real git and real `qem` processes; the full check's answer is the same command's with the
seal removed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_qem
from test_precommit import git, git_env

from qem_edit.mirror import verify
from qem_edit.mirror.staged import VERIFIED, verify_staged
from qem_edit.storage.store import Store
from qem_edit.system import gitrepo, gitspawn
from qem_edit.system.workspace import COMMITS_NAME, resolve

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A repository with code, a memory (a note anchored to src/a.py, a task) and its
    MEMORY.md, all committed, verified once (so sealed)."""
    (tmp_path / "home").mkdir()
    env = git_env(tmp_path / "home")
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.py").write_text("a = 1\n")
    (work / "other.py").write_text("b = 2\n")
    git("init", "-q", "-b", "main", cwd=work, env=env)
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "code", cwd=work, env=env)
    assert qem(work, env, "add", "a is set once", "--kind", "gotcha", "--anchor", "src/a.py").returncode == 0
    assert qem(work, env, "add", "tidy the build", "--kind", "task").returncode == 0
    assert qem(work, env, "export").returncode == 0
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "the memory", "--no-verify", cwd=work, env=env)
    first = qem(work, env, "verify", "--staged")
    assert first.returncode == 0, first.stderr
    assert (work / ".qem" / VERIFIED).is_file()
    return work, env


def qem(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return run_qem(*args, cwd=work, env=env, timeout=120)


def answers(work: Path, env: dict[str, str]) -> list[tuple[int, str, str]]:
    """`verify --staged`, as text and as JSON: exit status, stdout, stderr."""
    found = []
    for extra in ((), ("--json",), ("--fail-on-drift",)):
        done = qem(work, env, "verify", "--staged", *extra)
        found.append((done.returncode, done.stdout, done.stderr))
    return found


def full(work: Path, env: dict[str, str]) -> list[tuple[int, str, str]]:
    """The full check's answers: the same commands with no seal to go by."""
    for name in (VERIFIED, COMMITS_NAME):  # (and no answer kept: qem_edit.mirror.answered)
        (work / ".qem" / name).unlink(missing_ok=True)
    out = answers(work, env)
    for name in (VERIFIED, COMMITS_NAME):
        (work / ".qem" / name).unlink(missing_ok=True)
    return out


def replayed(work: Path, monkeypatch) -> bool:  # type: ignore[no-untyped-def]
    """Whether `verify --staged`, run here in this process, runs the full check."""
    ran = []

    def full_check(*args, **kwargs):  # type: ignore[no-untyped-def]
        ran.append(True)
        return real(*args, **kwargs)

    real = verify.verify_report
    monkeypatch.setattr(verify, "verify_report", full_check)
    monkeypatch.chdir(work)
    place = resolve(work, None)
    with Store.open(place.store_path) as store:
        verify_staged(store, place)
    monkeypatch.setattr(verify, "verify_report", real)
    return bool(ran)


def test_a_commit_touching_no_memory_is_answered_without_the_replay(repo, monkeypatch) -> None:
    work, env = repo
    (work / "other.py").write_text("b = 3\n")
    git("add", "other.py", cwd=work, env=env)
    sealed = answers(work, env)
    assert not replayed(work, monkeypatch)
    assert sealed[0] == (0, "", "ok: the log replays cleanly to 2 notes\n")
    assert sealed == full(work, env)


def test_files_whose_times_changed_and_not_their_bytes_keep_the_seal(repo, monkeypatch) -> None:
    """A log file and the anchored file touched, their bytes as committed (a checkout, a
    copy that kept no times): git's status, which the sealed answer asks where a note is
    anchored, compares their bytes and finds them unchanged, so the answer comes from the
    seal (diff-files, asked before, listed them by their times, and the log was replayed:
    10 s at 74,900 notes); the same answer as the full check's."""
    work, env = repo
    (work / "other.py").write_text("b = 3\n")
    git("add", "other.py", cwd=work, env=env)
    for path in (*sorted((work / ".qem" / "events").iterdir())[:1], work / "src" / "a.py"):
        later = path.stat().st_mtime + 100
        os.utime(path, (later, later))
    assert gitrepo._names(subprocess.run(["git", "diff-files", "--name-only", "-z"], cwd=work, env=env,
                                         capture_output=True, check=True).stdout)  # (listed by their times)
    sealed = answers(work, env)
    assert not replayed(work, monkeypatch)
    assert sealed[0] == (0, "", "ok: the log replays cleanly to 2 notes\n")
    assert sealed == full(work, env)


def test_a_listing_git_cannot_make_fails_the_hook_and_is_never_read_as_no_change(repo) -> None:
    """A submodule whose git folder is gone (a superproject moved, `.git/modules` cleaned by
    hand): git cannot say which files changed (status and diff-files both fail). The anchored
    file's change is then never trusted to git's index: `verify --staged` fails, naming what
    git could not list and why, with the seal and without it (it said the log was clean and
    left the drift unreported, before)."""
    work, env = repo
    sub = work.parent / "sub"
    git("init", "-q", "-b", "main", str(sub), cwd=work.parent, env=env)
    (sub / "s.txt").write_text("s\n")
    git("add", "-A", cwd=sub, env=env)
    git("commit", "-qm", "sub", cwd=sub, env=env)
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "lib/sub", cwd=work, env=env)
    git("commit", "-qm", "the submodule", "--no-verify", cwd=work, env=env)
    assert qem(work, env, "verify", "--staged").returncode == 0  # (sealed again, the submodule in)
    (work / "src" / "a.py").write_text("a = 2\n")  # drift, left unstaged
    (work / "other.py").write_text("b = 3\n")
    git("add", "other.py", cwd=work, env=env)
    shutil.move(work / ".git" / "modules" / "lib" / "sub", work.parent / "moved")
    for seal in (True, False):
        if not seal:
            for name in (VERIFIED, COMMITS_NAME):
                (work / ".qem" / name).unlink(missing_ok=True)
        done = qem(work, env, "verify", "--staged", "--fail-on-drift")
        assert done.returncode == 2, (seal, done.stdout, done.stderr)
        assert "cannot list the files whose work tree differs from git's index: git says:" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_drift_in_the_work_tree_is_still_listed_from_the_seal(repo, monkeypatch) -> None:
    """The commit does not carry the anchored file's change (unstaged): the fast answer
    still lists the work tree's drift, as the full check does, and fails on it when asked."""
    work, env = repo
    (work / "src" / "a.py").write_text("a = 2\n")
    (work / "other.py").write_text("b = 3\n")
    git("add", "other.py", cwd=work, env=env)
    sealed = answers(work, env)
    rounds: list[int] = []  # git's rounds, each by how many commands it starts side by side
    real = gitspawn.run_together
    monkeypatch.setattr(gitspawn, "run_together", lambda cwd, asks, *a: rounds.append(len(asks)) or real(cwd, asks, *a))
    assert not replayed(work, monkeypatch)
    # one round of three: the top, git's index and one status (the commit's files and the
    # work tree drift reads); then the changed anchored file, hashed as git hashes it
    assert rounds == [3, 1]
    assert "src/a.py" in sealed[0][1] and sealed[2][0] == 1
    assert sealed == full(work, env)


def test_a_hostile_file_staged_under_the_memory_gets_the_full_check(repo, monkeypatch) -> None:
    work, env = repo
    (work / ".qem" / "events" / "zz").write_bytes(b"\x00not an event\n")
    git("add", "-f", ".qem/events/zz", cwd=work, env=env)
    sealed = answers(work, env)
    assert replayed(work, monkeypatch)
    assert sealed[0][0] == 1 and "zz" in sealed[0][1]
    assert sealed == full(work, env)


def test_a_staged_change_to_an_anchored_path_gets_the_full_check(repo, monkeypatch) -> None:
    work, env = repo
    (work / "src" / "a.py").write_text("a = 2\n")
    git("add", "src/a.py", cwd=work, env=env)
    sealed = answers(work, env)
    assert replayed(work, monkeypatch)
    assert "src/a.py" in sealed[0][1]
    assert sealed == full(work, env)


def test_a_staged_mirror_gets_the_full_check(repo, monkeypatch) -> None:
    work, env = repo
    mirror = work / "MEMORY.md"
    mirror.write_text(mirror.read_text() + "\n- a line by hand\n")
    git("add", "MEMORY.md", cwd=work, env=env)
    sealed = answers(work, env)
    assert replayed(work, monkeypatch)
    assert sealed[0][0] == 1
    assert sealed == full(work, env)


def test_a_commit_that_removes_events_head_holds_gets_the_full_check(repo, monkeypatch) -> None:
    """The memory as staged was sealed clean (against a HEAD that held the same memory);
    HEAD then moves back to a commit holding a note the staged log lacks (`git reset
    --soft`): the commit removes it, which only the full check can name."""
    work, env = repo
    git("rm", "-q", "MEMORY.md", cwd=work, env=env)  # (else the commit changes MEMORY.md too)
    git("commit", "-qm", "no mirror", "--no-verify", cwd=work, env=env)
    before = git("rev-parse", "HEAD", cwd=work, env=env).stdout.strip()
    assert qem(work, env, "add", "a note to take away", "--kind", "task").returncode == 0
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "a third note", "--no-verify", cwd=work, env=env)
    with_it = git("rev-parse", "HEAD", cwd=work, env=env).stdout.strip()
    git("reset", "-q", "--hard", before, cwd=work, env=env)
    assert qem(work, env, "verify", "--staged").returncode == 0  # the memory of `before`, sealed
    git("reset", "-q", "--soft", with_it, cwd=work, env=env)
    assert git("diff", "--cached", "--name-only", cwd=work, env=env).stdout.startswith(".qem/")
    sealed = answers(work, env)
    assert replayed(work, monkeypatch)
    assert "a note to take away" in sealed[0][1]
    assert sealed == full(work, env)


def test_an_untracked_log_file_is_not_sealed(repo, monkeypatch) -> None:
    """A note written and not staged: the work tree's log is not the commit's, so no seal
    vouches for it and the full check runs."""
    work, env = repo
    settings = work / ".qem" / "config.toml"
    settings.write_text(settings.read_text() + "\n[git]\nstage = false\n")
    git("commit", "-qam", "stage nothing", "--no-verify", cwd=work, env=env)
    qem(work, env, "verify", "--staged")
    assert qem(work, env, "add", "not staged", "--kind", "task").returncode == 0
    (work / "other.py").write_text("b = 3\n")
    git("add", "other.py", cwd=work, env=env)
    sealed = answers(work, env)
    assert replayed(work, monkeypatch)
    assert sealed == full(work, env)


def test_a_bad_memory_committed_without_the_hook_still_fails_a_commit_touching_no_memory(repo, monkeypatch) -> None:
    """HEAD holds a hostile log file (committed with --no-verify): no clean verify sealed
    that memory, so a later commit of code alone gets the full check, and fails."""
    work, env = repo
    (work / ".qem" / "events" / "zz").write_bytes(b"\x00not an event\n")
    git("add", "-f", ".qem/events/zz", cwd=work, env=env)
    git("commit", "-qm", "a bad file", "--no-verify", cwd=work, env=env)
    (work / "other.py").write_text("b = 3\n")
    git("add", "other.py", cwd=work, env=env)
    sealed = answers(work, env)
    assert replayed(work, monkeypatch)
    assert sealed[0][0] == 1 and "zz" in sealed[0][1]
    assert sealed == full(work, env)


def test_a_request_gone_late_is_listed_from_the_seal_as_by_the_full_check(repo, monkeypatch) -> None:
    """Lateness moves with the clock, not with the files: the sealed answer reads it now."""
    work, env = repo
    then = {**env, "QEM_NOW": "2026-01-01T00:00:00Z"}
    assert qem(work, then, "add", "review the lock order", "--kind", "task", "--to", "ana",
               "--due", "2026-01-02").returncode == 0
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "a request", "--no-verify", cwd=work, env=env)
    assert qem(work, env, "verify", "--staged").returncode == 0  # sealed, the request late already
    (work / "other.py").write_text("b = 3\n")
    git("add", "other.py", cwd=work, env=env)
    later = {**env, "QEM_NOW": "2026-12-01T12:00:00Z"}  # (one clock for both: "LATE 333d 12h" is read to the minute)
    sealed = answers(work, later)
    failing = qem(work, later, "verify", "--staged", "--fail-on-late")
    assert not replayed(work, monkeypatch)
    assert "late: " in sealed[0][1] and failing.returncode == 1
    assert sealed == full(work, later)


def test_a_top_the_files_misname_is_asked_of_git_and_answered_alike(tmp_path: Path, monkeypatch) -> None:
    """The sealed check asks git its questions in one round, of the top the files name
    (the nearest `.git`); where git names another (a `.git` folder git does not take for a
    repository, as an empty one), they are asked again of git's top, in turn: the same
    answer as the full check, still without the replay."""
    (tmp_path / "home").mkdir()
    env = git_env(tmp_path / "home")
    work = tmp_path / "work"
    app = work / "app"
    (app / ".git").mkdir(parents=True)  # not a repository: git looks above it
    (work / "other.py").write_text("b = 2\n")
    git("init", "-q", "-b", "main", cwd=work, env=env)
    assert qem(app, env, "add", "tidy the build", "--kind", "task").returncode == 0
    assert qem(app, env, "export").returncode == 0
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "the memory", "--no-verify", cwd=work, env=env)
    assert git("ls-files", cwd=work, env=env).stdout.count("app/.qem/") > 1
    assert qem(app, env, "verify", "--staged").returncode == 0 and (app / ".qem" / VERIFIED).is_file()
    (work / "other.py").write_text("b = 3\n")
    git("add", "other.py", cwd=work, env=env)
    rounds = []
    real = gitrepo.commit_round
    monkeypatch.setattr(gitrepo, "commit_round", lambda *a: rounds.append(real(*a)) or rounds[-1])
    assert not replayed(app, monkeypatch)
    assert rounds == [None]  # (git named another top: asked in turn)
    sealed = answers(app, env)
    assert sealed[0] == (0, "", "ok: the log replays cleanly to 1 note\n")
    assert sealed == full(app, env)


@pytest.mark.parametrize("name", ["work ", "wo\nrk", "work\n", os.fsdecode(b"wo\xffrk")],
                         ids=["space", "line break", "line break at the end", "not UTF-8"])
def test_a_work_tree_named_oddly_is_written_exported_and_verified(tmp_path: Path, monkeypatch, name: str) -> None:
    """A work tree's top named with a space at its end, a line break inside, or a byte that
    is not UTF-8: `qem add` writes (a space gave a traceback: the top git printed was
    stripped of it), `qem export` writes MEMORY.md (a name not UTF-8 gave a traceback: the
    index's note of MEMORY.md's file held it, which SQLite cannot store), and `verify
    --staged` is answered from its seal as anywhere."""
    (tmp_path / "home").mkdir()
    env = git_env(tmp_path / "home")
    work = tmp_path / name
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work, env=env)
    added = qem(work, env, "add", "tidy the build", "--kind", "task")
    assert added.returncode == 0, added.stderr
    exported = qem(work, env, "export")
    assert exported.returncode == 0 and (work / "MEMORY.md").is_file(), exported.stderr
    assert qem(work, env, "export", "--check").returncode == 0
    with Store.open(work / ".qem") as store:  # what the index notes of MEMORY.md's file: a UTF-8 name as it is
        noted = store.remembered("mirror_stat")
    assert noted.endswith(f" {work / 'MEMORY.md'}" if name.isprintable() or "\n" in name
                          else f" {tmp_path}/wo\\xffrk/MEMORY.md"), noted
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "the memory", "--no-verify", cwd=work, env=env)
    assert qem(work, env, "verify", "--staged").returncode == 0 and (work / ".qem" / VERIFIED).is_file()
    (work / "other.py").write_text("b = 3\n")
    git("add", "other.py", cwd=work, env=env)
    assert not replayed(work, monkeypatch)
    sealed = answers(work, env)
    assert sealed[0] == (0, "", "ok: the log replays cleanly to 1 note\n")
    assert sealed == full(work, env)


def test_a_work_tree_named_beyond_ascii_under_an_ascii_locale_is_written_and_verified(tmp_path: Path) -> None:
    """Where Python names files in ASCII (`LC_ALL=C`, no UTF-8 mode), what git prints of the
    top is read as the file system names it: `qem add` in `wörk` gave a traceback (the name
    read as UTF-8 could not be named back in ASCII)."""
    (tmp_path / "home").mkdir()
    env = {**git_env(tmp_path / "home"), "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    work = tmp_path / "wörk"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work, env=env)
    for argv in (("add", "tidy the build", "--kind", "task"), ("export",), ("export", "--check")):
        done = qem(work, env, *argv)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (argv, done.stderr)
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "the memory", "--no-verify", cwd=work, env=env)
    done = qem(work, env, "verify", "--staged")
    assert done.returncode == 0 and done.stderr == "ok: the log replays cleanly to 1 note\n", done.stderr


def test_a_seal_of_another_form_is_checked_in_full_and_sealed_anew(repo, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The seal is what a clean verify vouches for, written out whole and compared as it is
    (no hashing module loaded on a commit); one written otherwise (the digest an earlier
    version kept, or any other bytes) is no seal: the check runs in full, answers as the
    full check does, and seals again, which the next commit goes by."""
    work, env = repo
    (work / "other.py").write_text("b = 3\n")
    git("add", "other.py", cwd=work, env=env)
    sealed = (work / ".qem" / VERIFIED).read_bytes()
    assert sealed.startswith(b"qem-seal 2\n") and b" .qem/config.toml\n" in sealed
    cut = sealed[:sealed.rindex(b"\n", 0, len(sealed) - 1) + 1]  # (its last file's line gone, cut at a line's end)
    for other in (b"2f7b6c1998c402bda8b7d837c48340ba5bee9acb8c8fcaf7e6e6976bc78464f9\n", sealed[:-1], cut, b""):
        (work / ".qem" / VERIFIED).write_bytes(other)
        (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
        assert replayed(work, monkeypatch)
        assert (work / ".qem" / VERIFIED).read_bytes() == sealed
        (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
        assert not replayed(work, monkeypatch)
    assert answers(work, env) == full(work, env)
