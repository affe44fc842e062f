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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

from . import errors
from .faults import checkpoint
from renderer import RENDER_VERSION, item_text

from .model import (
    KIND_RANK,
    Event,
    LogError,
    Note,
    TextError,
    TransitionError,
    apply_event,
    check_transition,
    normalize_text,
    replay,
)

APPLICATION_ID = 0x71656D31  # "qem1": marks the file as a qem store
SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 5_000
MAX_ID = 2**63 - 1  # SQLite's largest integer: no note id or seq lies beyond it
WRITE_PATIENCE_S = 60.0

_SCHEMA = """
CREATE TABLE events (
    seq     INTEGER PRIMARY KEY,
    note_id INTEGER NOT NULL CHECK (note_id > 0),
    type    TEXT NOT NULL CHECK (type IN ('created', 'superseded', 'revoked', 'stale_flagged',
                                          'reinstated', 'promoted', 'expired', 'forgotten',
                                          'disputed', 'ruled')),
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

-- Each note's rendered MEMORY.md item, clustered in the file's order, so that export
-- reads one narrow table in sequence.  A cache like `notes`: written in the same
-- transaction, checked by `verify`, valid only for the rendering code that made it.
CREATE TABLE items (
    kind_rank INTEGER NOT NULL,
    id        INTEGER NOT NULL,
    item      TEXT NOT NULL,
    PRIMARY KEY (kind_rank, id)
) WITHOUT ROWID;
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_NOTE_COLUMNS = (
    "id, kind, priority, text, provenance, created_at, actor, supersedes, superseded_by, "
    "state, state_at, state_reason, state_seq, bad_pointer, disputes"
)

T = TypeVar("T")


def utc_now() -> str:
    """Now, UTC, second precision.  `QEM_NOW` pins it (tests and reproducible fixtures)."""
    pinned = os.environ.get("QEM_NOW")
    if pinned:
        return pinned
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class NewNote:
    """The content of a note about to be created."""

    kind: str
    priority: str
    provenance: str
    text: str
    supersedes: int | None = None


def _note_from_row(row: Sequence[object]) -> Note:
    *fields, disputes = row
    pairs = tuple(tuple(pair) for pair in json.loads(disputes)) if disputes != "[]" else ()  # type: ignore[arg-type]
    return Note(*fields, disputes=pairs)  # type: ignore[arg-type]


def _event_from_row(row: Sequence[object]) -> Event:
    seq, note_id, type_, at, actor, reason, checkin, data = row
    return Event(seq, note_id, type_, at, actor, reason, checkin, json.loads(data))  # type: ignore[arg-type]


class Transaction:
    """Appends inside one open write transaction, keeping the cache in step."""

    def __init__(self, conn: sqlite3.Connection, at: str) -> None:
        self.conn = conn
        self.at = at
        row = conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()
        self.head: int = row[0]
        self._notes: dict[int, Note] = {}

    def note(self, note_id: int) -> Note:
        if not 0 < note_id <= MAX_ID:
            raise errors.NoSuchNote(f"no note #{note_id} in this store")
        if note_id not in self._notes:
            row = self.conn.execute(
                f"SELECT {_NOTE_COLUMNS} FROM notes WHERE id = ?", (note_id,)
            ).fetchone()
            if row is None:
                raise errors.NoSuchNote(f"no note #{note_id} in this store")
            self._notes[note_id] = _note_from_row(row)
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
            "INSERT INTO events (seq, note_id, type, at, actor, reason, checkin, data)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                event.seq,
                event.note_id,
                event.type,
                event.at,
                event.actor,
                event.reason,
                event.checkin,
                json.dumps(dict(event.data), ensure_ascii=False, separators=(",", ":")),
            ),
        )
        self._save(self._notes[event.note_id])
        self.head = event.seq
        checkpoint("append")
        return event

    def emit(
        self,
        note_id: int,
        type_: str,
        actor: str,
        reason: str | None = None,
        data: dict[str, object] | None = None,
        checkin: str | None = None,
    ) -> Event:
        return self.append(
            Event(self.head + 1, note_id, type_, self.at, actor, reason, checkin, data or {})
        )

    def create(
        self, new: NewNote, actor: str, reason: str | None = None, checkin: str | None = None
    ) -> Note:
        note_id = self.next_note_id()
        try:
            # every way in (the CLI, a check-in, a script on this API) stores the same text
            text = normalize_text(new.text)
        except TextError as exc:
            raise errors.Refused(str(exc)) from None
        data = {
            "kind": new.kind,
            "priority": new.priority,
            "provenance": new.provenance,
            "text": text,
            "supersedes": new.supersedes,
        }
        if new.supersedes is not None:
            old = self.note(new.supersedes)
            try:
                check_transition(old, "superseded")
            except TransitionError as exc:
                raise errors.Refused(str(exc)) from None
        self.emit(note_id, "created", actor, reason, data, checkin)
        if new.supersedes is not None:
            self.emit(new.supersedes, "superseded", actor, reason, {"by": note_id}, checkin)
        return self._notes[note_id]

    def forget(self, note_id: int, actor: str, reason: str) -> Event:
        self.note(note_id)
        event = self.emit(note_id, "forgotten", actor, reason)
        # The one rewrite the log allows: the created event loses its text.
        row = self.conn.execute(
            "SELECT seq, data FROM events WHERE note_id = ? AND type = 'created'", (note_id,)
        ).fetchone()
        data = json.loads(row[1])
        data["text"] = None
        self.conn.execute(
            "UPDATE events SET data = ? WHERE seq = ?",
            (json.dumps(data, ensure_ascii=False, separators=(",", ":")), row[0]),
        )
        return event

    def dispute(self, a: int, b: int, actor: str, reason: str) -> int:
        """Record a dispute between two live notes (neither is edited); returns its id."""
        if a == b:
            raise errors.Refused("a note cannot dispute itself")
        for note_id in (a, b):
            note = self.note(note_id)
            if not note.live:
                raise errors.Refused(f"cannot dispute note #{note_id}: it is {note.state}")
            if any(other == (b if note_id == a else a) for _, other in note.disputes):
                raise errors.Refused(f"notes #{a} and #{b} already have an open dispute")
        dispute_id = self.head + 1
        self.emit(a, "disputed", actor, reason, {"dispute": dispute_id, "with": b})
        self.emit(b, "disputed", actor, reason, {"dispute": dispute_id, "with": a})
        return dispute_id

    def rule(self, dispute_id: int, keep: int, actor: str, reason: str) -> None:
        """Close a dispute: `keep` stands, the other note is revoked in its favour."""
        rows = self.conn.execute(
            "SELECT DISTINCT note_id FROM events WHERE type = 'disputed'"
            " AND json_extract(data, '$.dispute') = ?",
            (dispute_id,),
        ).fetchall()
        sides = sorted(r[0] for r in rows)
        if len(sides) != 2:
            raise errors.NoSuchNote(f"no dispute {dispute_id} in this store")
        if keep not in sides:
            raise errors.Refused(f"dispute {dispute_id} is between #{sides[0]} and #{sides[1]}; --keep one of them")
        other = sides[1] if keep == sides[0] else sides[0]
        if not any(d == dispute_id for d, _ in self.note(keep).disputes):
            raise errors.Refused(f"dispute {dispute_id} is already closed")
        if not (self.note(keep).live and self.note(other).live):
            raise errors.Refused(f"dispute {dispute_id} is already settled: one side is no longer in force")
        data = {"dispute": dispute_id, "kept": keep}
        self.emit(keep, "ruled", actor, reason, data)
        self.emit(other, "ruled", actor, reason, data)
        self.emit(other, "revoked", actor, f"ruling on dispute {dispute_id}, #{keep} stands: {reason}")

    def _save(self, note: Note) -> None:
        rank = KIND_RANK[note.kind]
        self.conn.execute(
            f"INSERT OR REPLACE INTO notes (kind_rank, {_NOTE_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (rank, *_note_values(note)),
        )
        self.conn.execute(
            "INSERT OR REPLACE INTO items (kind_rank, id, item) VALUES (?, ?, ?)",
            (rank, note.id, item_text(note)),
        )

    def refresh_items(self) -> None:
        """Render every note's item again (the rendering code changed)."""
        self.conn.execute("DELETE FROM items")
        for note in (_note_from_row(r) for r in self.conn.execute(f"SELECT {_NOTE_COLUMNS} FROM notes")):
            self.conn.execute(
                "INSERT INTO items (kind_rank, id, item) VALUES (?, ?, ?)",
                (KIND_RANK[note.kind], note.id, item_text(note)),
            )
        self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('render_version', ?)", (RENDER_VERSION,)
        )


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
    def open(cls, path: Path, *, create: bool = False) -> "Store":
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
        # Opening can meet SQLITE_BUSY that the busy handler does not wait out (another
        # process creating the store, or switching it to WAL, at the same moment; SQLite
        # returns at once rather than risk a deadlock): try again, as a write does.
        deadline = time.monotonic() + WRITE_PATIENCE_S
        delay = 0.01
        while True:
            conn = None
            try:
                conn = sqlite3.connect(str(path), isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                # `forget` must erase text from the file, not just unlink it from the
                # b-tree; many SQLite builds leave freed cell bytes in place otherwise.
                conn.execute("PRAGMA secure_delete = ON")
                store = cls(path, conn)
                store._prepare(create)
                return store
            except sqlite3.DatabaseError as exc:
                if conn is not None:
                    conn.close()
                busy = isinstance(exc, sqlite3.OperationalError) and (
                    "locked" in str(exc).lower() or "busy" in str(exc).lower()
                )
                if busy and time.monotonic() < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, 0.5)
                    continue
                raise _translate_open_error(path, exc) from None
            except BaseException:
                if conn is not None:
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
            + f"INSERT INTO meta (key, value) VALUES ('render_version', '{RENDER_VERSION}');"
            + "COMMIT;"
        )
        try:
            conn.executescript(script)
        except sqlite3.OperationalError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            # A racing `init` may have won while we waited for the lock.
            if "already exists" in str(exc) and self._is_qem_store():
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
        deadline = time.monotonic() + WRITE_PATIENCE_S
        delay = 0.01
        while True:
            try:
                return self._write_once(work, at or utc_now())
            except sqlite3.OperationalError as exc:
                message = str(exc).lower()
                if "locked" in message or "busy" in message:
                    if time.monotonic() < deadline:
                        time.sleep(delay)
                        delay = min(delay * 2, 0.5)
                        continue
                    raise errors.StoreBusy(
                        f"{self.path} stayed locked by another process for over"
                        f" {int(WRITE_PATIENCE_S)} s; nothing was written"
                    ) from None
                if "readonly" in message or "read-only" in message:
                    raise errors.StoreUnwritable(
                        f"{self.path} is read-only; nothing was written"
                    ) from None
                raise errors.NotAStore(f"{self.path}: {exc}; nothing was written") from None
            except sqlite3.DatabaseError as exc:
                raise errors.NotAStore(f"{self.path} is corrupt: {exc}; nothing was written") from None
            except UnicodeEncodeError:
                # text, reason or actor came from undecodable bytes (argv, environment)
                raise errors.BadInput(
                    "an argument holds bytes that are not UTF-8; nothing was written"
                ) from None

    def _write_once(self, work: Callable[[Transaction], T], at: str) -> T:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            checkpoint("write-begin")
            tx = Transaction(conn, at)
            result = work(tx)
            if not self.items_fresh():
                tx.refresh_items()  # rendering code changed since the items were cached
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
            raise errors.NotAStore(f"{self.path} cannot be read: {exc}") from None

    def head(self) -> int:
        return self._read("SELECT coalesce(max(seq), 0) FROM events")[0][0]

    def note(self, note_id: int) -> Note:
        if not 0 < note_id <= MAX_ID:
            raise errors.NoSuchNote(f"no note #{note_id} in this store")
        rows = self._read(f"SELECT {_NOTE_COLUMNS} FROM notes WHERE id = ?", (note_id,))
        if not rows:
            raise errors.NoSuchNote(f"no note #{note_id} in this store")
        return _note_from_row(rows[0])

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
        where, params = [], []
        for column, values in (("kind", kinds), ("state", states)):
            if values is not None:
                values = list(values)
                where.append(f"{column} IN ({', '.join('?' * len(values))})")
                params.extend(values)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._read(
            f"SELECT {_NOTE_COLUMNS} FROM notes{clause} ORDER BY kind_rank, id", params
        )
        return [_note_from_row(r) for r in rows]

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
            "SELECT seq, note_id, type, at, actor, reason, checkin, data FROM events"
            f" WHERE {' AND '.join(where)} ORDER BY seq",
            params,
        )
        return [_event_from_row(r) for r in rows]

    def iter_events(self) -> Iterator[Event]:
        try:
            cursor = self.conn.execute(
                "SELECT seq, note_id, type, at, actor, reason, checkin, data FROM events ORDER BY seq"
            )
            for row in cursor:
                yield _event_from_row(row)
        except sqlite3.DatabaseError as exc:  # a damaged page, met halfway through the log
            raise errors.NotAStore(f"{self.path} cannot be read: {exc}") from None

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

    # -- checking ----------------------------------------------------------------------

    def verify(self) -> list[str]:
        """Differences between the notes cache and a replay of the log ([] when equal)."""
        problems: list[str] = []
        try:
            replayed = replay(self.iter_events())
        except (LogError, TransitionError) as exc:
            return [f"the log does not replay: {exc}"]
        except sqlite3.DatabaseError as exc:
            raise errors.NotAStore(f"{self.path} cannot be read: {exc}") from None
        cached = {n.id: n for n in self.notes()}
        for note_id in sorted(set(replayed) | set(cached)):
            want, have = replayed.get(note_id), cached.get(note_id)
            if want is None:
                problems.append(f"note #{note_id} is in the cache but has no created event")
            elif have is None:
                problems.append(f"note #{note_id} is in the log but missing from the cache")
            elif want != have:
                fields = [
                    f
                    for f in Note.__dataclass_fields__
                    if getattr(want, f) != getattr(have, f)
                ]
                problems.append(
                    f"note #{note_id}: cache disagrees with the log on {', '.join(fields)}"
                )
        problems += self._verify_items(replayed)
        integrity = self._read("PRAGMA quick_check")
        if integrity and integrity[0][0] != "ok":
            problems.append(f"SQLite integrity check: {integrity[0][0]}")
        return problems

    def _verify_items(self, replayed: dict[int, Note]) -> list[str]:
        if not self.items_fresh():
            return []  # made by other rendering code: unused until the next write rebuilds it
        cached = dict(self._read("SELECT id, item FROM items"))
        problems = []
        for note_id in sorted(set(replayed) | set(cached)):
            note = replayed.get(note_id)
            if note is None or cached.get(note_id) != item_text(note):
                problems.append(f"note #{note_id}: the cached MEMORY.md item disagrees with the log")
        return problems

    def items_fresh(self) -> bool:
        """Whether the cached items were rendered by this rendering code."""
        rows = self._read("SELECT value FROM meta WHERE key = 'render_version'")
        return bool(rows) and rows[0][0] == RENDER_VERSION

    def rebuild_cache(self) -> int:
        """Replace the notes cache with a replay of the log; returns the notes written."""

        def work(tx: Transaction) -> int:
            notes = replay(self.iter_events())
            tx.conn.execute("DELETE FROM notes")
            tx.conn.execute("DELETE FROM items")
            for note in notes.values():
                tx._save(note)
            tx.conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('render_version', ?)", (RENDER_VERSION,)
            )
            return len(notes)

        return self.write(work)

    def export_items(self, kinds: Iterable[str], *, with_ids: bool = False) -> dict[str, list]:
        """Each kind's cached items as UTF-8 bytes, in id order (valid when `items_fresh`);
        with `with_ids`, as (note id, item) pairs."""
        columns = "id, item" if with_ids else "item"
        conn = self.conn
        conn.text_factory = bytes
        try:
            out: dict[str, list] = {}
            for kind in kinds:
                rows = self._read(
                    f"SELECT {columns} FROM items WHERE kind_rank = ? ORDER BY id", (KIND_RANK[kind],)
                )
                out[kind] = rows if with_ids else [row[0] for row in rows]
            return out
        finally:
            conn.text_factory = str

    def has_disagreements(self) -> bool:
        """Whether any note is disputed or forked (export then marks them, from the graph)."""
        return bool(
            self._read(
                "SELECT 1 FROM notes WHERE disputes != '[]' UNION ALL SELECT 1 FROM"
                " (SELECT supersedes FROM notes WHERE supersedes IS NOT NULL"
                "  GROUP BY supersedes HAVING count(*) > 1) LIMIT 1"
            )
        )

    @contextmanager
    def reading(self) -> Iterator["Store"]:
        """A read transaction: every read inside sees one snapshot of the store."""
        self.conn.execute("BEGIN")
        try:
            yield self
        except sqlite3.DatabaseError as exc:
            raise errors.NotAStore(f"{self.path} cannot be read: {exc}") from None
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


def _translate_open_error(path: Path, exc: sqlite3.DatabaseError) -> errors.QemError:
    message = str(exc).lower()
    if "file is not a database" in message or "malformed" in message:
        return errors.NotAStore(f"{path} is not a qem store (not an SQLite database, or corrupt)")
    if "unable to open" in message:
        beside = f" (even to read it, SQLite must create {path.name}-shm beside it: is {path.parent} writable?)"
        return errors.StoreUnwritable(f"cannot open {path}: {exc}" + (beside if path.exists() else ""))
    if "readonly" in message or "read-only" in message:
        return errors.StoreUnwritable(f"{path} is read-only: {exc}")
    if "locked" in message or "busy" in message:
        return errors.StoreBusy(f"{path} is locked by another process: {exc}")
    return errors.NotAStore(f"cannot use {path}: {exc}")
