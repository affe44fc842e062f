"""Shared test fixtures.

Every test runs in its own workspace with qem's environment cleared and HOME pointed at
a temporary directory, so no test can touch a real user store.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
CORPUS = FIXTURES / "corpus-749.jsonl"


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name in list(os.environ):
        if name.startswith("QEM_") or name in ("VISUAL", "EDITOR"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("QEM_ACTOR", "tester")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace directory (its store is created by the first write)."""
    root = tmp_path / "ws"
    root.mkdir()
    return root


def no_child_left() -> bool:
    """Whether this process has no child, running or unwaited (what a test that starts git
    holds qem to: every git it started waited for)."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def run_qem(*args: str, cwd: Path | None = None, input: str | None = None, env: dict | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the real `qem` entry point in a child process, as a user would."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "qem_edit", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


@pytest.fixture
def qem(ws: Path):
    """`qem(...)` runs the CLI in the test's workspace and returns the CompletedProcess."""

    def call(*args: str, **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("cwd", ws)
        return run_qem(*args, **kwargs)

    return call
