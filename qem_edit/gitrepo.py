"""The little of git that qem asks about: is this a git work tree, what did a file hold
at a revision, is a file as the last commit left it, and the log as committed at a
revision.  Plain `git` commands, run only where an answer needs them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from . import errors


def _git(cwd: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in ("GIT_CONFIG_NOSYSTEM",)}
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, input=input, env=env, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise errors.BadInput(f"cannot run git: {exc}") from None


def toplevel(path: Path) -> Path | None:
    """The top of the git work tree holding `path` (None: not in one, or no git)."""
    folder = path if path.is_dir() else path.parent
    try:
        done = _git(folder, "rev-parse", "--show-toplevel")
    except errors.BadInput:
        return None
    return Path(done.stdout.decode().strip()) if done.returncode == 0 else None


def show(top: Path, rev: str, path: Path) -> bytes | None:
    """The file at `path` as revision `rev` holds it (None: not there)."""
    relative = path.resolve().relative_to(top.resolve()).as_posix()
    done = _git(top, "show", f"{rev}:{relative}")
    return done.stdout if done.returncode == 0 else None


def unmodified(top: Path, path: Path) -> bool:
    """Whether `path` is as the last commit holds it (in the work tree and the index)."""
    relative = path.resolve().relative_to(top.resolve()).as_posix()
    done = _git(top, "diff", "--quiet", "HEAD", "--", relative)
    return done.returncode == 0


def commit_of(top: Path, rev: str) -> str:
    """The commit a revision names; BadInput naming the revision if it names none."""
    done = _git(top, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if done.returncode != 0:
        raise errors.BadInput(f"{rev!r} is neither a date nor a git revision of this repository")
    return done.stdout.decode().strip()


def resolve_commit(top: Path, rev: str) -> str | None:
    """The commit a revision names (None: it names none here)."""
    if rev.startswith("-"):
        return None  # never an option to git
    done = _git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    return done.stdout.decode().strip() if done.returncode == 0 else None


def has_commits(top: Path) -> bool:
    return _git(top, "rev-parse", "--verify", "--quiet", "HEAD").returncode == 0


def is_shallow(top: Path) -> bool:
    done = _git(top, "rev-parse", "--is-shallow-repository")
    return done.returncode == 0 and done.stdout.strip() == b"true"


def shallow_boundary(top: Path) -> list[str]:
    """The commits a shallow clone's history stops at (their parents are not here)."""
    done = _git(top, "rev-parse", "--git-path", "shallow")
    path = Path(done.stdout.decode().strip())
    path = path if path.is_absolute() else top / path
    try:
        return path.read_text("ascii").split()
    except OSError:
        return []


def set_config(top: Path, key: str, value: str) -> bool:
    """Set `key` in the repository's own git config (.git/config); whether it worked."""
    return _git(top, "config", "--local", key, value).returncode == 0


def tree_files(top: Path, rev: str, folder: Path) -> dict[str, bytes]:
    """Every file under `folder` as commit `rev` holds it: path relative to `folder` → bytes."""
    relative = folder.resolve().relative_to(top.resolve()).as_posix()
    listing = _git(top, "ls-tree", "-r", "-z", rev, "--", relative)
    if listing.returncode != 0:
        raise errors.BadInput(f"cannot list {relative} at {rev}: {listing.stderr.decode(errors='replace').strip()}")
    entries = []
    for record in listing.stdout.split(b"\0"):
        if not record:
            continue
        meta, _, name = record.partition(b"\t")
        mode, kind, blob = meta.decode().split()
        if kind == "blob":
            entries.append((name.decode("utf-8", "surrogateescape"), blob))
    if not entries:
        return {}
    batch = _git(top, "cat-file", "--batch", input=b"".join(b.encode() + b"\n" for _, b in entries))
    return _parse_batch(batch.stdout, [n for n, _ in entries], relative)


def _parse_batch(data: bytes, names: list[str], prefix: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    pos = 0
    for name in names:
        end = data.index(b"\n", pos)
        header = data[pos:end].split()
        size = int(header[2])
        out[name[len(prefix) + 1:] if name.startswith(prefix + "/") else name] = data[end + 1:end + 1 + size]
        pos = end + 1 + size + 1
    return out


def added_by(top: Path, path: Path) -> str | None:
    """The commit that added `path` (its short hash; the oldest, were it added twice), or
    None when no commit holds it (not committed yet)."""
    relative = path.resolve().relative_to(top.resolve()).as_posix()
    done = _git(top, "log", "--diff-filter=A", "--format=%h", "--", relative)
    commits = done.stdout.decode().split() if done.returncode == 0 else []
    return commits[-1] if commits else None
