"""Whatever commit a person makes with their usual habits, it carries a memory consistent
with its MEMORY.md, or the hooks refuse it and name what is missing.

Real git (a bare origin, clones), the real pre-commit framework running this
repository's three hooks (as local system hooks with this interpreter: no install, no
network), real `qem` processes.  Every scenario ends in a fresh clone of the origin that
must hold every note: `qem list` shows it, `qem export --check` passes, the count is right.

qem's writes stage what they wrote (qem_edit.mirror.gitstage), so most habits commit a write
whole; with `[git] stage = false` the hooks judge the staged tree (qem_edit.mirror.staged) and
refuse the partial commits, rendering nothing over the work tree.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_qem
from test_precommit import git, git_env, local_hooks, pre_commit

from qem_edit.base.decisions import NewNote
from qem_edit.storage.logtree import LogTree, event_bytes
from qem_edit.storage.store import PACK_AT, Store

pytest.importorskip("pre_commit")
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

HOOKS = ("qem-export", "qem-export-check", "qem-verify")
FIRST = "Run tests inside the venv"
NEW = "The lock order is A then B"


def origin_and_clone(base: Path, text: str, kind: str) -> dict[str, str]:
    """Under `base`: a bare origin and a clone of it with one note (`text`, `kind`)
    committed and pushed, MEMORY.md tracked, and the hooks installed; the git
    environment."""
    env = git_env(base / "home")
    (base / "home").mkdir()
    env["PRE_COMMIT_HOME"] = str(base / "pre-commit-home")
    git("init", "-q", "--bare", "-b", "main", str(base / "origin.git"), cwd=base, env=env)
    work = base / "work"
    git("clone", "-q", str(base / "origin.git"), str(work), cwd=base, env=env)
    (work / ".pre-commit-config.yaml").write_text(local_hooks(*HOOKS), "utf-8")
    assert qem(work, "add", text, "--kind", kind).returncode == 0
    assert qem(work, "export").returncode == 0
    assert pre_commit("install", cwd=work, env=env).returncode == 0
    git("add", "-A", cwd=work, env=env)
    first = git("commit", "-m", "the memory", cwd=work, env=env, check=False)
    assert first.returncode == 0, first.stdout + first.stderr
    git("push", "-q", "origin", "main", cwd=work, env=env)
    return env


def copied(base: Path, env: dict[str, str], tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """(a clone, its origin, the git environment): copies of what `origin_and_clone` made."""
    shutil.copytree(base / "origin.git", tmp_path / "origin.git")
    shutil.copytree(base / "work", tmp_path / "work", symlinks=True)
    work = tmp_path / "work"
    git("remote", "set-url", "origin", str(tmp_path / "origin.git"), cwd=work, env=env)
    return work, tmp_path / "origin.git", env


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A bare origin and a clone of it with one note committed and pushed, MEMORY.md
    tracked, and the hooks installed; each test works on a copy."""
    base = tmp_path_factory.mktemp("habits")
    return base, origin_and_clone(base, FIRST, "directive")


@pytest.fixture
def team(template, tmp_path) -> tuple[Path, Path, dict[str, str]]:
    """(a clone, its origin, the git environment): copies of the template."""
    return copied(*template, tmp_path)


def qem(cwd: Path, *args: str):  # type: ignore[no-untyped-def]
    return run_qem(*args, cwd=cwd, timeout=120)


def staging_off(work: Path, env: dict[str, str]) -> None:
    settings = work / ".qem" / "config.toml"
    settings.write_text(settings.read_text("utf-8") + "\n[git]\nstage = false\n", "utf-8")
    done = git("commit", "-am", "stage nothing", cwd=work, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def commits(work: Path, env: dict[str, str]) -> int:
    return int(git("rev-list", "--count", "HEAD", cwd=work, env=env).stdout)


def fresh_clone_holds(origin: Path, env: dict[str, str], texts: list[str], count: int) -> None:
    """A fresh clone of the origin holds every note: listed, MEMORY.md current, counted."""
    fresh = origin.parent / f"fresh-{len(list(origin.parent.glob('fresh-*')))}"
    git("clone", "-q", str(origin), str(fresh), cwd=origin.parent, env=env)
    listed = qem(fresh, "list")
    assert listed.returncode == 0, listed.stderr
    for text in texts:
        assert text in listed.stdout, (text, listed.stdout[-2000:])
    checked = qem(fresh, "export", "--check")
    assert checked.returncode == 0, checked.stderr
    verified = qem(fresh, "verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["notes"] == count


HABITS = {
    "commit -am": [["commit", "-am", "a note"]],
    "add MEMORY.md": [["add", "MEMORY.md"], ["commit", "-m", "a note"]],
    "commit -- MEMORY.md": [["commit", "-m", "a note", "--", "MEMORY.md"]],
    "add .": [["add", "."], ["commit", "-m", "a note"]],
    "add -p": [["add", "-p"], ["commit", "-m", "a note"]],
    "add -u (an IDE's commit of changed files)": [["add", "-u"], ["commit", "-m", "a note"]],
    "add the events, not the texts": [["add", ".qem/events", "MEMORY.md"], ["commit", "-m", "a note"]],
}
# where qem stages its writes: the habits that commit the write whole, and the one that
# cannot (`commit -- PATHS` commits those paths from HEAD's tree: the hooks refuse it)
WHOLE_WHEN_STAGED = {"commit -am", "add MEMORY.md", "add .", "add -p", "add -u (an IDE's commit of changed files)",
                     "add the events, not the texts"}
WHOLE_WHEN_NOT_STAGED = {"add ."}


def make_commit(work: Path, env: dict[str, str], habit: str):  # type: ignore[no-untyped-def]
    done = None
    for step in HABITS[habit]:
        answers = "y\n" * 40 if step == ["add", "-p"] else None
        done = _git_input(work, env, step, answers)
        if step[0] == "commit":
            return done
    return done


def _git_input(work: Path, env: dict[str, str], args: list[str], answers: str | None):  # type: ignore[no-untyped-def]
    return subprocess.run(["git", *args], cwd=work, env=env, input=answers, capture_output=True, text=True,
                          timeout=300)


def refused_naming_the_note(done, work: Path, env: dict[str, str], before: int) -> None:  # type: ignore[no-untyped-def]
    """The commit was stopped by the hooks, which named the note, its files and the command."""
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert commits(work, env) == before
    assert "incomplete" in output and NEW in output, output
    note = qem(work, "list").stdout
    short = next(line.split("\t")[0] for line in note.splitlines() if NEW in line)
    assert short in output, (short, output)
    assert any(f".qem/{folder}/" in output for folder in ("events", "texts", "packs")), output
    assert "git add .qem MEMORY.md" in output, output


def follow_the_advice(work: Path, env: dict[str, str]) -> None:
    git("add", ".qem", "MEMORY.md", cwd=work, env=env)
    again = git("commit", "-m", "the note, whole", cwd=work, env=env, check=False)
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.parametrize("habit", list(HABITS))
def test_a_staged_write_is_committed_whole(team, habit: str) -> None:
    """qem stages what it writes: each habit commits the note whole, or (`commit --
    MEMORY.md`, which leaves the staged log out) the hooks refuse it and say what to add."""
    work, origin, env = team
    before = commits(work, env)
    assert qem(work, "add", NEW, "--kind", "gotcha").returncode == 0
    done = make_commit(work, env, habit)
    if habit in WHOLE_WHEN_STAGED:
        assert done.returncode == 0, done.stdout + done.stderr
        assert commits(work, env) == before + 1
    else:
        refused_naming_the_note(done, work, env, before)
        follow_the_advice(work, env)
    git("push", "-q", "origin", "main", cwd=work, env=env)
    fresh_clone_holds(origin, env, [FIRST, NEW], 2)


@pytest.mark.parametrize("habit", list(HABITS))
def test_the_hooks_refuse_a_partial_commit(team, habit: str) -> None:
    """With staging turned off, a habit that commits MEMORY.md without the note's log files
    is refused by the hooks, naming the note, its files and the command; the work tree's
    MEMORY.md is not rendered over.  Following the advice commits it whole."""
    work, origin, env = team
    staging_off(work, env)
    before = commits(work, env)
    assert qem(work, "add", NEW, "--kind", "gotcha").returncode == 0
    assert git("status", "--porcelain", "--", ".qem/events", cwd=work, env=env).stdout.startswith("??")
    mirror = (work / "MEMORY.md").read_bytes()
    done = make_commit(work, env, habit)
    if habit in WHOLE_WHEN_NOT_STAGED:
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        refused_naming_the_note(done, work, env, before)
        assert (work / "MEMORY.md").read_bytes() == mirror  # nothing rendered over
        if habit == "add the events, not the texts":
            output = done.stdout + done.stderr
            assert "(its text)" in output and ".qem/texts/" in output, output
        follow_the_advice(work, env)
    git("push", "-q", "origin", "main", cwd=work, env=env)
    fresh_clone_holds(origin, env, [FIRST, NEW], 2)


def loose_notes(work: Path, count: int) -> None:
    """`count` notes as loose files (an event and a text each), as that many `qem add`s
    leave them: written in one transaction (a pack), then laid out loose (quickly: no
    fsync, the test's files need none)."""
    with Store.open(work / ".qem") as store:
        store.write(lambda tx: [tx.create(NewNote("gotcha", "low", "agent", f"loose note {i}"), "tester")
                                for i in range(count)])
        tree = LogTree(work / ".qem")
        for name in sorted(n for n in tree.names() if n.startswith("packs/")):
            events, texts = tree.read(name)
            for event in events:
                (tree.root / "events" / event.id).write_bytes(event_bytes(event))
            for text in texts:
                (tree.root / "texts" / text.note).write_bytes(text.record_bytes())
            (tree.root / name).unlink()


def test_a_pack_is_committed_with_its_deletions(team) -> None:
    """Past PACK_AT loose files a write packs them: every committed loose file becomes a
    deletion and the packs are new files.  `git commit -am` carries both (qem staged
    them), so the fresh clone holds every note."""
    work, origin, env = team
    loose_notes(work, PACK_AT)
    assert qem(work, "export").returncode == 0
    git("add", "-A", cwd=work, env=env)
    seeded = git("commit", "-m", "many loose notes", cwd=work, env=env, check=False)
    assert seeded.returncode == 0, seeded.stdout + seeded.stderr
    assert len(list((work / ".qem" / "events").iterdir())) > PACK_AT // 2
    assert qem(work, "add", NEW, "--kind", "gotcha").returncode == 0
    assert not list((work / ".qem" / "events").iterdir())  # packed
    done = git("commit", "-am", "a note", cwd=work, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git("status", "--porcelain", "--", ".qem", cwd=work, env=env).stdout == ""
    git("push", "-q", "origin", "main", cwd=work, env=env)
    fresh_clone_holds(origin, env, [FIRST, NEW, "loose note 0", f"loose note {PACK_AT - 1}"], PACK_AT + 2)


def test_a_pack_not_staged_is_refused(team) -> None:
    """The same pack with staging turned off: `git commit -am` would commit the deletion
    of the whole log and leave the packs behind; the hooks refuse it, naming the packs."""
    work, origin, env = team
    staging_off(work, env)
    loose_notes(work, PACK_AT)
    assert qem(work, "export").returncode == 0
    git("add", "-A", cwd=work, env=env)
    assert git("commit", "-m", "many loose notes", cwd=work, env=env, check=False).returncode == 0
    before = commits(work, env)
    assert qem(work, "add", NEW, "--kind", "gotcha").returncode == 0
    done = git("commit", "-am", "a note", cwd=work, env=env, check=False)
    refused_naming_the_note(done, work, env, before)
    assert ".qem/packs/e-" in done.stdout + done.stderr
    follow_the_advice(work, env)
    git("push", "-q", "origin", "main", cwd=work, env=env)
    fresh_clone_holds(origin, env, [FIRST, NEW, "loose note 0"], PACK_AT + 2)


def test_a_commit_of_other_work_leaves_the_note_for_later(team) -> None:
    """With staging turned off, a commit of other files only (MEMORY.md and the log as
    HEAD has them) is whole: the hooks let it through, render nothing over MEMORY.md, and
    the note waits in the work tree for its own commit."""
    work, origin, env = team
    staging_off(work, env)
    assert qem(work, "add", NEW, "--kind", "gotcha").returncode == 0
    mirror = (work / "MEMORY.md").read_bytes()
    (work / "code.py").write_text("print('hello')\n", "utf-8")
    git("add", "code.py", cwd=work, env=env)
    done = git("commit", "-m", "code only", cwd=work, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / "MEMORY.md").read_bytes() == mirror
    git("push", "-q", "origin", "main", cwd=work, env=env)
    fresh_clone_holds(origin, env, [FIRST], 1)
    follow_the_advice(work, env)
    git("push", "-q", "origin", "main", cwd=work, env=env)
    fresh_clone_holds(origin, env, [FIRST, NEW], 2)


# -- where qem does not stage ---------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path) -> tuple[Path, dict[str, str]]:
    env = git_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    work = tmp_path / "repo"
    git("init", "-q", "-b", "main", str(work), cwd=tmp_path, env=env)
    return work, env


def test_an_ignored_memory_is_never_staged(repo) -> None:
    """A repository that ignores `.qem/` keeps its memory out of git: nothing is staged."""
    work, env = repo
    (work / ".gitignore").write_text(".qem/\n", "utf-8")
    done = qem(work, "add", NEW, "--kind", "gotcha")
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert git("ls-files", cwd=work, env=env).stdout == ""
    assert NEW in qem(work, "list").stdout
    # its MEMORY.md committed: the staged judgment is the work tree's (no log is ever staged)
    assert qem(work, "export").returncode == 0
    git("add", ".gitignore", "MEMORY.md", cwd=work, env=env)
    for args in (("export", "--check", "--staged"), ("verify", "--staged")):
        done = qem(work, *args)
        assert done.returncode == 0 and "incomplete" not in done.stdout + done.stderr, (args, done.stdout, done.stderr)


def test_a_mirror_outside_the_work_tree_is_refused_before_anything_is_written(repo, tmp_path) -> None:
    """The setting is committed, so a teammate's branch can set it: a mirror outside the
    work tree is refused (exit 2), the write is not made and nothing is staged
    (tests/test_trust_paths.py walks the hostile branch itself)."""
    work, env = repo
    assert qem(work, "init").returncode == 0
    outside = tmp_path / "elsewhere" / "MEMORY.md"
    outside.parent.mkdir()
    config = work / ".qem" / "config.toml"
    config.write_text(config.read_text("utf-8") + f'\n[export]\npath = "{outside}"\n', "utf-8")
    git("add", "-A", cwd=work, env=env)
    git("commit", "-qm", "config", cwd=work, env=env)
    for argv in (["export"], ["add", NEW, "--kind", "gotcha"]):
        done = qem(work, *argv)
        assert done.returncode == 2 and "[export] path" in done.stderr and "leads outside" in done.stderr, done.stderr
    assert not outside.exists()
    assert git("diff", "--cached", "--name-only", cwd=work, env=env).stdout == ""
    assert not any((work / ".qem" / "events").iterdir())


def test_the_advice_can_be_pasted_where_a_path_holds_a_space(repo) -> None:
    work, env = repo
    place = work / "sub dir"
    place.mkdir()
    assert qem(place, "init", "-w", str(place)).returncode == 0
    (place / ".qem" / "config.toml").write_text((place / ".qem" / "config.toml").read_text("utf-8")
                                               + "\n[git]\nstage = false\n", "utf-8")
    assert qem(place, "add", NEW, "--kind", "gotcha", "-w", str(place)).returncode == 0
    assert qem(place, "export", "-w", str(place)).returncode == 0
    git("add", "sub dir/MEMORY.md", cwd=work, env=env)
    done = qem(place, "export", "--check", "--staged", "-w", str(place))
    advice = re.search(r"`(git add [^`]+)`", done.stderr)
    assert done.returncode == 1 and advice, done.stderr
    pasted = subprocess.run(advice[1], shell=True, cwd=work, env=env, capture_output=True, text=True)
    assert pasted.returncode == 0, pasted.stderr
    assert qem(place, "export", "--check", "--staged", "-w", str(place)).returncode == 0


def test_a_locked_index_warns_and_the_write_stands(repo) -> None:
    """Another git holding `.git/index.lock` past a short wait: the write is saved, the
    writer is told the command that stages it by hand, and nothing is staged."""
    work, env = repo
    assert qem(work, "add", FIRST, "--kind", "directive").returncode == 0
    (work / ".git" / "index.lock").write_bytes(b"")
    done = qem(work, "add", NEW, "--kind", "gotcha")
    assert done.returncode == 0, done.stderr
    assert "the write is saved" in done.stderr and "`git add .qem`" in done.stderr, done.stderr
    (work / ".git" / "index.lock").unlink()
    assert NEW in qem(work, "list").stdout
    untracked = git("status", "--porcelain", "--untracked-files=all", cwd=work, env=env).stdout
    assert "?? .qem/events/" in untracked and "A  .qem/config.toml" in untracked, untracked


def test_a_bad_stage_setting_is_refused(repo) -> None:
    work, env = repo
    assert qem(work, "add", FIRST, "--kind", "directive").returncode == 0
    settings = work / ".qem" / "config.toml"
    settings.write_text(settings.read_text("utf-8") + "\n[git]\nstage = \"no\"\n", "utf-8")
    done = qem(work, "add", NEW, "--kind", "gotcha")
    assert done.returncode == 2 and "[git] stage must be true or false" in done.stderr, done.stderr
    assert NEW not in qem(work, "list").stdout
