"""git started without the subprocess module (qem_edit.system.gitspawn): every answer the
same as subprocess gives, both streams and the input side by side, a time limit, a Ctrl-C,
a missing git or folder, nothing left open or unwaited; and the commit hooks' three
questions asked at once answering as the three asked in turn (gitrepo.commit_files)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import no_child_left

from qem_edit.base import errors
from qem_edit.system import gitrepo, gitspawn, workspace

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
    assert time.monotonic() - started < 0.5  # (killed at once: no grace past its time)
    assert fds() == before and no_child_left()
    with pytest.raises(errors.BadInput, match="timed out after"):  # as gitrepo says it
        old = gitrepo.TIMEOUT_S
        try:
            gitrepo.TIMEOUT_S = 0.3
            gitrepo._git(repo, *SLEEP)
        finally:
            gitrepo.TIMEOUT_S = old


def test_a_ctrl_c_while_git_runs_kills_it(repo: Path) -> None:
    """Killed once given its quarter of a second to end on its own (a git that holds on
    here: the Ctrl-C reaches this process alone)."""
    interrupted = []

    def interrupt(signum: int, frame: object) -> None:
        interrupted.append(time.monotonic())
        raise KeyboardInterrupt

    before = fds()
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            gitspawn.run_together(str(repo), [SLEEP, ["status"]], ENV)
        ended = time.monotonic()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert 0.2 <= ended - interrupted[0] < 2
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


def hooks_own_index(repo: Path, monkeypatch: pytest.MonkeyPatch, *staging: str) -> None:
    """As `git commit -a` gives a hook: an index of its own (GIT_INDEX_FILE), staging `staging` too."""
    index = repo / ".git" / "next-index"
    shutil.copy(repo / ".git" / "index", index)
    subprocess.run(["git", "add", *staging], cwd=repo, check=True, env={**os.environ, "GIT_INDEX_FILE": str(index)})
    monkeypatch.setenv("GIT_INDEX_FILE", str(index))


@pytest.mark.parametrize("case", ["changes", "no HEAD yet", "a hook's own index", "no such folder in git"])
def test_the_three_asked_at_once_answer_as_in_turn(repo: Path, case: str, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = "."
    if case == "no HEAD yet":
        repo = tmp_path_factory.mktemp("fresh")
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        (repo / "x.txt").write_text("x\n")
        subprocess.run(["git", "add", "x.txt"], cwd=repo, check=True)
    elif case == "a hook's own index":
        hooks_own_index(repo, monkeypatch, "a.txt")
    elif case == "no such folder in git":
        folder = "nowhere"
    together = gitrepo.commit_files(repo, folder)
    in_turn = (gitrepo.unstaged_files(repo, [folder]), gitrepo.staged_files(repo, [folder]), gitrepo.staged_changes(repo))
    assert together[:2] == in_turn[:2]
    assert together[2] == (None if case == "no HEAD yet" else in_turn[2])  # (no HEAD: the caller asks staged_changes)
    if case == "a hook's own index":
        assert "a.txt" in together[2] and "a.txt" not in together[0]
    if case == "no HEAD yet":
        assert in_turn[2] == ["x.txt"]


@pytest.mark.parametrize("case", ["changes", "a hook's own index", "a broken index", "no git repository"])
def test_the_work_tree_asked_at_once_answers_as_in_turn(repo: Path, case: str, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    """What drift reads of the work tree (git's index, the files changed, the files untracked),
    asked side by side, is what the three asked one after another say; an index git cannot
    read fails alike."""
    (repo / "untracked.txt").write_text("u\n")
    (repo / "é b.txt").write_text("changed too\n")
    subprocess.run(["git", "init", "-q", str(repo / "nested")], check=True)  # (listed as `nested/`: left out)
    (repo / "nested" / "inside.txt").write_text("n\n")
    if case == "a hook's own index":
        hooks_own_index(repo, monkeypatch, "a.txt", "untracked.txt")
    elif case == "a broken index":
        (repo / ".git" / "index").write_bytes(b"DIRC not an index")
    elif case == "no git repository":
        repo = tmp_path_factory.mktemp("plain")
    if case in ("a broken index", "no git repository"):
        with pytest.raises(errors.BadInput) as alone:
            gitrepo.index_entries(repo)
        with pytest.raises(errors.BadInput) as together:
            gitrepo.work_tree_files(repo)
        assert str(together.value) == str(alone.value)
        return
    entries, unstaged, untracked = gitrepo.work_tree_files(repo)
    assert (entries, unstaged, untracked) == (gitrepo.index_entries(repo), gitrepo.unstaged_files(repo, []),
                                             gitrepo.untracked_files(repo))
    staged = {name for _, _, _, name in entries}
    assert ("untracked.txt" in staged) == (case == "a hook's own index") and "é b.txt" in unstaged
    assert untracked == ([] if case == "a hook's own index" else ["untracked.txt"])


def test_a_file_named_head_is_no_revision(repo: Path) -> None:
    """A file at the top named HEAD makes `git diff HEAD` ambiguous without `--`: the
    changes are listed all the same (as the sealed `verify --staged` asks them)."""
    (repo / "HEAD").write_text("a file\n")
    subprocess.run(["git", "add", "HEAD"], cwd=repo, env=ENV, check=True)
    subprocess.run(["git", "commit", "-qm", "head"], cwd=repo, env=ENV, check=True)
    (repo / "HEAD").write_text("changed\n")
    subprocess.run(["git", "add", "HEAD"], cwd=repo, env=ENV, check=True)
    together = gitrepo.commit_files(repo, ".")
    assert together[2] == gitrepo.staged_changes(repo) == ["HEAD"]
    assert gitrepo.changed_paths(repo, "HEAD", None) == {"HEAD", "a.txt"}


def test_no_descriptor_of_this_process_reaches_git(repo: Path) -> None:
    """As subprocess closed them: a pipe this process made inheritable is not held open by
    git, nor by what git runs (an alias's shell here)."""
    read, write = os.pipe()
    os.set_inheritable(write, True)
    try:
        ran = gitspawn.run(str(repo), ["-c", "alias.fds=!ls /proc/$$/fd", "fds"], ENV)
        held = ran.stdout.decode().split()
        assert ran.returncode == 0 and "0" in held and str(write) not in held, held
        started = gitspawn.started(str(repo), ENV, "-c", "alias.fds=!ls /proc/$$/fd", "fds")
        assert str(write) not in (gitspawn.output(started) or b"").decode().split()
    finally:
        os.close(read)
        os.close(write)


def test_a_parent_ignoring_sigchld_still_gets_its_answers(repo: Path) -> None:
    """A process that inherited SIGCHLD ignored cannot wait for git (the system reaps it):
    the answer is taken as exit status 0, as subprocess takes it, and nothing is left open."""
    before = fds()
    old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        ran = gitspawn.run(str(repo), ["rev-parse", "--show-toplevel"], ENV)
        assert ran.returncode == 0 and ran.stdout.decode().strip() == str(repo.resolve())
        assert gitrepo.toplevel(repo) == repo.resolve()
        assert gitspawn.output(gitspawn.started(str(repo), ENV, "rev-parse", "--git-dir")) == b".git\n"
        with pytest.raises(TimeoutError):
            gitspawn.run(str(repo), SLEEP, ENV, timeout=0.2)
    finally:
        signal.signal(signal.SIGCHLD, old)
    assert fds() == before


def test_an_interrupted_git_is_given_time_to_let_go_of_its_locks(tmp_path: Path) -> None:
    """A Ctrl-C at a terminal reaches git as well: it is given a quarter of a second to end
    on its own (and remove its lock files) before it is killed, as subprocess gives it; a
    run past its time is killed at once."""
    for grace, cleaned in ((0.25, True), (0.0, False)):
        marker = tmp_path / f"cleaned-{grace}"
        pid = os.posix_spawn("/bin/sh", ["sh", "-c", f"trap 'sleep 0.1; echo > {marker}; exit 1' INT; sleep 5 & wait"],
                             dict(os.environ))
        time.sleep(0.2)  # (its trap set)
        os.kill(pid, signal.SIGINT)
        gitspawn._end([pid], grace)
        assert marker.exists() == cleaned
        assert no_child_left()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may enter any folder")
def test_a_folder_that_may_not_be_entered_is_said(repo: Path) -> None:
    shut = repo / "shut"
    shut.mkdir()
    shut.chmod(0)
    try:
        with pytest.raises(PermissionError):
            gitspawn.run(str(shut), ["status"], ENV)
        with pytest.raises(errors.BadInput, match="Permission denied"):
            gitrepo.unstaged_files(shut, [])
    finally:
        shut.chmod(0o755)


def test_started_answers_with_this_process_standard_output_closed(repo: Path) -> None:
    probe = ("import os, sys\nfrom qem_edit.system import gitspawn\nos.close(1)\n"
             f"got = gitspawn.output(gitspawn.started({str(repo)!r}, gitspawn.base_env(), 'rev-parse', '--git-dir'))\n"
             "ran = gitspawn.run(" + repr(str(repo)) + ", ['rev-parse', '--git-dir'], gitspawn.base_env())\n"
             "sys.stderr.write(repr((got, ran.stdout)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stderr == repr((b".git\n", b".git\n")), done.stderr


def test_verify_staged_passes_beside_a_file_named_head(tmp_path: Path) -> None:
    """The commit hook asks git for the commit's changes against HEAD with a file named HEAD
    at the top of the work tree: answered, not refused as ambiguous."""
    from conftest import run_qem

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, env=ENV, check=True, capture_output=True)
    git("init", "-q")
    assert run_qem("add", "a note", "-k", "task", cwd=tmp_path).returncode == 0
    assert run_qem("export", cwd=tmp_path).returncode == 0
    (tmp_path / "HEAD").write_text("a file\n")
    git("add", "-A")
    git("commit", "-qm", "m")
    for _ in range(2):  # (the first seals the memory verified clean; the second answers from that seal)
        (tmp_path / "HEAD").write_text(f"changed {_}\n")
        git("add", "HEAD")
        done = run_qem("verify", "--staged", cwd=tmp_path)
        assert done.returncode == 0 and "ok:" in done.stdout + done.stderr, done.stderr


@pytest.mark.parametrize("ahead", [False, True], ids=["in the round", "the top asked ahead"])
@pytest.mark.parametrize("whole", [False, True], ids=["the memory's folder", "the whole work tree"])
@pytest.mark.parametrize("case", ["changes", "no HEAD yet", "a hook's own index", "no such folder in git",
                                  "the top as folder", "a broken index", "files naming another top",
                                  "a repository inside"])
def test_the_commit_round_answers_as_its_three_functions_in_turn(repo: Path, case: str, whole: bool, ahead: bool,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    """The sealed `verify --staged`'s one round (the top and object format, the commit's
    files, and the work tree where an anchor asks for it) answers as top_and_object_format,
    commit_files and work_tree_files asked in turn; None where git names another top than
    the one given (the caller then asks in turn); an index git cannot read fails alike.  The
    same where the top was asked ahead (`start_top`, as the hook opens its memory), which the
    round reads to its end whatever it answers."""
    folder, root = "mem", repo
    if ahead:
        real_round = gitrepo.commit_round

        def round_asked_ahead(top, root, *rest):  # type: ignore[no-untyped-def]
            gitrepo.start_top(os.fspath(top), root)
            assert len(gitrepo._tops) == 1
            try:
                return real_round(top, root, *rest)
            finally:
                assert gitrepo._tops == {} and no_child_left()
        monkeypatch.setattr(gitrepo, "commit_round", round_asked_ahead)
    (repo / "mem").mkdir()
    for name in ("kept.txt", "é changed.txt", "memo.txt"):
        (repo / "mem" / name).write_text("m\n")
    (repo / "memo").write_text("beside the folder, its name a prefix of it\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, env=ENV, check=True)
    subprocess.run(["git", "commit", "-qm", "mem"], cwd=repo, env=ENV, check=True)
    (repo / "mem" / "é changed.txt").write_text("changed\n")
    (repo / "mem" / "staged.txt").write_text("s\n")
    (repo / "memo").write_text("changed beside\n")
    (repo / "mem" / "untracked.txt").write_text("u\n")
    subprocess.run(["git", "add", "mem/staged.txt", "memo"], cwd=repo, env=ENV, check=True)
    if case == "no HEAD yet":
        shutil.rmtree(repo / ".git")
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        subprocess.run(["git", "add", "mem/kept.txt", "a.txt"], cwd=repo, check=True)
    elif case == "a hook's own index":
        hooks_own_index(repo, monkeypatch, "mem/é changed.txt", "mem/untracked.txt")
    elif case == "no such folder in git":
        folder = "nowhere"
    elif case == "the top as folder":
        folder = "."
    elif case == "a broken index":
        (repo / ".git" / "index").write_bytes(b"DIRC not an index")
    elif case == "files naming another top":  # a `.git` git does not take for a repository: it looks above
        (repo / "mem" / ".git").mkdir()
        root = repo / "mem"
    elif case == "a repository inside":  # the top given is not the one holding the memory's folder
        subprocess.run(["git", "init", "-q", str(repo / "mem")], check=True)
        root = repo / "mem"
    if case == "a broken index":
        with pytest.raises(errors.BadInput) as in_turn:
            gitrepo.commit_files(repo, folder)
        with pytest.raises(errors.BadInput) as together:
            gitrepo.commit_round(repo, root, folder, whole)
        assert str(together.value) == str(in_turn.value)
        return
    if case in ("files naming another top", "a repository inside"):
        # the files name a top git does not take; or a caller gives a top not the one holding root
        given = Path(workspace.git_top(root)) if case == "files naming another top" else repo
        named = gitrepo.top_and_object_format(root)
        assert named is not None and named[0] != given
        assert gitrepo.commit_round(given, root, folder, whole) is None
        return
    found = gitrepo.commit_round(repo, root, folder, whole)
    assert found is not None
    assert found[0] == gitrepo.top_and_object_format(root)
    in_turn = gitrepo.commit_files(repo, folder)
    if whole and in_turn[2] is None:  # (no HEAD: in turn, the caller lists what is staged; the round's status did)
        in_turn = (*in_turn[:2], gitrepo.staged_changes(repo))
    assert found[1] == in_turn
    assert found[2] == (gitrepo.work_tree_files(repo) if whole else None)
    if case == "changes":
        unstaged, staged, changes = found[1]
        assert unstaged == {"mem/é changed.txt"} and "memo" not in staged and "mem/staged.txt" in staged
        assert set(changes) == {"mem/staged.txt", "memo"}


def test_the_whole_round_s_status_says_what_diff_files_diff_cached_and_ls_files_say(repo: Path) -> None:
    """The whole work tree's round asks one `git status` where it asked diff-files, diff
    --cached HEAD and ls-files -o: the same paths for a change staged, unstaged, both, a
    deletion, a file added with intent (`add -N`), an untracked file in an untracked folder,
    a name with a space and a line break, and an unmerged path (listed by all three
    plumbing commands); a file whose times changed and not its bytes is the one difference
    (diff-files lists it, status compares it), and a status that fails answers None."""
    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, capture_output=True).stdout
    names = ["a.txt", "b.txt", "c.txt", "d.txt", "e f\ng.txt", "touched.txt", "both.txt"]
    for name in names:
        (repo / name).write_text(f"{name}\n")
    git("add", "-A")
    git("commit", "-qm", "files")
    git("checkout", "-qb", "side")
    (repo / "c.txt").write_text("side\n")
    git("commit", "-qam", "side")
    git("checkout", "-q", "-")
    (repo / "c.txt").write_text("here\n")
    git("commit", "-qam", "here")
    subprocess.run(["git", "merge", "-q", "side"], cwd=repo, env=ENV, capture_output=True)  # c.txt unmerged
    (repo / "a.txt").write_text("staged\n")
    git("add", "a.txt")
    (repo / "b.txt").write_text("unstaged\n")
    (repo / "both.txt").write_text("staged\n")
    git("add", "both.txt")
    (repo / "both.txt").write_text("and again\n")
    (repo / "d.txt").unlink()
    (repo / "e f\ng.txt").write_text("changed\n")
    (repo / "intent.txt").write_text("i\n")
    git("add", "-N", "intent.txt")
    (repo / "new" / "deeper").mkdir(parents=True)
    (repo / "new" / "deeper" / "u.txt").write_text("u\n")
    later = os.stat(repo / "touched.txt").st_mtime + 100
    os.utime(repo / "touched.txt", (later, later))  # (its times, not its bytes)
    status = subprocess.run(["git", *gitrepo.STATUS], cwd=repo, env=ENV, check=True, capture_output=True).stdout
    unstaged, changes, untracked = (set(gitrepo._name_list(listed)) for listed in gitrepo._status_files(status))
    plumbing = gitrepo._names(git("--literal-pathspecs", "diff-files", "--name-only", "-z"))
    assert plumbing - unstaged == {"touched.txt"}
    assert unstaged == {"b.txt", "both.txt", "c.txt", "d.txt", "e f\ng.txt", "intent.txt"}
    assert changes == gitrepo._names(git("diff", "--cached", "--name-only", "--no-renames", "-z", "HEAD", "--"))
    assert changes == {"a.txt", "both.txt", "c.txt"}
    assert untracked == set(gitrepo._untracked(git("ls-files", "-z", "-o", "--exclude-standard"))) == {"new/deeper/u.txt"}
    (repo / ".git" / "index").write_bytes(b"DIRC not an index")
    with pytest.raises(errors.BadInput):  # (git's index unreadable: as listing it fails alone)
        gitrepo.commit_round(repo, repo, ".", True)


def test_a_whole_round_whose_status_fails_is_asked_in_turn(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where `git status` fails and git's index can be read (a status refused), the round
    answers None: the caller asks in turn, never reading a failed status as nothing changed."""
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, env=ENV, check=True)
    monkeypatch.setattr(gitrepo, "STATUS", ("status", "--no-such-option"))
    assert gitrepo.commit_round(repo, repo, ".", True) is None
    assert gitrepo.commit_round(repo, repo, ".", False) is not None


@pytest.mark.parametrize("name", ["work ", "wo\nrk", "wo\n\nrk", "work\n", " work", "\twork"])
@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_a_top_is_named_as_git_prints_it(tmp_path: Path, name: str, object_format: str) -> None:
    """git prints the top as it is, then a line break: a folder's name ending in a space, or
    holding a line break, keeps it (a space was stripped, and every path below named a
    folder that is not there); the object format is the last line."""
    top = tmp_path / name
    top.mkdir()
    subprocess.run(["git", "init", "-q", f"--object-format={object_format}"], cwd=top, check=True)
    (top / "sub").mkdir()
    assert gitrepo.toplevel(top / "sub") == top
    assert gitrepo.top_and_object_format(top / "sub") == (str(top.resolve()), object_format)
    found = gitrepo.commit_round(top, top / "sub", "sub", False)
    assert found is not None and found[0] == (str(top.resolve()), object_format)
    if "\n" not in name:  # (a git printing no format: the one line is the top)
        assert gitrepo._named_top(os.fsencode(top) + b"\n") == (str(top.resolve()), "sha1")


def test_a_shallow_clone_s_boundary_is_read_in_a_folder_whose_name_is_not_utf8(
        repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """git names a linked worktree's shallow file by its whole path: a folder's name that is
    not UTF-8 is read as the file system names it (it was a UnicodeDecodeError's traceback
    from `qem diff`)."""
    subprocess.run(["git", "commit", "-qm", "second"], cwd=repo, env=ENV, check=True)
    clone = tmp_path_factory.mktemp("shallow") / os.fsdecode(b"sh\xffal")
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(clone)], env=ENV, check=True)
    linked = clone.parent / "linked"
    subprocess.run(["git", "worktree", "add", "-q", str(linked)], cwd=clone, env=ENV, check=True, capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, env=ENV, check=True, capture_output=True,
                          text=True).stdout.strip()
    assert gitrepo.shallow_boundary(clone) == gitrepo.shallow_boundary(linked) == [head]


def test_a_round_past_its_time_fails_once(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    """A git of the round killed past its time fails the round as it fails any git: it is
    not taken for a git that cannot run, whose questions the caller asks again in turn
    (and would wait for as long again)."""
    bin_dir = tmp_path_factory.mktemp("bin")
    slow = bin_dir / "git"  # the real git, but for the work tree's status, which it says after a sleep
    slow.write_text(f'#!/bin/sh\ncase " $* " in *" status "*) sleep 5;; esac\nexec {shutil.which("git")} "$@"\n')
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(gitrepo, "TIMEOUT_S", 0.5)
    assert gitrepo.commit_round(repo, repo, ".", False) is not None  # (the work tree's status not asked)
    started = time.monotonic()
    with pytest.raises(gitrepo.GitTimedOut, match="timed out"):
        gitrepo.commit_round(repo, repo, ".", True)
    assert time.monotonic() - started < 3


def test_the_top_asked_as_a_commit_hook_opens_its_memory_is_read_whatever_comes(
        repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`qem verify --staged` asks git for the top as it finds the workspace (`start_top`),
    before its store opens, and its round reads the answer; where the store cannot be opened
    (no memory here), what git was asked is still read to its end: no child left, no pipe
    open, and the command says what it says without it."""
    from qem_edit.shells.quick import run

    monkeypatch.chdir(repo)
    started: list[tuple[str, ...]] = []
    real = gitspawn.started
    monkeypatch.setattr(gitspawn, "started", lambda top, env, *args: started.append(args) or real(top, env, *args))
    before = fds()
    assert run(["verify", "--staged"]) == errors.EXIT_INPUT
    assert f"no qem memory at {repo.resolve() / '.qem'}" in capsys.readouterr().err
    assert len(started) == 1 and "rev-parse" in started[0] and "--show-toplevel" in started[0]
    assert gitrepo._tops == {} and no_child_left() and fds() == before


@pytest.mark.parametrize("failing", ["past its time", "git not started"])
def test_a_round_that_fails_still_ends_the_top_asked_ahead(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                           failing: str) -> None:
    """A round whose own gits fail (past their time, or not started at all) still ends the
    top asked ahead before it says so: no child left, no pipe open."""
    monkeypatch.setattr(gitrepo, "_missing", [])  # (what a git not found notes, for this test alone)
    before = fds()
    top = workspace.git_top(repo)
    gitrepo.start_top(top, repo)

    def fails(*args: object, **kwargs: object) -> None:
        raise TimeoutError("git ran past its time") if failing == "past its time" else FileNotFoundError(2, "no git")
    monkeypatch.setattr(gitspawn, "run_together", fails)
    if failing == "past its time":
        with pytest.raises(gitrepo.GitTimedOut):
            gitrepo.commit_round(top, repo, ".", True)
    else:
        assert gitrepo.commit_round(top, repo, ".", True) is None
    assert gitrepo._tops == {} and no_child_left() and fds() == before


def test_a_git_started_and_read_later_is_ended_past_its_time(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A git `started` and read later is never waited for without end: past the deadline its
    reader gives, it is killed (TimeoutError); one no longer wanted is ended (`dropped`); the
    top asked ahead of a round keeps the round's time (GitTimedOut, as the round's own gits
    do).  No child is left, no pipe open."""
    before = fds()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        gitspawn.output(gitspawn.started(str(repo), ENV, *SLEEP), time.monotonic() + 0.3)
    read, write = os.pipe()  # (a process that closed its output and went on running: read, then waited for)
    os.set_inheritable(read, False)
    closing = gitspawn.started.__globals__["_inherited"]()
    pid = os.posix_spawn("/bin/sh", ["sh", "-c", "exec >&-; sleep 5"], dict(os.environ),
                         file_actions=[(os.POSIX_SPAWN_DUP2, write, 1), *closing])
    os.close(write)
    with pytest.raises(TimeoutError):
        gitspawn.output((pid, read), time.monotonic() + 0.3)
    done = gitspawn.started(str(repo), ENV, "--version")
    time.sleep(0.5)
    assert gitspawn.output(done, time.monotonic() - 1).startswith(b"git version")  # (ended in time: read, however late)
    gitspawn.dropped(gitspawn.started(str(repo), ENV, *SLEEP))
    assert time.monotonic() - started < 3 and no_child_left() and fds() == before
    monkeypatch.setattr(gitrepo, "_top_ask", lambda root: SLEEP)
    monkeypatch.setattr(gitrepo, "TIMEOUT_S", 0.5)
    top = workspace.git_top(repo)
    gitrepo.start_top(top, repo)
    gitrepo.start_top(top, repo)  # (asked twice: the first is ended)
    with pytest.raises(gitrepo.GitTimedOut, match="rev-parse timed out"):
        gitrepo.commit_round(top, repo, ".", True)
    assert time.monotonic() - started < 4 and gitrepo._tops == {} and no_child_left() and fds() == before


def test_a_seal_states_how_many_files_it_vouches_for() -> None:
    """The seal of a memory's files (qem_edit.mirror.staged._seal) counts them first: the seal
    of fewer files is never the start of the seal of more, so one cut short at a line's end
    is not another state's."""
    from types import SimpleNamespace

    from qem_edit.mirror.staged import _seal

    store = SimpleNamespace(tree=SimpleNamespace(names=lambda: set()), head=lambda: None, moment=lambda head: "i:1")
    one = {".qem/config.toml": "a" * 40}
    two = {**one, ".qem/packs/e-x.jsonl": "b" * 40}
    fewer, more = _seal(store, ".qem", (set(), one, [])), _seal(store, ".qem", (set(), two, []))
    assert fewer is not None and more is not None and not more.startswith(fewer)
    assert _seal(store, ".qem", ({".qem/config.toml"}, two, [])) is None  # (the work tree not what git's index holds)
