"""SQLite opened one way: waiting out writers, its errors turned into qem's.

SQLite, the way qem uses it: one place that opens a database, waits out other writers,
and turns SQLite's errors into qem's (by result code, never by message text)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sized

from ..base import errors

try:  # SQLite's own module.  The `sqlite3` package around it adds DB-API's date types and
    # default date adapters, which qem never uses, and imports `datetime` for them: 1.5 ms
    # of every command and hook.  Every other module names SQLite through this one.
    import _sqlite3 as sqlite3
except ImportError:  # an interpreter that ships the package alone
    import sqlite3  # type: ignore[no-redef]

Connection = sqlite3.Connection  # what the other modules name a connection the storage layer hands them
BUSY_TIMEOUT_MS = 5_000
WRITE_PATIENCE_S = 60.0
_BUSY = frozenset({"SQLITE_BUSY", "SQLITE_LOCKED"})

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import TypeVar

    from .files import AnyPath

    T = TypeVar("T")

# SQLite calls back into Python this often (virtual machine steps) during a statement: a
# Ctrl-C is seen there (its handler runs, SQLite ends the statement: SQLITE_INTERRUPT)
# rather than when a statement over a whole log ends, minutes later.
PROGRESS_STEPS = 100_000
# The page size of a database file qem makes (the index, verify's fresh replay): set before its
# first table, fixed after.  SQLite reads and writes a page at a time; a whole log's build
# reads its tables again for each secondary index, beyond its cache (at 74,900 notes, 115,000
# reads of 4 KiB pages and 0.6 s of the building process's time in the kernel; of 16 KiB
# pages, 48,000 and 0.4 s).
PAGE_SIZE = 16384
_interrupted = False


def _progress() -> int:
    return 1 if _interrupted else 0


def on_interrupt(signum: int, frame: object) -> None:
    """The SIGINT handler of a qem command: KeyboardInterrupt, as Python's own, and noted,
    so that a statement it ended (SQLite's error, caught on the way up, or not) still ends
    the command as interrupted (`interrupted`)."""
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def interrupted() -> bool:
    return _interrupted


def _primary(exc: sqlite3.Error) -> str:
    """The primary result code's name ("SQLITE_BUSY" for SQLITE_BUSY_SNAPSHOT too)."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    return "_".join(name.split("_")[:2])


def is_busy(exc: sqlite3.Error) -> bool:
    return _primary(exc) in _BUSY


def translate(exc: sqlite3.Error, path: AnyPath, doing: str = "use") -> errors.QemError:
    """The one place an SQLite error becomes a qem error, by its result code.

    `doing` names what failed ("open", "read", "write"); a failed write says that nothing
    was written."""
    code = _primary(exc)
    nothing = "; nothing was written" if doing == "write" else ""
    if code in _BUSY:
        return errors.StoreBusy(f"{path} is locked by another process{nothing}")
    if code == "SQLITE_READONLY":
        return errors.StoreUnwritable(f"{path} is read-only{nothing}")
    if code == "SQLITE_CANTOPEN":
        return errors.StoreUnwritable(f"cannot open {path}: {exc}")
    if code in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
        return errors.NotAStore(f"{path} is damaged ({exc}); delete it: qem rebuilds it from the log{nothing}")
    if code == "SQLITE_INTERRUPT":
        return errors.Interrupted(f"interrupted{nothing}")
    if code == "SQLITE_FULL":
        return errors.StoreUnwritable(f"{path}: the disk is full{nothing}")
    return errors.NotAStore(f"cannot {doing} {path}: {exc}{nothing}")


def patiently(attempt: Callable[[], T], path: AnyPath, doing: str) -> T:
    """Run `attempt`, trying again while SQLite says busy (another process holds the lock
    longer than the busy timeout, or SQLite returned BUSY without waiting, as it does
    while another process creates the database or switches it to WAL); gives up with
    StoreBusy after a minute.  Every other SQLite error is translated."""
    deadline = time.monotonic() + WRITE_PATIENCE_S
    delay = 0.01
    while True:
        try:
            return attempt()
        except sqlite3.DatabaseError as exc:
            if not is_busy(exc):
                raise translate(exc, path, doing) from None
            if time.monotonic() >= deadline:
                nothing = "; nothing was written" if doing == "write" else ""
                raise errors.StoreBusy(
                    f"{path} stayed locked by another process for over {int(WRITE_PATIENCE_S)} s{nothing}"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def connect(target: str, *, uri: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(target, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, uri=uri)
    conn.set_progress_handler(_progress, PROGRESS_STEPS)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # forget must leave no text behind in freed pages of the index either
    conn.execute("PRAGMA secure_delete = ON")
    return conn


# every error `translate` makes: what a caller that reads a cache and carries on without it catches
TRANSLATED = (errors.StoreBusy, errors.StoreUnwritable, errors.NotAStore, errors.Interrupted)
CHUNK = 500  # ids per `IN (...)`: well under SQLite's limit on bound parameters


def chunks(items: list[T]) -> Iterator[list[T]]:
    """`items` (ids, sorted by the caller) a CHUNK at a time: each is bound into one `IN (...)`."""
    for start in range(0, len(items), CHUNK):
        yield items[start:start + CHUNK]


def marks(values: Sized) -> str:
    """The `?, ?, ...` placeholders for binding `values` into `IN (...)`."""
    return ", ".join("?" * len(values))


class transaction:
    """A write transaction (BEGIN IMMEDIATE): committed when the block ends, rolled back
    when anything is raised in it, or by the commit (a rollback that itself fails gives way
    to the error that caused it).  Every write of a memory's index is one (a file of one
    process's own, as verify's fresh replay, needs no lock); SQLite's errors pass through to
    the `patiently` that runs it, which waits out a busy one and translates the rest, once.
    (A class, not contextlib's: a hook loads this module, qem_edit.system.files.)"""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is None:
            try:
                self.conn.execute("COMMIT")
                return
            except BaseException:
                self._roll_back()
                raise
        self._roll_back()

    def _roll_back(self) -> None:
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
