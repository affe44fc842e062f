"""The pre-commit hooks in `.pre-commit-hooks.yaml`, run by the real pre-commit framework
in a throwaway git repository.

`test_the_published_hook_*` installs qem the way a user's pre-commit does: from a git
repository holding this working tree (copied and committed, so uncommitted changes are
what is tested), into pre-commit's own virtual environment (`pip install .`, which needs
the package index once).  The installed environment is cached across test sessions
(in pytest's cache directory, else the system temp directory), keyed by the content of
the files installed, so only the first run after a change to qem's code pays for it.

`test_the_hook_definition_*` runs the same hook definitions as `repo: local` hooks with
`language: system` and this interpreter, so the hook's behaviour is checked even where
the package index cannot be reached.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import run_qem

pytest.importorskip("pre_commit")
yaml = pytest.importorskip("yaml")  # a dependency of pre-commit
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
PACKAGES = ("qem_edit", "renderer", "reconciler")
NETWORK_TROUBLE = (
    "Could not find a version", "No matching distribution", "Failed to establish a new connection",
    "Temporary failure in name resolution", "Network is unreachable", "NewConnectionError",
    "ProxyError", "ConnectTimeout", "Read timed out",
)


def git_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="qem tests",
        GIT_AUTHOR_EMAIL="tests@example.invalid",
        GIT_COMMITTER_NAME="qem tests",
        GIT_COMMITTER_EMAIL="tests@example.invalid",
        # fixed dates: the same files give the same commit, so pre-commit reuses its install
        GIT_AUTHOR_DATE="2026-01-01T00:00:00Z",
        GIT_COMMITTER_DATE="2026-01-01T00:00:00Z",
    )
    return env


def git(*args: str, cwd: Path, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=check, timeout=120)


def cache_dir(config) -> Path:  # type: ignore[no-untyped-def]
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("qem-pre-commit"))
    path = Path(os.environ.get("TMPDIR", "/tmp")) / "qem-tests-pre-commit"
    path.mkdir(exist_ok=True)
    return path


def hook_files() -> list[Path]:
    files = [ROOT / "pyproject.toml", ROOT / "README.md", MANIFEST]
    for package in PACKAGES:
        files.extend(sorted((ROOT / package).rglob("*.py")))
    return [f for f in files if f.is_file() and "__pycache__" not in f.parts]


@pytest.fixture(scope="session")
def hook_repo(request, tmp_path_factory) -> tuple[Path, str, Path]:
    """(a git repository holding qem as it is now, its HEAD, a PRE_COMMIT_HOME)."""
    base = cache_dir(request.config)
    files = hook_files()
    digest = hashlib.sha256()
    for f in files:
        digest.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    repo = base / f"hook-{digest.hexdigest()[:16]}"
    env = git_env(tmp_path_factory.mktemp("git-home"))
    if not (repo / ".git").is_dir():
        staging = base / f"staging-{uuid.uuid4().hex}"
        for f in files:
            target = staging / f.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, target)
        git("init", "-q", "-b", "main", cwd=staging, env=env)
        git("add", "-A", cwd=staging, env=env)
        git("commit", "-q", "-m", "qem under test", cwd=staging, env=env)
        try:
            staging.rename(repo)  # atomic: a concurrent session either wins or finds it made
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    rev = git("rev-parse", "HEAD", cwd=repo, env=env).stdout.strip()
    home = base / "pre-commit-home"
    home.mkdir(exist_ok=True)
    return repo, rev, home


def project(tmp_path: Path, config: str, env: dict[str, str]) -> Path:
    """A git repository with a qem memory (its log committed with the code), a current
    MEMORY.md, and `config` as its .pre-commit-config.yaml.  Auto-export is off, so the
    log can move on without the mirror, as it does when a pull brings events."""
    proj = tmp_path / "project"
    proj.mkdir()
    git("init", "-q", "-b", "main", cwd=proj, env=env)
    (proj / ".pre-commit-config.yaml").write_text(config, "utf-8")
    assert run_qem("add", "Run tests inside the venv", "--kind", "directive", cwd=proj).returncode == 0
    settings = proj / ".qem" / "config.toml"
    settings.write_text(settings.read_text("utf-8") + "\n[export]\nauto = false\n", "utf-8")
    assert run_qem("export", cwd=proj).returncode == 0
    return proj


def pre_commit(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=600,
    )


def the_hook_guards_memory_md(proj: Path, env: dict[str, str], hook_id: str = "qem-export") -> None:
    installed = pre_commit("install", cwd=proj, env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    git("add", "-A", cwd=proj, env=env)
    first = git("commit", "-m", "memory, current", cwd=proj, env=env, check=False)
    assert first.returncode == 0, first.stdout + first.stderr  # current: the hook passes

    # the store moves on; the committed MEMORY.md is now stale
    assert run_qem("add", "The lock order is A then B", "--kind", "gotcha", cwd=proj).returncode == 0
    stale = git("commit", "--allow-empty", "-m", "with a stale memory", cwd=proj, env=env, check=False)
    output = stale.stdout + stale.stderr
    assert stale.returncode != 0, output
    assert "Failed" in output
    assert git("rev-list", "--count", "HEAD", cwd=proj, env=env).stdout.strip() == "1"
    check = run_qem("export", "--check", cwd=proj)
    if hook_id == "qem-export":
        assert "files were modified by this hook" in output
        assert check.returncode == 0, check.stderr  # the hook re-rendered it
    else:
        assert "moved on" in output
        assert check.returncode == 1  # --check changes nothing
        assert run_qem("export", cwd=proj).returncode == 0

    git("add", "MEMORY.md", ".qem", cwd=proj, env=env)
    again = git("commit", "-m", "memory, current again", cwd=proj, env=env, check=False)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "The lock order is A then B" in git("show", "HEAD:MEMORY.md", cwd=proj, env=env).stdout

    ran = pre_commit("run", hook_id, "--all-files", cwd=proj, env=env)
    assert ran.returncode == 0 and "Passed" in ran.stdout, ran.stdout + ran.stderr


def test_the_manifest_is_valid() -> None:
    proc = pre_commit("validate-manifest", str(MANIFEST), cwd=ROOT, env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    hooks = {h["id"]: h for h in yaml.safe_load(MANIFEST.read_text("utf-8"))}
    assert hooks["qem-export"]["entry"] == "qem export --staged"
    for hook in hooks.values():
        if hook["id"] == "qem-secrets":  # given the log files a commit adds, and only those
            assert hook["language"] == "python" and "pass_filenames" not in hook and "always_run" not in hook
            assert hook["files"] == r"(^|/)\.qem/(events|texts|packs)/"  # a memory in a subfolder too
            continue
        assert (hook["language"], hook["pass_filenames"], hook["always_run"]) == ("python", False, True)


@pytest.mark.parametrize("hook_id", ["qem-export", "qem-export-check"])
def test_the_hook_definition_guards_memory_md(tmp_path: Path, hook_id: str) -> None:
    """The manifest's hooks, run as local system hooks with this interpreter."""
    hook = next(h for h in yaml.safe_load(MANIFEST.read_text("utf-8")) if h["id"] == hook_id)
    command = hook["entry"].split()
    assert command[0] == "qem"
    local = dict(hook, language="system", entry=" ".join([sys.executable, "-m", "qem_edit", *command[1:]]))
    local.pop("description", None)
    config = yaml.safe_dump({"repos": [{"repo": "local", "hooks": [local]}]})
    env = git_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    the_hook_guards_memory_md(project(tmp_path, config, env), env, hook_id)


@pytest.mark.slow  # about 10-30 s the first time (pip install), a few seconds once cached
def test_the_published_hook_guards_memory_md(tmp_path: Path, hook_repo: tuple[Path, str, Path]) -> None:
    """pre-commit installs qem from a git repository of this tree, then guards MEMORY.md."""
    repo, rev, home = hook_repo
    config = yaml.safe_dump(
        {"repos": [{"repo": str(repo), "rev": rev, "hooks": [{"id": "qem-export"}, {"id": "qem-export-check"}]}]}
    )
    env = git_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    env["PRE_COMMIT_HOME"] = str(home)
    proj = project(tmp_path, config, env)
    installed = pre_commit("install-hooks", cwd=proj, env=env)
    if installed.returncode != 0:
        output = installed.stdout + installed.stderr
        log = home / "pre-commit.log"
        if log.exists():
            output += log.read_text("utf-8", "replace")
        if any(word in output for word in NETWORK_TROUBLE):
            pytest.skip("pre-commit could not install qem: the package index is out of reach")
        pytest.fail(f"pre-commit could not install the hook:\n{output}")
    # only qem-export in the commit; qem-export-check would fail the commit before it
    only = yaml.safe_dump({"repos": [{"repo": str(repo), "rev": rev, "hooks": [{"id": "qem-export"}]}]})
    (proj / ".pre-commit-config.yaml").write_text(only, "utf-8")
    the_hook_guards_memory_md(proj, env)

    # the installed qem-export-check reports a stale file and changes nothing
    (proj / ".pre-commit-config.yaml").write_text(config, "utf-8")
    assert run_qem("add", "a third note", "--kind", "task", cwd=proj).returncode == 0
    before = (proj / "MEMORY.md").read_bytes()
    stale = pre_commit("run", "qem-export-check", "--all-files", cwd=proj, env=env)
    assert stale.returncode == 1 and "moved on" in stale.stdout, stale.stdout + stale.stderr
    assert (proj / "MEMORY.md").read_bytes() == before


def local_hooks(*hook_ids: str) -> str:
    """The manifest's hooks as local system hooks run with this interpreter (no install)."""
    out = []
    for hook in yaml.safe_load(MANIFEST.read_text("utf-8")):
        if hook["id"] in hook_ids:
            command = hook["entry"].split()
            local = dict(hook, language="system", entry=" ".join([sys.executable, "-m", "qem_edit", *command[1:]]))
            local.pop("description", None)
            out.append(local)
    return yaml.safe_dump({"repos": [{"repo": "local", "hooks": out}]})


def test_the_hooks_work_in_a_fresh_clone(tmp_path: Path) -> None:
    """A teammate's fresh clone: no index, nothing set up.  Every hook builds what it needs
    on its first run, lets a commit with a current MEMORY.md through, and stops one whose
    log moved on without it; nothing qem makes locally is ever staged."""
    env = git_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    hooks = ("qem-export", "qem-export-check", "qem-verify")
    proj = project(tmp_path, local_hooks(*hooks), env)
    git("add", "-A", cwd=proj, env=env)
    git("commit", "-q", "-m", "the memory", cwd=proj, env=env)
    fresh = tmp_path / "fresh"
    git("clone", "-q", str(proj), str(fresh), cwd=tmp_path, env=env)
    assert not (fresh / ".qem" / "index.db").exists()
    assert pre_commit("install", cwd=fresh, env=env).returncode == 0
    (fresh / "code.py").write_text("print('hello')\n", "utf-8")
    git("add", "code.py", cwd=fresh, env=env)
    done = git("commit", "-m", "code, in a fresh clone", cwd=fresh, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(f"{name}" in done.stdout + done.stderr for name in ("qem export", "qem verify"))
    assert git("status", "--porcelain", cwd=fresh, env=env).stdout == ""  # the index stays local
    for hook_id in hooks:  # a note added, MEMORY.md not rendered again: each hook stops it
        assert run_qem("add", f"stale for {hook_id}", "--kind", "task", cwd=fresh).returncode == 0
        ran = pre_commit("run", hook_id, "--all-files", cwd=fresh, env=env)
        assert ran.returncode == 1, (hook_id, ran.stdout + ran.stderr)
        assert run_qem("export", cwd=fresh).returncode == 0
