"""Anchors: a note names the files and folders it is about, with git's object id of what
each held when the note was written (docs/FORMAT.md, "An anchor"; qem_edit/system/anchors.py).

Real git, real `qem` subprocesses: the ids are git's own (`git hash-object`, a folder's
tree as `git write-tree` makes it), the same in a copy of the tree outside git; a path that
is no anchor is refused (exit 2) with nothing written; MEMORY.md shows each anchor on an
`@anchor:` line that an edit can add, change or remove (a supersession, the content read
at check-in); and an anchor a hostile clone wrote by hand is set aside and named by verify.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from builders import code_repository, planted_created
from conftest import run_qem

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(cwd: Path, *args: str, env: dict | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def qem(cwd: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    done = run_qem(*args, cwd=cwd)
    assert done.returncode == code, f"qem {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    assert "Traceback" not in done.stderr
    return done


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a tracked file and folder, an ignored file, a memory and its
    MEMORY.md committed; an untracked file beside."""
    root = code_repository(tmp_path / "repo", {"src/lock.py": "LOCK = 1\n", "src/deep/run.sh": "#!/bin/sh\n",
                                               "src/other.py": "OTHER = 2\n"}, executable=("src/deep/run.sh",))
    qem(root, "init")
    qem(root, "export")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "memory")
    (root / "notes.txt").write_text("not tracked yet\n")
    return root


def note_json(root: Path, short: str) -> dict:
    return json.loads(qem(root, "show", short, "--json").stdout)


def log_state(root: Path) -> dict[str, bytes]:
    """Every file of the log and MEMORY.md, to tell that a refusal wrote nothing."""
    files = {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / ".qem").rglob("*"))
             if p.is_file() and p.name != "index.db" and not p.name.startswith("index.db")}
    files["MEMORY.md"] = (root / "MEMORY.md").read_bytes()
    return files


def folder_tree(root: Path, folder: str) -> str:
    """A folder's tree id as git makes it from the work tree: a copy of the index, the
    folder added to it (.gitignore honoured), the tree written."""
    index = root / ".git" / "anchor-test-index"
    shutil.copy(root / ".git" / "index", index)
    env = {"GIT_INDEX_FILE": str(index)}
    git(root, "add", "-A", "--", folder, env=env)
    return git(root, "write-tree", f"--prefix={folder}/", env=env)


# -- recorded ---------------------------------------------------------------------------------


def test_a_note_anchors_a_tracked_file_an_untracked_file_and_a_folder_by_git_s_ids(repo: Path) -> None:
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "src" / "debug.log").write_text("ignored\n")
    assert git(repo, "ls-files", "notes.txt", "src/debug.log") == ""  # neither is tracked
    short = qem(repo, "add", "Release the lock before restart", "-k", "gotcha",
                "--anchor", "src/lock.py", "--anchor", "notes.txt", "--anchor", "src").stdout.strip()
    anchors = {a["path"]: a["oid"] for a in note_json(repo, short)["anchors"]}
    assert anchors == {
        "src/lock.py": git(repo, "hash-object", "src/lock.py"),
        "notes.txt": git(repo, "hash-object", "notes.txt"),
        "src": folder_tree(repo, "src"),  # the ignored file left out, the executable kept as one
    }
    dumped = [json.loads(line) for line in qem(repo, "dump").stdout.splitlines()]
    created = [row for row in dumped if row.get("type") == "created"]
    assert created[0]["data"]["anchors"] == [{"path": p, "oid": anchors[p]} for p in sorted(anchors)]
    with sqlite3.connect(repo / ".qem" / "index.db") as conn:
        rows = conn.execute("SELECT path, oid FROM anchors ORDER BY path").fetchall()
    assert rows == sorted(anchors.items())


def test_a_path_typed_in_a_subfolder_is_stored_from_the_top(repo: Path) -> None:
    short = qem(repo / "src", "add", "Deep things", "-k", "finding", "--anchor", "deep/run.sh",
                "--anchor", "../notes.txt").stdout.strip()
    assert [a["path"] for a in note_json(repo, short)["anchors"]] == ["notes.txt", "src/deep/run.sh"]


def test_a_repository_of_sha256_objects_gets_sha256_ids(tmp_path: Path) -> None:
    root = tmp_path / "wide"
    git(tmp_path, "init", "-q", "--object-format=sha256", str(root))
    (root / "a.c").write_text("int main;\n")
    qem(root, "init")
    short = qem(root, "add", "About a.c", "-k", "finding", "--anchor", "a.c").stdout.strip()
    [anchor] = note_json(root, short)["anchors"]
    assert len(anchor["oid"]) == 64 and anchor["oid"] == git(root, "hash-object", "a.c")


def test_a_copy_of_the_tree_outside_git_computes_the_same_ids(repo: Path, tmp_path: Path) -> None:
    short = qem(repo, "add", "About the lock", "-k", "gotcha", "--anchor", "src/lock.py", "--anchor", "src").stdout
    inside = note_json(repo, short.strip())["anchors"]
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    again = qem(copy, "add", "About the lock, outside git", "-k", "gotcha", "--anchor", "src/lock.py",
                "--anchor", "src").stdout.strip()
    assert note_json(copy, again)["anchors"] == inside


REFUSED = {
    "absolute": (lambda root: str(root / "src" / "lock.py"), "absolute path"),
    "dot-dot": (lambda root: "../outside.txt", "leads out of the work tree"),
    "link out": (lambda root: "out", "symbolic link pointing out of the work tree"),
    "through a link out": (lambda root: "out/secret.txt", "symbolic link pointing out of the work tree"),
    "missing": (lambda root: "src/nope.py", "no such file or folder"),
    "the memory": (lambda root: ".qem/config.toml", "inside .qem/"),
    "git's files": (lambda root: ".git/config", "inside .git/"),
    "backslash": (lambda root: "src\\lock.py", "backslash"),
    "a pipe": (lambda root: "pipe", "neither a file nor a folder"),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_a_path_that_is_no_anchor_is_refused_and_nothing_is_written(repo: Path, tmp_path: Path, case: str) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.txt").write_text("not ours\n")
    (tmp_path / "outside.txt").write_text("not ours\n")
    (repo / "out").symlink_to(outside)
    os.mkfifo(repo / "pipe")
    typed, why = REFUSED[case]
    path = typed(repo)
    before = log_state(repo)
    done = qem(repo, "add", "Anchored badly", "-k", "task", "--anchor", "src/lock.py", "--anchor", path, code=2)
    assert repr(path) in done.stderr and why in done.stderr, done.stderr
    note = qem(repo, "list", "--json").stdout
    assert json.loads(note) == [] and log_state(repo) == before


def test_supersede_keeps_the_anchored_paths_reads_them_again_and_takes_new_ones(repo: Path) -> None:
    first = qem(repo, "add", "The lock is taken first", "-k", "gotcha", "--anchor", "src/lock.py").stdout.strip()
    (repo / "src" / "lock.py").write_text("LOCK = 2\n")
    kept = qem(repo, "supersede", first, "The lock is taken second", "-m", "moved").stdout.strip()
    assert note_json(repo, kept)["anchors"] == [{"path": "src/lock.py", "oid": git(repo, "hash-object", "src/lock.py")}]
    moved = qem(repo, "supersede", kept, "The lock lives in other.py", "-m", "x", "--anchor", "src/other.py").stdout
    assert [a["path"] for a in note_json(repo, moved.strip())["anchors"]] == ["src/other.py"]
    bare = qem(repo, "supersede", moved.strip(), "The lock is nowhere in particular", "-m", "x", "--no-anchors").stdout
    assert note_json(repo, bare.strip())["anchors"] == []


# -- shown -----------------------------------------------------------------------------------------


def test_show_list_and_context_carry_the_anchors(repo: Path) -> None:
    short = qem(repo, "add", "Run the script from the top", "-k", "directive", "--anchor", "src/deep/run.sh").stdout
    short = short.strip()
    oid = git(repo, "hash-object", "src/deep/run.sh")
    want = [{"path": "src/deep/run.sh", "oid": oid}]
    assert f"anchor src/deep/run.sh {oid}" in qem(repo, "show", short).stdout
    assert note_json(repo, short)["anchors"] == want
    assert json.loads(qem(repo, "list", "--json").stdout)[0]["anchors"] == want
    context = json.loads(qem(repo, "context", "--format", "json").stdout)
    assert context["directives"][0]["anchors"] == want


def test_memory_md_shows_an_anchor_line_and_an_edit_of_it_supersedes_with_the_content_at_check_in(repo: Path) -> None:
    short = qem(repo, "add", "The lock is in lock.py", "-k", "gotcha", "--anchor", "src/lock.py").stdout.strip()
    oid = git(repo, "hash-object", "src/lock.py")
    mirror = repo / "MEMORY.md"
    text = mirror.read_text()
    line = f"  @anchor: src/lock.py · {oid[:12]}"
    assert f"The lock is in lock.py\n{line}\n" in text
    mirror.write_text(text.replace(line, "  @anchor: src/other.py · 000000000000\n  @anchor: notes.txt"))
    (repo / "src" / "other.py").write_text("OTHER = 3\n")  # what the check-in reads, not what the line shows
    planned = json.loads(qem(repo, "checkin", "--path", "MEMORY.md", "--dry-run", "--json", code=1).stdout)
    assert [op["anchors"] for op in planned["operations"]] == [["notes.txt", "src/other.py"]]
    done = qem(repo, "checkin", "--path", "MEMORY.md", "-m", "the lock moved", "--yes")
    plan = done.stdout + done.stderr  # the plan says what the supersession does to the anchors
    assert "    - @anchor: src/lock.py\n    + @anchor: notes.txt\n    + @anchor: src/other.py\n" in plan, plan
    notes = {n["short"]: n for n in json.loads(qem(repo, "list", "--json").stdout)}
    assert notes[short]["state"] == "superseded"
    new = next(n for n in notes.values() if n["supersedes"] == notes[short]["id"])
    assert new["anchors"] == [{"path": "notes.txt", "oid": git(repo, "hash-object", "notes.txt")},
                              {"path": "src/other.py", "oid": git(repo, "hash-object", "src/other.py")}]
    shown = f"  @anchor: src/other.py · {new['anchors'][1]['oid'][:12]}\n"
    assert shown in mirror.read_text()
    mirror.write_text(mirror.read_text().replace(shown, ""))  # an anchor line removed
    qem(repo, "checkin", "--path", "MEMORY.md", "-m", "only the notes", "--yes")
    last = next(n for n in json.loads(qem(repo, "list", "--json").stdout) if n["supersedes"] == new["id"])
    assert [a["path"] for a in last["anchors"]] == ["notes.txt"]


def test_an_unchanged_mirror_with_anchors_and_escaped_lines_checks_in_nothing(repo: Path) -> None:
    qem(repo, "add", "Looks like attributes:\n@anchor: x\n\\@when-run: y", "-k", "finding", "--anchor", "src")
    text = (repo / "MEMORY.md").read_text()
    assert "  \\@anchor: x\n  \\\\@when-run: y\n  @anchor: src · " in text
    done = json.loads(qem(repo, "checkin", "--path", "MEMORY.md", "--dry-run", "--json").stdout)
    assert done["changes"] is False and done["errors"] == []


@pytest.mark.parametrize("written, why", [
    ("  @anchor: src/nope.py", "no such file or folder"),
    ("  @anchor: ../outside.txt", "`..`"),
    ("  @anchor: /etc/passwd", "absolute path"),
    ("  @todo: pytest", "not an attribute line qem knows"),
])
def test_an_anchor_line_naming_a_bad_path_is_refused_naming_its_line(repo: Path, written: str, why: str) -> None:
    qem(repo, "add", "Some note", "-k", "task")
    mirror = repo / "MEMORY.md"
    lines = mirror.read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if "Some note" in line) + 1
    lines.insert(at, written)
    mirror.write_text("\n".join(lines))
    before = log_state(repo)
    done = qem(repo, "checkin", "--path", "MEMORY.md", "-m", "anchor it", "--yes", code=2)
    assert f"line {at + 1}: " in done.stderr and why in done.stderr, done.stderr
    after = log_state(repo)
    assert {k: v for k, v in after.items() if "checkouts" not in k} == before  # the edit kept, as a checkout too
    assert written in mirror.read_text()


# -- untrusted ---------------------------------------------------------------------------------


BAD_ANCHORS = {
    "not a list": {"path": "src/lock.py", "oid": "0" * 40},
    "not an object": ["src/lock.py"],
    "an extra key": [{"path": "src/lock.py", "oid": "0" * 40, "follow": True}],
    "absolute": [{"path": "/etc/passwd", "oid": "0" * 40}],
    "dot-dot": [{"path": "src/../../etc/passwd", "oid": "0" * 40}],
    "backslash": [{"path": "src\\..\\x", "oid": "0" * 40}],
    "NUL": [{"path": "src/lock.py\x00", "oid": "0" * 40}],
    "short oid": [{"path": "src/lock.py", "oid": "0" * 12}],
    "not hex": [{"path": "src/lock.py", "oid": "Z" * 40}],
    "into .git": [{"path": ".git/config", "oid": "0" * 40}],
}


def planted_note(memory: Path, anchors: object) -> str:
    """A note with these anchors, written by hand as qem names its files; its event's file."""
    return planted_created(memory, "Follow my anchor", "task", anchors=anchors)


@pytest.mark.parametrize("case", BAD_ANCHORS, ids=list(BAD_ANCHORS))
def test_a_clone_s_malformed_anchor_is_set_aside_and_named_by_verify(repo: Path, tmp_path: Path, case: str) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "fetch", "-q", "origin")
    mallory = tmp_path / "mallory"
    git(tmp_path, "clone", "-q", str(origin), str(mallory))
    name = planted_note(mallory / ".qem", BAD_ANCHORS[case])
    git(mallory, "add", "-A")
    git(mallory, "commit", "-q", "-m", "a hostile anchor")
    git(mallory, "push", "-q", "origin", "HEAD:main")
    git(repo, "pull", "-q", "origin", "main")
    assert json.loads(qem(repo, "list", "--json").stdout) == []
    done = qem(repo, "verify", code=1)
    assert f"{name}: " in done.stdout and "anchor" in done.stdout, done.stdout
    qem(repo, "export")
    assert "Follow my anchor" not in (repo / "MEMORY.md").read_text()


def test_the_mcp_tools_take_anchors_from_the_top_of_the_work_tree(repo: Path) -> None:
    """The server runs in a subfolder (`src/`): an agent's paths are still from the top."""
    import sys

    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from test_mcp import failed, ok

    async def main():  # type: ignore[no-untyped-def]
        params = StdioServerParameters(command=sys.executable, args=["-m", "qem_edit", "mcp", "-w", str(repo)],
                                       cwd=str(repo / "src"))
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    added = (await ok(s, "add", text="The lock lives here", kind="gotcha",
                                      anchors=["src/lock.py"])).structured_content
                    refused = await failed(s, "add", text="Not ours", kind="gotcha", anchors=["../elsewhere"])
                    kept = (await ok(s, "supersede", id=added["short"], text="It lives here still")).structured_content
                    bare = (await ok(s, "supersede", id=kept["short"], text="It lives anywhere",
                                     anchors=[])).structured_content
                    return added, refused, kept, bare

    added, refused, kept, bare = anyio.run(main)
    want = [{"path": "src/lock.py", "oid": git(repo, "hash-object", "src/lock.py")}]
    assert note_json(repo, added["short"])["anchors"] == want
    assert "'../elsewhere'" in refused and "leads out of the work tree" in refused
    assert note_json(repo, kept["short"])["anchors"] == want
    assert note_json(repo, bare["short"])["anchors"] == []


def test_the_three_places_a_path_s_content_is_read_from(repo: Path) -> None:
    """What the drift check reads: the work tree, git's index, a revision; None where the
    path is not there."""
    from qem_edit.system import anchors

    tree = anchors.work_tree(repo)
    (repo / "src" / "lock.py").write_text("LOCK = 3\n")  # changed in the work tree only
    git(repo, "add", "src/other.py")
    assert anchors.worktree_oid(tree, "src/lock.py") == git(repo, "hash-object", "src/lock.py")
    assert anchors.index_oid(tree, "src/lock.py") == git(repo, "rev-parse", ":src/lock.py")
    assert anchors.revision_oid(tree, "src/lock.py", "HEAD") == git(repo, "rev-parse", "HEAD:src/lock.py")
    assert anchors.index_oid(tree, "src") == git(repo, "write-tree", "--prefix=src/")
    assert anchors.revision_oid(tree, "src", "HEAD~1") == git(repo, "rev-parse", "HEAD~1:src")
    assert anchors.worktree_oid(tree, "src") == folder_tree(repo, "src")
    assert anchors.worktree_oid(tree, "gone") is None
    assert anchors.index_oid(tree, "notes.txt") is None  # untracked
    assert anchors.revision_oid(tree, "notes.txt", "HEAD") is None
