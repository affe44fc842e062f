"""git started without the subprocess module (qem_edit.system.gitspawn): every answer the
same as subprocess gives, both streams and the input side by side, a time limit, a Ctrl-C,
a missing git or folder, nothing left open or unwaited; and the commit hooks' three
questions asked at once answering as the three asked in turn (gitrepo.commit_files)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from qem_edit.base import errors
from qem_edit.system import gitrepo, gitspawn

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not gitspawn.SPAWNS, reason="needs git and posix_spawn")

ENV = {**gitspawn.base_env(), "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
SLEEP = ["-c", "alias.nap=!sleep 5", "nap"]  # a git that runs long (its shell sleeps)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, env=ENV, check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / "é b.txt").write_text("two\n")
    git("add", "-A")
    git("commit", "-qm", "first")
    (tmp_path / "a.txt").write_text("changed\n")
    (tmp_path / "c.txt").write_text("new\n")
    git("add", "c.txt")
    return tmp_path


def fds() -> list[str]:
    return sorted(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else []


def no_child_left() -> bool:
    """Whether this process has no child, running or unwaited."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


ASKS = [
    (["rev-parse", "--show-toplevel", "--show-object-format"], None),
    (["status", "--porcelain=v2", "-z"], None),
    (["nonsense-command"], None),  # git's own refusal, on stderr, exit 1
    (["cat-file", "-p", "no-such-object"], None),  # exit 128
    (["hash-object", "--stdin"], b"x" * 3_000_000),  # input far past a pipe's buffer
    (["hash-object", "--stdin"], None),  # nothing given: it reads an empty input, never this process's
    (["cat-file", "--batch"], b"HEAD:a.txt\n" + b"%s\n" % (b"0" * 120) * 3_000),  # input and output past a pipe's buffer at once
    (["ls-files", "-s", "-z"], None),
    (["log", "--format=%H %s%n%b", "-z"], None),
    (["diff", "--cached", "--name-only", "-z", "HEAD"], None),
]


@pytest.mark.parametrize("args, given", ASKS, ids=[" ".join(a[:2]) for a, _ in ASKS])
def test_an_answer_is_what_subprocess_gives(repo: Path, args: list[str], given: bytes | None) -> None:
    before = fds()
    ran = gitspawn.run(str(repo), args, ENV, input=given)
    done = subprocess.run(["git", *args], cwd=repo, env=ENV, capture_output=True,
                          input=given if given is not None else b"")
    assert (ran.returncode, ran.stdout, ran.stderr) == (done.returncode, done.stdout, done.stderr)
    assert fds() == before and no_child_left()


def test_asked_together_each_answers_as_asked_alone(repo: Path) -> None:
    asks = [args for args, given in ASKS if given is None]
    together = gitspawn.run_together(str(repo), asks, ENV)
    alone = [gitspawn.run(str(repo), args, ENV) for args in asks]
    assert [(r.returncode, r.stdout, r.stderr) for r in together] == [(r.returncode, r.stdout, r.stderr) for r in alone]
    assert no_child_left()


def test_a_git_past_its_time_is_killed_and_waited_for(repo: Path) -> None:
    before = fds()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        gitspawn.run_together(str(repo), [["rev-parse", "HEAD"], SLEEP, SLEEP], ENV, timeout=0.3)
    assert time.monotonic() - started < 3
    assert fds() == before and no_child_left()
    with pytest.raises(errors.BadInput, match="timed out after"):  # as gitrepo says it
        old = gitrepo.TIMEOUT_S
        try:
            gitrepo.TIMEOUT_S = 0.3
            gitrepo._git(repo, *SLEEP)
        finally:
            gitrepo.TIMEOUT_S = old


def test_a_ctrl_c_while_git_runs_kills_it(repo: Path) -> None:
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    before = fds()
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            gitspawn.run_together(str(repo), [SLEEP, ["status"]], ENV)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert fds() == before and no_child_left()


def test_a_missing_folder_or_git_is_said_as_subprocess_said_it(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FileNotFoundError) as gone:
        gitspawn.run(str(repo / "gone"), ["status"], ENV)
    assert gone.value.filename == str(repo / "gone")
    with pytest.raises(errors.BadInput, match="cannot run git"):
        gitrepo._git(repo / "gone", "status")
    assert not gitrepo.missing()  # (a folder that is not there is not a git that is not there)
    monkeypatch.setenv("PATH", str(repo))  # (posix_spawnp searches this process's PATH)
    monkeypatch.setattr(gitrepo, "_missing", [])
    with pytest.raises(FileNotFoundError) as none:
        gitspawn.run(str(repo), ["status"], ENV)
    assert none.value.filename == "git"
    with pytest.raises(errors.BadInput, match="cannot run git"):
        gitrepo._git(repo, "status")
    assert gitrepo.missing()


def test_without_posix_spawn_git_runs_as_before(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where posix_spawn is not there (Windows), gitrepo runs git with subprocess: the same answers."""
    spawned = [gitrepo._git(repo, *args, input=given) for args, given in ASKS]
    monkeypatch.setattr(gitspawn, "SPAWNS", False)
    ran = [gitrepo._git(repo, *args, input=given) for args, given in ASKS]
    assert [(r.returncode, r.stdout, r.stderr) for r in ran] == [(r.returncode, r.stdout, r.stderr) for r in spawned]
    assert gitrepo.commit_files(repo, ".") == (gitrepo.unstaged_files(repo, ["."]), gitrepo.staged_files(repo, ["."]),
                                               gitrepo.staged_changes(repo))


@pytest.mark.parametrize("case", ["changes", "no HEAD yet", "a hook's own index", "no such folder in git"])
def test_the_three_asked_at_once_answer_as_in_turn(repo: Path, case: str, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = "."
    if case == "no HEAD yet":
        repo = tmp_path_factory.mktemp("fresh")
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        (repo / "x.txt").write_text("x\n")
        subprocess.run(["git", "add", "x.txt"], cwd=repo, check=True)
    elif case == "a hook's own index":  # as `git commit -a` gives a hook: another index, staging a.txt too
        index = repo / ".git" / "next-index"
        shutil.copy(repo / ".git" / "index", index)
        subprocess.run(["git", "add", "a.txt"], cwd=repo, check=True, env={**os.environ, "GIT_INDEX_FILE": str(index)})
        monkeypatch.setenv("GIT_INDEX_FILE", str(index))
    elif case == "no such folder in git":
        folder = "nowhere"
    together = gitrepo.commit_files(repo, folder)
    in_turn = (gitrepo.unstaged_files(repo, [folder]), gitrepo.staged_files(repo, [folder]), gitrepo.staged_changes(repo))
    assert together == in_turn
    if case == "a hook's own index":
        assert "a.txt" in together[2] and "a.txt" not in together[0]
    if case == "no HEAD yet":
        assert together[2] == ["x.txt"]
