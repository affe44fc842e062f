"""Every git command started, with nothing but `os`.

No subprocess module: its import costs a command more than the git it runs.  Every git
command qem runs is started here (qem_edit.system.gitrepo names each one for what it
answers): `run` runs one to its end, its input written and both of its streams read side by
side, and `run_together` several at once (the sealed `verify --staged`'s round); `started`
and `output`, with nothing more than `os`, one git started and read later, while the caller
works: a commit hook's kept answer's (qem_edit.mirror.answered) and the sealed verify's
first question, asked as it opens its memory (qem_edit.system.gitrepo.start_top).  All in
the environment every git command of qem's gets: every GIT_* variable dropped but
GIT_CONFIG_NOSYSTEM, and git's index file as a hook is given it (GIT_INDEX_FILE) kept only
where it is this repository's.  Where posix_spawn is not
there (Windows), nothing starts here: gitrepo runs git with the subprocess module, and the
commit hooks answer in full.
"""

from __future__ import annotations

import os
import stat

SPAWNS = hasattr(os, "posix_spawnp")  # (not on Windows)

# Told of the next git run here, once, before it starts (`run_together`): where a commit hook's
# answer may be kept, what it rests on is read before the command reads anything through git
# (qem_edit.mirror.answered.Keeping).  Each is called with the folder and the asks about to
# start, and may return what to call with their answers once they have ended.
first: list = []


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
        try:  # (the pipe's read end closes at exec: it is never inheritable)
            pid = _spawn(top, list(args), env, (null, write, null), _inherited())
        finally:
            os.close(null)
    except (OSError, AttributeError):
        os.close(read)
        return None
    finally:
        os.close(write)
    return pid, read


def output(start: tuple[int, int] | None, deadline: float | None = None) -> bytes | None:
    """What a git `started` wrote, once it has ended; None where it did not start or did not
    exit 0.  Past `deadline` (time.monotonic's, where given: what git wrote by then is still
    read) git is killed and TimeoutError raised; without one, git is read and waited for
    until it ends.  On anything else raised meanwhile (a Ctrl-C), git is given a quarter of
    a second to end on its own, then killed, as `run_together` ends its own."""
    if start is None:
        return None
    pid, read = start
    parts = []
    try:
        if deadline is not None:
            _read_until(read, deadline, parts)
            status = _exited_by(pid, deadline)
        else:
            while chunk := os.read(read, 1 << 16):
                parts.append(chunk)
    except BaseException as exc:
        os.close(read)
        _end([pid], grace=0.0 if isinstance(exc, TimeoutError) else 0.25)
        raise
    os.close(read)
    if deadline is None:
        status = _waited(pid)
    return b"".join(parts) if status == 0 else None


def dropped(start: tuple[int, int] | None) -> None:
    """A git `started` whose answer is no longer wanted: ended (a quarter of a second to end on
    its own, then killed) and waited for, its pipe closed."""
    if start is not None:
        os.close(start[1])
        _end([start[0]], grace=0.25)


def _read_until(read: int, deadline: float, parts: list[bytes]) -> None:
    import select
    import time

    poller = select.poll()
    poller.register(read, select.POLLIN)
    while True:  # (what git wrote before the deadline is read even once it has passed)
        if not poller.poll(max(deadline - time.monotonic(), 0) * 1000):
            raise TimeoutError("git ran past its time")
        chunk = os.read(read, 1 << 16)
        if not chunk:
            return
        parts.append(chunk)


def _exited_by(pid: int, deadline: float) -> int:
    """git's exit status once it has ended (its output closed), waited for until `deadline`
    (TimeoutError past it: a git that closed its output and went on running)."""
    import time

    pause = 0.00005  # (a git ends microseconds after closing its output: looked at again soon, then less often)
    while True:
        try:
            ended, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0  # (as `_waited`: not this process's to wait for)
        if ended:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            raise TimeoutError("git ran past its time")
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


class Ran:
    """A git command run to its end: its exit status and what it wrote to each stream."""

    __slots__ = ("returncode", "stdout", "stderr")

    def __init__(self, returncode: int, stdout: bytes, stderr: bytes) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run(cwd: str, args: list[str], env: dict[str, str], input: bytes | None = None, timeout: float = 120.0) -> Ran:
    """`git ARGS` run in the folder `cwd` (`git -C`), `input` on its standard input (else
    nothing: it never reads this process's), to its end, as `subprocess.run` with
    `capture_output` ran it: no file descriptor of this process's but the three given,
    SIGPIPE and SIGXFSZ at their defaults.  Raises what subprocess raised for the same:
    FileNotFoundError where git is not on the PATH or `cwd` is no folder, PermissionError
    where `cwd` may not be entered, TimeoutError where git ran past `timeout` seconds (it
    is killed), and anything raised meanwhile (a Ctrl-C: git is given a quarter of a second
    to end on its own, as subprocess gives it, its locks then let go) once git is waited for."""
    return run_together(cwd, [args], env, timeout, input)[0]


def run_together(cwd: str, asks: list[list[str]], env: dict[str, str], timeout: float = 120.0,
                 input: bytes | None = None) -> list[Ran]:
    """Each of `asks` (git's arguments) run as `run` runs one, all started at once, so that
    they run side by side (`input` given to the first); their answers in the same order.
    Where one cannot start, or a Ctrl-C comes, every one started is ended and waited for."""
    import _signal as signal  # (the C module Python loads as it starts: `signal` adds enums)
    import time

    if not os.path.isdir(cwd):
        raise FileNotFoundError(2, "No such file or directory", cwd)
    if not os.access(cwd, os.X_OK):
        raise PermissionError(13, "Permission denied", cwd)
    told = first.pop()(cwd, asks) if first else None
    ends: list[int] = []  # every pipe end still open here, closed on the way out
    pids: list[int] = []  # every git started, in order
    done: list[Ran] = []  # the answers of those waited for
    try:
        pipes, closing = [], _inherited()
        for n, args in enumerate(asks):
            out, out_w = _pipe(ends)
            err, err_w = _pipe(ends)
            if n or input is None:
                given, given_w = os.open(os.devnull, os.O_RDONLY), -1
                ends.append(given)
            else:
                given, given_w = _pipe(ends)
            pids.append(_spawn(cwd, args, env, (given, out_w, err_w), closing,
                               (signal.SIGPIPE, signal.SIGXFSZ)))  # (Python ignores SIGPIPE)
            for fd in (out_w, err_w, given):  # git's ends: it holds its own copies
                _close(fd, ends)
            pipes.append((out, err, given_w))
        deadline = time.monotonic() + timeout
        for n, (out, err, given_w) in enumerate(pipes):
            read = _communicate(out, err, given_w, (input or b"") if n == 0 else b"", deadline, ends)
            done.append(Ran(_waited(pids[n]), read[out], read[err]))
        if told is not None:
            told(done)
        return done
    except BaseException as exc:
        _end(pids[len(done):], grace=0.0 if isinstance(exc, TimeoutError) else 0.25)
        raise
    finally:
        for fd in ends:
            os.close(fd)


def _spawn(cwd: str, args: list[str], env: dict[str, str], streams: tuple[int, int, int],
           closing: list[tuple[int, int]], defaults: tuple[int, ...] = ()) -> int:
    """`git -C cwd ARGS` started, `streams` its standard input, output and errors, the
    descriptors `closing` closes (`_inherited`) closed in it, the signals `defaults` at
    their defaults; its process id."""
    given, out, err = streams
    return os.posix_spawnp("git", ["git", "-C", cwd, *args], env, file_actions=[
        (os.POSIX_SPAWN_DUP2, given, 0), (os.POSIX_SPAWN_DUP2, out, 1), (os.POSIX_SPAWN_DUP2, err, 2), *closing],
        setsigdef=defaults)


def _pipe(ends: list[int]) -> tuple[int, int]:
    read, write = os.pipe()
    ends += [read, write]
    return read, write


def _close(fd: int, ends: list[int]) -> None:
    ends.remove(fd)
    os.close(fd)


def _communicate(out: int, err: int, given: int, data: bytes, deadline: float, ends: list[int]) -> dict[int, bytes]:
    """Both streams read to their ends while `data` is written to `given` (-1: nothing to
    write) and `given` then closed, side by side, so that neither side waits on a full
    pipe; TimeoutError past `deadline` (time.monotonic's)."""
    import select
    import time

    parts: dict[int, list[bytes]] = {out: [], err: []}
    poller = select.poll()
    for fd in parts:
        poller.register(fd, select.POLLIN)
    reading, sent = set(parts), 0
    if given >= 0:
        os.set_blocking(given, False)
        poller.register(given, select.POLLOUT)
    while reading or given >= 0:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("git ran past its time")
        for fd, _ in poller.poll(left * 1000):
            if fd == given:
                try:
                    sent += os.write(given, data[sent:sent + (1 << 16)])
                except BrokenPipeError:  # git ended without reading it all: what it said is read
                    sent = len(data)
                if sent >= len(data):
                    poller.unregister(given)
                    _close(given, ends)  # (the end of git's input)
                    given = -1
            elif chunk := os.read(fd, 1 << 16):
                parts[fd].append(chunk)
            else:
                poller.unregister(fd)
                reading.discard(fd)
    return {fd: b"".join(chunks) for fd, chunks in parts.items()}


def _end(pids: list[int], grace: float) -> None:
    """Each git of `pids` (started, not waited for: a run past its time, a failure or a
    Ctrl-C on the way) ended and waited for: given `grace` seconds to end on its own first
    (a Ctrl-C at a terminal reaches git too, which then lets go of its locks), then killed."""
    import _signal as signal  # (the C module Python loads as it starts: `signal` adds enums)
    import time

    deadline = time.monotonic() + grace
    for pid in pids:
        try:
            while os.waitpid(pid, os.WNOHANG) == (0, 0):  # (not ended yet)
                if time.monotonic() >= deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.005)
        except ChildProcessError:  # not this process's to wait for (SIGCHLD ignored): ended all the same
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _waited(pid: int) -> int:
    """git's exit status, once it ended; 0 where this process may not wait for it (a parent
    that set SIGCHLD to be ignored: the system reaped it), as subprocess takes it."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return 0
    return os.waitstatus_to_exitcode(status)


def _inherited() -> list[tuple[int, int]]:
    """Closing every file descriptor above 2 this process would let a program it starts
    inherit (subprocess closes them all): git, and any filter or helper it runs, holds none
    of this process's pipes open."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            named = os.listdir(folder)
        except OSError:
            continue
        out = []
        for name in named:
            fd = int(name)
            try:
                if fd > 2 and os.get_inheritable(fd):
                    out.append((os.POSIX_SPAWN_CLOSE, fd))
            except OSError:
                pass  # (the folder's own descriptor, closed once listed)
        return out
    return []
