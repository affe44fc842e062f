"""How every read of the index is made: errors translated, one snapshot, sessions kept apart."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..base.vocabulary import LIVE_STATES
from ..system import db
from ..system.db import sqlite3

LIVE = ("active", "stale")  # the states of a note in force (vocabulary.LIVE_STATES), as bound into SQL
IN_FORCE = "state IN ('active', 'stale')"  # the same, spelled out for the index's SQL
assert LIVE_STATES == set(LIVE)
TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Self, TypeVar

    from ..system.files import AnyPath

    T = TypeVar("T")


class IndexReads:
    """What every read of Store is made with (Store and each class of its reads build on
    it); Store sets these when it opens the index."""

    root: AnyPath  # as Store.open was given it
    conn: sqlite3.Connection
    index_path: str | None
    session: str | None  # the agent session the reads are for (Store.__init__ says more)
    every_session: bool
    _reading: bool

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise db.translate(exc, self.index_path or self.root, "read") from None

    def _guarded(self, read: Callable[[], T]) -> T:
        try:
            return read()
        except sqlite3.DatabaseError as exc:
            raise db.translate(exc, self.index_path or self.root, "read") from None

    def hidden(self) -> frozenset[str]:
        """The session notes of sessions other than this store's reader's (`session`):
        none of its reads counts them, in force or not (none while `every_session`)."""
        if self.every_session:
            return frozenset()
        rows = self._read("SELECT id, session FROM notes INDEXED BY notes_sessions WHERE scope = 'session'")
        return frozenset(n for n, session in rows if session != self.session)

    def _seen(self, rows: list, at: int = 0) -> list:
        """`rows` without those of `hidden` notes (the note id in column `at`)."""
        hidden = self.hidden() if rows else frozenset()
        return [r for r in rows if r[at] not in hidden] if hidden else rows

    def seeing_every_session(self) -> Scope:
        """Reads that see every session's notes while it lasts: a write judging a note it
        names by its scope, or flagging this clone's notes whichever session wrote them."""
        every = self.every_session

        def begin() -> None:
            self.every_session = True

        def end(error: BaseException | None) -> None:
            self.every_session = every
        return Scope(begin, end)

    def reading(self) -> Scope:
        """A read transaction: every read inside sees one snapshot of the index."""
        return Scope(self._begin_reading, self._end_reading)

    def _begin_reading(self) -> Self:
        self.conn.execute("BEGIN")
        self._reading = True
        return self

    def _end_reading(self, error: BaseException | None) -> None:
        self._reading = False
        try:
            self.conn.execute("COMMIT")
        except sqlite3.DatabaseError:
            pass
        if isinstance(error, sqlite3.DatabaseError):
            raise db.translate(error, self.index_path or self.root, "read") from None


class Scope:
    """A block's beginning and end, as a context manager: `begin()` gives what `with ... as`
    names, `end(error)` runs however the block ends (`error`: what it raised, else None;
    what `end` raises replaces it).  Not contextlib's: every hook that reads loads this
    module, and contextlib costs it about 0.4 ms (qem_edit.system.files)."""

    __slots__ = ("begin", "end")

    def __init__(self, begin: Callable[[], T], end: Callable[[BaseException | None], None]) -> None:
        self.begin, self.end = begin, end

    def __enter__(self) -> T:
        return self.begin()

    def __exit__(self, kind: object, error: BaseException | None, *rest: object) -> None:
        self.end(error)
