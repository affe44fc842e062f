"""What a commit hook answered, kept beside the index: a commit touching no memory loads no qem.

The commit hooks (`qem verify --staged`, `qem export --check --staged`, `qem anchors check
--staged`; `qem export --staged` and `qem anchors check --staged --flag`, below) run on every commit, and nearly every commit changes neither the memory's folder,
nor MEMORY.md, nor a file a note is anchored to: what they answer then is what they answered
for the last commit.  The first one to answer at a moment of the index keeps what it printed
beside the index (`.qem/index.db-commits`, ignored by git as SQLite's own files are), with
what its answer rests on; the next, when that is unchanged, prints it again, its exit status
0 as before, without importing SQLite, the store or the command-line parser: only this
module, and git asked twice, at once.

What an answer rests on, and is kept only where git itself vouches for it:
- the memory's folder, MEMORY.md and every anchored file or folder (of a note in force, or
  flagged stale; one inside another is asked about as part of it) as HEAD holds them (`git
  ls-tree HEAD`, their object ids): each must be there (a missing one is drift, whose answer
  searches the whole tree for where it went);
- git's index and the work tree holding exactly that for each of them, and no file git does
  not ignore untracked among them (`git status`, with git's own stat cache and its
  racy-clean check; a folder's content in the work tree counts its untracked files, as
  qem_edit.system.anchors reads it): the commit changes none of them;
- MEMORY.md's own file (its size, times and inode), which the commands read as bytes where
  git may have been told to look away (assume-unchanged, skip-worktree), reached through no
  link;
- the log's files as the index read them (the folders' fingerprint, qem_edit.storage.stamp,
  the one the index caught up with: an untracked or private log file added or removed moves
  it) and the index's moment (its id and generation: every change qem makes to the index
  removes this file, as it removes the hooks' digest, qem_edit.reads.quiet);
- the clock: from the time it was read until the first end of a note in force after that;
  never kept while a request is in force (what is late moves with the clock alone);
- the command exactly (one of FORMS, nothing else on its line), the folder it runs in (the
  top of the work tree, holding `.qem/`, as the pre-commit framework runs a hook; by its
  path, so a checkout moved elsewhere answers anew), every QEM_ setting it ran with (the
  agent session: a session's notes are its own; the length of short ids), this qem (its
  version, where it is installed, and when this module was written there) and this Python.

The two hooks that write where the commit asks it (`qem export --staged`, which renders a
stale MEMORY.md, and `qem anchors check --staged --flag`, which flags drift) are kept alike
where they wrote nothing: a write moves what the answer rests on (MEMORY.md, the log, git's
index), and `.qem/mirror-base.md`, which an export finding MEMORY.md current writes again
where it is missing or of another rendering, is part of what it rests on too.

Kept only for an exit status of 0, from a run in which none of these moved (each read before
the command reads it, as the memory is opened and, git's status, before the command asks git
anything; and again after it: `Keeping`), that printed
nothing before opening the memory (a log file a merge left unmerged, settled) and said no
notice on opening it (a first index built, a forget arrived), wrote nothing to a
stream's bytes directly, lost no reader mid-answer (a broken pipe), and showed no progress
(a long replay, at a terminal: the pre-commit framework gives hooks a terminal of their own
at a person's).  Not kept, and not answered from, where a merge, rebase, cherry-pick or
revert is in progress (judged against both sides), where QEM_WORKSPACE, QEM_STORE, QEM_NOW or
a fault (QEM_FAULT) is set, where a standard stream is closed, git's folder cannot be read
or git cannot be spawned, or does not answer within PATIENCE_S (as long as qem waits for any
git: then killed).  Anything else runs the command in full, which keeps its answer
again.  The file is read as untrusted: no link, no device, at most MAX_BYTES, every field
bounds-checked; one that names another folder or another log's fingerprint (another
checkout) is never used, nor is an answer that does not rest on the memory's folder (a file
forced into a commit is inside the folder it would have to match: never matched).  A qem
whose modules are edited in place (a checkout installed for development) is not told apart
from the one before: an answer kept before the edit holds until the memory next changes.
"""

from __future__ import annotations

import os
import sys

from .. import __version__
from ..storage.stamp import stamp
from ..system import gitspawn

NAME = "index.db-commits"  # under .qem/, ignored with the index (`/index.db-*`)
VERSION = 1  # of the file's form
# the hooks that judge, and the two that write only where the commit asks it (qem-export renders a
# stale MEMORY.md, qem-anchors flags drift): where they wrote nothing, what they print is an answer
FORMS = (("verify", "--staged"), ("export", "--check", "--staged"), ("anchors", "check", "--staged"),
         ("export", "--staged"), ("anchors", "check", "--staged", "--flag"))
BASE = "mirror-base.md"  # what `qem export` last wrote, beside the index (qem_edit.mirror.export.MIRROR_BASE)
MAX_BYTES = 1 << 20
MOST_PATHS = 2000  # anchored paths named to git on one command line; a memory with more is answered in full
MOST = 8  # answers kept for one moment (a command, folder and session each)
SIDES = ("MERGE_HEAD", "REBASE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD")  # a commit judged against another side too
# the memory or the clock named otherwise, or a fault asked for: answered in full
UNSET = ("QEM_WORKSPACE", "QEM_STORE", "QEM_NOW", "QEM_FAULT", "QEM_FAULT_AFTER_N")
FOLDER = ".qem"  # the memory's folder (qem_edit.system.workspace.STATE_DIR, not imported: it brings pathlib)
PATIENCE_S = 120.0  # how long git is waited for, as for any of qem's (qem_edit.system.gitrepo.TIMEOUT_S): killed past it


# -- answering from what was kept (no qem module but this one and the log's fingerprint) --------------

def answer(argv: list[str]) -> int | None:
    """The kept answer to `argv` (the words after `qem`) printed, and its exit status; None
    where none is kept for it or it does not hold now (the command then runs in full)."""
    try:
        here = where(argv)
        if here is None:
            return None
        kept = _read(here)
        if kept is None:
            return None
        entry = kept[1].get(_entry_key(argv))
        if entry is None:
            return None
        start, until, mirror, paths, heads, chunks = entry
        if FOLDER not in paths:
            return None  # (never kept so: a file forced into a commit rests on the folder holding it, never matched)
        now = _now()
        if not (start <= now and (until == "" or now < until)) or _heads(here, paths, mirror) != heads:
            return None
    except KeyboardInterrupt:
        return _interrupted()
    except Exception:  # noqa: BLE001 - a kept answer that cannot be read or checked: the command runs in full
        return None
    try:
        return _replay(chunks)
    except KeyboardInterrupt:
        return _interrupted()


def _interrupted() -> int:
    """Ctrl-C, said as every command says it (qem_edit.shells.shell.guarded)."""
    from ..base.errors import EXIT_INTERRUPTED

    try:
        print("\nqem: interrupted", file=sys.stderr)
    except (OSError, ValueError):
        pass
    return EXIT_INTERRUPTED


def where(argv: list[str]) -> str | None:
    """The folder a kept answer is of (the current one, the top of its work tree, holding the
    memory's folder), where the command may be answered from one."""
    if tuple(argv) not in FORMS or any(name in os.environ for name in UNSET) or sys.stdout is None or sys.stderr is None:
        return None
    if any(name.startswith("GITHEAD_") for name in os.environ):
        return None  # (a merge git is about to record)
    try:
        here = os.getcwd()
    except OSError:  # (a folder removed under the command: it says so in full)
        return None
    gitdir = gitspawn.git_dir(here)
    if gitdir is None or not _is_dir(os.path.join(here, FOLDER)):
        return None
    if any(os.path.lexists(os.path.join(gitdir, side)) for side in SIDES):
        return None
    return here


def _is_dir(path: str) -> bool:
    import stat

    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _now() -> str:
    """Now, UTC, as qem_edit.base.times.utc_now writes it (QEM_NOW is never set here)."""
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _entry_key(argv: list[str]) -> str:
    """An answer's key: the command, and every QEM_ setting it ran with (the agent session,
    whose notes are its own; the length of short ids; who asks)."""
    settings = sorted(f"{name}={value}" for name, value in os.environ.items() if name.startswith("QEM_"))
    return "\0".join((" ".join(argv), *settings))


def _header(here: str, moment: str) -> bytes:
    """What a kept file is of: its form; this qem (its version, where it is installed and
    when this module was written there: another install, or the same one installed again, is
    another qem) and this Python (the streams it printed to behave alike); the folder it
    answered in (a checkout moved elsewhere keeps its folders' fingerprint, not its paths);
    the log's fingerprint; the index's moment."""
    folders = ",".join(f"{folder}:{mtime}:{inode}" for folder, mtime, inode in stamp(os.path.join(here, FOLDER)))
    build = os.stat(__file__)
    python = ".".join(map(str, sys.version_info[:2]))
    words = (f"qem-commits {VERSION} {__version__} {os.path.dirname(__file__)} {build.st_mtime_ns}:{build.st_ino}"
             f" {python} {here} {folders} {moment}")
    return words.replace("\n", " ").encode("utf-8", "surrogateescape")


def _read(here: str) -> tuple[bytes, dict[str, tuple]] | None:
    """The kept file's moment and entries, where it is of the log as it is now; None where
    there is none, it is another's or it cannot be read."""
    import stat

    path = os.path.join(here, FOLDER, NAME)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = b""
        while len(raw) <= MAX_BYTES and (chunk := os.read(fd, MAX_BYTES + 1 - len(raw))):
            raw += chunk
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        return None
    head, _, body = raw.partition(b"\n")
    moment = head.rpartition(b" ")[2]
    if head != _header(here, moment.decode("ascii")):
        return None
    return moment, entries(body)


def entries(body: bytes) -> dict[str, tuple]:
    """The entries of a kept file's body (ValueError where it is not one): each a key and
    (from, until, MEMORY.md's path and the paths git is asked about, what git said of them and
    what MEMORY.md's file is, the chunks printed)."""
    fields = _fields(body)
    out: dict[str, tuple] = {}
    at = 0
    while at < len(fields):
        key, start, until, mirror, paths, heads, count = (f.decode("utf-8", "surrogateescape") for f in fields[at:at + 7])
        at += 7
        chunks = []
        for _ in range(int(count)):
            where, text = fields[at:at + 2]
            if where not in (b"1", b"2", b"f1", b"f2"):
                raise ValueError("not a kept answer")
            chunks.append((where.decode(), text.decode("utf-8", "surrogateescape")))
            at += 2
        out[key] = (start, until, mirror, paths.split("\0") if paths else [], heads.encode("utf-8", "surrogateescape"),
                    chunks)
    return out


def _fields(body: bytes) -> list[bytes]:
    """Length-prefixed fields (`<length>:<bytes>`), one after another."""
    out, at = [], 0
    while at < len(body):
        colon = body.index(b":", at, at + 12)
        size = int(body[at:colon])
        end = colon + 1 + size
        if size < 0 or end > len(body):
            raise ValueError("not a kept answer")
        out.append(body[colon + 1:end])
        at = end
    return out


def encoded(kept: dict[str, tuple]) -> bytes:
    """The body `entries` reads back as `kept`."""
    out = []

    def field(value: str | bytes) -> None:
        data = value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")
        out.append(b"%d:%s" % (len(data), data))
    for key, (start, until, mirror, paths, heads, chunks) in kept.items():
        for value in (key, start, until, mirror, "\0".join(paths), heads, str(len(chunks))):
            field(value)
        for where, text in chunks:
            field(where)
            field(text)
    return b"".join(out)


def _heads(here: str, paths: list[str], mirror: str) -> bytes | None:
    """What HEAD holds at each of `paths` (`git ls-tree`: mode, type, object id, path), where
    git's index and the work tree hold the same for every one of them and HEAD holds each,
    and what the file `mirror` (MEMORY.md, read by the commands as bytes, not through git's
    index: git may be told to look away from it) is on disk; None otherwise, or where git
    cannot be asked."""
    return _heard(_ask(here, paths), paths, here, mirror)


def _ask(here: str, paths: list[str]) -> tuple:
    """The two git commands `_heads` reads, started side by side (read by `_heard`)."""
    env = _env(here)
    return _status(here, env, paths), _listing(here, env, paths)


def _env(here: str) -> dict[str, str]:
    return {**gitspawn.base_env(), **gitspawn.index_env(here)}


def _status(here: str, env: dict[str, str], paths: list[str], branch: bool = False) -> tuple[int, int] | None:
    """`git status` of `paths` started (`branch`: with the branch's lines, HEAD's commit among them)."""
    return gitspawn.started(here, env, "--no-optional-locks", "--literal-pathspecs", "-c", "status.showStash=false",
                            "-c", "status.branch=false", "status", "--porcelain=v2",
                            *(("--branch", "--no-ahead-behind") if branch else ()),
                            "-z", "--untracked-files=normal", "--ignore-submodules=none", "--", *paths)


def _listing(here: str, env: dict[str, str], paths: list[str], commit: str = "HEAD") -> tuple[int, int] | None:
    """`git ls-tree` of `paths` in `commit` started."""
    return gitspawn.started(here, env, "--literal-pathspecs", "ls-tree", "-z", "--full-tree", commit, "--", *paths)


def _heard(asked: tuple, paths: list[str], here: str, mirror: str) -> bytes | None:
    changed, listed_out = _read_both(*asked)
    if changed != b"":
        return None
    return _held(listed_out, paths, here, _mirror_stat(here, mirror))


def _read_both(status: tuple | None, listed: tuple | None) -> tuple[bytes | None, bytes | None]:
    """What a `git status` and a `git ls-tree` started side by side wrote, each read within
    PATIENCE_S; where reading the first fails, the second is ended too."""
    try:
        said = gitspawn.output(status, _deadline())
    except BaseException:
        gitspawn.dropped(listed)
        raise
    return said, gitspawn.output(listed, _deadline())


def _deadline() -> float:
    import time

    return time.monotonic() + PATIENCE_S


def _held(listed_out: bytes | None, paths: list[str], here: str, mirror_stat: bytes | None) -> bytes | None:
    """What an answer rests on but git's status: what HEAD holds at each of `paths` (`git
    ls-tree`'s `listed_out`), MEMORY.md's own file (`mirror_stat`) and what `qem export` last
    wrote beside the index; None where HEAD lacks one of them or MEMORY.md is not there."""
    if listed_out is None or mirror_stat is None:
        return None
    held = {record.partition(b"\t")[2] for record in listed_out.split(b"\0") if record}
    if held != {path.encode("utf-8", "surrogateescape") for path in paths}:
        return None  # (HEAD lacks one: an unborn branch, or an anchor drifted away)
    try:  # (`qem export`, finding MEMORY.md current, writes this again where it is not there or not of it)
        base = os.lstat(os.path.join(here, FOLDER, BASE))
        kept = b"%d:%d:%d" % (base.st_size, base.st_mtime_ns, base.st_ino)
    except OSError:
        kept = b"-"
    return listed_out + b"\0\0" + mirror_stat + b"\0" + kept


def _mirror_stat(here: str, mirror: str) -> bytes | None:
    """MEMORY.md's own file (its size, times and inode: the commands read its bytes where git
    may have been told to look away from it); None where it is not there."""
    try:
        seen = os.lstat(os.path.join(here, mirror))
    except OSError:
        return None
    return b"%d:%d:%d:%d" % (seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns, seen.st_ino)


def _said(out: bytes | None, paths: list[str] | None = None) -> tuple[bytes, bool] | None:
    """What a `git status --branch` printed (`_status`, or the whole work tree's,
    qem_edit.system.gitrepo.STATUS: then only what it lists at or under one of `paths`
    counts): HEAD's commit, and whether it lists nothing; None where it did not answer.
    (Read as the command runs in full: gitrepo, which reads git's records, is loaded then.)"""
    from ..system.gitrepo import STATUS_PATHS, status_records

    if out is None:
        return None
    names = {path.encode("utf-8", "surrogateescape") for path in paths} if paths is not None else None
    commit, listed = None, False
    for kind, _, path, other in status_records(out):
        if kind == b"# ":
            if path.startswith(b"# branch.oid "):
                commit = path[len(b"# branch.oid "):]
        elif names is None or kind not in STATUS_PATHS:  # (a record of a form not known here: counted)
            listed = True
        elif any(p in names or any(c == 0x2F and p[:at] in names for at, c in enumerate(p))
                 for p in (path, other) if p is not None):
            listed = True
    return (commit, not listed) if commit is not None else None


def _replay(chunks: list[tuple[str, str]]) -> int:
    """What the command printed, printed again as it printed it: the same texts to the same
    streams, flushed where it flushed, each stream made as tolerant as the command made it."""
    from ..base.shown import tolerant_streams

    tolerant_streams()
    try:
        for where, text in chunks:
            stream = sys.stdout if where.endswith("1") else sys.stderr
            if where.startswith("f"):
                stream.flush()
            else:
                stream.write(text)
    except BrokenPipeError:  # (a reader gone: as the command ends quietly, so does its answer)
        pass
    return 0


# -- keeping what a command answered --------------------------------------------------------------

class _Tee:
    """A text stream that records what is written to it, and passes it on."""

    def __init__(self, stream, where: str, chunks: list) -> None:  # type: ignore[no-untyped-def]
        self._stream, self._where, self._chunks = stream, where, chunks
        self.raw = False  # whether the bytes beneath were asked for (not recorded), or a write failed

    def write(self, text: str) -> int:
        self._chunks.append((self._where, text))
        try:
            return self._stream.write(text)
        except BaseException:  # (a reader gone: what was printed is not the whole answer)
            self.raw = True
            raise

    def flush(self) -> None:
        self._chunks.append(("f" + self._where, ""))
        try:
            self._stream.flush()
        except BaseException:
            self.raw = True
            raise

    @property
    def buffer(self):  # type: ignore[no-untyped-def]
        self.raw = True
        return self._stream.buffer

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


class Keeping:
    """A command of FORMS run in full, what it prints recorded, and kept if it may be.

    What it rests on is read before the command reads it, and again after: the index and
    the log as it opens the memory (`opened`), MEMORY.md's own file then too, and git's
    status of the paths before the command asks git anything: the command's own look at the
    whole work tree where its first git round takes one (`git status`, the sealed `verify
    --staged`'s, qem_edit.system.gitrepo.STATUS: what it lists under the paths), else `git
    status` of those paths, started as the memory opens and read to its end before the
    command's first git starts.  That status names HEAD's commit; what that commit holds at
    the paths (`git ls-tree` of that commit, not of HEAD, which may have moved meanwhile:
    what a commit holds never changes) is asked as soon as the commit is named, and read
    after the command, beside the status asked again then, which must say the same."""

    def __init__(self, argv: list[str], here: str) -> None:
        self.argv, self.here = argv, here
        self.chunks: list[tuple[str, str]] = []
        self.tees = (_Tee(sys.stdout, "1", self.chunks), _Tee(sys.stderr, "2", self.chunks))
        self.streams: tuple | None = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = self.tees  # type: ignore[assignment]
        self.place = None
        self.before: tuple | None = None  # what the answer rests on, read as the memory was opened
        self.seen: bytes | None = None  # MEMORY.md's own file then (`_mirror_stat`)
        self.said: tuple[bytes, bool] | None = None  # git's status before the command asked git anything (`_said`)
        self.asked = False  # the command has asked git something since it opened the memory
        self.early: tuple | None = None  # git's status started as the memory opened, heard before the command asks git
        self.listed: tuple | None = None  # (commit, `git ls-tree` of it started): asked as soon as the commit is known
        self.bounds = ("", "")  # (from, until): the clock read then, and the first end of a note in force after it

    def opened(self, place, store, notices: list[str]) -> None:  # type: ignore[no-untyped-def]
        """The command opened its memory: what its answer will rest on, read now (git's
        status read before the command next asks git anything, `_first`)."""
        self.before, self.said = None, None
        self._hear_early()
        gitspawn.first[:] = [self._first]  # (whether or not this open is kept: a later one must know git was asked)
        try:
            if self.asked or notices or self.chunks or (
                    os.path.realpath(place.root_name) != os.path.realpath(self.here)) or (
                    os.path.realpath(store.root) != os.path.realpath(os.path.join(self.here, FOLDER))):
                return  # (a memory opened again after git was asked: what was read before is not known)
            start = _now()
            requests, until, _ = store.start_bounds(start)
            if requests:
                return  # (what is late moves with the clock alone)
            self.place, self.bounds = place, (start, until or "")
            self.before = _resting(store, self.here, place)
            self.seen = _mirror_stat(self.here, self.before[2])
            if tuple(self.argv) != FORMS[0]:  # (the sealed verify's round looks at the whole work tree itself)
                self.early = _status(self.here, _env(self.here), self.before[3], branch=True)
        except Exception:  # noqa: BLE001 - what cannot be read is not kept
            self.before = None

    def _first(self, cwd: str, asks: list[list[str]]):  # type: ignore[no-untyped-def]
        """The command's first git round after it opened the memory, about to start in
        `cwd`: git's status of what the answer rests on, taken from it where it looks at the
        whole work tree, else heard now (started as the memory opened, or asked now: what
        git said has ended before the command's git starts).  What to call with the round's
        answers, or None."""
        self.asked = True
        try:
            if self.before is None:
                self._hear_early()
                return None
            paths = self.before[3]
            if os.path.realpath(cwd) == os.path.realpath(self.here):
                from ..system.gitrepo import STATUS

                for n, args in enumerate(asks):
                    if tuple(args) == STATUS:
                        def took(done: list) -> None:
                            self.said = _said(done[n].stdout if done[n].returncode == 0 else None, paths)
                            self._list()
                        self._hear_early()  # (none started for the sealed verify, whose round this is)
                        return took
            early, self.early = self.early, None
            self.said = _said(gitspawn.output(early or _status(self.here, _env(self.here), paths, branch=True),
                                              _deadline()))
            self._list()
        except Exception:  # noqa: BLE001 - what cannot be read is not kept
            self._hear_early()
            self.said = None
        return None

    def _list(self) -> None:
        """What the commit git's status named holds at the paths, asked now (`git ls-tree`
        of a commit: what a commit holds never changes), read once the command has ended
        (`_again`), beside the status asked again then."""
        commit = self._commit()
        if commit is not None:
            try:
                self.listed = (commit, _listing(self.here, _env(self.here), self.before[3], commit))
            except Exception:  # noqa: BLE001 - not started: asked after the command instead (`_again`)
                self.listed = None

    def _commit(self) -> str | None:
        """The commit an answer may be kept under: the one git's status named before the
        command asked git anything, where it listed nothing under the paths and what the
        answer rests on was read; None otherwise, or with no commit yet (`# branch.oid
        (initial)`)."""
        said = self.said
        if self.before is None or said is None or not said[1] or not said[0] or said[0].startswith(b"(") or (
                not said[0].isascii()):
            return None
        return said[0].decode("ascii")

    def _hear_early(self, listing: bool = True) -> None:
        """The status started as the memory opened (and the listing started once its commit
        was known: `listing`), no longer wanted: ended (gitspawn.dropped)."""
        early, self.early = self.early, None
        try:
            gitspawn.dropped(early)
        finally:
            if listing:
                self.let_go()

    def let_go(self) -> None:
        """The listing started once the commit was known, no longer wanted: ended (`finish`
        reads it, or lets it go: a command that raised past `finish` lets it go)."""
        listed, self.listed = self.listed, None
        if listed is not None:
            gitspawn.dropped(listed[1])

    def _unwatch(self) -> None:
        if gitspawn.first and getattr(gitspawn.first[0], "__self__", None) is self:
            gitspawn.first.clear()

    def restore(self) -> None:
        """The command's streams given back (what it printed is recorded until then), and
        its git rounds no longer watched, however it ended (the listing is `finish`'s)."""
        self._unwatch()
        try:
            self._hear_early(listing=False)
        except BaseException:
            self.let_go()
            raise
        finally:
            self._give_back()

    def _give_back(self) -> None:
        if self.streams is None:
            return
        if not (sys.stdout is self.tees[0] and sys.stderr is self.tees[1]):
            self.before = None  # (replaced while it ran: what it printed after is not known)
        sys.stdout, sys.stderr = self.streams
        self.streams = None

    def finish(self, code: int) -> int:
        """The command ended with `code` (its streams given back): its answer kept where it
        may be; `code` returned."""
        try:
            return self._finish(code)
        finally:
            self.let_go()

    def _finish(self, code: int) -> int:
        self.restore()
        commit = self._commit()
        if code != 0 or commit is None or any(tee.raw for tee in self.tees):
            return code
        if any("\r" in text for _, text in self.chunks):
            return code  # (a long run's progress, at a terminal: not what the next run would print)
        try:
            self._keep(commit)
        except KeyboardInterrupt:  # (Ctrl-C while it was being kept: said as every command says it)
            return _interrupted()
        except Exception:  # noqa: BLE001 - an answer not kept is answered in full next time
            pass
        return code

    def _keep(self, commit: str) -> None:
        """Keep what the command printed, resting on what HEAD's commit `commit` (as git's
        status named it before the command read anything) holds at the paths and MEMORY.md's
        file as read then, where git says the same now (the same commit, nothing listed), the
        file is as it was and the index and the log are as they were."""
        from ..storage.store import LOCK_NAME
        from ..system import files

        moment, header, mirror, paths = self.before  # type: ignore[misc]
        start, until = self.bounds
        root = os.path.join(self.here, FOLDER)
        store, heads = self._again(commit, root)
        with store:
            if heads is None:
                return  # (something it rests on moved while it ran)
            if until and not _now() < until:
                return  # (a note's end came while it ran)
            with files.locked(os.path.join(root, LOCK_NAME), 0):
                if store.moment(store.head()) != moment:
                    return
                try:
                    kept = _read(self.here)
                except (ValueError, IndexError):
                    kept = None
                there = kept[1] if kept is not None and kept[0].decode("ascii") == moment else {}
                key = _entry_key(self.argv)
                there.pop(key, None)
                there[key] = (start, until, mirror, paths, heads, list(self.chunks))
                while len(there) > MOST:
                    there.pop(next(iter(there)))
                data = header + b"\n" + encoded(there)
                if len(data) > MAX_BYTES:
                    return
                files.write_atomic(os.path.join(root, NAME), data, mode=0o600, durable=False)
                if store.moment(store.head()) != moment:
                    os.unlink(os.path.join(root, NAME))

    def _again(self, commit: str, root: str):  # type: ignore[no-untyped-def]
        """What the answer rests on, read again now: the index as it stands (open: the
        caller closes it) and what HEAD's commit `commit` holds at the paths, with MEMORY.md's
        file as read before (`_held`), where git's status names that commit and lists
        nothing, the index and the log read as before and MEMORY.md's file is as it was;
        None in its place where one moved.  Whatever fails on the way, both gits are ended
        and the index closed."""
        from ..storage.store import Store

        _, _, mirror, paths = self.before  # type: ignore[misc]
        env = _env(self.here)
        asked = listed = store = None
        try:  # (the index read while git answers)
            if self.listed is not None and self.listed[0] == commit:  # (asked as the commit was named: `_list`)
                listed, self.listed = self.listed[1], None
            asked = _status(self.here, env, paths, branch=True)
            if listed is None:
                listed = _listing(self.here, env, paths, commit)
            store = Store.as_indexed(root)
            now = _resting(store, self.here, self.place)
            started, asked, listed = (asked, listed), None, None  # (read, or ended, by `_read_both` however it ends)
            out, listed_out = _read_both(*started)
            said, heads = _said(out), _held(listed_out, paths, self.here, self.seen)
            if said != (commit.encode("ascii"), True) or now != self.before or (
                    _mirror_stat(self.here, mirror) != self.seen):
                heads = None
        except BaseException:
            try:
                gitspawn.dropped(asked)
                gitspawn.dropped(listed)
            finally:
                if store is not None:
                    store.close()
            raise
        return store, heads


def _resting(store, here: str, place) -> tuple:  # type: ignore[no-untyped-def]
    """What an answer read from `store` now rests on, but git's word: (the index's moment, the
    kept file's header, MEMORY.md's path and the paths git is asked about); ValueError where
    there is nothing to keep: a log whose folders moved since the index read them, too many
    anchors, no MEMORY.md in the work tree, or one reached through a link (git would be asked
    about the file it leads to, not the link)."""
    from ..base import cjson  # (as the index writes it: json's own C encoder, without importing json)

    if store.log_stamp() != cjson.dumps(stamp(os.path.join(here, FOLDER))):
        raise ValueError("the log moved since the index read it")
    given = place.mirror_name()
    mirror = os.path.relpath(os.path.abspath(given), here)
    if mirror.startswith("..") or mirror != os.path.relpath(os.path.realpath(given), here) or not os.path.isfile(given):
        raise ValueError("no MEMORY.md in the work tree")
    anchored = store.anchored_paths(MOST_PATHS)
    if anchored is None:
        raise ValueError("too many anchors")
    mirror = mirror.replace(os.sep, "/")
    named = {FOLDER, mirror, *anchored}
    # a path inside another of them is asked about as part of that folder (ls-tree names the folder alone)
    paths = sorted(p for p in named if not any(p[:at] in named for at, c in enumerate(p) if c == "/"))
    moment = store.moment(store.head())
    return moment, _header(here, moment), mirror, paths
