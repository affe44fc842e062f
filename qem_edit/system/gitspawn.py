"""git started with nothing but `os`: where a command's whole cost is a few git answers.

qem_edit.system.gitrepo runs every other git command qem runs, with the subprocess module;
importing that (and pathlib, which gitrepo's callers speak in) costs a commit hook answered
from what it answered last (qem_edit.mirror.answered) as much again as the two git commands
it asks.  This module starts git with `os.posix_spawnp` instead, two side by side where the
caller wants both, in the environment every git command of qem's gets (gitrepo's too):
every GIT_* variable dropped but GIT_CONFIG_NOSYSTEM, and git's index file as a hook is
given it (GIT_INDEX_FILE) kept only where it is this repository's.  Where posix_spawn is not
there (Windows), nothing starts: the commit hook is answered in full, as before.
"""

from __future__ import annotations

import os
import stat


def git_dir(top: str) -> str | None:
    """The work tree's own git folder: `.git`, or the folder a `.git` file names (a linked
    worktree's, a submodule's); None when neither can be read."""
    dot = os.path.join(top, ".git")
    try:
        if stat.S_ISDIR(os.stat(dot).st_mode):
            return dot
        with open(dot, encoding="utf-8") as handle:
            named = handle.read().partition("gitdir:")[2].strip()
    except (OSError, UnicodeDecodeError):
        return None
    return os.path.join(top, named)


def base_env() -> dict[str, str]:
    """The environment git runs in: this process's, every GIT_* variable dropped (a hook's
    GIT_DIR, GIT_WORK_TREE and the like name the repository git was run for, not the one qem
    asks about) but GIT_CONFIG_NOSYSTEM."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k == "GIT_CONFIG_NOSYSTEM"}


def index_env(top: str) -> dict[str, str]:
    """GIT_INDEX_FILE as git sets it for a hook (`commit -a` and `commit -- PATHS` build
    the commit in an index of their own), kept only when it is this repository's: an index
    file of another repository (a hook of an outer one) must never be read or written for
    this one."""
    given = os.environ.get("GIT_INDEX_FILE")
    if not given:
        return {}
    index = os.path.abspath(given)
    gitdir = git_dir(top)
    try:
        same = gitdir is not None and os.path.realpath(os.path.dirname(index)) == os.path.realpath(gitdir)
    except OSError:
        return {}
    return {"GIT_INDEX_FILE": index} if same else {}


def started(top: str, env: dict[str, str], *args: str) -> tuple[int, int] | None:
    """`git -C top ARGS` started, reading nothing, its output to a pipe and its errors
    nowhere: (its process id, the pipe's end to read, for `output`); None where it cannot
    be started (no git on the PATH, no posix_spawn)."""
    read, write = os.pipe()
    try:
        null = os.open(os.devnull, os.O_RDWR)
        try:
            pid = os.posix_spawnp("git", ["git", "-C", top, *args], env, file_actions=[
                (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, write, 1), (os.POSIX_SPAWN_DUP2, null, 2),
                (os.POSIX_SPAWN_CLOSE, read)])
        finally:
            os.close(null)
    except (OSError, AttributeError):
        os.close(read)
        return None
    finally:
        os.close(write)
    return pid, read


def output(start: tuple[int, int] | None) -> bytes | None:
    """What a git `started` wrote, once it has ended; None where it did not start or did not
    exit 0."""
    if start is None:
        return None
    pid, read = start
    parts = []
    try:
        while chunk := os.read(read, 1 << 16):
            parts.append(chunk)
    finally:
        os.close(read)
        _, status = os.waitpid(pid, 0)
    return b"".join(parts) if os.waitstatus_to_exitcode(status) == 0 else None
