"""Where things live: the workspace, its store, its mirror, its settings, and who writes.

Resolution order (first that applies):
- memory (the log and its index): `--store DIR`, `QEM_STORE`, else `<workspace>/.qem`;
- workspace: `--workspace DIR`, `QEM_WORKSPACE`, the nearest ancestor of the current
  directory holding `.qem/`, else the top of the git work tree holding it (a memory
  belongs to the repository, not to a subdirectory), else the current directory;
- actor: `--actor NAME`, `QEM_ACTOR`, else the login name.
"""

from __future__ import annotations

import os

from ..base import errors
from ..base.stored_form import actor_problem
from .files import lands_in_own, leads_out, parent_name, path_name

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from .files import AnyPath

STATE_DIR = ".qem"
CONFIG_NAME = "config.toml"
INDEX_NAME = "index.db"
# What a hook keeps beside the index (qem_edit.reads.quiet: what a tool call can fire;
# qem_edit.reads.starts: what a new session's start is given; qem_edit.mirror.answered, which
# names its own file without importing this module: what a commit hook answered): named as
# SQLite's own files beside it are, so every memory's .gitignore (`/index.db-*`) already keeps
# them out of git.
MOMENTS_NAME = "index.db-moments.json"
STARTS_NAME = "index.db-starts.json"
COMMITS_NAME = "index.db-commits"
KEPT_NAMES = (MOMENTS_NAME, STARTS_NAME, COMMITS_NAME)
DEFAULT_MIRROR = "MEMORY.md"
_ID_CHARACTERS = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")


def _is_comment(line: str) -> bool:
    """A TOML comment: `#`, then no control character but a tab (no pattern compiled: the
    `re` module and the enum it loads are a tenth of a commit hook's start-up)."""
    return line.startswith("#") and all(c == "\t" or (" " <= c and c != "\x7f") for c in line)


def _memory_id(line: str) -> str | None:
    """The id of a line `id = "ID"` (ID: digits and lowercase ASCII letters), else None."""
    if len(line) > 7 and line.startswith('id = "') and line.endswith('"') and _ID_CHARACTERS.issuperset(line[6:-1]):
        return line[6:-1]
    return None


def plain_config(text: str) -> dict | None:
    """config.toml as tomllib reads it, where it holds only what `qem` writes to a new
    memory's (`[memory]` and its `id`, comments, blank lines), read without tomllib:
    importing tomllib costs each commit hook ~2 ms.  None for anything else (tomllib reads
    it, and says what is wrong).  tests/test_hook_cost.py holds the two to one answer."""
    table: dict | None = None
    for line in text.split("\n"):
        line = line.strip(" \t")
        if not line or _is_comment(line):
            continue
        found = _memory_id(line)
        if line == "[memory]" and table is None:
            table = {}
        elif found is not None and table is not None and "id" not in table:
            table["id"] = found
        else:
            return None
    return {} if table is None else {"memory": table}


def settings_of(text: str) -> dict:
    """config.toml's text as tomllib reads it: a plain one (plain_config) without importing
    tomllib; ValueError (tomllib's TOMLDecodeError) where the text is not TOML."""
    config = plain_config(text)
    if config is None:
        import tomllib  # (here: most memories' config.toml is plain)

        config = tomllib.loads(text)
    return config


def read_settings(path: AnyPath) -> dict:
    """A config.toml's settings ({} where there is none); BadInput naming the file where
    it cannot be read, or is not TOML."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise errors.BadInput(f"cannot read {path}: {exc.strerror}") from None
    try:
        return settings_of(raw.decode("utf-8"))
    except ValueError as exc:  # not UTF-8, or tomllib's TOMLDecodeError (tomllib not imported to name it)
        raise errors.BadInput(f"{path} is not valid TOML: {exc}") from None


class Workspace:
    """A workspace: its folder, and the memory it uses; its settings read once.

    Both folders are kept as strings, named as pathlib names them (`root_name`,
    `store_name`), and given as Paths (`root`, `store_path`) only when asked for: the
    commit hooks run in full use the strings alone, and pathlib (with the re, enum and
    urllib.parse it imports) is a third of their start-up."""

    __slots__ = ("root_name", "store_name", "_paths", "_config")

    def __init__(self, root: AnyPath, store_path: AnyPath) -> None:
        self.root_name, self.store_name = path_name(root), path_name(store_path)
        self._paths: tuple[Path, Path] | None = None
        self._config: dict | None = None

    @property
    def root(self) -> Path:
        return self._as_paths()[0]

    @property
    def store_path(self) -> Path:
        return self._as_paths()[1]

    def _as_paths(self) -> tuple[Path, Path]:
        if self._paths is None:
            from pathlib import Path

            self._paths = (Path(self.root_name), Path(self.store_name))
        return self._paths

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workspace) and (self.root_name, self.store_name) == (other.root_name, other.store_name)

    def __hash__(self) -> int:
        return hash((self.root_name, self.store_name))

    def __repr__(self) -> str:
        return f"Workspace(root={self.root_name!r}, store_path={self.store_name!r})"

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def checkouts(self) -> Path:
        return self.state_dir / "checkouts"

    def mirror_path(self, override: str | Path | None = None) -> Path:
        from pathlib import Path

        return Path(self.mirror_name(override))

    def mirror_name(self, override: AnyPath | None = None) -> str:
        """The mirror's file (MEMORY.md, or as configured, or `override`), named as
        `mirror_path` is, as a string."""
        if override is not None:
            return path_name(override)
        configured = self.config().get("export", {}).get("path")
        return path_name(os.path.join(self.root_name, configured or DEFAULT_MIRROR))

    def config(self) -> dict:
        """The workspace's settings (`.qem/config.toml`), read and checked once."""
        if self._config is None:
            self._config = self._read_config()
        return self._config

    def _read_config(self) -> dict:
        path = path_name(os.path.join(self.store_name, CONFIG_NAME))
        config = read_settings(path)
        for table in ("export", "git", "delivery"):
            if not isinstance(config.get(table, {}), dict):
                raise errors.BadInput(f"{path}: {table} must be a table (a `[{table}]` section), not"
                                      f" {config[table]!r}; nothing was written")
        export = config.get("export", {})
        if not isinstance(export.get("auto", False), bool):
            raise errors.BadInput(f"{path}: [export] auto must be true or false")
        if "path" in export and not isinstance(export["path"], str):
            raise errors.BadInput(f"{path}: [export] path must be a string")
        if "\x00" in export.get("path", ""):  # (no file is named so: every system call refuses it)
            raise errors.BadInput(f"{self._shown(path)}: [export] path holds a NUL character; name a file inside"
                                  " the work tree, relative to it; nothing was written")
        if export.get("path") and leads_out(self.root_name, export["path"]):
            # the file is committed: a teammate's branch must not make this clone write anywhere
            raise errors.BadInput(f'{self._shown(path)}: [export] path "{export["path"]}" leads outside the work tree'
                                  f" ({self.root_name}); name a file inside it, relative to it; nothing was written")
        own = export.get("path") and lands_in_own(self.root_name, export["path"], self.store_name)
        if own:  # (git's settings and hooks, or the log: a committed path must not reach either)
            raise errors.BadInput(f'{self._shown(path)}: [export] path "{export["path"]}" is inside {own}/, which'
                                  " qem does not write MEMORY.md into; name a file of the work tree outside it,"
                                  " relative to it; nothing was written")
        git = config.get("git", {})
        if not isinstance(git.get("stage", True), bool):
            raise errors.BadInput(f"{path}: [git] stage must be true or false")
        delivery = config.get("delivery", {})
        if not isinstance(delivery.get("hold", True), bool):
            raise errors.BadInput(f"{path}: [delivery] hold must be true or false (whether a hook holds a call"
                                  " whose notes were not given yet)")
        return config

    def _shown(self, path: str) -> str:
        """`path` as a message names it: from the workspace where it is inside it."""
        from pathlib import Path

        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return path

    def stages(self) -> bool:
        """Whether writes stage what they wrote in git's index (qem_edit.mirror.gitstage): yes
        unless `[git] stage = false`."""
        return bool(self.config().get("git", {}).get("stage", True))

    def auto_export(self) -> bool:
        """Whether writes keep the mirror current: as configured, else yes in a git work
        tree where MEMORY.md exists (what a reviewer reads must not lag the log)."""
        configured = self.config().get("export", {}).get("auto")
        if configured is not None:
            return bool(configured)
        if not self.mirror_path().is_file():
            return False
        from . import gitrepo

        return gitrepo.toplevel(self.root) is not None


# The folders below are found and named as strings (os.path), not pathlib's Paths: a hook
# finds its memory with them, and pathlib (with the urllib.parse it imports) is about 3 ms
# of a hook's start-up.  `resolve` gives the commands their Workspace of Paths.

def _up(folder: str) -> Iterator[str]:
    """`folder` (absolute) and each folder above it, to the root."""
    while True:
        yield folder
        above = os.path.dirname(folder)
        if above == folder:
            return
        folder = above


def git_top(start: AnyPath) -> str | None:
    """The top of the git work tree holding `start`: its nearest folder, itself or above,
    holding `.git` (a directory, or a linked worktree's file), resolved; None outside any.
    Asked of the files, not of git, so it costs no process and works with no git installed."""
    return next((d for d in _up(os.path.realpath(start)) if os.path.exists(os.path.join(d, ".git"))), None)


def work_top(state: AnyPath) -> str:
    """The top of the work tree the memory `state` (its `.qem` folder) is in, resolved:
    anchors and paths are named from it; the nearest folder at or above the workspace
    holding `.git`, else the workspace."""
    above = parent_name(state)
    return git_top(above) or os.path.realpath(above)


def find_workspace(cwd: AnyPath | None = None) -> str:
    """The workspace holding `cwd` (the working directory where None), resolved: the
    nearest folder at or above it holding `.qem/`, else the top of its git work tree, else itself."""
    start = os.path.realpath(os.getcwd() if cwd is None else cwd)
    top = None
    for candidate in _up(start):
        if os.path.isdir(os.path.join(candidate, STATE_DIR)):
            return candidate
        if top is None and os.path.exists(os.path.join(candidate, ".git")):  # a directory, or a worktree's file
            top = candidate
    return top or start


def resolve(workspace: AnyPath | None = None, store: AnyPath | None = None) -> Workspace:
    root, store_path = places(workspace, store)
    return Workspace(root=root, store_path=store_path)


def places(workspace: AnyPath | None = None, store: AnyPath | None = None) -> tuple[str, str]:
    """The workspace's folder (resolved) and its memory's, as strings (the order of the
    module's docstring)."""
    root_arg = workspace or os.environ.get("QEM_WORKSPACE")
    root = os.path.realpath(root_arg) if root_arg else find_workspace()
    store_arg = store or os.environ.get("QEM_STORE")
    store_path = os.fspath(store_arg) if store_arg else os.path.join(root, STATE_DIR)
    if not store_arg and os.path.islink(store_path) and leads_out(root, STATE_DIR):
        # git keeps a link: a clone's `.qem` pointing elsewhere would have every write land there
        raise errors.BadInput(f"{STATE_DIR} is a symbolic link leading outside the work tree ({root}, to"
                              f" {os.path.realpath(store_path)}); qem writes its memory only inside the work tree:"
                              " remove the link (or name the memory with --store); nothing was written")
    return root, store_path


def actor(explicit: str | None = None) -> str:
    name = explicit or os.environ.get("QEM_ACTOR")
    if name:
        name = name.strip()
        problem = actor_problem(name)
        if problem:
            raise errors.BadInput(f"the actor name {name!r}: {problem}")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise errors.BadInput("the actor name is not UTF-8") from None
        return name
    import getpass  # only when no actor is named

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
