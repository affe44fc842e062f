"""The agent harnesses the real-harness tests drive, pinned: Claude Code and Codex as
their npm packages ship them, installed once into `<repo>/.harnesses` (gitignored).

`harness_bin("claude")` / `harness_bin("codex")` returns the pinned binary's path,
installing it first when it is missing or another version is there.  The install runs
under a file lock, since pytest-xdist runs the suite in two processes that may both ask at
once.  A harness that cannot be installed (no npm, no registry) fails the test under
`CI=true`, where the real-harness tests are the proof of delivery and must run; elsewhere
the test is skipped with the reason.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from filelock import FileLock

REPO = Path(__file__).resolve().parent.parent
PREFIX = REPO / ".harnesses"
# name -> (npm package, version): the versions the delivery timings were seen in.
PINS = {
    "claude": ("@anthropic-ai/claude-code", "2.1.332"),
    "codex": ("@openai/codex", "0.171.0"),
    # the extension validator the plugin tests run (tests/test_plugin.py)
    "gemini": ("@google/gemini-cli", "0.61.0"),
}
INSTALL_SECONDS = 900  # two native binaries of a few hundred MB on a slow link


class HarnessUnavailable(Exception):
    """The pinned harness could not be installed or does not run here."""


def harness_bin(name: str) -> Path:
    """The pinned `name` binary, installed when missing; fails (CI) or skips without it."""
    try:
        return _installed(name)
    except HarnessUnavailable as why:
        message = f"{name} {PINS[name][1]} unavailable: {why}"
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@functools.lru_cache(maxsize=None)
def _installed(name: str) -> Path:
    package, version = PINS[name]
    binary = PREFIX / "node_modules" / ".bin" / name
    if _version_of(package) != version:
        PREFIX.mkdir(exist_ok=True)
        with FileLock(str(PREFIX / ".install.lock"), timeout=INSTALL_SECONDS + 60):
            if _version_of(package) != version:
                _npm_install(f"{package}@{version}")
    if _version_of(package) != version or not binary.exists():
        raise HarnessUnavailable(f"npm installed no {package}@{version} under {PREFIX}")
    _check_runs(binary, version)
    return binary


def _version_of(package: str) -> str | None:
    manifest = PREFIX / "node_modules" / package / "package.json"
    try:
        return json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def _npm_install(spec: str) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise HarnessUnavailable("npm is not on PATH (install nodejs and npm)")
    # Saved to .harnesses/package.json, so installing the other harness keeps this one.
    argv = [npm, "install", "--prefix", str(PREFIX), "--save-exact", "--no-audit", "--no-fund",
            "--loglevel=error", spec]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_SECONDS)
    except subprocess.TimeoutExpired:
        raise HarnessUnavailable(f"`npm install {spec}` took over {INSTALL_SECONDS} s") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise HarnessUnavailable(f"`npm install {spec}` exited {done.returncode}: " + " | ".join(tail))


def _check_runs(binary: Path, version: str) -> None:
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                              timeout=60, env={**os.environ, "NO_COLOR": "1"})
    except (OSError, subprocess.TimeoutExpired) as error:
        raise HarnessUnavailable(f"{binary} --version failed: {error}") from None
    if version not in done.stdout:
        raise HarnessUnavailable(f"{binary} --version said {done.stdout.strip()!r}"
                                 f" {done.stderr.strip()[-200:]!r}, not {version}")
