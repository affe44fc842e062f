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
