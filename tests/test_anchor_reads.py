"""Reading notes by what they are anchored to: `qem query anchor=PATH` and `anchor~FOLDER`
(in a scan and in the index), `qem anchors list [PATH]`, and `qem anchors suggest` (the
paths a note's text names in backticks that it is not anchored to; nothing is anchored).

Real git, real `qem` subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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


# -- qem anchors list --------------------------------------------------------------------------------


def test_anchors_list_gives_a_line_per_note_and_path_by_path(repo: Path, anchored: dict) -> None:
    n = anchored
    oid = {path: git(repo, "hash-object", path) for path in FILES}
    oid["src"] = git(repo, "rev-parse", "HEAD:src")
    lines = qem(repo, "anchors", "list").stdout.splitlines()
    assert [line.split("\t")[:3] for line in lines] == [
        ["docs/deps.md", oid["docs/deps.md"][:12], f"#{n['deep']}"],
        ["src", oid["src"][:12], f"#{n['src']}"],
        ["src/deep/run.sh", oid["src/deep/run.sh"][:12], f"#{n['deep']}"],
        ["src/lock.py", oid["src/lock.py"][:12], f"#{n['lock']}"],
        ["srcx/b.py", oid["srcx/b.py"][:12], f"#{n['srcx']}"],
    ]
    assert lines[3].split("\t")[3:] == ["gotcha", "active", "The lock is taken first"]
    listed = json.loads(qem(repo, "anchors", "list", "--json").stdout)
    assert [(row["path"], row["oid"], row["short"]) for row in listed] == [
        (line.split("\t")[0], oid[line.split("\t")[0]], line.split("\t")[2][1:]) for line in lines]
    assert set(listed[0]) == {"path", "oid", "note", "short", "kind", "state", "first_line"}


def test_anchors_list_path_keeps_that_path_and_the_folder_under_it(repo: Path, anchored: dict) -> None:
    n = anchored

    def paths(*args: str) -> list[tuple[str, str]]:
        return [(row["path"], row["short"]) for row in json.loads(qem(repo, "anchors", "list", *args, "--json").stdout)]

    assert paths("src") == [("src", n["src"]), ("src/deep/run.sh", n["deep"]), ("src/lock.py", n["lock"])]
    assert paths("src/") == paths("src")
    assert paths("srcx") == [("srcx/b.py", n["srcx"])]
    assert paths("src/lock.py") == [("src/lock.py", n["lock"])]
    empty = qem(repo, "anchors", "list", "lib")
    assert empty.stdout == "" and "no note in force is anchored to lib" in empty.stderr


def test_anchors_list_holds_only_notes_in_force(repo: Path, anchored: dict) -> None:
    n = anchored
    qem(repo, "flag-stale", n["lock"], "-m", "the lock moved")
    qem(repo, "revoke", n["srcx"], "-m", "not vendored after all")
    successor = qem(repo, "supersede", n["src"], "src holds the daemon and its lock", "-m", "more").stdout.strip()
    listed = {(row["path"], row["short"], row["state"]) for row in json.loads(qem(repo, "anchors", "list", "--json").stdout)}
    assert ("src/lock.py", n["lock"], "stale") in listed and ("src", successor, "active") in listed
    assert not {row for row in listed if row[1] in (n["srcx"], n["src"])}


@pytest.mark.parametrize("path, words", [
    ("/src", "anchors list /src: an absolute path"),
    ("../src", "a path with an empty, `.` or `..` part"),
    (".qem", "inside .qem/"),
])
def test_anchors_list_refuses_a_path_no_anchor_can_have(repo: Path, path: str, words: str) -> None:
    done = qem(repo, "anchors", "list", path, code=2)
    assert words in done.stderr and done.stdout == ""


# -- qem anchors suggest -----------------------------------------------------------------------------


def suggestions(root: Path) -> dict[str, list[str]]:
    return {row["short"]: row["paths"] for row in json.loads(qem(root, "anchors", "suggest", "--json").stdout)}


def test_suggest_names_the_existing_paths_a_text_holds_and_the_note_is_not_anchored_to(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "x").write_text("outside the work tree\n")
    (repo / "notes.txt").write_text("untracked: still a path of the work tree\n")
    text = ("Edit `src/lock.py` and `src/deep/` with care; `docs/deps.md` too. Not these: `../x`, `src/gone.py`,"
            " `make lint`, `https://example.com/src`, `/etc/passwd`, `.git/config`, `.qem/config.toml`, `src/../srcx`;"
            " and `notes.txt`.")
    note = add(repo, text, "docs/deps.md")
    plain = add(repo, "No path at all, and src/lock.py outside backticks")
    before = qem(repo, "dump").stdout
    found = suggestions(repo)
    assert found == {note: ["notes.txt", "src/deep", "src/lock.py"]}  # docs/deps.md is anchored already
    assert plain not in found
    shown = qem(repo, "anchors", "suggest")
    assert shown.stdout.startswith(f"#{note} names notes.txt, src/deep, src/lock.py, not anchored:\n")
    assert "1 note(s) name 3 path(s) they are not anchored to; nothing was anchored" in shown.stderr
    assert qem(repo, "dump").stdout == before  # nothing was written


def test_the_suggested_command_anchors_the_note_keeping_its_text_and_anchors(repo: Path) -> None:
    note = add(repo, "Read `src/lock.py` before\n\nchanging `srcx/b.py`", "docs/deps.md")
    [row] = json.loads(qem(repo, "anchors", "suggest", "--json").stdout)
    assert row["paths"] == ["src/lock.py", "srcx/b.py"] and row["anchors"] == ["docs/deps.md"]
    here = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # this qem, this python
    done = subprocess.run(["sh", "-c", row["command"]], cwd=repo, capture_output=True, text=True, env={**os.environ, **here})
    assert done.returncode == 0, done.stderr
    successor = json.loads(qem(repo, "show", done.stdout.strip(), "--json").stdout)
    assert successor["text"] == "Read `src/lock.py` before\n\nchanging `srcx/b.py`"
    assert [a["path"] for a in successor["anchors"]] == ["docs/deps.md", "src/lock.py", "srcx/b.py"]
    assert json.loads(qem(repo, "show", note, "--json").stdout)["state"] == "superseded"
    nothing = qem(repo, "anchors", "suggest")
    assert nothing.stdout == "" and "no note in force names" in nothing.stderr


def test_suggest_reads_only_notes_in_force(repo: Path) -> None:
    revoked = add(repo, "Once about `src/lock.py`")
    qem(repo, "revoke", revoked, "-m", "wrong")
    stale = add(repo, "Still about `srcx/b.py`")
    qem(repo, "flag-stale", stale, "-m", "check it")
    assert suggestions(repo) == {stale: ["srcx/b.py"]}


def test_suggest_follows_no_link_out_of_the_work_tree(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (repo / "out").symlink_to(tmp_path / "outside")
    (repo / "inside").symlink_to(repo / "src")
    add(repo, "See `out` and `out/secret.txt`, and `inside`")
    [row] = json.loads(qem(repo, "anchors", "suggest", "--json").stdout)
    assert row["paths"] == ["inside"]  # a link inside the tree is a path of it, as an anchor takes it


# -- the command group ----------------------------------------------------------------------------


def test_a_command_of_the_group_is_built_alone_and_ends_quietly_on_a_closed_pipe() -> None:
    """`qem anchors list` builds only that command of the group (the hook's `qem anchors
    check` pays for no other), `qem anchors --help` the whole group, and its commands, as
    every other, end quietly when their reader goes (`| head`)."""
    from qem_edit.shells import cli

    command, args, prog = cli._command(["anchors", "list", "src"])
    assert prog == "qem anchors" and args == ["list", "src"] and set(command.commands) == {"list"}
    whole, _, _ = cli._command(["anchors", "--help"])
    assert {"check", "list", "suggest"} <= set(whole.commands)
    assert all(hasattr(info.callback, "__wrapped__") for info in cli.anchors_app.registered_commands)
