"""The commit hooks (`verify --staged`, `export --check --staged`, `anchors check --staged`)
answer a commit that changes nothing their answer rests on from what they printed last
(qem_edit.mirror.answered), without SQLite or the store, across commits; and answer in full
everything else: a change to the memory, MEMORY.md or an anchored file (staged or not), an
untracked log file, a write, an anchored file gone from HEAD, a merge in progress, a
memory named otherwise, a note's end passed, a request in force, a kept file damaged,
planted or brought from another clone.  Each answer is compared with the same command's
with no kept file: the same exit status and the same bytes on both streams.

Real git and real `qem` processes; commits made by `git commit` (plain, `-am`, `-- PATHS`)
with a hook script running the three commands, output captured, and by the real pre-commit
framework running the repository's own hooks."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import no_child_left
from test_precommit import git, git_env

from qem_edit.mirror import answered
from qem_edit.system.workspace import COMMITS_NAME, KEPT_NAMES, STATE_DIR

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not hasattr(os, "posix_spawnp"),
                                reason="needs git and posix_spawn")

FULL = ["_sqlite3", "qem_edit.storage.store"]  # what a command answered in full loads
HOOKS = [answered.FORMS[0], answered.FORMS[1], answered.FORMS[2]]  # the hooks that judge
WRITERS = [("export", "--staged"), ("anchors", "check", "--staged", "--flag")]  # the two that write where asked
PROBE = ("import atexit, json, sys\n"
         "SAID = sys.argv[1]\n"
         "def said():\n"
         f"    with open(SAID, 'a') as out: out.write(json.dumps(sorted(m for m in {FULL!r} if m in sys.modules)) + '\\n')\n"
         "atexit.register(said)\n"
         "sys.argv = ['qem', *sys.argv[2:]]\n"
         "from qem_edit.__main__ import main\n"
         "main()\n")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Code, a memory (a note anchored to src/a.py, one anchored to the folder lib, a task)
    and its MEMORY.md, all committed; a change to code nobody anchored staged."""
    (tmp_path / "home").mkdir()
    env = git_env(tmp_path / "home")
    env.pop("QEM_NOW", None)
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "lib").mkdir()
    (work / "src" / "a.py").write_text("a = 1\n")
    (work / "lib" / "b.py").write_text("b = 1\n")
    (work / "other.py").write_text("c = 1\n")
    git("init", "-q", "-b", "main", cwd=work, env=env)
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "code", cwd=work, env=env)
    for args in (("a is set once", "--kind", "gotcha", "--anchor", "src/a.py"),
                 ("lib is vendored", "--kind", "directive", "--anchor", "lib"),
                 ("tidy the build", "--kind", "task")):
        assert qem(work, env, "add", *args).returncode == 0
    assert qem(work, env, "export").returncode == 0
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "the memory", "--no-verify", cwd=work, env=env)
    stage_code(work, env, "c = 2\n")
    return work, env


def qem(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qem_edit", *args], cwd=work, env=env, capture_output=True,
                          text=True, timeout=120)


def stage_code(work: Path, env: dict[str, str], text: str) -> None:
    (work / "other.py").write_text(text)
    git("add", "other.py", cwd=work, env=env)


def hook(work: Path, env: dict[str, str], form: tuple[str, ...]) -> tuple[tuple[int, str, str], list[str]]:
    """One commit hook's command in a process of its own, its streams captured as the
    pre-commit framework captures them: (exit status, stdout, stderr), and which of SQLite
    and the store it loaded."""
    said = work.parent / "loaded.txt"
    said.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-c", PROBE, str(said), *form], cwd=work, env=env, capture_output=True,
                          text=True, timeout=120)
    return (done.returncode, done.stdout, done.stderr), json.loads(said.read_text())


def full(work: Path, env: dict[str, str], form: tuple[str, ...]) -> tuple[int, str, str]:
    """The same command with no kept answer to go by (which it then keeps)."""
    (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
    answer, loaded = hook(work, env, form)
    assert loaded == FULL
    return answer


def kept_then_full(work: Path, env: dict[str, str], kept: bytes) -> list[list[str]]:
    """Each hook's command as it answers now, with the answers `kept` before in place,
    checked against its answer in full; which of SQLite and the store each loaded."""
    found = []
    for form in HOOKS:
        (work / ".qem" / COMMITS_NAME).write_bytes(kept)
        answer, loaded = hook(work, env, form)
        assert answer == full(work, env, form), form
        found.append(loaded)
    return found


def primed(work: Path, env: dict[str, str]) -> None:
    """Each hook's answer kept (run in full once), and each then answered from it."""
    (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
    for form in HOOKS:
        assert hook(work, env, form)[1] == FULL, form
    for form in HOOKS:
        assert hook(work, env, form)[1] == [], form


def test_a_commit_touching_no_memory_is_answered_from_the_last_answer_across_commits(repo) -> None:  # type: ignore[no-untyped-def]
    work, env = repo
    for form in HOOKS:
        first, loaded = hook(work, env, form)
        assert loaded == FULL and first[0] == 0, first
        again, loaded = hook(work, env, form)
        assert loaded == [] and again == first  # the same bytes, without SQLite or the store
    assert hook(work, env, HOOKS[0])[0] == (0, "", "ok: the log replays cleanly to 3 notes\n")
    kept = (work / ".qem" / COMMITS_NAME).read_bytes()
    git("commit", "-qm", "code again", "--no-verify", cwd=work, env=env)  # HEAD moves; the memory does not
    stage_code(work, env, "c = 3\n")
    assert kept_then_full(work, env, kept) == [[], [], []]


def test_what_is_printed_is_the_kept_answer(repo) -> None:  # type: ignore[no-untyped-def]
    """The answer given is the one in the file (marked here), with its exit status 0."""
    work, env = repo
    primed(work, env)
    path = work / ".qem" / COMMITS_NAME
    head, _, body = path.read_bytes().partition(b"\n")
    entries = answered.entries(body)
    key = next(k for k in entries if k.split("\0")[0] == "verify --staged")
    start, until, mirror, paths, heads, chunks = entries[key]
    entries[key] = (start, until, mirror, paths, heads, [("2", "MARKED\n")])
    path.write_bytes(head + b"\n" + answered.encoded(entries))
    assert hook(work, env, HOOKS[0]) == ((0, "", "MARKED\n"), [])
    assert paths == [".qem", "MEMORY.md", "lib", "src/a.py"]


@pytest.mark.parametrize("change", ["anchored file edited", "anchored file staged", "file in an anchored folder staged",
                                    "untracked file in an anchored folder",
                                    "MEMORY.md edited", "MEMORY.md staged", "untracked log file", "log file staged",
                                    "anchored file deleted and committed", "merge in progress", "memory named",
                                    "a write"])
def test_a_change_it_rests_on_is_answered_in_full(repo, change: str) -> None:  # type: ignore[no-untyped-def]
    """Each change, with the answers kept before it put back in place for every command
    (as if nothing had removed them), is answered in full."""
    work, env = repo
    primed(work, env)
    kept = (work / ".qem" / COMMITS_NAME).read_bytes()
    if change == "anchored file edited":
        (work / "src" / "a.py").write_text("a = 2\n")
    elif change == "anchored file staged":
        (work / "src" / "a.py").write_text("a = 2\n")
        git("add", "src/a.py", cwd=work, env=env)
    elif change in ("file in an anchored folder staged", "untracked file in an anchored folder"):
        (work / "lib" / "c.py").write_text("c = 1\n")
        if change.endswith("staged"):
            git("add", "lib/c.py", cwd=work, env=env)
    elif change == "MEMORY.md edited":
        (work / "MEMORY.md").write_text((work / "MEMORY.md").read_text() + "\n- a line by hand\n")
    elif change == "MEMORY.md staged":
        (work / "MEMORY.md").write_text((work / "MEMORY.md").read_text() + "\n- a line by hand\n")
        git("add", "MEMORY.md", cwd=work, env=env)
    elif change in ("untracked log file", "log file staged"):
        (work / ".qem" / "events" / "zz").write_bytes(b"\x00not an event\n")
        if change == "log file staged":
            git("add", "-f", ".qem/events/zz", cwd=work, env=env)
    elif change == "anchored file deleted and committed":
        git("rm", "-q", "src/a.py", cwd=work, env=env)
        git("commit", "-qm", "gone", "--no-verify", cwd=work, env=env)
        for _ in range(2):  # (nothing is kept: where the drifted file went is a question of the whole tree)
            assert [hook(work, env, form)[1] for form in HOOKS] == [FULL] * 3
    elif change == "merge in progress":
        head = git("rev-parse", "HEAD", cwd=work, env=env).stdout.strip()
        (work / ".git" / "MERGE_HEAD").write_text(head + "\n")
    elif change == "memory named":
        env = {**env, "QEM_WORKSPACE": str(work)}
    elif change == "a write":
        assert qem(work, env, "add", "one more", "--kind", "finding").returncode == 0
        assert not (work / ".qem" / COMMITS_NAME).exists()  # (every change to the index removes it)
    assert kept_then_full(work, env, kept) == [FULL] * 3, change
    if change in ("anchored file edited", "untracked file in an anchored folder"):  # drift in the work tree, listed
        assert "drift: " in hook(work, env, HOOKS[0])[0][1]
    if change in ("MEMORY.md edited", "MEMORY.md staged", "log file staged"):
        assert hook(work, env, HOOKS[0])[0][0] == 1


def test_a_failing_answer_is_never_kept(repo) -> None:  # type: ignore[no-untyped-def]
    """A bad log file committed without the hooks: every commit touching no memory still
    fails, each time in full (only an answer of exit status 0 is kept)."""
    work, env = repo
    (work / ".qem" / "events" / "zz").write_bytes(b"\x00not an event\n")
    git("add", "-f", ".qem/events/zz", cwd=work, env=env)
    git("commit", "-qm", "a bad file", "--no-verify", cwd=work, env=env)
    stage_code(work, env, "c = 9\n")
    for _ in range(2):
        answer, loaded = hook(work, env, HOOKS[0])
        assert answer[0] == 1 and "zz" in answer[1] and loaded == FULL


def test_drift_is_listed_as_the_full_check_lists_it(repo) -> None:  # type: ignore[no-untyped-def]
    """An anchored file changed in the work tree: verify lists the drift in full, every
    time (never from the answer kept before it), and fails on it when asked."""
    work, env = repo
    primed(work, env)
    (work / "src" / "a.py").write_text("a = 2\n")
    answer, loaded = hook(work, env, HOOKS[0])
    assert loaded == FULL and "src/a.py" in answer[1]
    answer, loaded = hook(work, env, HOOKS[0])
    assert loaded == FULL and "src/a.py" in answer[1]


def test_the_answer_holds_until_a_notes_end(repo) -> None:  # type: ignore[no-untyped-def]
    work, env = repo
    ends = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=4)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert qem(work, env, "add", "the freeze ends soon", "--kind", "directive", "--expires", ends).returncode == 0
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "a note with an end", "--no-verify", cwd=work, env=env)
    stage_code(work, env, "c = 4\n")
    primed(work, env)
    while datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") < ends:
        time.sleep(0.2)
    for form in HOOKS:
        answer, loaded = hook(work, env, form)
        assert loaded == FULL, form
        (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
        assert answer == hook(work, env, form)[0]


def test_a_request_in_force_is_never_kept(repo) -> None:  # type: ignore[no-untyped-def]
    """What is late moves with the clock alone: while a request is in force every commit
    hook answers in full."""
    work, env = repo
    assert qem(work, env, "add", "review the build", "--kind", "task", "--to", "bob", "--due", "2099-01-01"
               ).returncode == 0
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "a request", "--no-verify", cwd=work, env=env)
    stage_code(work, env, "c = 5\n")
    for form in HOOKS:
        for _ in range(2):
            assert hook(work, env, form)[1] == FULL, form
    assert not (work / ".qem" / COMMITS_NAME).exists()


def test_a_damaged_or_planted_kept_file_is_answered_in_full(repo) -> None:  # type: ignore[no-untyped-def]
    work, env = repo
    primed(work, env)
    path = work / ".qem" / COMMITS_NAME
    good = path.read_bytes()
    head = good.partition(b"\n")[0]
    expected = {form: full(work, env, form) for form in HOOKS}
    for damaged in (b"", b"garbage", head, head + b"\n12:short", head + b"\n999999999999:x", head + b"\n-5:x",
                    head + b"\n1:a0:0:0:0:99:", good[:-3], good + b"x" * answered.MAX_BYTES,
                    head.replace(b"qem-commits 1", b"qem-commits 9") + good[len(head):]):
        path.write_bytes(damaged)
        for form in HOOKS:
            answer, loaded = hook(work, env, form)
            assert answer == expected[form] and "Traceback" not in answer[2], damaged[:40]
            path.write_bytes(damaged)
    path.unlink()
    os.symlink(work / "elsewhere", path)
    (work / "elsewhere").write_bytes(good)
    for form in HOOKS:
        answer, loaded = hook(work, env, form)
        assert loaded == FULL and answer == expected[form]


def test_an_answer_not_resting_on_the_memorys_folder_is_never_used(repo) -> None:  # type: ignore[no-untyped-def]
    work, env = repo
    primed(work, env)
    path = work / ".qem" / COMMITS_NAME
    head, _, body = path.read_bytes().partition(b"\n")
    heads = answered._heads(str(work), ["MEMORY.md"], "MEMORY.md")
    entries = {key: (entry[0], entry[1], "MEMORY.md", ["MEMORY.md"], heads, [("2", "PLANTED\n")])
               for key, entry in answered.entries(body).items()}
    path.write_bytes(head + b"\n" + answered.encoded(entries))
    for form in HOOKS:
        answer, loaded = hook(work, env, form)
        assert "PLANTED" not in answer[2] and loaded == FULL, form
        path.write_bytes(head + b"\n" + answered.encoded(entries))


def test_a_kept_file_brought_from_another_clone_is_never_used(repo, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Planted by a commit forcing it in, its answers resting on MEMORY.md alone (which the
    commit leaves as it is, so git says of it what the answers say)."""
    work, env = repo
    primed(work, env)
    path = work / ".qem" / COMMITS_NAME
    head, _, body = path.read_bytes().partition(b"\n")
    heads = answered._heads(str(work), ["MEMORY.md"], "MEMORY.md")
    assert heads is not None
    entries = {key: (entry[0], entry[1], "MEMORY.md", ["MEMORY.md"], heads, [("2", "PLANTED\n")])
               for key, entry in answered.entries(body).items()}
    path.write_bytes(head + b"\n" + answered.encoded(entries))
    git("add", "-f", f".qem/{COMMITS_NAME}", cwd=work, env=env)
    git("commit", "-qm", "a kept answer forced in", "--no-verify", cwd=work, env=env)
    clone = tmp_path / "clone"
    git("clone", "-q", str(work), str(clone), cwd=tmp_path, env=env)
    stage_code(clone, env, "c = 6\n")
    for form in HOOKS:
        answer, loaded = hook(clone, env, form)
        assert "PLANTED" not in answer[2] and loaded == FULL, form


def test_real_commits_with_a_pre_commit_hook(repo) -> None:  # type: ignore[no-untyped-def]
    """`git commit` runs the three hooks (their output captured, as the pre-commit framework
    captures it): `commit -am` and `commit -- PATHS` (each in an index of its own) and a plain
    commit; those touching no memory are answered from the last answer, the one that changes
    the anchored file in full, its drift named and the commit refused."""
    work, env = repo
    said = work.parent / "loaded.txt"
    probe = work.parent / "probe.py"
    probe.write_text(PROBE)
    lines = [f"{sys.executable} {probe} {said} {' '.join(form)} >> {work.parent / 'hooks.log'} 2>&1 || exit 1"
             for form in HOOKS]
    script = work / ".git" / "hooks" / "pre-commit"
    script.write_text("#!/bin/sh\n" + "\n".join(lines) + "\n")
    script.chmod(0o755)
    git("commit", "-qm", "first", cwd=work, env=env)  # (answers kept)
    (work / "other.py").write_text("c = 7\n")
    said.unlink()
    git("commit", "-qam", "second", cwd=work, env=env)
    assert said.read_text().splitlines() == ["[]"] * 3
    (work / "other.py").write_text("c = 8\n")
    said.unlink()
    git("commit", "-qm", "third", "--", "other.py", cwd=work, env=env)
    assert said.read_text().splitlines() == ["[]"] * 3
    (work / "src" / "a.py").write_text("a = 9\n")
    said.unlink()
    done = git("commit", "-qam", "the anchored file", cwd=work, env=env, check=False)
    assert said.read_text().splitlines() == [json.dumps(FULL)] * 3
    assert done.returncode == 1  # refused: `anchors check --staged` names the drift (qem-anchors, with --flag, flags it)
    assert "anchor src/a.py changed" in (work.parent / "hooks.log").read_text()


def test_an_answer_is_not_kept_when_what_it_rests_on_moved_while_it_ran(repo, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A log file arrives while `verify --staged` runs (after it opened the memory): what
    it printed is not kept; run again, it is."""
    from qem_edit.mirror import staged
    from qem_edit.shells.quick import run

    work, env = repo
    monkeypatch.chdir(work)
    real = staged.verify_staged

    def meanwhile(store, place, **options):  # type: ignore[no-untyped-def]
        (work / ".qem" / "events" / ".arriving").write_bytes(b"")  # (a file the log reader skips)
        return real(store, place, **options)
    monkeypatch.setattr(staged, "verify_staged", meanwhile)
    assert run(list(HOOKS[0])) == 0
    assert not (work / ".qem" / COMMITS_NAME).exists()
    (work / ".qem" / "events" / ".arriving").unlink()
    monkeypatch.setattr(staged, "verify_staged", real)
    assert run(list(HOOKS[0])) == 0
    assert (work / ".qem" / COMMITS_NAME).exists()


def test_the_pre_commit_framework_gets_the_kept_answer(repo) -> None:  # type: ignore[no-untyped-def]
    """The real pre-commit framework running the repository's own hooks (qem-anchors, with
    --flag, qem-export-check, qem-verify): commits touching no memory pass, the judging hooks
    keep their answers, and the next run prints the kept one (marked here)."""
    from test_precommit import local_hooks, pre_commit

    work, env = repo
    env = {**env, "PRE_COMMIT_HOME": str(work.parent / "pre-commit-home")}
    (work / ".pre-commit-config.yaml").write_text(local_hooks("qem-anchors", "qem-export-check", "qem-verify"))
    git("add", ".pre-commit-config.yaml", cwd=work, env=env)
    assert pre_commit("install", cwd=work, env=env).returncode == 0
    done = git("commit", "-m", "the hooks", cwd=work, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    path = work / ".qem" / COMMITS_NAME
    head, _, body = path.read_bytes().partition(b"\n")
    entries = answered.entries(body)
    assert {key.split("\0")[0] for key in entries} == {"verify --staged", "export --check --staged",
                                                        "anchors check --staged --flag"}
    key = next(k for k in entries if k.startswith("verify --staged\0"))
    entries[key] = (*entries[key][:5], [("2", "MARKED by the kept answer\n")])
    path.write_bytes(head + b"\n" + answered.encoded(entries))
    stage_code(work, env, "c = 10\n")
    ran = pre_commit("run", "qem-verify", "--verbose", cwd=work, env=env)
    assert ran.returncode == 0 and "MARKED by the kept answer" in ran.stdout, ran.stdout + ran.stderr
    done = git("commit", "-m", "more code", cwd=work, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_moved_checkout_answers_in_its_new_place(repo) -> None:  # type: ignore[no-untyped-def]
    """A checkout moved elsewhere keeps its folders' fingerprint: the answer names the new path."""
    work, env = repo
    primed(work, env)
    moved = work.parent / "moved"
    work.rename(moved)
    answer, loaded = hook(moved, env, HOOKS[1])
    assert loaded == FULL and str(moved / "MEMORY.md") in answer[2]


def test_memory_md_reached_through_a_link_is_never_kept(repo) -> None:  # type: ignore[no-untyped-def]
    """MEMORY.md kept at docs/MEMORY.md, docs a link to a folder (which may be pointed
    elsewhere): nothing is kept (git tracks the link, never a path through it; and the file's
    real path must be its path)."""
    work, env = repo
    (work / "site" / "v1").mkdir(parents=True)
    (work / "docs").symlink_to("site/v1")
    settings = work / ".qem" / "config.toml"
    settings.write_text(settings.read_text() + '\n[export]\npath = "docs/MEMORY.md"\n')
    git("rm", "-q", "MEMORY.md", cwd=work, env=env)
    assert qem(work, env, "export").returncode == 0
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "MEMORY.md in docs", "--no-verify", cwd=work, env=env)
    stage_code(work, env, "c = 11\n")
    for _ in range(2):
        assert [hook(work, env, form)[1] for form in HOOKS] == [FULL] * 3


def test_memory_md_git_looks_away_from_is_read_as_the_file(repo) -> None:  # type: ignore[no-untyped-def]
    """git told to assume MEMORY.md unchanged: a hand edit is still seen (the file's own
    stat is part of what an answer rests on)."""
    work, env = repo
    git("update-index", "--assume-unchanged", "MEMORY.md", cwd=work, env=env)
    primed(work, env)
    kept = (work / ".qem" / COMMITS_NAME).read_bytes()
    with (work / "MEMORY.md").open("a") as mirror:
        mirror.write("\n- a line by hand\n")
    assert kept_then_full(work, env, kept) == [FULL] * 3
    assert hook(work, env, HOOKS[1])[0][0] == 1


def test_nested_anchors_and_status_settings_still_keep(repo) -> None:  # type: ignore[no-untyped-def]
    """A note on a folder and one on a file inside it (git lists the folder alone), git's
    status told to show stashes and the branch: answers are kept and answered all the same."""
    work, env = repo
    assert qem(work, env, "add", "src is generated", "--kind", "gotcha", "--anchor", "src").returncode == 0
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "a folder's note", "--no-verify", cwd=work, env=env)
    git("config", "status.showStash", "true", cwd=work, env=env)
    git("config", "status.branch", "true", cwd=work, env=env)
    (work / "scratch.txt").write_text("x\n")
    git("add", "scratch.txt", cwd=work, env=env)
    git("stash", "-q", cwd=work, env=env)
    stage_code(work, env, "c = 12\n")
    primed(work, env)
    kept = (work / ".qem" / COMMITS_NAME).read_bytes()
    assert kept_then_full(work, env, kept) == [[], [], []]


def test_a_reader_gone_mid_answer_keeps_nothing(repo) -> None:  # type: ignore[no-untyped-def]
    """A listing longer than a pipe holds, its reader gone: the command ends quietly, and
    what it printed before the pipe broke is not kept as its answer."""
    work, env = repo
    files = [f"f/{n}.txt" for n in range(90)]
    (work / "f").mkdir()
    for name in files:
        (work / name).write_text("v1\n")
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "files", "--no-verify", cwd=work, env=env)
    anchors = [word for name in files for word in ("--anchor", name)]
    assert qem(work, env, "add", "the f files are generated", "--kind", "gotcha", *anchors).returncode == 0
    assert qem(work, env, "export").returncode == 0
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "a note", "--no-verify", cwd=work, env=env)
    for name in files:
        (work / name).write_text("v2\n")
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "drift, unflagged", "--no-verify", cwd=work, env=env)
    (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
    read, write = os.pipe()
    os.close(read)
    done = subprocess.run([sys.executable, "-m", "qem_edit", *HOOKS[0]], cwd=work, env=env, stdout=write,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(write)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert not (work / ".qem" / COMMITS_NAME).exists()
    answer, loaded = hook(work, env, HOOKS[0])
    assert loaded == FULL and answer[1].count("drift: ") == 90


def test_odd_streams_and_folders_are_answered_as_before(repo, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Standard output closed, the current folder removed, Ctrl-C while git is asked: each
    ends as every command ends, never in a traceback."""
    work, env = repo
    primed(work, env)
    closed = subprocess.run(["sh", "-c", f'exec "{sys.executable}" -m qem_edit anchors check --staged >&-'], cwd=work,
                            env=env, capture_output=True, text=True, timeout=120)
    assert closed.returncode == 0 and "Traceback" not in closed.stderr, closed.stderr
    gone = subprocess.run(["sh", "-c", f'mkdir gone && cd gone && rmdir ../gone && exec "{sys.executable}" -m qem_edit'
                                       " verify --staged"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert gone.returncode != 0 and gone.stderr.startswith("qem: ") and "Traceback" not in gone.stderr, gone.stderr
    slow = tmp_path / "slowgit"
    slow.mkdir()
    (slow / "git").write_text(f'#!/bin/sh\nsleep 5\nexec {shutil.which("git")} "$@"\n')
    (slow / "git").chmod(0o755)
    started = subprocess.Popen([sys.executable, "-m", "qem_edit", *HOOKS[0]], cwd=work,
                               env={**env, "PATH": f"{slow}:{env['PATH']}"}, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(1.0)
    started.send_signal(signal.SIGINT)
    out, err = started.communicate(timeout=60)
    assert started.returncode == 130 and err.endswith("qem: interrupted\n") and "Traceback" not in err, err


def test_at_a_terminal_the_answer_is_kept_once_no_progress_is_shown(repo) -> None:  # type: ignore[no-untyped-def]
    """The pre-commit framework runs hooks on a terminal of their own at a person's terminal:
    a run that showed the log's replay as progress keeps nothing; the next (from the seal,
    no progress) keeps its answer, and the one after is answered from it."""
    work, env = repo
    (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
    (work / ".qem" / "index.db-verified").unlink(missing_ok=True)
    said = work.parent / "loaded.txt"
    found = []
    for _ in range(3):
        leader, follower = os.openpty()
        said.unlink(missing_ok=True)
        done = subprocess.run([sys.executable, "-c", PROBE, str(said), *HOOKS[0]], cwd=work, env=env,
                              stdout=follower, stderr=follower, stdin=subprocess.DEVNULL, timeout=120)
        os.close(follower)
        os.close(leader)
        assert done.returncode == 0
        found.append((json.loads(said.read_text()), (work / ".qem" / COMMITS_NAME).exists()))
    assert found == [(FULL, False), (FULL, True), ([], True)]


def test_the_hooks_that_write_are_answered_where_they_wrote_nothing(repo) -> None:  # type: ignore[no-untyped-def]
    """qem-export and qem-anchors (with --flag): a commit touching no memory is answered from
    their last answer, the same bytes; a stale MEMORY.md, a staged anchored change and a
    missing mirror base each run them in full, and they write as before."""
    work, env = repo
    assert set(WRITERS) <= set(answered.FORMS)
    (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
    first = [hook(work, env, form) for form in WRITERS]
    assert [loaded for _, loaded in first] == [FULL, FULL]
    assert [hook(work, env, form) for form in WRITERS] == [(answer, []) for answer, _ in first]
    kept = (work / ".qem" / COMMITS_NAME).read_bytes()

    (work / ".qem" / "mirror-base.md").unlink()
    answer, loaded = hook(work, env, WRITERS[0])
    assert loaded == FULL and answer == first[0][0] and (work / ".qem" / "mirror-base.md").is_file()

    assert qem(work, env, "add", "one more", "--kind", "finding").returncode == 0
    git("checkout", "MEMORY.md", cwd=work, env=env)  # the rendering before the note: stale
    (work / ".qem" / COMMITS_NAME).write_bytes(kept)
    answer, loaded = hook(work, env, WRITERS[0])
    assert loaded == FULL and "one more" in (work / "MEMORY.md").read_text()
    assert qem(work, env, "export", "--check").returncode == 0

    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "a note", "--no-verify", cwd=work, env=env)
    primed_writers = [hook(work, env, form)[1] for form in WRITERS] + [hook(work, env, form)[1] for form in WRITERS]
    assert primed_writers == [FULL, FULL, [], []]
    kept = (work / ".qem" / COMMITS_NAME).read_bytes()
    (work / "src" / "a.py").write_text("a = 13\n")
    git("add", "src/a.py", cwd=work, env=env)
    (work / ".qem" / COMMITS_NAME).write_bytes(kept)
    answer, loaded = hook(work, env, WRITERS[1])
    assert loaded == FULL and answer[0] == 1 and "flagged stale: #" in answer[1] + answer[2]
    assert "a is set once" in qem(work, env, "list", "--state", "stale").stdout


def test_what_is_printed_before_the_memory_opens_is_not_kept(repo, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`qem export` settles the log files a merge left unmerged before it opens the memory,
    and says so: that run's answer is not kept (its next run would settle nothing)."""
    from qem_edit.shells import shell
    from qem_edit.shells.quick import run

    work, env = repo
    monkeypatch.chdir(work)
    monkeypatch.setattr(shell, "_settle_log", lambda *args: shell.say("settled .qem/events/x, which the merge left"))
    assert run(list(WRITERS[0])) == 0
    assert not (work / ".qem" / COMMITS_NAME).exists()
    monkeypatch.undo()
    monkeypatch.chdir(work)
    assert run(list(WRITERS[0])) == 0
    assert (work / ".qem" / COMMITS_NAME).exists()


def test_the_kept_files_name_is_the_stores(repo) -> None:  # type: ignore[no-untyped-def]
    """Every change to the index removes the kept answers (they are among KEPT_NAMES); the
    mirror's base is export's, the memory's folder the workspace's (each named again in
    qem_edit.mirror.answered, which imports neither module)."""
    from qem_edit.mirror.export import MIRROR_BASE

    assert answered.NAME == COMMITS_NAME and COMMITS_NAME in KEPT_NAMES and answered.BASE == MIRROR_BASE
    assert answered.FOLDER == STATE_DIR


def test_the_anchored_paths_an_answer_rests_on_are_read_no_further_than_needed(tmp_path: Path) -> None:
    """`Store.anchored_paths(most)` (what a kept answer rests on) is the sorted paths of
    `anchors_in_force()`, another session's notes left out as they are, and None past
    `most`; `any_anchor_in_force` is `bool(anchors_in_force(...))`: in the memory's states
    as they move (a note superseded, one of another session's, one flagged stale)."""
    from conftest import run_qem

    from qem_edit.storage.store import Store

    for name in ("a.py", "b.py", "c.py", "d.py"):
        (tmp_path / name).write_text(f"{name}\n")

    def add(text: str, *args: str, session: str | None = None) -> None:
        env = {**os.environ, **({"QEM_SESSION": session} if session else {})}
        assert run_qem("add", text, "-k", "gotcha", *args, cwd=tmp_path, env=env).returncode == 0

    def check(session: str | None) -> None:
        with Store.open(str(tmp_path / STATE_DIR)) as store:
            store.session = session
            every = sorted({path for _, path, _ in store.anchors_in_force()})
            for most in range(len(every) + 2):
                assert store.anchored_paths(most) == (every if len(every) <= most else None), (session, most)
            for states in (("active",), ("active", "stale"), ("stale",)):
                assert store.any_anchor_in_force(states=states) == bool(store.anchors_in_force(states=states))

    with Store.open(str(tmp_path / STATE_DIR), create=True) as store:
        assert store.anchored_paths(0) == [] and not store.any_anchor_in_force()
    add("a and b", "--anchor", "a.py", "--anchor", "b.py")
    add("b again", "--anchor", "b.py")
    add("only this session's", "--anchor", "d.py", "--scope", "session", session="s1")
    for session in (None, "s1", "s2"):
        check(session)
    listed = json.loads(run_qem("list", "--json", cwd=tmp_path).stdout)
    first = next(n["id"] for n in listed if n["text"] == "a and b")
    assert run_qem("flag-stale", first, "-m", "looked", cwd=tmp_path).returncode == 0  # (stale: still in force)
    add("c, soon revoked", "--anchor", "c.py")
    for session in (None, "s1"):
        check(session)
    listed = json.loads(run_qem("list", "--json", cwd=tmp_path).stdout)
    third = next(n["id"] for n in listed if n["text"] == "c, soon revoked")
    assert run_qem("revoke", third, "-m", "no longer", cwd=tmp_path).returncode == 0  # (out of force)
    for session in (None, "s1"):
        check(session)


@pytest.mark.parametrize("form", HOOKS)
def test_memory_md_edited_while_it_ran_is_not_kept(repo, monkeypatch, form) -> None:  # type: ignore[no-untyped-def]
    """MEMORY.md edited by hand while a hook runs, after the command read it, git told to
    look away from it: what the command printed (of the file as it was) is not kept, for
    MEMORY.md's own file is read as the memory opens, before the command reads it; the next
    run answers as the full check does."""
    from qem_edit.shells import quick

    work, env = repo
    git("update-index", "--assume-unchanged", "MEMORY.md", cwd=work, env=env)
    monkeypatch.chdir(work)
    real = quick._body

    def body(name):  # type: ignore[no-untyped-def]
        def meanwhile(**params):  # type: ignore[no-untyped-def]
            code = real(name)(**params)
            with (work / "MEMORY.md").open("a") as mirror:
                mirror.write("\n- a line by hand\n")
            return code
        return meanwhile
    monkeypatch.setattr(quick, "_body", body)
    (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
    assert quick.run(list(form)) == 0
    assert not (work / ".qem" / COMMITS_NAME).exists()
    monkeypatch.setattr(quick, "_body", real)
    answer, loaded = hook(work, env, form)
    assert loaded == FULL and answer == full(work, env, form)


def _gits_seen(monkeypatch) -> list[tuple[str, tuple[str, ...]]]:  # type: ignore[no-untyped-def]
    """Every git started from here from now on, in order, as it starts: ("started", its
    arguments) for a kept answer's own (gitspawn.started), ("round", ...) for a command's
    (gitspawn.run_together); and ("heard", ...) as a kept answer's own is read to its end (or
    ended, no longer wanted: gitspawn.dropped)."""
    from qem_edit.system import gitspawn

    seen: list[tuple[str, tuple[str, ...]]] = []
    started, output, spawn = gitspawn.started, gitspawn.output, gitspawn._spawn
    names: dict[int, tuple[str, ...]] = {}
    own: list[bool] = []

    def start(top, env, *args):  # type: ignore[no-untyped-def]
        own.append(True)
        try:
            begun = started(top, env, *args)
        finally:
            own.pop()
        if begun is not None:
            names[begun[0]] = args
        return begun

    def spawned(cwd, args, *rest):  # type: ignore[no-untyped-def]
        seen.append(("started" if own else "round", tuple(args)))
        return spawn(cwd, args, *rest)

    def heard(begun, deadline=None):  # type: ignore[no-untyped-def]
        out = output(begun, deadline)
        if begun is not None:
            seen.append(("heard", names[begun[0]]))
        return out

    def ended(begun):  # type: ignore[no-untyped-def]
        dropped(begun)
        if begun is not None:
            seen.append(("heard", names[begun[0]]))
    dropped = gitspawn.dropped
    monkeypatch.setattr(gitspawn, "started", start)
    monkeypatch.setattr(gitspawn, "output", heard)
    monkeypatch.setattr(gitspawn, "dropped", ended)
    monkeypatch.setattr(gitspawn, "_spawn", spawned)
    return seen


def test_git_is_heard_on_what_an_answer_rests_on_before_the_command_asks_it_anything(repo, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`export --check --staged`, in full: the kept answer's `git status` of the paths it
    rests on has ended before the command's first git starts (a change landing between the
    two is seen by both, or by neither: never by the command alone), and its answer is kept."""
    from qem_edit.shells.quick import run

    work, env = repo
    monkeypatch.chdir(work)
    (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
    seen = _gits_seen(monkeypatch)
    assert run(list(HOOKS[1])) == 0
    assert (work / ".qem" / COMMITS_NAME).exists()
    first_round = next(n for n, (what, _) in enumerate(seen) if what == "round")
    status = [n for n, (what, args) in enumerate(seen) if what == "heard" and "status" in args]
    assert status and status[0] < first_round, seen
    assert all("--branch" in seen[n][1] for n in status)
    started = [n for n, (what, args) in enumerate(seen) if what == "started" and "status" in args]
    assert started[0] == 0 and [n for n in started if n < first_round] == [0], seen  # (started as the memory
    # opened, once: git answers while the command begins, and is heard before the command's first git)


def test_the_sealed_verify_takes_its_own_look_at_the_work_tree_as_the_answers(repo, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`verify --staged` in full from its seal, a note in force anchored: its round's
    `git status` of the whole work tree is the kept answer's look at the paths it rests on
    (no status of its own before), so five gits start, not seven: the top git names, asked as
    the memory opens, the round's other two, what the commit the status named holds at the
    paths, asked as soon as the round ended, and a status once the command has ended; its
    answer is kept, and answered from."""
    from qem_edit.shells.quick import run

    work, env = repo
    monkeypatch.chdir(work)
    assert run(list(HOOKS[0])) == 0  # (sealed)
    (work / ".qem" / COMMITS_NAME).unlink()
    seen = _gits_seen(monkeypatch)
    assert run(list(HOOKS[0])) == 0
    starts = [(what, args) for what, args in seen if what in ("started", "round")]
    assert [what for what, _ in starts] == ["started", "round", "round", "started", "started"], starts
    assert "rev-parse" in starts[0][1] and "--show-toplevel" in starts[0][1]
    assert "status" in starts[1][1] + starts[2][1] and "ls-files" in starts[1][1] + starts[2][1]
    assert "ls-tree" in starts[3][1] and "status" in starts[4][1] and "--branch" in starts[4][1]
    head = git("rev-parse", "HEAD", cwd=work, env=env).stdout.strip()
    assert head in starts[3][1] and "HEAD" not in starts[3][1]  # (the commit the status named, not HEAD now)
    assert (work / ".qem" / COMMITS_NAME).exists()
    monkeypatch.undo()
    assert hook(work, env, HOOKS[0]) == ((0, "", "ok: the log replays cleanly to 3 notes\n"), [])


@pytest.mark.parametrize("ending", ["fails", "interrupted", "escapes"])
def test_what_an_answer_asked_git_is_heard_however_the_command_ends(repo, monkeypatch, ending) -> None:  # type: ignore[no-untyped-def]
    """What HEAD's commit holds at the paths, asked as soon as the sealed verify's round named
    the commit, is read to its end where the command then fails, is interrupted or raises
    what no shell catches (and nothing is kept): every git started is heard, no child is left."""
    from qem_edit.base import errors
    from qem_edit.mirror import staged
    from qem_edit.shells.quick import run

    work, env = repo
    monkeypatch.chdir(work)
    assert run(list(HOOKS[0])) == 0  # (sealed)
    (work / ".qem" / COMMITS_NAME).unlink()
    seen = _gits_seen(monkeypatch)
    real = staged.verify_staged

    def ends_badly(*args, **kwargs):  # type: ignore[no-untyped-def]
        real(*args, **kwargs)
        raise {"fails": errors.BadInput("a failure after the round"), "interrupted": KeyboardInterrupt(),
               "escapes": RuntimeError("what no shell catches")}[ending]
    monkeypatch.setattr(staged, "verify_staged", ends_badly)
    if ending == "escapes":
        with pytest.raises(RuntimeError):
            run(list(HOOKS[0]))
    else:
        assert run(list(HOOKS[0])) == (errors.EXIT_INPUT if ending == "fails" else errors.EXIT_INTERRUPTED)
    started = [args for what, args in seen if what == "started"]
    assert any("ls-tree" in args for args in started), seen
    assert sorted(started) == sorted(args for what, args in seen if what == "heard"), seen
    assert not (work / ".qem" / COMMITS_NAME).exists()
    assert no_child_left()


@pytest.mark.parametrize("failing", ["the listing as the commit is named", "the listing both times", "the status after"])
def test_a_git_the_answer_cannot_start_costs_the_answer_not_the_command(repo, monkeypatch, failing) -> None:  # type: ignore[no-untyped-def]
    """Where the kept answer's listing cannot be started as the round names the commit, it is
    asked after the command instead, and the answer kept; where that cannot be started either,
    or the status after cannot be, nothing is kept and what was started is still heard.  The
    command answers as it does either way, and no child is left."""
    from qem_edit.shells.quick import run

    work, env = repo
    monkeypatch.chdir(work)
    assert run(list(HOOKS[0])) == 0  # (sealed)
    (work / ".qem" / COMMITS_NAME).unlink()
    seen = _gits_seen(monkeypatch)
    real = answered._listing if failing.startswith("the listing") else answered._status
    calls: list[int] = []

    def fails_first(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 1 or failing == "the listing both times":
            raise OSError(24, "Too many open files")
        return real(*args, **kwargs)
    monkeypatch.setattr(answered, "_listing" if failing.startswith("the listing") else "_status", fails_first)
    assert run(list(HOOKS[0])) == 0
    started = [args for what, args in seen if what == "started"]
    assert sorted(started) == sorted(args for what, args in seen if what == "heard"), seen
    assert (work / ".qem" / COMMITS_NAME).exists() == (failing == "the listing as the commit is named")
    assert len(calls) == (2 if failing.startswith("the listing") else 1)
    assert [what for what, _ in seen].count("round") == 2, seen  # (the round not failed: not asked again in turn)
    assert no_child_left()


def test_a_kept_answer_waits_for_git_as_long_as_any_git_and_no_longer(repo, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """A `git status` of the kept answer's that does not end (a stuck mount, an fsmonitor
    hook) is killed past PATIENCE_S, as any git of qem's is past its time: the kept answer
    is not answered from, the command runs in full and answers as it does, nothing is kept,
    and no child is left."""
    from qem_edit.shells.quick import run
    from qem_edit.system import gitspawn

    work, env = repo
    monkeypatch.chdir(work)
    assert run(list(HOOKS[0])) == 0 and (work / ".qem" / COMMITS_NAME).exists()  # (sealed, and kept)
    capsys.readouterr()
    kept = (work / ".qem" / COMMITS_NAME).stat().st_mtime_ns
    monkeypatch.setattr(answered, "PATIENCE_S", 0.3)
    monkeypatch.setattr(answered, "_status", lambda here, env, paths, branch=False: gitspawn.started(
        here, env, "-c", "alias.nap=!sleep 5", "nap"))
    started = time.monotonic()
    assert answered.answer(list(HOOKS[0])) is None  # (as `qem` asks first: not answered from what was kept)
    assert time.monotonic() - started < 2 and capsys.readouterr() == ("", "")
    assert run(list(HOOKS[0])) == 0  # (in full)
    assert time.monotonic() - started < 4
    assert capsys.readouterr().err == "ok: the log replays cleanly to 3 notes\n"
    assert (work / ".qem" / COMMITS_NAME).stat().st_mtime_ns == kept  # (its look after timed out too: nothing kept)
    assert no_child_left()


def test_what_a_whole_status_says_of_the_paths_is_what_their_own_status_says(tmp_path: Path) -> None:
    """`_said` of the whole work tree's `git status` (qem_edit.system.gitrepo.STATUS),
    limited to the paths an answer rests on, against `git status` of those paths alone
    (answered._status): the same commit, and a change under them listed by both or by
    neither, across changes inside and outside them of every kind git lists."""
    from qem_edit.system.gitrepo import STATUS

    (tmp_path / "home").mkdir()
    env = git_env(tmp_path / "home")
    work = tmp_path / "work"
    for name in ("lib/a.py", "lib/deep/b.py", "src/c.py", "other.py", ".qem/config.toml", "MEMORY.md",
                 "lib2/x.py", "odd name\nhere/f.py"):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(f"{name}\n")
    git("init", "-q", "-b", "main", cwd=work, env=env)
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "all", cwd=work, env=env)
    paths = [".qem", "MEMORY.md", "lib", "odd name\nhere", "src/c.py"]

    def both() -> tuple[object, object]:
        whole = subprocess.run(["git", *STATUS], cwd=work, env=env, capture_output=True, check=True).stdout
        began = answered._status(str(work), {**env}, paths, branch=True)
        return answered._said(whole, paths), answered._said(answered.gitspawn.output(began))

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, env=env, capture_output=True, text=True).stdout.strip()
    assert both() == ((head.encode(), True),) * 2
    changes = [
        lambda: (work / "other.py").write_text("changed\n"),  # outside: not listed
        lambda: (work / "lib2" / "y.py").write_text("new\n"),  # outside, though its name starts as one inside
        lambda: (work / "lib" / "deep" / "b.py").write_text("changed\n"),
        lambda: (work / "lib" / "deep" / "new.py").write_text("untracked\n"),
        lambda: (work / "src" / "c.py").unlink(),
        lambda: git("add", "-A", cwd=work, env=env),
        lambda: (work / "odd name\nhere" / "g.py").write_text("untracked\n"),
        lambda: (work / ".qem" / "config.toml").write_text("changed\n"),
        lambda: (git("add", "-A", cwd=work, env=env), git("commit", "-qm", "more", cwd=work, env=env)),
    ]
    for n, change in enumerate(changes):
        change()
        whole, own = both()
        assert whole == own, (n, whole, own)
        assert whole is not None and whole[1] == (n < 2 or n == 8), (n, whole)
    assert answered._said(b"# branch.oid abc\0! ignored\0", ["x"]) == (b"abc", False)  # (a record not known: counted)
    for paths, clean in ((["lib"], False), (["new"], False), (["lib/old/x", "other"], True)):
        assert answered._said(b"# branch.oid abc\x002 R. N... 100644 100644 100644 a b R100 new\0lib/old\0",
                              paths) == (b"abc", clean), paths  # (a rename's other path is its own record)
    assert answered._said(b"1 .M N... 100644 100644 100644 a b lib/x", ["lib"]) is None  # (no commit: no answer)


def test_a_kept_answer_reads_the_index_as_it_stands_and_makes_none(tmp_path: Path) -> None:
    """`Store.as_indexed`: the index as it is (a folder named with URI's characters), and
    NotAStore, with no file made, where there is none."""
    from qem_edit.base.errors import NotAStore
    from qem_edit.storage.store import Store

    root = tmp_path / "a ?#%41 b" / STATE_DIR
    root.parent.mkdir()
    with Store.open(str(root), create=True) as store:
        moment = store.moment(store.head())
    with Store.as_indexed(str(root)) as store:
        assert store.moment(store.head()) == moment
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        (root / name).unlink(missing_ok=True)
    with pytest.raises(NotAStore):
        Store.as_indexed(str(root))
    assert not (root / "index.db").exists()


@pytest.mark.parametrize("sealed", [False, True])
def test_head_moved_after_the_memory_opened_keeps_nothing_of_the_old_commit(repo, monkeypatch, sealed) -> None:  # type: ignore[no-untyped-def]
    """A commit made after `verify --staged` opened the memory and before it asked git
    anything (the anchored file changed in it): what the command judged is the new commit,
    kept under what the new commit holds, never the old one's; HEAD reset to the old commit,
    the next run answers as the full check does."""
    from qem_edit.mirror import staged
    from qem_edit.shells.quick import run

    work, env = repo
    monkeypatch.chdir(work)
    if sealed:
        assert run(list(HOOKS[0])) == 0
    (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
    old = git("rev-parse", "HEAD", cwd=work, env=env).stdout.strip()
    real = staged.verify_staged

    def meanwhile(store, place, **options):  # type: ignore[no-untyped-def]
        (work / "src" / "a.py").write_text("a = 2\n")
        git("commit", "-qam", "a moves", "--no-verify", cwd=work, env=env)
        return real(store, place, **options)
    monkeypatch.setattr(staged, "verify_staged", meanwhile)
    assert run(list(HOOKS[0])) == 0
    monkeypatch.setattr(staged, "verify_staged", real)
    git("reset", "-q", "--hard", old, cwd=work, env=env)
    stage_code(work, env, "c = 3\n")
    answer, _ = hook(work, env, HOOKS[0])
    assert answer == full(work, env, HOOKS[0])


def test_a_command_that_fails_unforeseen_leaves_no_git_watched(repo, monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A command that raises what no shell catches (a bug): the kept answer's watch on the
    next git round is gone with it; a later git run here starts only its own."""
    from qem_edit.mirror import staged
    from qem_edit.shells.quick import run
    from qem_edit.system import gitspawn

    work, env = repo
    monkeypatch.chdir(work)

    def broken(store, place, **options):  # type: ignore[no-untyped-def]
        raise RuntimeError("a bug in the command")
    monkeypatch.setattr(staged, "verify_staged", broken)
    with pytest.raises(RuntimeError):
        run(list(HOOKS[0]))
    assert not gitspawn.first
    seen = _gits_seen(monkeypatch)
    gitspawn.run(str(tmp_path), ["--version"], gitspawn.base_env())
    assert [what for what, _ in seen] == ["round"], seen
    seen.clear()
    from qem_edit.shells import shell

    real = shell.open_saying_notices

    def opened_then_broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        place, store = real(*args, **kwargs)
        store.close()
        raise RuntimeError("a bug in the command")
    monkeypatch.setattr(shell, "open_saying_notices", opened_then_broken)
    with pytest.raises(RuntimeError):
        run(list(HOOKS[1]))  # (its status started as the memory opened: read to its end all the same)
    assert not gitspawn.first
    assert [what for what, args in seen if "status" in args] == ["started", "heard"], seen


def test_a_memory_opened_again_after_git_was_asked_keeps_nothing(repo, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A command that asks git, then opens the memory again: what it read between the two
    was read before what the answer would rest on, so nothing is kept; opened twice before
    asking git, it is kept as ever."""
    from qem_edit.shells import shell
    from qem_edit.shells.quick import run
    from qem_edit.system import gitrepo

    work, env = repo
    monkeypatch.chdir(work)
    real, resting = shell.open_saying_notices, answered._resting
    # (the first opening one an answer may rest on, or one it may not: its reading fails)
    for asks_between, first_kept, kept in ((True, True, False), (True, False, False), (False, True, True)):
        (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
        opened = []

        def once(*args, **kwargs):  # type: ignore[no-untyped-def]
            opened.append(True)
            if len(opened) == 1 and not first_kept:
                raise ValueError("not this time")
            return resting(*args, **kwargs)

        def twice(*args, **kwargs):  # type: ignore[no-untyped-def]
            place, store = real(*args, **kwargs)
            store.close()
            if asks_between:
                gitrepo.staged_files(str(work), ["src"])
            return real(*args, **kwargs)
        monkeypatch.setattr(answered, "_resting", once)
        monkeypatch.setattr(shell, "open_saying_notices", twice)
        assert run(list(HOOKS[1])) == 0
        assert (work / ".qem" / COMMITS_NAME).exists() == kept, (asks_between, first_kept)


def test_an_index_reached_through_a_link_is_not_read_as_it_stands(tmp_path: Path) -> None:
    """`Store.as_indexed` refuses an index that is a link (SQLite would write through it)."""
    from qem_edit.base.errors import NotAStore
    from qem_edit.storage.store import Store

    root = tmp_path / STATE_DIR
    with Store.open(str(root), create=True):
        pass
    os.replace(root / "index.db", tmp_path / "elsewhere.db")
    os.symlink(tmp_path / "elsewhere.db", root / "index.db")
    with pytest.raises(NotAStore):
        Store.as_indexed(str(root))


def test_ctrl_c_while_an_answer_is_kept_is_said_as_every_command_says_it(repo, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C after the command printed its answer, while the answer is being kept (the
    index read again, git asked): "qem: interrupted" and its exit status, no traceback,
    nothing kept, and both git commands asked then waited for."""
    from qem_edit.base.errors import EXIT_INTERRUPTED
    from qem_edit.shells.quick import run
    from qem_edit.storage.store import Store

    work, env = repo
    monkeypatch.chdir(work)
    (work / ".qem" / COMMITS_NAME).unlink(missing_ok=True)
    seen = _gits_seen(monkeypatch)

    def interrupted(root):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt
    monkeypatch.setattr(Store, "as_indexed", staticmethod(interrupted))
    assert run(list(HOOKS[2])) == EXIT_INTERRUPTED
    out, err = capsys.readouterr()
    assert "no anchor drifted" in out and err.endswith("qem: interrupted\n") and "Traceback" not in err
    assert not (work / ".qem" / COMMITS_NAME).exists()
    after = [args for what, args in seen if what == "heard"][-2:]
    assert "status" in after[0] and "ls-tree" in after[1], seen
