"""Writing files safely: atomically, privately, and never through a symbolic link."""

from __future__ import annotations

import errno
import os
import stat

from ..base import errors
from ..base.faults import checkpoint

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import BinaryIO

    AnyPath = str | os.PathLike[str]  # a path as a string or a pathlib.Path: either is taken (no hook loads pathlib)


def leads_out(root: AnyPath, named: str) -> bool:
    """Whether `named`, a path a committed file gives relative to `root`, would take a
    write out of `root`: an absolute path, a `..` climbing out, or a symbolic link (among
    its folders, or the path itself) resolving outside.  A clone's files are untrusted
    input; git keeps links, so the resolved path is what counts, not the spelling."""
    if not named or os.path.isabs(named) or named.startswith(("\\", "/")) or named[1:2] == ":":
        return True
    top = os.path.realpath(root)
    lexical = os.path.normpath(os.path.join(top, named))
    if lexical != top and not lexical.startswith(top.rstrip(os.sep) + os.sep):
        return True
    resolved = os.path.realpath(os.path.join(top, named))
    return resolved != top and not resolved.startswith(top.rstrip(os.sep) + os.sep)


def lands_in_own(root: AnyPath, named: str, store: AnyPath) -> str | None:
    """Which folder of git's or qem's own `named` (a path a committed file gives, inside
    `root`: see `leads_out`) would write into, as written or once its links are resolved:
    a `.git` (git's settings, its hooks, its objects: any folder so named, in any case, as
    git itself refuses it in a tree), or the memory's own folder `store`; None for neither."""
    top, own = os.path.realpath(root), os.path.realpath(store)
    folded = own.rstrip(os.sep).lower()  # (compared without case, as `.git` is: a file system may ignore it)
    for spelled in (os.path.normpath(os.path.join(top, named)), os.path.realpath(os.path.join(top, named))):
        inside = os.path.relpath(spelled, top).replace(os.sep, "/").split("/")
        if any(part.lower() == ".git" for part in inside):
            return ".git"
        if spelled.lower() == folded or spelled.lower().startswith(folded + os.sep):
            return os.path.relpath(own, top).replace(os.sep, "/")
    return None


def path_name(path: AnyPath) -> str:
    """`path` named as pathlib names it (`str(Path(path))`), without importing pathlib
    where the separator is `/`: no empty part and no `.` part, no `/` at the end, and
    two leading slashes kept (POSIX leaves their meaning to the system)."""
    named = os.fspath(path)
    if os.sep != "/" or os.altsep:
        from pathlib import Path

        return str(Path(named))
    top = "//" if named.startswith("//") and not named.startswith("///") else "/" if named.startswith("/") else ""
    return top + "/".join(part for part in named.split("/") if part not in ("", ".")) or "."


def parent_name(path: AnyPath) -> str:
    """The folder holding `path`, as pathlib's `parent` names it (`str(Path(path).parent)`):
    its parts but the last, where an empty part and a `.` are no parts (`D/.qem/.` is held
    by `D`) and `..` is one."""
    return os.path.dirname(path_name(path)) or "."


def is_regular(path: AnyPath) -> bool:
    """Whether `path` is a regular file (through a link), as pathlib's `is_file` says it:
    False where it is not there (or a link leads nowhere), OSError where it cannot be looked
    at (a name too long, a folder that may not be entered), not read as "not there"."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return False
        raise


def name_within(top: AnyPath, path: AnyPath) -> str | None:
    """`path` from `top`, both resolved, its parts joined by `/` (`.` for `top` itself), as
    pathlib's `Path(path).resolve().relative_to(Path(top).resolve()).as_posix()` names it,
    without pathlib; None where it is not inside `top`."""
    top, path = os.path.realpath(top), os.path.realpath(path)
    if path == top:
        return "."
    prefix = top if top.endswith(os.sep) else top + os.sep
    if not path.startswith(prefix):
        return None
    return path[len(prefix):].replace(os.sep, "/")


def refuse_link(path: AnyPath) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise errors.BadInput(
            f"{path} is a symbolic link; qem does not write through links. Remove it (or"
            " point --path at a regular file) and try again"
        )
    if not stat.S_ISREG(mode):
        raise errors.BadInput(f"{path} exists and is not a regular file")


def read_regular(path: AnyPath) -> bytes | None:
    """The bytes of `path`, or None if it does not exist.  Refuses links and non-files."""
    refuse_link(path)
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise errors.BadInput(f"cannot read {path}: {exc.strerror}") from None


def read_text(path: AnyPath, errors: str = "strict") -> str:
    """A file's text, UTF-8, as pathlib's `read_text("utf-8", errors)` gives it (newlines
    read as open() reads them); OSError as open() raises it."""
    with open(path, encoding="utf-8", errors=errors) as handle:
        return handle.read()


def open_regular(path: AnyPath) -> BinaryIO | None:
    """`path` open for reading, or None if it does not exist.  Refuses links and non-files."""
    refuse_link(path)
    try:
        return open(path, "rb")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise errors.BadInput(f"cannot read {path}: {exc.strerror}") from None


def file_chunks(path: AnyPath, size: int = 1 << 20) -> Iterator[bytes]:
    """The bytes of `path` a chunk at a time (nothing, if it does not exist)."""
    handle = open_regular(path)
    if handle is None:
        return
    with handle:
        while chunk := handle.read(size):
            yield chunk


def same_bytes(path: AnyPath, chunks: Iterable[bytes]) -> bool | None:
    """Whether `path` holds exactly the bytes of `chunks`, read side by side, a chunk at
    a time (None: no such file)."""
    handle = open_regular(path)
    if handle is None:
        return None
    with handle:
        for chunk in chunks:
            if handle.read(len(chunk)) != chunk:
                return False
        return handle.read(1) == b""


def write_atomic(path: AnyPath, data: bytes | Iterable[bytes] | os.PathLike[str], mode: int | None = None,
                 before_replace: Callable[[], None] | None = None, *, durable: bool = True) -> None:
    """Replace `path` with `data` (bytes, or chunks of them: a stream is never held whole;
    or a file's bytes, copied by the kernel) so a reader sees the old bytes or the new,
    never a mix.

    Temp file in the same directory (created exclusively, so no link is followed), fsync,
    rename over the target, fsync the directory.  `mode` None: a file that exists keeps its
    permissions (a mirror the user made private stays private), a new one gets 0644 less
    the umask, as any new file would.  `before_replace` runs once the bytes are on disk,
    before they replace `path`.  `durable` False: no fsync (for a cache that is checked
    before it is used, whose loss in a power cut costs only its making again).
    """
    refuse_link(path)
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            mode = 0o644 & ~_umask()
    directory = os.path.dirname(os.fspath(path)) or "."
    try:
        fd, tmp = _new_beside(path)
    except OSError as exc:
        raise errors.StoreUnwritable(f"cannot write in {directory}: {exc.strerror}") from None
    try:
        checkpoint("atomic-tmp")
        with os.fdopen(fd, "wb") as handle:
            if isinstance(data, os.PathLike):
                _copy_into(handle, data)
            else:
                for chunk in (data,) if isinstance(data, (bytes, bytearray)) else data:
                    handle.write(chunk)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if durable:
                os.fsync(handle.fileno())
        checkpoint("atomic-written")
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
        checkpoint("atomic-replaced")
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        fsync_dir(directory)


def _copy_into(handle: BinaryIO, source: AnyPath) -> None:
    """`source`'s bytes into `handle`: by the kernel where it can (sendfile), no read into
    Python."""
    src = open_regular(source)
    if src is None:
        raise FileNotFoundError(errno.ENOENT, "no such file", str(source))
    with src:
        try:
            size, at = os.fstat(src.fileno()).st_size, 0
            while at < size:
                sent = os.sendfile(handle.fileno(), src.fileno(), at, size - at)
                if sent == 0:
                    break
                at += sent
            handle.seek(at)
        except (AttributeError, OSError):  # no sendfile here, or not between these files
            handle.seek(0)
            handle.truncate()
            src.seek(0)
            while chunk := src.read(1 << 20):
                handle.write(chunk)


def _new_beside(path: AnyPath) -> tuple[int, str]:
    """A new file beside `path`, private, made exclusively (no link followed, no file of
    another's taken), with a random name (`.NAME.XXXXXXXX.tmp`): its descriptor and name.
    As tempfile.mkstemp, without importing it (a write's start-up pays for every import)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    directory, base = os.path.split(os.fspath(path))
    for _ in range(100):
        name = os.path.join(directory, f".{base}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def fsync_dir(directory: AnyPath) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class read_at:
    """`path` open for reading in place, while the block runs: a function giving `count`
    bytes at an offset (fewer at the end), and the file's size.  (The context managers here
    are classes, not contextlib's: every hook loads this module, and contextlib costs it
    about 0.4 ms.)"""

    def __init__(self, path: AnyPath) -> None:
        self.path = path
        self.handle: BinaryIO | None = None

    def __enter__(self) -> tuple[Callable[[int, int], bytes], int]:
        handle = open_regular(self.path)
        if handle is None:
            raise FileNotFoundError(errno.ENOENT, "no such file", str(self.path))
        try:
            size = os.fstat(handle.fileno()).st_size
        except BaseException:
            handle.close()
            raise
        self.handle = handle

        def read(at: int, count: int) -> bytes:
            handle.seek(at)
            return handle.read(count)

        return read, size

    def __exit__(self, *exc: object) -> None:
        if self.handle is not None:
            self.handle.close()


class LockTimeout(OSError):
    """Another process held a lock past the time given."""


class locked:
    """An exclusive lock on `path` (created private if missing), held while the block
    runs; LockTimeout when another holds it past `timeout` seconds.  The operating
    system's own file lock (flock, or msvcrt's on Windows), so a process that dies
    releases it; the lock file itself stays.  Not reentrant: a process that takes it again
    while holding it waits for itself."""

    def __init__(self, path: AnyPath, timeout: float) -> None:
        self.path, self.timeout, self.fd = path, timeout, -1

    def __enter__(self) -> None:
        import time

        self.fd = fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            end = time.monotonic() + self.timeout
            delay = 0.002
            while not _try_lock(fd):
                if time.monotonic() > end:
                    raise LockTimeout(f"{self.path} stayed locked for {self.timeout:g} s")
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        except BaseException:  # (a Ctrl-C among them, the lock taken or not: let go)
            self.let_go()
            raise

    def __exit__(self, *exc: object) -> None:
        self.let_go()

    def let_go(self) -> None:
        """The lock released and its descriptor closed (again: nothing)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            _release(fd)

    def __del__(self) -> None:  # a block cut off where neither its end nor its failure ran
        try:
            self.let_go()
        except Exception:  # noqa: BLE001 - (at exit, os may be gone)
            pass


def _release(fd: int) -> None:
    try:
        _unlock(fd)  # a process forked meanwhile shares the descriptor: released for it too
    finally:
        os.close(fd)  # (closing the descriptor releases the lock where no other shares it)


def _try_lock(fd: int) -> bool:
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _unlock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # Windows: closing the descriptor releases it
        return
    fcntl.flock(fd, fcntl.LOCK_UN)


def private_dir(path: AnyPath) -> AnyPath:
    """Create `path` (and parents) with mode 0700; refuse an existing link or file there."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise errors.StoreUnwritable(f"cannot create {path}: {exc.strerror}") from None
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise errors.BadInput(f"{path} is not a private directory (a link or a file is in the way)")
    os.chmod(path, 0o700)
    return path
