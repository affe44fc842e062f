"""What a newcomer meets first, each with the message a serious tool gives and nothing
changed by a refused command: `qem setup --command` with a path holding a space, a write
with no git on the PATH, `qem load` into a new folder, a refused first write, `--anchor` on
a submodule, a stream that cannot encode a note's text, `--ttl 0d`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import run_qem

# -- qem setup --command "/opt/my tools/bin/qem" ---------------------------------------------------


@pytest.fixture
def spaced_qem(tmp_path: Path) -> str:
    """A qem installed under a folder whose name holds a space."""
    program = tmp_path / "my tools" / "bin" / "qem"
    program.parent.mkdir(parents=True)
    program.write_text(f"#!/bin/sh\nexec {sys.executable} -m qem_edit \"$@\"\n", "utf-8")
    program.chmod(0o755)
    return str(program)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert run_qem("add", "Run the tests inside .venv", "-k", "directive", cwd=root).returncode == 0
    return root


def hook_commands(project: Path, harness: str) -> list[str]:
    rel = {"claude": ".claude/settings.json", "codex": ".codex/hooks.json", "gemini": ".gemini/settings.json"}[harness]
    hooks = json.loads((project / rel).read_text("utf-8"))["hooks"]
    return [h["command"] for groups in hooks.values() for g in groups for h in g["hooks"]]


def server_entry(project: Path, harness: str) -> dict:
    if harness == "codex":
        return tomllib.loads((project / ".codex/config.toml").read_text("utf-8"))["mcp_servers"]["qem"]
    rel = ".mcp.json" if harness == "claude" else ".gemini/settings.json"
    return json.loads((project / rel).read_text("utf-8"))["mcpServers"]["qem"]


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_a_command_path_holding_a_space_is_quoted_for_the_shell_and_kept_whole(
        project: Path, spaced_qem: str, harness: str) -> None:
    done = run_qem("setup", harness, "--command", spaced_qem, cwd=project)
    assert done.returncode == 0, done.stderr
    assert server_entry(project, harness) == {"command": spaced_qem, "args": ["mcp"]}
    commands = hook_commands(project, harness)
    assert commands and all(c.startswith(f"'{spaced_qem}' hook {harness} ") for c in commands)
    start = next(c for c in commands if "SessionStart" in c)
    ran = subprocess.run(["sh", "-c", start], cwd=project, capture_output=True, text=True, timeout=60,
                         input=json.dumps({"session_id": "s1", "cwd": str(project), "source": "startup",
                                           "hook_event_name": "SessionStart"}))
    assert ran.returncode == 0 and "Run the tests inside .venv" in ran.stdout, ran.stdout + ran.stderr
    entry = server_entry(project, harness)
    assert subprocess.run([entry["command"], "--version"], capture_output=True, timeout=60).returncode == 0
    assert run_qem("setup", harness, "--command", spaced_qem, "--check", cwd=project).returncode == 0


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_check_catches_an_entry_split_at_the_space(project: Path, spaced_qem: str, harness: str) -> None:
    """The settings an earlier qem wrote (the hook commands unquoted, the MCP entry split
    at the space): `--check` names them, exit 1, and `qem setup` puts them right."""
    assert run_qem("setup", harness, "--command", spaced_qem, cwd=project).returncode == 0
    for path in project.joinpath(f".{harness}" if harness != "claude" else ".claude").rglob("*"):
        if path.is_file():
            path.write_text(path.read_text("utf-8").replace(f"'{spaced_qem}'", spaced_qem), "utf-8")
    first, rest = spaced_qem.split(" ", 1)
    for rel in (".mcp.json", ".gemini/settings.json", ".codex/config.toml"):
        path = project / rel
        if path.is_file():
            text = path.read_text("utf-8")
            if rel.endswith(".toml"):
                text = text.replace(f'command = "{spaced_qem}"', f'command = "{first}"').replace(
                    'args = ["mcp"]', f'args = ["{rest}", "mcp"]')
            else:
                doc = json.loads(text)
                doc["mcpServers"]["qem"] = {"command": first, "args": [rest, "mcp"]}
                text = json.dumps(doc, indent=2)
            path.write_text(text, "utf-8")
    assert server_entry(project, harness)["command"] == first
    checked = run_qem("setup", harness, "--command", spaced_qem, "--check", cwd=project)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "differs from what qem writes" in checked.stdout + checked.stderr
    assert f"MCP server qem is" in checked.stdout + checked.stderr
    assert run_qem("setup", harness, "--command", spaced_qem, cwd=project).returncode == 0
    assert server_entry(project, harness) == {"command": spaced_qem, "args": ["mcp"]}
    assert run_qem("setup", harness, "--command", spaced_qem, "--check", cwd=project).returncode == 0


def test_shell_words_stay_shell_words(project: Path) -> None:
    """A command of several words (`python -m qem_edit`) is taken as the shell takes it."""
    done = run_qem("setup", "claude", "--command", f"{sys.executable} -m qem_edit", cwd=project)
    assert done.returncode == 0, done.stderr
    assert server_entry(project, "claude") == {"command": sys.executable, "args": ["-m", "qem_edit", "mcp"]}
    assert all(c.startswith(f"{sys.executable} -m qem_edit hook claude ") for c in hook_commands(project, "claude"))


def test_a_spaced_path_that_is_not_there_is_warned_about(project: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "no such dir" / "qem")
    done = run_qem("setup", "claude", "--command", missing, cwd=project)
    assert "is not on this PATH" in done.stderr and "quote it" in done.stderr, done.stderr


# -- no git on the PATH ----------------------------------------------------------------------------


def test_a_write_with_no_git_on_the_path_says_what_it_could_not_do_once(project: Path, tmp_path: Path) -> None:
    assert run_qem("export", cwd=project).returncode == 0
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    before = (project / "MEMORY.md").read_bytes()
    empty = tmp_path / "no-git"
    empty.mkdir()
    done = run_qem("add", "Ship the parser", "-k", "task", cwd=project, env={"PATH": str(empty)})
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "git" in line]
    assert len(lines) == 1, done.stderr
    assert "no `git` on this PATH" in lines[0] and "MEMORY.md was not re-rendered" in lines[0]
    assert "nothing was staged (`git add .qem MEMORY.md`" in lines[0]
    assert (project / "MEMORY.md").read_bytes() == before
    with_git = run_qem("add", "Ship the lexer", "-k", "task", cwd=project)
    assert "no `git`" not in with_git.stderr and b"Ship the lexer" in (project / "MEMORY.md").read_bytes()


# -- qem load into a new folder ---------------------------------------------------------------------


def test_a_load_into_a_new_folder_names_the_memory_it_keeps(project: Path, tmp_path: Path) -> None:
    dump = run_qem("dump", cwd=project).stdout
    kept = json.loads(dump.splitlines()[0])["memory"]
    fresh = tmp_path / "demo"
    done = run_qem("load", "-", "-w", str(fresh), input=dump)
    assert done.returncode == 0, done.stderr
    assert f"created a new memory at {fresh / '.qem'} (memory {kept})" in done.stderr
    assert f'id = "{kept}"' in (fresh / ".qem" / "config.toml").read_text("utf-8")


def test_a_refused_load_into_a_new_folder_leaves_nothing(tmp_path: Path) -> None:
    fresh = tmp_path / "demo"
    fresh.mkdir()
    done = run_qem("load", "-", "-w", str(fresh), input='{"memory": "abcdefabcdef"}\nnot json\n')
    assert done.returncode == 2 and ":2: not JSON" in done.stderr
    assert "created a new memory" not in done.stderr and list(fresh.iterdir()) == []


# -- a refused first write --------------------------------------------------------------------------


REFUSED_FIRST = {
    "unknown kind": (["add", "x", "--kind", "nosuchkind"], "unknown kind 'nosuchkind'"),
    "bad end": (["add", "x", "-k", "task", "--expires", "2020-13-01"], "give a date (YYYY-MM-DD)"),
    "zero ttl": (["add", "x", "-k", "task", "--ttl", "0d"], "at least 1 hour"),
    "missing anchor": (["add", "x", "-k", "task", "--anchor", "nope.py"], "no such file or folder"),
}


@pytest.mark.parametrize("case", sorted(REFUSED_FIRST))
def test_a_refused_first_write_creates_nothing(tmp_path: Path, case: str) -> None:
    argv, says = REFUSED_FIRST[case]
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    done = run_qem(*argv, cwd=root)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert "created a new memory" not in done.stderr
    assert sorted(p.name for p in root.iterdir()) == [".git"]
    assert subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout == ""


def test_a_refused_first_write_over_mcp_creates_nothing(tmp_path: Path) -> None:
    import anyio
    from test_mcp import failed, session

    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)

    async def script() -> str:
        async with session(root) as s:
            return await failed(s, "add", text="x", kind="task", expires="2020-13-01")

    assert "give a date (YYYY-MM-DD)" in anyio.run(script)
    assert sorted(p.name for p in root.iterdir()) == [".git"]


# -- --anchor on a submodule ------------------------------------------------------------------------


def test_an_anchor_on_a_submodule_says_it_is_one(project: Path, tmp_path: Path) -> None:
    library = tmp_path / "library"
    subprocess.run(["git", "init", "-q", str(library)], check=True)
    (library / "a.py").write_text("A = 1\n", "utf-8")
    git_id = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", *git_id, "add", "a.py"], cwd=library, check=True)
    subprocess.run(["git", *git_id, "commit", "-qm", "a"], cwd=library, check=True)
    subprocess.run(["git", *git_id, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib"],
                   cwd=project, check=True, capture_output=True)
    before = run_qem("dump", cwd=project).stdout
    for typed, says in (("lib", "'lib': a submodule, which"), ("lib/a.py", "'lib/a.py': inside the submodule lib")):
        done = run_qem("add", "The library pins its lock", "-k", "finding", "--anchor", typed, cwd=project)
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert "went while it was read" not in done.stderr
    assert run_qem("dump", cwd=project).stdout == before


# -- a stream that cannot encode a note's text ------------------------------------------------------


def test_an_ascii_stream_gets_escapes_not_a_traceback(project: Path) -> None:
    note = run_qem("add", "Le café ☕ est prêt", "-k", "directive", cwd=project).stdout.strip()
    ascii_env = {"PYTHONIOENCODING": "ascii"}
    for argv in (["list"], ["show", note], ["context"], ["log", note], ["query", "kind=directive"]):
        done = run_qem(*argv, cwd=project, env=ascii_env)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (argv, done.stderr)
        assert "caf\\xe9" in done.stdout or argv[0] == "log", (argv, done.stdout)
    listed = run_qem("list", "--json", cwd=project, env=ascii_env)
    assert listed.returncode == 0 and "Le café ☕ est prêt" in [n["text"] for n in json.loads(listed.stdout)]
    hook = subprocess.run([sys.executable, "-m", "qem_edit", "hook", "claude", "SessionStart"], cwd=project,
                          input=json.dumps({"session_id": "s", "cwd": str(project), "source": "startup",
                                            "hook_event_name": "SessionStart"}).encode(),
                          capture_output=True, env={**os.environ, **ascii_env}, timeout=60)
    assert hook.returncode == 0 and b"Traceback" not in hook.stderr
    assert "Le café ☕ est prêt" in json.loads(hook.stdout.decode("utf-8"))["hookSpecificOutput"]["additionalContext"]


# -- --ttl 0d -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("ttl", ["0d", "0h", "00w"])
def test_a_zero_ttl_says_it_must_be_positive(project: Path, ttl: str) -> None:
    before = run_qem("dump", cwd=project).stdout
    done = run_qem("add", "x", "-k", "task", "--ttl", ttl, cwd=project)
    assert done.returncode == 2 and "a time to live must be at least 1 hour" in done.stderr, done.stderr
    assert "whole number" not in done.stderr
    assert run_qem("dump", cwd=project).stdout == before
