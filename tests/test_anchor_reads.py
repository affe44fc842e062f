"""Reading notes by what they are anchored to: `qem query anchor=PATH` and `anchor~FOLDER`,
in a scan and in the index.

Real git, real `qem` subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_qem

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

FILES = ("src/lock.py", "src/deep/run.sh", "srcx/b.py", "docs/deps.md")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def qem(cwd: Path, *args: str, code: int = 0, **kwargs) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    done = run_qem(*args, cwd=cwd, **kwargs)
    assert done.returncode == code, f"qem {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    assert "Traceback" not in done.stderr
    return done


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a few committed files, and a memory."""
    home = Path(os.environ["HOME"])
    (home / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.com\n[init]\n\tdefaultBranch = main\n")
    root = tmp_path / "repo"
    for path in FILES:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(f"# {path}\n")
    git(root.parent, "init", "-q", str(root))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "code")
    qem(root, "init")
    return root


def add(root: Path, text: str, *anchors: str, kind: str = "gotcha") -> str:
    args = [a for path in anchors for a in ("--anchor", path)]
    return qem(root, "add", text, "-k", kind, *args).stdout.strip()


@pytest.fixture
def anchored(repo: Path) -> dict[str, str]:
    """Notes anchored to a file, a folder, a file in a sub-folder, a file of a folder whose
    name starts like another's (srcx, beside src), and one anchored to nothing."""
    return {
        "lock": add(repo, "The lock is taken first", "src/lock.py"),
        "src": add(repo, "src holds the daemon", "src"),
        "deep": add(repo, "run.sh runs from the top", "src/deep/run.sh", "docs/deps.md"),
        "srcx": add(repo, "srcx is vendored", "srcx/b.py"),
        "none": add(repo, "Nothing in particular"),
    }


def queried(root: Path, *filters: str) -> set[str]:
    return {n["short"] for n in json.loads(qem(root, "query", *filters, "--json").stdout)["notes"]}


def exported(root: Path, *filters: str) -> set[str]:
    """The notes a query's rendering holds: the filters run in the index, not a scan."""
    text = qem(root, "export", "--stdout", *filters).stdout
    return {line.split("]", 1)[0][len("- [#"):] for line in text.splitlines() if line.startswith("- [#")}


# -- qem query anchor= / anchor~ -------------------------------------------------------------------


def test_anchor_filters_pick_a_path_or_a_folder_and_stop_at_the_folder_s_boundary(repo: Path, anchored: dict) -> None:
    n = anchored
    cases = {
        ("anchor=src/lock.py",): {n["lock"]},
        ("anchor=src",): {n["src"]},  # exactly the folder, not what is in it
        ("anchor=src/",): {n["src"]},  # a trailing / is the same path
        ("anchor~src",): {n["lock"], n["src"], n["deep"]},  # never srcx/b.py
        ("anchor~src/",): {n["lock"], n["src"], n["deep"]},
        ("anchor~src/deep",): {n["deep"]},  # what is in the folder, not the folders holding it
        ("anchor~srcx",): {n["srcx"]},
        ("anchor~docs/deps.md",): {n["deep"]},  # a file's "folder" is the file
        ("anchor~sr",): set(),  # a prefix of a name is no folder
        ("anchor~src", "anchor=docs/deps.md"): {n["deep"]},  # filters are and-ed
        ("anchor~src", "kind=finding"): set(),
    }
    for filters, wanted in cases.items():
        assert queried(repo, *filters) == wanted, filters
        if wanted:  # (a query's checkout that matches nothing is refused)
            assert exported(repo, *filters) == wanted, filters


def test_a_superseded_note_keeps_its_anchors_for_the_query(repo: Path, anchored: dict) -> None:
    """anchor= reads every note, as every other note filter does; state= narrows it."""
    successor = qem(repo, "supersede", anchored["lock"], "The lock is taken second", "-m", "order").stdout.strip()
    assert queried(repo, "anchor=src/lock.py") == {anchored["lock"], successor}
    assert queried(repo, "anchor=src/lock.py", "state=active") == {successor}


@pytest.mark.parametrize("given, words", [
    ("anchor=/etc/passwd", "anchor=/etc/passwd: an absolute path"),
    ("anchor~../outside", "anchor~../outside: a path with an empty, `.` or `..` part"),
    ("anchor=src//lock.py", "a path with an empty"),
    ("anchor~.git/config", "inside .git/"),
    ("anchor~", "filter 'anchor~' is empty"),
    ("kind~gotcha", "no filter kind~: write kind=VALUE"),
    ("text=lock", "no filter text=: write text~VALUE"),
    ("anchors=src", "unknown note filter 'anchors'"),
])
def test_a_filter_no_anchor_can_match_is_refused_naming_it(repo: Path, given: str, words: str) -> None:
    done = qem(repo, "query", given, code=2)
    assert words in done.stderr and done.stdout == ""
