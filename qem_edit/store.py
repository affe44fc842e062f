"""The note store: one SQLite file holding the append-only event log.

This module owns the write transaction.  Every change is one `BEGIN IMMEDIATE`
transaction that appends events and, in the same transaction, updates the `notes` table,
a cache of the replayed state that `verify` rebuilds from the log and compares.  The
database itself refuses to delete events, to create a note id twice, or to rewrite an
event other than erasing a forgotten note's text.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

from . import errors, items
from .faults import checkpoint
from .model import (
    EVENT_TYPES,
    KIND_RANK,
    Draft,
    Event,
    LogError,
    NewNote,
    Note,
    TextError,
    TransitionError,
    apply_event,
    decide_create,
    decide_dispute,
    decide_forget,
    decide_move,
    decide_rule,
    replay,
)

APPLICATION_ID = 0x71656D31  # "qem1": marks the file as a qem store
SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 5_000
MAX_ID = 2**63 - 1  # SQLite's largest integer: no note id or seq lies beyond it
WRITE_PATIENCE_S = 60.0

_EVENT_TYPES_SQL = ", ".join(f"'{t}'" for t in EVENT_TYPES)
_SCHEMA = f"""
CREATE TABLE events (
    seq     INTEGER PRIMARY KEY,
    note_id INTEGER NOT NULL CHECK (note_id > 0),
    type    TEXT NOT NULL CHECK (type IN ({_EVENT_TYPES_SQL})),
    at      TEXT NOT NULL,
    actor   TEXT NOT NULL,
    reason  TEXT,
    checkin TEXT,
    data    TEXT NOT NULL
);
CREATE UNIQUE INDEX events_one_creation ON events (note_id) WHERE type = 'created';
CREATE INDEX events_by_note ON events (note_id, seq);
CREATE TRIGGER events_never_deleted BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'qem events are append-only'); END;
CREATE TRIGGER events_only_forgetting BEFORE UPDATE ON events
WHEN NOT (OLD.type = 'created' AND NEW.type = 'created' AND NEW.seq = OLD.seq
          AND NEW.note_id = OLD.note_id AND json_extract(NEW.data, '$.text') IS NULL)
BEGIN SELECT RAISE(ABORT, 'qem events are append-only'); END;

CREATE TABLE notes (
    id            INTEGER PRIMARY KEY,
    kind_rank     INTEGER NOT NULL,
    kind          TEXT NOT NULL,
    priority      TEXT NOT NULL,
    text          TEXT,
    provenance    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    actor         TEXT NOT NULL,
    supersedes    INTEGER,
    superseded_by INTEGER,
    state         TEXT NOT NULL,
    state_at      TEXT,
    state_reason  TEXT,
    state_seq     INTEGER,
    bad_pointer   TEXT,
    disputes      TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX notes_in_order ON notes (kind_rank, id);
CREATE INDEX notes_by_parent ON notes (supersedes) WHERE supersedes IS NOT NULL;
{items.SCHEMA}
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_NOTE_COLUMNS = (
    "id, kind, priority, text, provenance, created_at, actor, supersedes, superseded_by, "
    "state, state_at, state_reason, state_seq, bad_pointer, disputes"
)
_EVENT_COLUMNS = "seq, note_id, type, at, actor, reason, checkin, data"

T = TypeVar("T")


def utc_now() -> str:
    """Now, UTC, second precision.  `QEM_NOW` pins it (tests and reproducible fixtures)."""
    pinned = os.environ.get("QEM_NOW")
    if pinned:
        return pinned
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- sqlite, translated once -------------------------------------------------------------------

_BUSY = frozenset({"SQLITE_BUSY", "SQLITE_LOCKED"})


def _primary(exc: sqlite3.Error) -> str:
    """The primary result code's name ("SQLITE_BUSY" for SQLITE_BUSY_SNAPSHOT too)."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    return "_".join(name.split("_")[:2])


def is_busy(exc: sqlite3.Error) -> bool:
    return _primary(exc) in _BUSY


def translate(exc: sqlite3.Error, path: Path, doing: str = "use") -> errors.QemError:
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
        beside = ""
        if path.exists():
            beside = f" (even to read it, SQLite must create {path.name}-shm beside it: is {path.parent} writable?)"
        return errors.StoreUnwritable(f"cannot open {path}: {exc}{beside}")
    if code in ("SQLITE_NOTADB", "SQLITE_CORRUPT") and doing == "open":
        return errors.NotAStore(f"{path} is not a qem store (not an SQLite database, or corrupt)")
    if code in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
        return errors.NotAStore(f"{path} is corrupt: {exc}{nothing}")
    return errors.NotAStore(f"cannot {doing} {path}: {exc}{nothing}")


def patiently(attempt: Callable[[], T], path: Path, doing: str) -> T:
    """Run `attempt`, trying again while SQLite says busy (another process holds the lock
    longer than the busy timeout, or SQLite returned BUSY without waiting, as it does
    while another process creates the store or switches it to WAL); gives up with
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


def _note_from_row(row: Sequence[object]) -> Note:
    *fields, disputes = row
    pairs = tuple(tuple(pair) for pair in json.loads(disputes)) if disputes != "[]" else ()  # type: ignore[arg-type]
    return Note(*fields, disputes=pairs)  # type: ignore[arg-type]


def _event_from_row(row: Sequence[object]) -> Event:
    seq, note_id, type_, at, actor, reason, checkin, data = row
    return Event(seq, note_id, type_, at, actor, reason, checkin, json.loads(data))  # type: ignore[arg-type]


def read_note(conn: sqlite3.Connection, note_id: int) -> Note:
    """One note from the cache; NoSuchNote for an id that names none."""
    row = None
    if 0 < note_id <= MAX_ID:
        row = conn.execute(f"SELECT {_NOTE_COLUMNS} FROM notes WHERE id = ?", (note_id,)).fetchone()
    if row is None:
        raise errors.NoSuchNote(f"no note #{note_id} in this store")
    return _note_from_row(row)


def _compact(data: object) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


class Transaction:
    """One open write transaction: turns decided drafts into events, appends them, and
    keeps the notes and items caches in step."""

    def __init__(self, conn: sqlite3.Connection, at: str) -> None:
        self.conn = conn
        self.at = at
        row = conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()
        self.head: int = row[0]
        self._notes: dict[int, Note] = {}

    def note(self, note_id: int) -> Note:
        if note_id not in self._notes:
            self._notes[note_id] = read_note(self.conn, note_id)
        return self._notes[note_id]

    def next_note_id(self) -> int:
        row = self.conn.execute(
            "SELECT max((SELECT coalesce(max(id), 0) FROM notes),"
            " (SELECT coalesce(max(note_id), 0) FROM events))"
        ).fetchone()
        return max(row[0], max(self._notes, default=0)) + 1

    def append(self, event: Event) -> Event:
        """Validate `event` against the note's state, then write it and the new state."""
        if event.type == "created":
            if event.note_id in self._notes or self.conn.execute(
                "SELECT 1 FROM notes WHERE id = ?", (event.note_id,)
            ).fetchone():
                raise errors.Refused(f"note #{event.note_id} already exists")
        else:
            self.note(event.note_id)
        try:
            apply_event(self._notes, event)
        except (TransitionError, LogError) as exc:
            raise errors.Refused(str(exc)) from None
        self.conn.execute(
            f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (event.seq, event.note_id, event.type, event.at, event.actor,
             event.reason, event.checkin, _compact(dict(event.data))),
        )
        self._save(self._notes[event.note_id])
        self.head = event.seq
        checkpoint("append")
        return event

    def record(self, drafts: Iterable[Draft], actor: str, checkin: str | None = None) -> list[Event]:
        """Append decided drafts as the next events, in order."""
        return [
            self.append(Event(self.head + 1, d.note_id, d.type, self.at, actor, d.reason, checkin, d.data))
            for d in drafts
        ]

    def emit(self, note_id: int, type_: str, actor: str, reason: str | None = None,
             checkin: str | None = None) -> Event:
        """A lifecycle move (revoke, flag stale, reinstate, expire, promote) on one note."""
        [event] = self.record([_decided(decide_move, self.note(note_id), type_, reason)], actor, checkin)
        return event

    def create(self, new: NewNote, actor: str, reason: str | None = None, checkin: str | None = None) -> Note:
        note_id = self.next_note_id()
        old = self.note(new.supersedes) if new.supersedes is not None else None
        self.record(_decided(decide_create, note_id, new, old, reason), actor, checkin)
        return self._notes[note_id]

    def forget(self, note_id: int, actor: str, reason: str) -> Event:
        [event] = self.record([_decided(decide_forget, self.note(note_id), reason)], actor)
        # The one rewrite the log allows: the created event loses its text.
        seq, data = self.conn.execute(
            "SELECT seq, data FROM events WHERE note_id = ? AND type = 'created'", (note_id,)
        ).fetchone()
        self.conn.execute(
            "UPDATE events SET data = ? WHERE seq = ?", (_compact({**json.loads(data), "text": None}), seq)
        )
        return event

    def dispute(self, a: int, b: int, actor: str, reason: str) -> int:
        """Record a dispute between two live notes (neither is edited); returns its id."""
        dispute_id = self.head + 1
        self.record(_decided(decide_dispute, self.note(a), self.note(b), dispute_id, reason), actor)
        return dispute_id

    def rule(self, dispute_id: int, keep: int, actor: str, reason: str) -> None:
        """Close a dispute: `keep` stands, the other note is revoked in its favour."""
        rows = self.conn.execute(
            "SELECT DISTINCT note_id FROM events WHERE type = 'disputed'"
            " AND json_extract(data, '$.dispute') = ? ORDER BY note_id",
            (dispute_id,),
        ).fetchall()
        if len(rows) != 2:
            raise errors.NoSuchNote(f"no dispute {dispute_id} in this store")
        sides = (self.note(rows[0][0]), self.note(rows[1][0]))
        self.record(_decided(decide_rule, dispute_id, sides, keep, reason), actor)

    def _save(self, note: Note) -> None:
        self.conn.execute(
            f"INSERT OR REPLACE INTO notes (kind_rank, {_NOTE_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (KIND_RANK[note.kind], *_note_values(note)),
        )
        items.save(self.conn, note)

    def save_all(self, notes: Iterable[Note]) -> None:
        """Replace both caches with `notes` (a replay of the whole log)."""
        notes = list(notes)
        self.conn.execute("DELETE FROM notes")
        for note in notes:
            self._save(note)
        items.rebuild(self.conn, notes)


def _decided(decide: Callable[..., T], *args: object) -> T:
    """Run a domain decision; its refusal becomes the user's."""
    try:
        return decide(*args)
    except (TransitionError, TextError) as exc:
        raise errors.Refused(str(exc)) from None


def _note_values(note: Note) -> tuple[object, ...]:
    return (
        note.id,
        note.kind,
        note.priority,
        note.text,
        note.provenance,
        note.created_at,
        note.actor,
        note.supersedes,
        note.superseded_by,
        note.state,
        note.state_at,
        note.state_reason,
        note.state_seq,
        note.bad_pointer,
        json.dumps([list(pair) for pair in note.disputes]),
    )


class Store:
    """One qem store file.  Open it with `Store.open` (reads) or `Store.open(create=True)`."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self.conn = conn

    # -- opening -----------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, *, create: bool = False, write: bool = False) -> "Store":
        """The store at `path`; `create` makes a missing one, `write` says the command
        means to write (a store that can only be read is then refused up front)."""
        path = Path(path)
        if not path.exists():
            if not create:
                raise errors.StoreMissing(
                    f"no qem store at {path}",
                    hint="create one with `qem init` (or any write command, e.g. `qem add`)",
                )
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise errors.StoreUnwritable(f"cannot create {path.parent}: {exc.strerror}") from None
        elif path.is_dir():
            raise errors.NotAStore(f"{path} is a directory, not a qem store")
        try:
            return patiently(lambda: cls._connect(path, create), path, "open")
        except errors.StoreUnwritable as exc:
            if create or write:
                raise errors.StoreUnwritable(
                    f"{path} is read-only here ({exc}); nothing was written"
                ) from None
            # A read-only mount or directory: SQLite cannot make the -shm file a WAL
            # reader needs.  Reading still works read-only, or, with no write-ahead log
            # waiting to be read, as an immutable file; every write then refuses.
            reader = cls._read_only(path)
            if reader is None:
                raise
            return reader

    @classmethod
    def _read_only(cls, path: Path) -> "Store | None":
        from urllib.parse import quote

        uri = "file:" + quote(str(path.resolve()))
        wal = Path(str(path) + "-wal")
        modes = ["mode=ro"] + ([] if wal.exists() and wal.stat().st_size else ["immutable=1"])
        for mode in modes:
            try:
                return cls._connect(path, False, f"{uri}?{mode}")
            except sqlite3.DatabaseError:
                continue
        return None

    @classmethod
    def _connect(cls, path: Path, create: bool, uri: str | None = None) -> "Store":
        target = uri if uri is not None else str(path)
        conn = sqlite3.connect(target, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, uri=uri is not None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            # `forget` must erase text from the file, not just unlink it from the
            # b-tree; many SQLite builds leave freed cell bytes in place otherwise.
            conn.execute("PRAGMA secure_delete = ON")
            store = cls(path, conn)
            store._prepare(create)
            return store
        except BaseException:
            conn.close()
            raise

    def _prepare(self, create: bool) -> None:
        conn = self.conn
        # One read transaction, so a store another process is creating right now is seen
        # before or after its creation, never half-way (tables there, application id not).
        conn.execute("BEGIN")
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            has_tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")
        if app_id == 0 and version == 0:
            if has_tables:
                raise errors.NotAStore(f"{self.path} is an SQLite database, but not a qem store")
            if not create:
                raise errors.StoreMissing(
                    f"{self.path} is an empty file, not yet a qem store",
                    hint="initialize it with `qem init`",
                )
            self._initialize()
            return
        if app_id != APPLICATION_ID:
            raise errors.NotAStore(f"{self.path} is an SQLite database, but not a qem store")
        if version > SCHEMA_VERSION:
            raise errors.SchemaTooNew(
                f"{self.path} has store schema {version}; this qem reads up to {SCHEMA_VERSION}",
                hint="upgrade qem to read it",
            )
        if self._journal_mode() != "wal":
            self._enable_wal()

    def _journal_mode(self) -> str:
        return str(self.conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()

    def _enable_wal(self) -> None:
        try:
            self.conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError:
            pass  # a read-only store still reads; writes report it

    def _initialize(self) -> None:
        conn = self.conn
        conn.execute("PRAGMA journal_mode = WAL")
        script = (
            "BEGIN IMMEDIATE;"
            + _SCHEMA
            + f"PRAGMA application_id = {APPLICATION_ID};"
            + f"PRAGMA user_version = {SCHEMA_VERSION};"
            + items.initial_meta()
            + "COMMIT;"
        )
        try:
            conn.executescript(script)
        except sqlite3.OperationalError:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            # A racing `init` may have won while we waited for the lock: its tables are
            # there now (ours then failed to be created), and that store is ours too.
            if self._is_qem_store():
                return
            raise

    def _is_qem_store(self) -> bool:
        return self.conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------

    def write(self, work: Callable[[Transaction], T], *, at: str | None = None) -> T:
        """Run `work` in one write transaction; all its events land, or none.

        Waits for other writers (SQLite's busy timeout, then retries with backoff) rather
        than surfacing "database is locked"; gives up with StoreBusy after a minute.
        """
        try:
            return patiently(lambda: self._write_once(work, at or utc_now()), self.path, "write")
        except UnicodeEncodeError:
            # text, reason or actor came from undecodable bytes (argv, environment)
            raise errors.BadInput("an argument holds bytes that are not UTF-8; nothing was written") from None

    def _write_once(self, work: Callable[[Transaction], T], at: str) -> T:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            checkpoint("write-begin")
            tx = Transaction(conn, at)
            result = work(tx)
            if not items.fresh(conn):  # the rendering changed since the items were cached
                items.rebuild(conn, self.notes())
            checkpoint("write-before-commit")
            conn.execute("COMMIT")
            checkpoint("write-after-commit")
            return result
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # -- reading -----------------------------------------------------------------------

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "read") from None

    def head(self) -> int:
        return self._read("SELECT coalesce(max(seq), 0) FROM events")[0][0]

    def note(self, note_id: int) -> Note:
        return self._guarded(lambda conn: read_note(conn, note_id))

    def notes_by_id(self, ids: Iterable[int]) -> dict[int, Note]:
        """The notes with these ids (absent ids are left out)."""
        wanted = sorted(set(ids))
        out: dict[int, Note] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = self._read(
                f"SELECT {_NOTE_COLUMNS} FROM notes WHERE id IN ({', '.join('?' * len(chunk))})", chunk
            )
            out.update((n.id, n) for n in map(_note_from_row, rows))
        return out

    def notes(
        self, kinds: Iterable[str] | None = None, states: Iterable[str] | None = None
    ) -> list[Note]:
        """Notes from the cache, in the projection's total order (kind rank, id)."""
        clause, params = _where(kinds, states)
        rows = self._read(
            f"SELECT {_NOTE_COLUMNS} FROM notes{clause} ORDER BY kind_rank, id", params
        )
        return [_note_from_row(r) for r in rows]

    def count(self, kinds: Iterable[str] | None = None, states: Iterable[str] | None = None) -> int:
        clause, params = _where(kinds, states)
        return self._read(f"SELECT count(*) FROM notes{clause}", params)[0][0]

    def snapshot(self) -> tuple[int, list[Note]]:
        """The head and every note, read in one transaction so the two agree."""
        conn = self.conn
        conn.execute("BEGIN")
        try:
            return self.head(), self.notes()
        finally:
            self._end_read()

    def events(
        self, note_id: int | None = None, after: int = 0, upto: int | None = None
    ) -> list[Event]:
        where, params = ["seq > ?"], [after]
        if note_id is not None:
            where.append("note_id = ?")
            params.append(note_id)
        if upto is not None:
            where.append("seq <= ?")
            params.append(upto)
        rows = self._read(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE {' AND '.join(where)} ORDER BY seq", params
        )
        return [_event_from_row(r) for r in rows]

    def iter_events(self) -> Iterator[Event]:
        try:
            for row in self.conn.execute(f"SELECT {_EVENT_COLUMNS} FROM events ORDER BY seq"):
                yield _event_from_row(row)
        except sqlite3.DatabaseError as exc:  # a damaged page, met halfway through the log
            raise translate(exc, self.path, "read") from None

    def rewind(self, base: int) -> tuple[list[Event], dict[int, Note | None]]:
        """The events after `base`, and each note they touch as it was at `base` (None:
        created after it).  Notes they do not touch are as they are now."""
        since = self.events(after=base)
        past: dict[int, Note | None] = {}
        for note_id in sorted({e.note_id for e in since}):
            replayed = replay(self.events(note_id=note_id, upto=base))
            past[note_id] = replayed.get(note_id)
        return since, past

    def seq_at(self, moment: str) -> int:
        """The last seq written at or before `moment` (a UTC timestamp); 0 if none."""
        return self._read("SELECT coalesce(max(seq), 0) FROM events WHERE at <= ?", (moment,))[0][0]

    def state_at(self, seq: int) -> dict[int, Note]:
        """Every note as it was right after event `seq` (forgotten text stays forgotten)."""
        return replay(self.events(upto=seq))

    # -- the item cache ------------------------------------------------------------------

    def items_fresh(self) -> bool:
        """Whether the cached items were rendered by this rendering."""
        return self._guarded(items.fresh)

    def export_items(self, kinds: Iterable[str], *, with_ids: bool = False) -> dict[str, list]:
        """Each kind's cached items as UTF-8 bytes, in id order (see items.by_kind)."""
        return self._guarded(lambda conn: items.by_kind(conn, kinds, with_ids=with_ids))

    def _guarded(self, read: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return read(self.conn)
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "read") from None

    def has_disagreements(self) -> bool:
        """Whether any note is disputed or forked (export then marks them, from the graph)."""
        return bool(
            self._read(
                "SELECT 1 FROM notes WHERE disputes != '[]' UNION ALL SELECT 1 FROM"
                " (SELECT supersedes FROM notes WHERE supersedes IS NOT NULL"
                "  GROUP BY supersedes HAVING count(*) > 1) LIMIT 1"
            )
        )

    # -- checking ----------------------------------------------------------------------

    def verify(self) -> list[str]:
        """Differences between the caches and a replay of the log ([] when equal)."""
        try:
            replayed = replay(self.iter_events())
        except (LogError, TransitionError) as exc:
            return [f"the log does not replay: {exc}"]
        cached = {n.id: n for n in self.notes()}
        problems = [
            problem
            for note_id in sorted(set(replayed) | set(cached))
            if (problem := _cache_problem(note_id, replayed.get(note_id), cached.get(note_id)))
        ]
        problems += self._guarded(lambda conn: items.disagreements(conn, replayed))
        integrity = self._read("PRAGMA quick_check")
        if integrity and integrity[0][0] != "ok":
            problems.append(f"SQLite integrity check: {integrity[0][0]}")
        return problems

    def rebuild_cache(self) -> int:
        """Replace the notes and items caches with a replay of the log; returns the notes
        written."""

        def work(tx: Transaction) -> int:
            notes = replay(self.iter_events())
            tx.save_all(notes.values())
            return len(notes)

        return self.write(work)

    @contextmanager
    def reading(self) -> Iterator["Store"]:
        """A read transaction: every read inside sees one snapshot of the store."""
        self.conn.execute("BEGIN")
        try:
            yield self
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "read") from None
        finally:
            self._end_read()

    def _end_read(self) -> None:
        """End a read transaction; on a damaged file the read itself reports the damage,
        so a COMMIT that fails too must not replace that report with a traceback."""
        try:
            self.conn.execute("COMMIT")
        except sqlite3.DatabaseError:
            if self.conn.in_transaction:
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.DatabaseError:
                    pass


def _where(kinds: Iterable[str] | None, states: Iterable[str] | None) -> tuple[str, list[str]]:
    where, params = [], []
    for column, values in (("kind", kinds), ("state", states)):
        if values is not None:
            values = list(values)
            where.append(f"{column} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    return (f" WHERE {' AND '.join(where)}" if where else ""), params


def _cache_problem(note_id: int, want: Note | None, have: Note | None) -> str | None:
    """How the cached note differs from the log's replay (None: it does not)."""
    if want is None:
        return f"note #{note_id} is in the cache but has no created event"
    if have is None:
        return f"note #{note_id} is in the log but missing from the cache"
    if want == have:
        return None
    fields = [f for f in Note.__dataclass_fields__ if getattr(want, f) != getattr(have, f)]
    return f"note #{note_id}: cache disagrees with the log on {', '.join(fields)}"
