"""Every git command qem runs, each a named function.

Every git command qem runs, each a function named for what it answers: is this a git
work tree and where is its top, what did a file hold at a revision, what does git's index
hold, what did a change touch, and the log as committed at a revision; plain `git`
commands, run only where an answer needs them.  Each is started by qem_edit.system.gitspawn
(with os.posix_spawn, not the subprocess module, which only Windows loads here), the one
other module that starts git, in the same environment (tests/test_code_shape.py holds it)."""

from __future__ import annotations

import os
from collections.abc import Container, Iterator

from ..base import errors
from ..base.patterns import Lazy
from . import gitspawn
from .files import name_within, parent_name

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from pathlib import Path

    from .files import AnyPath


def _git(cwd: Path, *args: str, input: bytes | None = None, extra: dict[str, str] | None = None) -> gitspawn.Ran:
    return _gits(cwd, [list(args)], input, extra)[0]


def _gits(cwd: Path, asks: list[list[str]], input: bytes | None = None,
          extra: dict[str, str] | None = None) -> list[gitspawn.Ran]:
    """Each of `asks` (git's arguments) run in the folder `cwd`, side by side (`input` given
    to the first), in git's environment with `extra`; BadInput where git cannot be run
    (GitTimedOut, one, where it ran past TIMEOUT_S and was killed)."""
    env = gitspawn.base_env()
    env.update(extra or {})
    try:
        if gitspawn.SPAWNS:  # (without the subprocess module: its import costs a hook more than git)
            return gitspawn.run_together(os.fspath(cwd), asks, env, TIMEOUT_S, input)
        import subprocess

        done = []
        for n, args in enumerate(asks):
            try:
                ran = subprocess.run(["git", *args], cwd=cwd, capture_output=True, input=None if n else input, env=env,
                                     timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise TimeoutError("git ran past its time") from None
            done.append(gitspawn.Ran(ran.returncode, ran.stdout, ran.stderr))
        return done
    except TimeoutError:
        asked = "; ".join(" ".join(args[:3]) for args in asks)
        raise GitTimedOut(f"cannot run git: git {asked} timed out after {TIMEOUT_S} seconds") from None
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and exc.filename in ("git", None) and not _missing:  # (not the folder)
            _missing.append(True)
        raise errors.BadInput(f"cannot run git: {exc}") from None


TIMEOUT_S = 120
_missing: list[bool] = []  # a run found no `git` on the PATH (noted as it happens: asking costs a PATH walk)


def missing() -> bool:
    """Whether this process tried to run git and found none on the PATH."""
    return bool(_missing)


class GitFailed(errors.BadInput):
    """A git command that ran and refused: git's own complaint, for the caller to say what
    it asked (a BadInput still, where no caller says more)."""


class GitTimedOut(errors.BadInput):
    """A git command killed past TIMEOUT_S (a BadInput, as every git that cannot be run)."""


def toplevel(path: AnyPath) -> Path | None:
    """The top of the git work tree holding `path` (None: not in one, or no git)."""
    from pathlib import Path

    found = top_name(path)
    return Path(found) if found is not None else None


def top_name(path: AnyPath) -> str | None:
    """`toplevel(path)` as a string, as git prints it (no pathlib: a commit hook's)."""
    found = _top(path)
    return _printed(found) if found is not None else None


def top_and_object_format(path: AnyPath) -> tuple[str, str] | None:
    """The top of the git work tree holding `path`, resolved, and the object format its
    ids are in (sha1 for one git names otherwise), asked in one call: a hook pays for each
    (None: not in a work tree, or no git)."""
    found = _top(path, "--show-object-format")
    return _named_top(found) if found is not None else None


def _named_top(found: bytes) -> tuple[str, str]:
    """What `rev-parse --show-toplevel --show-object-format` printed: the top, resolved,
    and the object format (its last line: the top's name may hold a line break)."""
    top, newline, object_format = _printed(found).rpartition("\n")
    if not newline:  # (one line: a git that printed no format)
        top, object_format = object_format, ""
    return os.path.realpath(top), object_format if object_format in ("sha1", "sha256") else "sha1"


def _printed(found: bytes) -> str:
    """What git printed, its one line break at the end dropped, nothing else: a folder's
    name may end in a space, or hold a line break, and git prints it as it is."""
    return os.fsdecode(found).removesuffix("\n")


def _top(path: AnyPath, *also: str) -> bytes | None:
    """What `git rev-parse --show-toplevel` (and the `also` asked with it) answers in the
    folder holding `path` (None: not in a work tree, or no git)."""
    folder = path if os.path.isdir(path) else parent_name(path)
    try:
        done = _git(folder, "rev-parse", "--show-toplevel", *also)
    except errors.BadInput:
        return None
    return done.stdout if done.returncode == 0 else None


def _from_top(top: AnyPath, path: AnyPath) -> str:
    """`path` from `top`, both resolved, `/`-separated (ValueError where it is not inside)."""
    relative = name_within(top, path)
    if relative is None:
        raise ValueError(f"{os.fspath(path)!r} is not in the subpath of {os.fspath(top)!r}")
    return relative


def show(top: AnyPath, rev: str, path: AnyPath) -> bytes | None:
    """The file at `path` as revision `rev` holds it (None: not there)."""
    relative = _from_top(top, path)
    done = _git(top, "show", f"{rev}:{relative}")
    return done.stdout if done.returncode == 0 else None


def unmodified(top: Path, path: Path) -> bool:
    """Whether `path` is as the last commit holds it (in the work tree and the index)."""
    relative = _from_top(top, path)
    done = _git(top, "diff", "--quiet", "HEAD", "--", relative)
    return done.returncode == 0


def as_staged(top: Path, path: Path) -> bool:
    """Whether the work tree's `path` is what git's index holds (no change left unstaged)."""
    relative = _from_top(top, path)
    return _git(top, "diff", "--quiet", "--", relative, extra=index_env(top)).returncode == 0


def last_change(top: Path, path: Path, *, added: bool = False, every_ref: bool = False,
                oldest: bool = False) -> str | None:
    """The last commit that changed (`added`: added) `path`, of HEAD (`every_ref`: of any
    branch or tag, and one that left it there: a deletion is not its last form), as a short
    hash (None: none); `oldest`: the first such commit instead (of a file added twice, the
    commit that first brought it)."""
    relative = _from_top(top, path)
    options = (["--diff-filter=A"] if added else []) + (["--all", "--diff-filter=AM"] if every_ref else [])
    done = _git(top, "log", *([] if oldest else ["-1"]), "--format=%h", *options, "--", relative)
    commits = done.stdout.decode().split() if done.returncode == 0 else []
    return commits[-1] if commits else None


def commit_of(top: Path, rev: str) -> str | None:
    """The commit a revision names (None: it names none here)."""
    if rev.startswith("-"):
        return None  # never an option to git
    done = _git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    return done.stdout.decode().strip() if done.returncode == 0 else None


def object_at(top: Path, rev: str, path: str) -> str | None:
    """The object id of `path` (from the top) in revision `rev` (None: not there)."""
    done = _git(top, "rev-parse", "--verify", "--quiet", f"{rev}:{path}")
    return done.stdout.decode().strip() if done.returncode == 0 else None


def commit_entries(top: Path, commit: str) -> list[tuple[bytes, str, str]]:
    """Every entry of commit `commit`'s whole tree, from the top: (git's mode, object id,
    path); GitFailed, with git's complaint, when git cannot list it."""
    done = _git(top, "ls-tree", "-r", "-z", "--full-tree", commit)
    if done.returncode != 0:
        raise GitFailed(done.stderr.decode(errors="replace").strip() or "git ls-tree failed")
    out = []
    for record in done.stdout.split(b"\0"):
        meta, _, name = record.partition(b"\t")
        fields = meta.split()
        if name and len(fields) == 3:
            out.append((fields[0], fields[2].decode(), os.fsdecode(name)))
    return out


def commit_time(top: Path, commit: str) -> str | None:
    """When a commit was made (its committer's date), UTC, as qem writes times."""
    from datetime import datetime, timezone

    done = _git(top, "show", "-s", "--format=%ct", commit, "--")
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        return None
    from ..base.times import stamp

    return stamp(datetime.fromtimestamp(int(done.stdout), timezone.utc))


def has_commits(top: Path) -> bool:
    return _git(top, "rev-parse", "--verify", "--quiet", "HEAD").returncode == 0


def is_shallow(top: Path) -> bool:
    done = _git(top, "rev-parse", "--is-shallow-repository")
    return done.returncode == 0 and done.stdout.strip() == b"true"


def shallow_boundary(top: Path) -> list[str]:
    """The commits a shallow clone's history stops at (their parents are not here)."""
    from pathlib import Path

    done = _git(top, "rev-parse", "--git-path", "shallow")
    path = Path(_printed(done.stdout))
    path = path if path.is_absolute() else Path(top, path)
    try:
        return path.read_text("ascii").split()
    except OSError:
        return []


def set_config(top: Path, key: str, value: str) -> bool:
    """Set `key` in the repository's own git config (.git/config); whether it worked."""
    return _git(top, "config", "--local", key, value).returncode == 0


def merge_base(top: Path, a: str, b: str) -> str | None:
    """The best common ancestor of two commits (None: none that this clone holds, as in a
    shallow clone or unrelated histories)."""
    done = _git(top, "merge-base", "--end-of-options", a, b)
    return done.stdout.decode().split()[0] if done.returncode == 0 and done.stdout.strip() else None


def merge_heads(top: Path) -> list[str]:
    """The commits a merge in progress brings in (git's MERGE_HEAD, a line each: several
    for an octopus); none outside a merge.  A hook judging the merge's commit reads them:
    what arrived from the other side is not what this commit's author wrote.  git runs
    its pre-merge-commit hook before it writes MERGE_HEAD; there the heads are the ones it
    names in the hook's environment (`GITHEAD_<oid>`, each side's label)."""
    folder = gitspawn.git_dir(os.fspath(top))  # read, not asked of git: the hook runs on every commit
    try:
        if folder is None:
            held = ""
        else:
            with open(os.path.join(folder, "MERGE_HEAD"), encoding="ascii") as handle:
                held = handle.read()
    except (OSError, UnicodeDecodeError):  # no merge, or one git is about to record
        held = ""
    heads = [line.strip() for line in held.splitlines() if line.strip()]
    return heads or sorted(name[len("GITHEAD_"):] for name in os.environ
                           if name.startswith("GITHEAD_") and _GITHEAD.fullmatch(name))


_GITHEAD = Lazy(r"GITHEAD_[0-9a-f]{40}(?:[0-9a-f]{24})?")


def changed_paths(top: Path, old: str | None, new: str | None) -> set[str]:
    """The paths (from the top of the work tree) the change from commit `old` to commit
    `new` touches; `new` None: to the work tree, its untracked files that git does not
    ignore included; `old` None: from nothing, every file.  A rename is both its paths
    (`--no-renames`: a deletion and an addition)."""
    if old is None:
        commands = [("ls-files", "-z", "-c", "-o", "--exclude-standard")]
    else:
        commands = [("diff", "--name-only", "--no-renames", "-z", old, *([new] if new else []), "--")]
        if new is None:
            commands.append(("ls-files", "-z", "-o", "--exclude-standard"))
    out: set[str] = set()
    for command in commands:
        done = _git(top, *command)
        if done.returncode != 0:
            raise errors.BadInput(f"cannot list the files a change touches: {done.stderr.decode(errors='replace').strip()}")
        out.update(name.decode("utf-8", "surrogateescape") for name in done.stdout.split(b"\0") if name)
    return out


def tree_files(top: Path, rev: str, folder: Path, skip: Container[str] = ()) -> dict[str, bytes]:
    """Every file under `folder` as commit `rev` holds it: path relative to `folder` → bytes;
    the files named in `skip` (relative to `folder`) are not read."""
    relative = _from_top(top, folder)
    listing = _git(top, "ls-tree", "-r", "-z", rev, "--", relative)
    if listing.returncode != 0:
        raise errors.BadInput(f"cannot list {relative} at {rev}: {listing.stderr.decode(errors='replace').strip()}")
    entries = []
    for record in listing.stdout.split(b"\0"):
        if not record:
            continue
        meta, _, name = record.partition(b"\t")
        mode, kind, blob = meta.decode().split()
        path = name.decode("utf-8", "surrogateescape")
        if kind == "blob" and _within(path, relative) not in skip:
            entries.append((path, blob))
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
        out[_within(name, prefix)] = data[end + 1:end + 1 + size]
        pos = end + 1 + size + 1
    return out


def _within(name: str, prefix: str) -> str:
    return name[len(prefix) + 1:] if name.startswith(prefix + "/") else name


# -- the index (what the next commit holds) ---------------------------------------------------


def index_env(top: Path) -> dict[str, str]:
    """GIT_INDEX_FILE as git sets it for a hook, kept only when it is this repository's
    (qem_edit.system.gitspawn.index_env: every other GIT_* variable is dropped, by _git)."""
    return gitspawn.index_env(str(top))


def git_dir(top: Path) -> Path | None:
    """The work tree's own git folder: `.git`, or the folder a `.git` file names (a linked
    worktree's, a submodule's); None when neither can be read."""
    from pathlib import Path

    found = gitspawn.git_dir(os.fspath(top))
    return Path(found) if found is not None else None


def staged_files(top: Path, paths: list[str]) -> dict[str, str]:
    """The files under these paths (relative to `top`) in git's index: path → blob id."""
    done = _git(top, *_STAGED_FILES, *paths, extra=index_env(top))
    if done.returncode != 0:
        raise errors.BadInput(f"cannot read git's index: {done.stderr.decode(errors='replace').strip()}")
    return _listed_blobs(done.stdout)


def _listed_blobs(listed: bytes) -> dict[str, str]:
    out = {}
    for record in listed.split(b"\0"):
        meta, _, name = record.partition(b"\t")
        if name:
            out[name.decode("utf-8", "surrogateescape")] = meta.split()[1].decode()
    return out


def unstaged_files(top: Path, paths: list[str]) -> set[str]:
    """The tracked files under these paths whose work-tree copy differs from the index's."""
    return _names(_listed(_git(top, *_UNSTAGED_FILES, *paths, extra=index_env(top)), UNSTAGED_WHAT))


UNSTAGED_WHAT = "the files whose work tree differs from git's index"
UNTRACKED_WHAT = "the work tree's untracked files"


def _listed(done: gitspawn.Ran, what: str) -> bytes:
    """What git listed, where it ran to its end; BadInput naming `what` and git's complaint
    where it failed (a submodule whose git folder is gone, say): a listing that failed is
    never read as nothing listed (no change, no untracked file: a seal holding, a drifted
    anchor trusted to git's index)."""
    if done.returncode != 0:
        raise errors.BadInput(f"cannot list {what}: git says: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


_STAGED_FILES = ("--literal-pathspecs", "ls-files", "-s", "-z", "--")
_UNSTAGED_FILES = ("--literal-pathspecs", "diff-files", "--name-only", "-z", "--")
_STAGED_CHANGES = ("diff", "--cached", "--name-only", "--no-renames", "-z")


def _names(listed: bytes) -> set[str]:
    return set(_name_list(listed))


def _name_list(listed: bytes) -> list[str]:
    return [name for name in listed.decode("utf-8", "surrogateescape").split("\0") if name]


CommitFiles = tuple[set[str], dict[str, str], list[str] | None]  # commit_files' answer
WorkTreeFiles = tuple[list[tuple[bytes, str, str, str]], set[str], list[str]]  # work_tree_files' answer


def commit_files(top: Path, folder: str) -> CommitFiles:
    """`unstaged_files(top, [folder])`, `staged_files(top, [folder])` and
    `staged_changes(top)`, asked of git side by side: what a commit hook that judges the
    commit's files asks first (one after another, it pays for three git starts in turn).
    The files staged, where git failed to list them, are asked again alone, to fail as they
    do alone; the changes, where git failed to list them, are None: the caller asks
    `staged_changes` if it needs them (which lists every staged path where there is no HEAD
    yet, and says git's failure otherwise)."""
    return _commit_files(top, folder, *_gits(top, _commit_asks([folder]), extra=index_env(top)))


def _commit_asks(paths: list[str]) -> list[list[str]]:
    """What `commit_files` asks (of `paths`; of every path where none is named)."""
    return [[*_UNSTAGED_FILES, *paths], [*_STAGED_FILES, *paths], [*_STAGED_CHANGES, "HEAD", "--"]]


def _commit_files(top: Path, folder: str, unstaged: gitspawn.Ran, staged: gitspawn.Ran,
                  changes: gitspawn.Ran) -> CommitFiles:
    blobs = _listed_blobs(staged.stdout) if staged.returncode == 0 else staged_files(top, [folder])
    return (_names(_listed(unstaged, UNSTAGED_WHAT)), blobs,
            _name_list(changes.stdout) if changes.returncode == 0 else None)


def _top_ask(root: AnyPath) -> list[str]:
    """What asks git for the top it names for `root`, and the repository's object format."""
    return ["-C", os.fspath(root), "rev-parse", "--show-toplevel", "--show-object-format"]


# `commit_round`'s first question (the top git names, and its object format), started as a commit
# hook opens its memory (`start_top`): by (the top its files name, the folder asked from)
_tops: dict[tuple[str, str], tuple[int, int]] = {}


def start_top(top: str | None, root: AnyPath) -> None:
    """The top git names for `root` (a memory's workspace; `top`: the top its files name,
    qem_edit.system.workspace.git_top) asked now, to be read by the `commit_round` about it:
    git answers while the memory opens."""
    if top is None or not gitspawn.SPAWNS:
        return
    key = (top, os.fspath(root))
    gitspawn.dropped(_tops.pop(key, None))  # (asked twice: the first is not wanted)
    started = gitspawn.started(top, {**gitspawn.base_env(), **index_env(top)}, *_top_ask(root))
    if started is not None:
        _tops[key] = started


def forget_tops() -> None:
    """Every question `start_top` asked and no round read, ended and let go."""
    while _tops:
        gitspawn.dropped(_tops.popitem()[1])


def _round(top: AnyPath, root: AnyPath, asks: list[list[str]]) -> tuple[bytes | None, list[gitspawn.Ran]] | None:
    """What `rev-parse` printed for `root`'s top (None where it failed) and the answers to
    `asks`, all asked in one round of `top`'s: the top read from the git `start_top` started,
    where it did, within the round's time; None where git cannot be run."""
    import time

    deadline = time.monotonic() + TIMEOUT_S  # (the round's own time, which the top asked ahead keeps too)
    early = _tops.pop((os.fspath(top), os.fspath(root)), None)
    try:
        answers = _gits(top, [*([] if early is not None else [_top_ask(root)]), *asks], extra=index_env(top))
    except BaseException as exc:
        gitspawn.dropped(early)
        if isinstance(exc, errors.BadInput) and not isinstance(exc, GitTimedOut):
            return None  # (no git on the PATH, a folder git cannot enter; past its time, asked again it waits as long)
        raise
    if early is None:
        ran, *answers = answers
        return (ran.stdout if ran.returncode == 0 else None), answers
    try:
        return gitspawn.output(early, deadline), answers
    except TimeoutError:
        raise GitTimedOut(f"cannot run git: git rev-parse timed out after {TIMEOUT_S} seconds") from None


def commit_round(top: AnyPath, root: AnyPath, folder: str,
                 whole: bool) -> tuple[tuple[str, str], CommitFiles, WorkTreeFiles | None] | None:
    """`top_and_object_format(root)`, `commit_files(top, folder)` and, where `whole`,
    `work_tree_files(top)`, asked of git in one round (in turn, a commit hook waits for three
    rounds of git starts).  `top`: the work tree's top as its files name it
    (qem_edit.system.workspace.git_top), where the others are asked, checked against the top
    git names: None where that is another, or where git cannot be run (the caller then asks
    in turn, as it would have); GitTimedOut where one ran past its time (asked again, it would
    wait as long again).

    Where `whole`, the round is three git starts, not five: git's index (`ls-files -s`) and
    one `git status` (`STATUS`), which says what `diff-files`, `diff --cached HEAD` and `ls-files
    -o` say (`_status_files`), but for a file whose times changed and not its bytes, which
    `status` compares and `diff-files` lists (the drift check then hashes it, as it hashes
    any file listed: the same answer); the commit's files are those of that listing under
    `folder`, not asked apart.  A `status` that fails answers None (asked in turn).  The top,
    where `start_top` asked it of the same folders as the memory opened, is read from there,
    within the round's time (ended where the round fails): the round's own starts are the
    other two or three."""
    asked = _round(top, root, [[*STATUS], [*_STAGED_FILES]] if whole else _commit_asks([folder]))
    if asked is None:
        return None
    found, answers = asked
    named = _named_top(found) if found is not None else None
    if named is None or named[0] != os.path.realpath(top):
        return None
    if not whole:
        unstaged, staged, changes = answers
        return named, _commit_files(top, folder, unstaged, staged, changes), None
    status, staged = answers
    if status.returncode != 0:  # (an index git cannot read fails as listing it alone fails; else asked in turn)
        if staged.returncode != 0:
            staged_files(top, [folder])
        return None
    unstaged, changes, untracked = (gitspawn.Ran(0, names, b"") for names in _status_files(status.stdout))
    prefix = b"" if folder == "." else os.fsencode(folder) + b"/"
    under = gitspawn.Ran(0, b"\0".join(name for name in unstaged.stdout.split(b"\0") if name.startswith(prefix)), b"")
    listed = gitspawn.Ran(staged.returncode, b"\0".join(
        record for record in staged.stdout.split(b"\0") if record.partition(b"\t")[2].startswith(prefix)), staged.stderr)
    return named, _commit_files(top, folder, under, listed, changes), _work_tree_files(staged, unstaged, untracked)


# What the whole work tree's round asks in place of diff-files, diff --cached HEAD and ls-files -o:
# no optional lock (a hook runs while `git commit` holds the index's), no stash line, no renames
# (each is its two paths), every untracked file by name, every submodule looked into; and the
# branch's lines, HEAD's commit among them (`# branch.oid`, read by a commit hook's kept answer,
# qem_edit.mirror.answered, which takes this very look as its own), with no count against the upstream.
STATUS = ("--no-optional-locks", "-c", "status.showStash=false", "status", "--porcelain=v2", "-z", "--no-renames",
          "--untracked-files=all", "--ignore-submodules=none", "--branch", "--no-ahead-behind")


def _status_files(listed: bytes) -> tuple[bytes, bytes, bytes]:
    """What `git status` (`STATUS`) printed, as the three listings it stands for, each
    NUL-separated: the paths whose work tree differs from git's index (`diff-files
    --name-only`: a change's second letter not `.`, and every unmerged path), those whose
    index differs from HEAD's (`diff --cached --name-only HEAD`: its first letter not `.`,
    and every unmerged path; every path staged where there is no HEAD yet), and the
    untracked files git does not ignore (`ls-files -o --exclude-standard`).  The branch's
    lines (`# `) are none of them."""
    unstaged, changes, untracked = [], [], []
    for kind, states, path, _ in status_records(listed):  # (a rename's source: not asked for, --no-renames)
        if kind == b"? ":
            untracked.append(path)
        elif kind in (b"1 ", b"2 "):
            if states[1:2] != b".":
                unstaged.append(path)
            if states[:1] != b".":
                changes.append(path)
        elif kind == b"u ":
            unstaged.append(path)
            changes.append(path)
    return b"\0".join(unstaged), b"\0".join(changes), b"\0".join(untracked)


STATUS_PATHS = {b"1 ": 8, b"2 ": 9, b"u ": 10, b"? ": 1}  # a path's records, and their fields before the path


def status_records(listed: bytes) -> Iterator[tuple[bytes, bytes, bytes, bytes | None]]:
    """The records `git status --porcelain=v2 -z` printed, each as (its kind, the first two
    bytes: `1 `, `2 `, `u `, `? ` for a path's (STATUS_PATHS), `# ` for a branch's line; its
    two letters of change, or b""; its path, or the whole record where the kind names no path;
    a rename's or copy's other path, a record of its own, else None)."""
    records = iter(listed.split(b"\0"))
    for record in records:
        if not record:
            continue
        kind = record[:2]
        fields = STATUS_PATHS.get(kind)
        if fields is None:
            yield kind, b"", record, None
        elif kind == b"? ":
            yield kind, b"", record[2:], None
        else:
            parts = record.split(b" ", fields)
            yield kind, parts[1], parts[-1], next(records, b"") if kind == b"2 " else None


def index_entries(top: Path, paths: list[str] | None = None) -> list[tuple[bytes, str, str, str]]:
    """What git's index holds (`paths` alone, files or every file under folders, where
    named): (git's mode, object id, stage, path from the top) of each entry."""
    named = ["--", *paths] if paths else []
    return _index_entries(_git(top, "--literal-pathspecs", "ls-files", "-s", "-z", *named, extra=index_env(top)))


def work_tree_files(top: Path) -> WorkTreeFiles:
    """`index_entries(top)`, `unstaged_files(top, [])` and `untracked_files(top)`, asked of
    git side by side (one after another, a commit hook pays for three git starts in turn)."""
    entries, unstaged, untracked = _gits(top, [[*_STAGED_FILES], [*_UNSTAGED_FILES], [*_UNTRACKED_FILES]],
                                         extra=index_env(top))
    return _work_tree_files(entries, unstaged, untracked)


def _work_tree_files(entries: gitspawn.Ran, unstaged: gitspawn.Ran, untracked: gitspawn.Ran) -> WorkTreeFiles:
    return (_index_entries(entries), _names(_listed(unstaged, UNSTAGED_WHAT)),
            _untracked(_listed(untracked, UNTRACKED_WHAT)))


def _index_entries(done: gitspawn.Ran) -> list[tuple[bytes, str, str, str]]:
    if done.returncode != 0:
        raise errors.BadInput(f"cannot read git's index: {done.stderr.decode(errors='replace').strip()}")
    out = []
    for record in done.stdout.split(b"\0"):
        meta, _, name = record.partition(b"\t")
        fields = meta.split()
        if name and len(fields) == 3:
            out.append((fields[0], fields[1].decode(), fields[2].decode(), os.fsdecode(name)))
    return out


def staged_tree(top: Path, folder: str) -> str | None:
    """The id of the tree `git write-tree --prefix` makes of `folder` (from the top) as
    git's index holds it (None: git could not, as for a folder the index does not hold)."""
    done = _git(top, "write-tree", f"--prefix={folder}/", extra=index_env(top))
    return done.stdout.decode().strip() if done.returncode == 0 else None


def staged_changes(top: Path, parent: str = "HEAD") -> list[str]:
    """The paths git's index changes against commit `parent` (every staged path before the
    first commit): both sides of a rename."""
    extra = index_env(top)
    done = _git(top, *_STAGED_CHANGES, parent, "--", extra=extra)
    if done.returncode != 0 and not has_commits(top):  # no HEAD yet: everything staged is new
        done = _git(top, "ls-files", "-z", extra=extra)
    if done.returncode != 0:
        raise errors.BadInput(f"cannot compare git's index with HEAD: {done.stderr.decode(errors='replace').strip()}")
    return _name_list(done.stdout)


def files_seen(top: Path, folder: str) -> set[str]:
    """The files under `folder` (from the top) git sees: tracked ones, and untracked ones it
    does not ignore (a nested repository, listed as a folder, left out)."""
    done = _git(top, "--literal-pathspecs", "ls-files", "-z", "-c", "-o", "--exclude-standard", "--", folder,
                extra=index_env(top))
    if done.returncode != 0:
        raise errors.BadInput(f"cannot list the files of {folder}: {done.stderr.decode(errors='replace').strip()}")
    return {os.fsdecode(n) for n in done.stdout.split(b"\0") if n and not n.endswith(b"/")}


def untracked_files(top: Path) -> list[str]:
    """The files of the work tree git does not track and does not ignore (a nested
    repository left out)."""
    return _untracked(_listed(_git(top, *_UNTRACKED_FILES, extra=index_env(top)), UNTRACKED_WHAT))


_UNTRACKED_FILES = ("ls-files", "-z", "-o", "--exclude-standard")


def _untracked(listed: bytes) -> list[str]:
    return [os.fsdecode(n) for n in listed.split(b"\0") if n and not n.endswith(b"/")]


def hashed_blobs(top: Path, names: list[str]) -> list[bytes] | None:
    """The binary ids of the blobs `git add` would store for these files (paths from the
    top), git's filters applied (line endings, LFS, a clean filter), one `git hash-object
    --stdin-paths` for them all (None: git could not say, as when a file went meanwhile)."""
    feed = "".join(name + "\n" for name in names).encode("utf-8", "surrogateescape")
    done = _git(top, "hash-object", "--stdin-paths", input=feed)
    found = done.stdout.decode().split()
    if done.returncode != 0 or len(found) != len(names):
        return None
    return [bytes.fromhex(oid) for oid in found]


def blobs(top: Path, named: dict[str, str]) -> dict[str, bytes]:
    """The bytes of blobs (name → blob id, as staged_files gives them), by name."""
    if not named:
        return {}
    names = sorted(named)
    batch = _git(top, "cat-file", "--batch", input=b"".join(named[n].encode() + b"\n" for n in names))
    return _parse_batch(batch.stdout, names, "")


def tagged_files(cwd: Path, paths: list[str], top: Path) -> dict[str, str] | None:
    """Which of these paths (relative to `cwd`) git tracks (tag H) or would add (`?`,
    untracked and not ignored); an ignored one is left out.  None: not a git work tree."""
    try:
        done = _git(cwd, "--literal-pathspecs", "ls-files", "-z", "-t", "-c", "-o", "--exclude-standard", "--", *paths,
                    extra=index_env(top))
    except errors.BadInput:
        return None
    if done.returncode != 0:
        return None
    out = {}
    for record in done.stdout.split(b"\0"):
        tag, _, name = record.decode("utf-8", "surrogateescape").partition(" ")
        if name:
            out[name] = tag
    return out


def update_index(cwd: Path, feed: bytes, extra: dict[str, str]) -> str | None:
    """`git update-index --add --remove` of the NUL-ended paths in `feed` (relative to
    `cwd`); git's complaint, or None when it took them."""
    done = _git(cwd, "update-index", "--add", "--remove", "-z", "--stdin", input=feed, extra=extra)
    return None if done.returncode == 0 else done.stderr.decode("utf-8", "replace").strip() or "git update-index failed"


def add_to_index(top: Path, paths: list[str]) -> None:
    """`git add` of these paths (from the top)."""
    _git(top, "--literal-pathspecs", "add", "--", *paths)


def remove_from_index(top: Path, paths: list[str]) -> None:
    """`git rm --cached` of these paths (from the top): out of git's index, the files left."""
    _git(top, "--literal-pathspecs", "rm", "-q", "--cached", "--ignore-unmatch", "--", *paths)


# -- a merge stopped, a patch set aside ------------------------------------------------------


def unmerged_paths(top: Path) -> set[str]:
    """The paths git's index holds mid-merge (no one content to judge)."""
    done = _git(top, "ls-files", "-u", "-z", extra=index_env(top))
    return {os.fsdecode(record.partition(b"\t")[2]) for record in done.stdout.split(b"\0") if b"\t" in record}


def unmerged_stages(top: Path, paths: list[str]) -> list[tuple[str, str, str]]:
    """The unmerged entries under these paths (from the top), as git's index stages them:
    (path, blob id, stage: 1 the merge base, 2 ours, 3 theirs); none when git cannot say."""
    done = _git(top, "--literal-pathspecs", "ls-files", "-u", "-z", "--", *paths)
    out = []
    for record in done.stdout.split(b"\0") if done.returncode == 0 else []:
        meta, _, path = record.partition(b"\t")
        if path:
            _, blob, stage = meta.split()
            out.append((path.decode("utf-8", "surrogateescape"), blob.decode(), stage.decode()))
    return out


def patched_paths(top: Path, patch: Path) -> set[str]:
    """The paths (from the top) a patch file changes, as `git apply --numstat` reads it
    (none when git cannot read it)."""
    done = _git(top, "apply", "--numstat", "-z", str(patch))
    if done.returncode != 0:
        return set()
    paths = set()
    for record in done.stdout.split(b"\0"):
        name = record.split(b"\t", 2)[-1] if record.count(b"\t") >= 2 else b""
        if name:
            paths.add(name.decode("utf-8", "surrogateescape"))
    return paths
