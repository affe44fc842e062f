"""A person's unstaged changes, as a hook run by the pre-commit framework can know them.

Before it runs the hooks of a commit, pre-commit sets the unstaged changes to tracked files
aside: `git diff-index --binary` against the index's tree, saved as `patch<time>-<pid>` in
its cache directory (`PRE_COMMIT_HOME`, else `$XDG_CACHE_HOME/pre-commit`, else
`~/.cache/pre-commit`; `<pid>` is the pre-commit process, the hook's parent), then `git
checkout -- .`.  After the hooks it applies the patch again; when that fails it checks the
index out over the work tree and applies the patch once more.  So from inside a hook the
work tree looks clean, and the patch is the only trace of an edit a person did not stage.

A hook that rewrites a file the patch touches, and stages it, makes the patch apply to
neither the work tree nor the index: pre-commit stops with "patch does not apply" and the
edit is left only in its cache.  qem's hooks that render MEMORY.md therefore ask first
(`guard`) and refuse, naming the file, instead of rendering over an edit set aside.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ..base import errors
from . import gitrepo
from .files import name_within

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from .files import AnyPath

# A patch older than this is another run's (its process id since used again), not this one's:
# pre-commit writes it just before the hooks run (an hour covers the slowest chain of hooks)
# and never removes it.  Naming the patch, a refusal lets a person see which it read.
FRESH_FOR = 3600


def set_aside(top: AnyPath) -> tuple[str | None, set[str]]:
    """(the patch, the paths relative to `top` it holds) that the pre-commit run this
    process is a hook of set aside; (None, empty) when not run by pre-commit, or when
    nothing was set aside."""
    if os.environ.get("PRE_COMMIT") != "1":
        return None, set()
    patch = _patch_of(os.getppid())
    if patch is None:
        return None, set()
    return patch, gitrepo.patched_paths(top, patch)


def _patch_of(pid: int) -> str | None:
    """The newest patch pre-commit process `pid` wrote (`patch<time>-<pid>`), if it is recent."""
    home = os.environ.get("PRE_COMMIT_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pre-commit")
    end = f"-{pid}"
    try:
        found = [(int(written), entry.path) for entry in os.scandir(os.path.realpath(home))
                 if entry.name.startswith("patch") and entry.name.endswith(end)
                 and (written := entry.name[len("patch"):-len(end)]).isdecimal() and entry.is_file()]
    except OSError:
        return None
    if not found:
        return None
    written, path = max(found)
    return path if time.time() - written < FRESH_FOR else None


def guard(file: AnyPath, rewrites: Callable[[], bool] = lambda: True, workspace: AnyPath | None = None) -> None:
    """Refuse (exit 3, nothing written) to rewrite `file` when the pre-commit run this
    hook is part of set aside a person's unstaged changes to it, and `rewrites()` says
    the file would change (asked only then: outside pre-commit this costs an environment
    lookup, and where pre-commit set nothing aside, a look at its folder: git is asked
    nothing).  `workspace`: the memory's, named in the advice where it is not the top."""
    if os.environ.get("PRE_COMMIT") != "1" or _patch_of(os.getppid()) is None:
        return
    top = gitrepo.top_name(file)
    name = name_within(top, file) if top is not None else None
    if top is None or name is None:
        return
    patch, paths = set_aside(top)
    if name not in paths or not rewrites():
        return
    raise errors.ConflictError(
        f"{name} has changes you have not staged (pre-commit set them aside for its hooks, in {patch});"
        f" rendering {name} again here would lose them, so nothing was written",
        hint=f"check the edits in (`qem checkin{_workspace_option(top, workspace)} --path {name}`) or stash them"
             f" alone (`git stash push {name}`), then commit again")


def _workspace_option(top: AnyPath, workspace: AnyPath | None) -> str:
    """` -w DIR` for a memory in a subfolder (`app/.qem`): git runs its hooks, and the
    person their advice, at the top, where no memory would be found."""
    import shlex

    folder = name_within(top, workspace) if workspace is not None else "."
    return "" if folder is None or folder == "." else f" -w {shlex.quote(folder)}"
