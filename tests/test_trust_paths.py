"""Nothing from the repository makes qem write outside the work tree.

A teammate's branch is untrusted input: every path a committed file names (`[export] path`
in `.qem/config.toml`, the memory's folder itself, its index, the harness settings `qem
setup` writes, MEMORY.md) is confined to the work tree.  Each case is a hostile branch
pushed from a second clone over a bare origin with real git: the victim pulls and runs
`qem add` and `qem export` (and `qem setup`), which refuse with exit 2 naming the file and
the key, and nothing is created outside; then a fresh clone does the same.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from test_git import Clone, Team, team  # noqa: F401  (the fixture)


def everything_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def founded_and_hostile(team: Team, change) -> tuple[Clone, Path]:  # type: ignore[no-untyped-def]
    """A founder's memory pushed; mallory's clone makes `change(mallory, outside)` and
    pushes it; the founder pulls.  Returns the founder and the folder outside the work
    tree (empty) that the change points at."""
    outside = team.root / "outside"
    outside.mkdir()
    founder = team.founded("The parser is in src")
    mallory = team.clone("mallory")
    change(mallory, outside)
    mallory.publish("tidy the memory's settings")
    founder.pull()
    return founder, outside


def export_setting(path: str):  # type: ignore[no-untyped-def]
    def change(mallory: Clone, outside: Path) -> None:
        config = mallory.path / ".qem" / "config.toml"
        config.write_text(config.read_text("utf-8") + f'\n[export]\nauto = true\npath = "{path}"\n', "utf-8")
    return change


def linked_folder(mallory: Clone, outside: Path) -> None:
    """`docs` is a link to the folder outside; the mirror is `docs/MEMORY.md`."""
    os.symlink(os.path.relpath(outside, mallory.path), mallory.path / "docs")
    export_setting("docs/MEMORY.md")(mallory, outside)


def linked_file(mallory: Clone, outside: Path) -> None:
    """The mirror's own path is a link to a file (not yet there) outside."""
    os.symlink(os.path.relpath(outside / "authorized_keys", mallory.path), mallory.path / "notes.md")
    export_setting("notes.md")(mallory, outside)


HOSTILE_EXPORT = {
    "dot-dot": (export_setting("../outside/authorized_keys"), '"../outside/authorized_keys"'),
    "absolute": (lambda m, outside: export_setting(str(outside / "authorized_keys"))(m, outside), 'path "/'),
    "linked folder": (linked_folder, '"docs/MEMORY.md"'),
    "linked file": (linked_file, '"notes.md"'),
}


def refused_everywhere(clone: Clone, outside: Path, says: str) -> None:
    """`qem add` and `qem export` refuse (exit 2), naming the file and the key; nothing
    is written outside, and the add wrote no note."""
    before = clone.event_ids()
    for args in (("add", "ssh-ed25519 AAAAC3Nza mallory@evil", "-k", "finding"), ("export",)):
        done = clone.qem(*args, code=2)
        assert ".qem/config.toml: [export] path" in done.stderr and says in done.stderr, done.stderr
        assert "leads outside the work tree" in done.stderr
    assert everything_under(outside) == set()
    assert clone.event_ids() == before


@pytest.mark.parametrize("case", sorted(HOSTILE_EXPORT))
def test_a_committed_export_path_never_leads_a_write_out(team: Team, case: str) -> None:
    change, says = HOSTILE_EXPORT[case]
    founder, outside = founded_and_hostile(team, change)
    refused_everywhere(founder, outside, says)
    fresh = team.clone("fresh")
    refused_everywhere(fresh, outside, says)


def linked_to_git(mallory: Clone, outside: Path) -> None:
    """`gl` is a link to git's own folder; the mirror is `gl/config`."""
    os.symlink(".git", mallory.path / "gl")
    export_setting("gl/config")(mallory, outside)


OWN_FOLDERS = {
    "git's settings": (export_setting(".git/config"), '".git/config"', ".git/"),
    "a git hook": (export_setting(".git/hooks/post-checkout"), '".git/hooks/post-checkout"', ".git/"),
    "git's folder spelled otherwise": (export_setting("./.GIT/config"), '"./.GIT/config"', ".git/"),
    "a link to git's folder": (linked_to_git, '"gl/config"', ".git/"),
    "the memory's folder": (export_setting(".qem/MEMORY.md"), '".qem/MEMORY.md"', ".qem/"),
    "the memory's folder spelled otherwise": (export_setting(".QEM/MEMORY.md"), '".QEM/MEMORY.md"', ".qem/"),
}


@pytest.mark.parametrize("case", sorted(OWN_FOLDERS))
def test_a_committed_export_path_never_reaches_git_or_the_log(team: Team, case: str) -> None:
    """Inside the work tree, yet git's own (its settings, its hooks) or the log's folder: a
    branch naming one there is refused (exit 2, the key named) in the pulling clone and in
    a fresh one, and neither git's files nor the memory change."""
    change, says, folder = OWN_FOLDERS[case]
    founder, outside = founded_and_hostile(team, change)
    for clone in (founder, team.clone("fresh")):
        git_config = (clone.path / ".git" / "config").read_bytes()
        before = clone.event_ids()
        for args in (("add", "a note", "-k", "finding"), ("export",)):
            done = clone.qem(*args, code=2)
            assert ".qem/config.toml: [export] path" in done.stderr and says in done.stderr, done.stderr
            assert f"is inside {folder}" in done.stderr, done.stderr
        assert (clone.path / ".git" / "config").read_bytes() == git_config
        assert not (clone.path / ".git" / "hooks" / "post-checkout").exists()
        assert not (clone.path / ".qem" / "MEMORY.md").exists()
        assert clone.event_ids() == before
    assert everything_under(outside) == set()


def test_an_export_path_inside_the_tree_is_taken(team: Team) -> None:
    """The check refuses only what leads out: a mirror in a folder of the tree, named with
    a `..` that stays inside, is written there."""
    founder, outside = founded_and_hostile(team, export_setting("docs/../docs/MEMORY.md"))
    (founder.path / "docs").mkdir()
    founder.qem("add", "Tests run in .venv", "-k", "directive")
    assert b"Tests run in .venv" in (founder.path / "docs" / "MEMORY.md").read_bytes()
    assert everything_under(outside) == set()


def test_a_committed_memory_folder_that_is_a_link_out_is_refused(team: Team) -> None:
    """A branch that makes `.qem` a link to a folder outside: a fresh clone's writes and
    reads refuse (exit 2) and nothing lands outside."""
    outside = team.root / "outside"
    outside.mkdir()
    (outside / "config.toml").write_text('[memory]\nid = "aaaaaaaaaaaa"\n', "utf-8")
    mallory = team.clone("mallory")
    (mallory.path / "README").write_text("a project\n", "utf-8")
    os.symlink(os.path.relpath(outside, mallory.path), mallory.path / ".qem")
    mallory.publish("move the memory")
    before = everything_under(outside)
    fresh = team.clone("fresh")
    for args in (("add", "a note", "-k", "finding"), ("export",), ("list",)):
        done = fresh.qem(*args, code=2)
        assert ".qem is a symbolic link leading outside the work tree" in done.stderr, done.stderr
    assert everything_under(outside) == before


def test_a_committed_index_link_is_never_written_through(team: Team) -> None:
    """`.qem/index.db` (ignored, but a commit can force it in) as a link to a file
    outside: the pull puts the link in place of the victim's index; the next command makes
    its index anew beside the log, and nothing is created outside."""
    def change(mallory: Clone, outside: Path) -> None:
        index = mallory.path / ".qem" / "index.db"
        index.unlink(missing_ok=True)
        os.symlink(os.path.relpath(outside / "planted", index.parent), index)
        os.symlink(os.path.relpath(outside / "planted-wal", index.parent), index.parent / "index.db-wal")
        mallory.git("add", "-f", ".qem/index.db", ".qem/index.db-wal")
    founder, outside = founded_and_hostile(team, change)
    for clone in (founder, team.clone("fresh")):
        clone.qem("add", "Ship the parser", "-k", "task")
        clone.qem("export")
        assert not (clone.path / ".qem" / "index.db").is_symlink()
        assert everything_under(outside) == set()


def test_a_committed_mirror_link_is_refused(team: Team) -> None:
    """MEMORY.md itself a link to a file outside: a write leaves it (the mirror is not
    written through a link) and `qem export` refuses it, exit 2."""
    def change(mallory: Clone, outside: Path) -> None:
        (mallory.path / "MEMORY.md").unlink()
        os.symlink(os.path.relpath(outside / "authorized_keys", mallory.path), mallory.path / "MEMORY.md")
    founder, outside = founded_and_hostile(team, change)
    for clone in (founder, team.clone("fresh")):
        done = clone.qem("export", code=2)
        assert "MEMORY.md is a symbolic link" in done.stderr
        clone.qem("add", "Ship the parser", "-k", "task", code=None)
        assert everything_under(outside) == set()


@pytest.mark.parametrize("harness,folder", [("claude", ".claude"), ("codex", ".codex"), ("gemini", ".gemini")])
def test_qem_setup_writes_no_settings_through_a_committed_link(team: Team, harness: str, folder: str) -> None:
    def change(mallory: Clone, outside: Path) -> None:
        os.symlink(os.path.relpath(outside, mallory.path), mallory.path / folder)
    founder, outside = founded_and_hostile(team, change)
    for clone in (founder, team.clone("fresh")):
        done = clone.qem("setup", harness, "--command", "qem", code=2)
        assert f"{folder}/" in done.stderr and "leads outside the work tree" in done.stderr, done.stderr
        assert everything_under(outside) == set()
        assert clone.git("status", "--porcelain").stdout == ""


@pytest.mark.parametrize("folder", ["sessions", "checkouts"])
def test_the_private_folders_linked_out_get_nothing(team: Team, folder: str) -> None:
    """`.qem/sessions` (the hooks' ledgers and log) or `.qem/checkouts` (kept edits),
    ignored but forced into a commit as a link out: the hooks answer with no context, exit
    0, and `qem checkout` refuses; nothing lands outside."""
    import json
    import sys

    def change(mallory: Clone, outside: Path) -> None:
        os.symlink(os.path.relpath(outside, mallory.path / ".qem"), mallory.path / ".qem" / folder)
        mallory.git("add", "-f", f".qem/{folder}")
    founder, outside = founded_and_hostile(team, change)
    for clone in (founder, team.clone("fresh")):
        for event, extra in (("SessionStart", {"source": "startup"}), ("UserPromptSubmit", {"prompt": "the parser"})):
            hook = subprocess.run([sys.executable, "-m", "qem_edit", "hook", "claude", event], cwd=clone.path,
                                  input=json.dumps({"session_id": "s1", "cwd": str(clone.path),
                                                    "hook_event_name": event, **extra}),
                                  capture_output=True, text=True, timeout=60)
            assert hook.returncode == 0 and "Traceback" not in hook.stderr, hook.stderr
        if folder == "checkouts":
            assert "is not a private directory" in clone.qem("checkout", code=2).stderr
        assert everything_under(outside) == set()


def test_a_committed_export_path_holding_a_nul_is_refused_without_a_traceback(team: Team) -> None:
    """`[export] path` with a NUL (TOML's `\\u0000`), pushed by a teammate: every command
    that reads the setting refuses it (exit 2), naming the file and the key; before, the
    check of where it leads ended in a traceback (ValueError: embedded null byte)."""
    founder, outside = founded_and_hostile(team, export_setting("a\\u0000b.md"))
    for clone in (founder, team.clone("fresh")):
        for args in (("add", "a note", "-k", "finding"), ("export",), ("export", "--check"), ("verify",)):
            done = clone.qem(*args, code=2)
            assert ".qem/config.toml: [export] path holds a NUL character" in done.stderr, (args, done.stderr)
            assert "Traceback" not in done.stderr
    assert everything_under(outside) == set()


def test_verify_says_why_it_cannot_look_at_memory_md(team: Team) -> None:
    """A configured MEMORY.md that cannot be looked at (its name too long for the file
    system) fails `qem verify` (exit 2, naming the file and why), as it fails `export
    --check`; never read as a memory with no MEMORY.md (checked, and found fine)."""
    founder, outside = founded_and_hostile(team, export_setting("A" * 300 + ".md"))
    for args in (("verify",), ("export", "--check")):
        done = founder.qem(*args, code=2)
        assert "File name too long" in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
