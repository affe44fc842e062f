"""Driving the real Claude Code and Codex binaries against tests/_model_server.py, the way
a user's project has them: a git work tree with a memory, `qem setup HARNESS` run in it,
and the harness started without prompts in a temporary HOME (and CODEX_HOME).

- Claude Code: `claude -p --dangerously-skip-permissions PROMPT`, with ANTHROPIC_BASE_URL
  at the server, a dummy ANTHROPIC_API_KEY, IS_SANDBOX=1 (as root it refuses to bypass
  permissions otherwise) and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1.
- Codex: `codex exec --dangerously-bypass-approvals-and-sandbox
  --dangerously-bypass-hook-trust --skip-git-repo-check PROMPT`, with CODEX_HOME's
  config.toml naming a model provider whose base_url is the server (Responses API) and
  the project trusted (Codex reads a project's .codex/ only then).

A counter script (`counter(work, NAME)`) stands on PATH as NAME and appends the wall-clock
time of each run to a file, so a test can tell whether a command ran, how often, and
whether before or after a request reached the server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from _harness_bins import harness_bin
from _model_server import ModelServer

VENV_BIN = Path(sys.executable).parent  # holds the `qem` the hooks run
RUN_SECONDS = 120  # one harness run; a scripted session takes a few seconds


class Project(NamedTuple):
    work: Path  # the git work tree the harness runs in
    home: Path
    codex_home: Path
    bin: Path  # on PATH first: counter scripts

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "CODEX", "OPENAI"))}
        env.update(HOME=str(self.home), PATH=f"{self.bin}:{VENV_BIN}:{os.environ.get('PATH', '')}",
                   QEM_ACTOR="tester", NO_COLOR="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
        return env

    def sh(self, *argv: str) -> subprocess.CompletedProcess:
        done = subprocess.run(argv, cwd=self.work, env=self.env(), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{argv}: {done.stderr}"
        return done


def project(root: Path) -> Project:
    """A git work tree holding src/lock.py and an empty memory."""
    made = Project(root / "work", root / "home", root / "codex-home", root / "bin")
    for folder in made[:4]:
        folder.mkdir(parents=True)
    (made.work / "src").mkdir()
    (made.work / "src" / "lock.py").write_text("x = 1\n")
    made.sh("git", "init", "-q")
    return made


def counter(made: Project, name: str) -> Path:
    """A command `name` on PATH that records each run's time; the file it records in."""
    runs = made.work.parent / f"{name}.runs"
    script = made.bin / name
    script.write_text(f"#!/bin/sh\ndate +%s.%N >> '{runs}'\necho '{name} ran'\n")
    script.chmod(0o755)
    return runs


def runs_of(runs: Path) -> list[float]:
    return [float(line) for line in runs.read_text().split()] if runs.exists() else []


class Run(NamedTuple):
    server: ModelServer
    done: subprocess.CompletedProcess


def claude(made: Project, prompt: str, steps: list, answer=None) -> Run:  # type: ignore[no-untyped-def]
    """One `claude -p` session against a server replaying `steps`."""
    binary = harness_bin("claude")
    with ModelServer(steps, answer) as server:
        env = dict(made.env(), ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-ant-scripted",
                   IS_SANDBOX="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
        done = subprocess.run([str(binary), "-p", "--dangerously-skip-permissions", prompt], cwd=made.work,
                              env=env, capture_output=True, text=True, timeout=RUN_SECONDS,
                              stdin=subprocess.DEVNULL)
    return Run(server, done)


def codex(made: Project, prompt: str, steps: list, answer=None, *,  # type: ignore[no-untyped-def]
          bypass_trust: bool = True, trusted: bool = True, config: str = "") -> Run:
    """One `codex exec` session against a server replaying `steps`; `trusted`: the project
    trusted in CODEX_HOME's config.toml; `config`: more of that file."""
    binary = harness_bin("codex")
    with ModelServer(steps, answer) as server:
        (made.codex_home / "config.toml").write_text(
            'model = "gpt-5-codex"\nmodel_provider = "scripted"\n\n'
            '[model_providers.scripted]\nname = "scripted"\n'
            f'base_url = "{server.url}/v1"\nwire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\n\n'
            + (f'[projects.{json.dumps(str(made.work))}]\ntrust_level = "trusted"\n\n' if trusted else "")
            + config)
        env = dict(made.env(), CODEX_HOME=str(made.codex_home), SCRIPTED_API_KEY="scripted")
        argv = [str(binary), "exec", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check",
                "--color", "never"]
        argv += ["--dangerously-bypass-hook-trust"] if bypass_trust else []
        done = subprocess.run([*argv, prompt], cwd=made.work, env=env, capture_output=True, text=True,
                              timeout=RUN_SECONDS, stdin=subprocess.DEVNULL)
    return Run(server, done)


def first_with(server: ModelServer, text: str) -> int | None:
    """The index among the turns of the first request holding `text` (None: none does)."""
    return next((i for i, r in enumerate(server.turns) if text in r.text), None)


def texts(server: ModelServer) -> str:
    return "\n".join(r.text for r in server.turns)
