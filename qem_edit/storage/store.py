"""A memory: its log in the working tree (qem_edit.storage.logtree) and its local index.

`Store.open` finds the memory directory (`<workspace>/.qem`), opens the index beside it
(or, where nothing can be written, one in memory) and catches it up with the log.  Reads
go to the index: the notes and events by id are here, each feature's reads in the module
of the class Store is made of for it (`delivery_reads`, `mirror_reads`…), all made as
`reading` says; reads no hook makes (`verify_reads`, `selection`) are loaded when asked.
A write (`Store.write`) holds the memory's write lock, catches up, lets the caller decide
through a `Transaction` (qem_edit.storage.transaction), which writes the new events as
files (one event as one file, several as one pack, so a check-in lands whole or not at
all), then records them in the index.  The log is append-only by
construction: files are added, and only a forget deletes one (a text).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence

from ..base import errors, ids
from ..base.faults import checkpoint
from ..base.replay import Event, Note, replay
from ..system import db
from ..system.db import sqlite3
from ..system.workspace import CONFIG_NAME, INDEX_NAME, KEPT_NAMES
from . import starting
from .delivery_reads import DeliveryReads
from .dispute_reads import DisputeReads
from .index import EVENT_COLUMNS, NOTE_COLUMNS, Caught, Index, event_from_row, note_from_row, shorts
from .logtree import EVENTS, PACKS, TEXTS, TEXTS_PER_PACK, LogFileError, LogTree, TextRecord, pack_text_line
from .mirror_reads import MirrorReads
from .path_reads import PathReads
from .reading import IN_FORCE, IndexReads
from .request_reads import RequestReads
from .starting import COMMITTED, read_memory_id, remember
from .transfer_reads import TransferReads
from .write_reads import WriteReads

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import TypeVar

    from .selection import Condition
    from .transaction import Transaction, WriteMark

    from ..system.files import AnyPath
    from .verify_reads import VerifyReads

    T = TypeVar("T")

PACK_AT = 1000  # loose log files that make a write pack them (`qem pack` does it at will)
LEGACY_NAME = "memory.db"
LOCK_NAME = "write.lock"
START_LOCK_NAME = "start.lock"  # (ignored by .gitignore's /*.lock, as the write lock is)
BUILD_LOCK_NAME = "build.lock"  # held while a missing index is built whole (`_build_missing`)
WRITE_PATIENCE_S = db.WRITE_PATIENCE_S


class Store(WriteReads, DeliveryReads, PathReads, RequestReads, DisputeReads, MirrorReads, TransferReads, IndexReads):
    """One memory.  Open it with `Store.open(memory_dir)`.  What it is (opening, catching
    up, writing, the notes and events by id) is here; the reads each feature makes of it
    are the classes it is made of, one module each, all on one connection."""

    def __init__(self, root: AnyPath, conn: sqlite3.Connection, index_path: str | None) -> None:
        self.root = root
        self.conn = conn
        self.index_path = index_path
        self.tree = LogTree(root)
        self.index = Index(conn, self.tree)
        self.caught = Caught()
        self.last_write: WriteMark | None = None
        self.started: str | None = None  # what starting the memory did, when this open started it
        self.made = False  # this open made the memory's folder (a refused first write takes it away: opening.unmade)
        self._calm_known: tuple[str, bool] | None = None  # has_disagreements' answer, and at which moment
        self._reading = False  # inside `reading`: a snapshot no write of this connection changes
        # The agent session this store reads for (a hook's, an MCP call's, QEM_SESSION):
        # session notes of other sessions are not counted by its reads (`hidden`);
        # `every_session`: a writer that ends sessions' notes sees them all.
        self.session: str | None = os.environ.get("QEM_SESSION") or None
        self.every_session = False

    # -- opening -----------------------------------------------------------------------

    @classmethod
    def open(cls, root: AnyPath, *, create: bool = False, write: bool = False) -> "Store":
        """The memory at `root` (`<workspace>/.qem`); `create` makes a missing one,
        `write` says the command means to write (a memory that can only be read is then
        refused up front).  `root` is kept as given: a Path from the commands, a string
        from a hook (which loads no pathlib, qem_edit.system.workspace); the store joins
        either with os.path."""
        _refuse_legacy(root)
        existed = os.path.lexists(root)
        started = _start_if_new(root, create)
        store = cls._with_index(root, write)
        store.started, store.made = started, started is not None and not existed
        if started is not None:  # staged with the first write (qem_edit.mirror.gitstage)
            store.tree.touched |= set(COMMITTED)
        try:
            store.sync()
        except errors.NotAStore:  # the index is damaged where opening did not look
            store.rebuild()
        remember(store, root)
        return store

    @classmethod
    def _with_index(cls, root: AnyPath, write: bool) -> "Store":
        path = os.path.join(root, INDEX_NAME)
        _remove_index(path, links_only=True)  # git keeps links: SQLite would write through one
        try:
            built = _build_missing(root, path)
            try:
                conn = db.patiently(lambda: _open_index(path), path, "open")
            except errors.NotAStore:  # damaged: it is only a cache of the log, made anew
                _remove_index(path)
                conn = db.patiently(lambda: _open_index(path), path, "open")
            store = cls(root, conn, path)
            store.caught = built or store.caught
            return store
        except errors.StoreUnwritable as exc:
            if write and os.path.isdir(path) and not os.path.islink(path):  # (a clone's commit can put one there)
                raise errors.StoreUnwritable(f"{path} is a folder, where qem keeps its index (a file it makes, a"
                                             " cache of the log): move the folder away; nothing was written") from None
            if write:
                raise errors.StoreUnwritable(f"{root} is read-only here ({exc}); nothing was written") from None
        # Nothing can be written here (a read-only mount): an index in memory, built now.
        return cls(root, _open_index_in_memory(), None)

    @classmethod
    def as_indexed(cls, root: str) -> "Store":
        """The memory at `root` as its index holds it now: not built, not caught up with the
        log, nothing made or written (a commit hook's kept answer asks whether anything it rests
        on moved, qem_edit.mirror.answered); NotAStore where there is no index ready to read."""
        import stat

        path = os.path.join(root, INDEX_NAME)
        try:
            regular = stat.S_ISREG(os.lstat(path).st_mode)  # (never through a link: SQLite would write through it)
        except OSError:
            regular = False
        if not regular:
            raise errors.NotAStore(f"{path} is not there, or not a file of its own")
        named = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")  # (SQLite's URI: no file is made)

        def opening() -> sqlite3.Connection:
            conn = db.connect(f"file:{named}?mode=rw", uri=True)
            try:
                if not Index(conn, LogTree(root)).ready():
                    raise errors.NotAStore(f"{path} is not an index ready to read")
                return conn
            except BaseException:
                conn.close()
                raise
        return cls(root, db.patiently(opening, path, "open"), path)

    def close(self) -> None:
        self.conn.close()

    # -- the memory's name -------------------------------------------------------------

    def memory_id(self) -> str:
        """The memory's id (in `.qem/config.toml`, committed): MEMORY.md's header names it,
        so a file of another memory is refused rather than applied by id."""
        cached = self.__dict__.get("_memory")
        if cached is None:
            cached = read_memory_id(self.root)
            if cached is None:
                raise errors.BadInput(
                    f"{os.path.join(self.root, CONFIG_NAME)} names no memory id ([memory] id = ...), so no"
                    " MEMORY.md can be told to be this memory's",
                    hint="restore it (`git checkout -- .qem/config.toml`), or add the id MEMORY.md's first line"
                         " names: [memory] id = \"...\"")
            self.__dict__["_memory"] = cached
        return cached

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- catching up -------------------------------------------------------------------

    def sync(self) -> None:
        """Catch the index up with the log (cheap when nothing moved)."""
        if not self._guarded(lambda: self.index.stale()):
            return
        self.caught = db.patiently(self._sync_once, self.index_path or self.root, "read")
        self._moved()

    def _moved(self) -> None:
        """After a change to the index, committed: what the hooks keep beside it goes (the
        digest, qem_edit.reads.quiet; the starts, qem_edit.reads.starts), so none outlives
        the index it was read from (nor a text forgotten since)."""
        for name in KEPT_NAMES:
            try:
                os.unlink(os.path.join(self.root, name))
            except OSError:  # none there (or a folder that takes no change: none was kept in it either)
                pass
        _remove_kept_temporaries(self.root)

    def _sync_once(self) -> Caught:
        with db.transaction(self.conn):
            caught = self.index.sync()
        self._drop_old_pages()
        return caught

    def _drop_old_pages(self) -> None:
        """After a forgotten text left the index: the write-ahead log still holds the pages
        it was in, so it is checkpointed and truncated (freed pages are zeroed: secure_delete)."""
        if self.index.blanked:
            self.index.blanked.clear()
            try:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.DatabaseError:
                pass  # a reader holds the log; the next checkpoint takes the pages

    # -- writing -----------------------------------------------------------------------

    def write(self, work: Callable[[Transaction], T], *, at: str | None = None, agent: bool | None = None,
              allow_secret: bool = False) -> T:
        """Run `work` under the memory's write lock, caught up first; its events are
        written to the log and recorded in the index.  Writers on one clone take turns, so
        two of them never make a note's history branch; branches come from other clones.
        `agent`: the writer is an agent (None: as QEM_ACTOR_KIND says; qem_edit.storage.protect);
        `allow_secret`: a person commits a secret knowingly (qem_edit.storage.secrets)."""
        from ..base import times
        from ..system.files import LockTimeout, locked
        from . import protect
        from .transaction import as_writer  # here: a read never loads the write transaction

        as_agent = protect.writer_is_agent(agent)
        work = as_writer(work, as_agent, allow_secret)
        try:
            with locked(os.path.join(self.root, LOCK_NAME), WRITE_PATIENCE_S):
                try:
                    return db.patiently(lambda: self._write_once(work, at or times.utc_now()),
                                        self.index_path or self.root, "write")
                finally:
                    self._moved()  # (after the commit, or after a write that failed: either way, read afresh)
        except LockTimeout:
            raise errors.StoreBusy(f"{self.root} stayed locked by another writer for over"
                                   f" {int(WRITE_PATIENCE_S)} s; nothing was written") from None
        except UnicodeEncodeError:
            raise errors.BadInput("an argument holds bytes that are not UTF-8; nothing was written") from None
        except OSError as exc:
            where = exc.filename or self.root
            raise errors.StoreUnwritable(f"cannot write {where}: {exc.strerror or exc}; nothing was written") from None

    def _write_once(self, work: Callable[[Transaction], T], at: str) -> T:
        from .transaction import Transaction, WriteMark

        tx: Transaction | None = None
        try:
            with db.transaction(self.conn):
                checkpoint("write-begin")
                self.index.sync()
                leftover = self.forgotten_texts()  # brought back by a merge: forget still forgets
                if leftover:
                    self.purge_texts({note for note, _ in leftover})
                before, calm = self.index.generation, not self.has_disagreements()
                self.index.keep_replaced()
                tx = Transaction(self, at)
                result = work(tx)
                tx.flag_dependents()
                tx.flush()
                if self._loose() > PACK_AT:
                    self._pack_now()
                self.index.note_stamp()
                mark = WriteMark(before, self.index.generation, self.index.take_replaced(), calm and tx.bulk is None)
        except Exception:
            self.index.take_replaced()
            if tx is not None and tx.landed:  # the log holds the write: it stands
                self._catch_up()
                return result
            raise
        self.last_write = mark
        self._drop_old_pages()
        return result

    def _catch_up(self) -> None:
        """The index follows a write that reached the log but not the index (made anew
        if it is damaged; failing that, the next command catches up)."""
        try:
            self.sync()
        except errors.QemError:
            try:
                self.rebuild()
            except errors.QemError:
                pass

    def pack(self) -> tuple[int, int]:
        """Loose event and text files into packs (and many event packs into one), under
        the write lock; returns (files before, files after).  Packs are new files named by
        their bytes, so packing on two branches merges with no conflict: an event in two
        packs is still one event."""
        def work(tx: Transaction) -> tuple[int, int]:
            return self._pack_now()

        return self.write(work)

    def _pack_now(self) -> tuple[int, int]:
        self.tree.ensure()  # (refuses a linked log folder)
        names = sorted(self.tree.names())
        loose_events = [n for n in names if n.startswith(f"{EVENTS}/")]
        loose_texts = [n for n in names if n.startswith(f"{TEXTS}/")]
        event_packs = [n for n in names if n.startswith(f"{PACKS}/e-")]
        merging = event_packs if len(event_packs) > 16 else []
        events: list[Event] = []
        texts: list[TextRecord] = []
        packed: list[str] = []
        aside = {name for (name,) in self._read("SELECT name FROM files WHERE problem IS NOT NULL")}
        for name in loose_events + merging + loose_texts:
            try:
                if name in aside:  # (one the index set aside as a whole: an event whose prev crosses notes)
                    continue
                found, records = self.tree.read(name)
            except LogFileError:  # set aside by the index: left where it is, for verify to name
                continue
            events += found
            texts += records
            packed.append(name)
        if events:
            unique = {e.id: e for e in events}.values()
            self.tree.write_event_packs(sorted(unique, key=lambda e: (e.clock, e.id)))
        self.tree.write_text_packs(sorted(texts, key=lambda t: t.note), TEXTS_PER_PACK)
        for name in packed:
            self.tree.remove(name)
        self.index.sync()
        return len(names), len(self.tree.names())

    def purge_texts(self, note_ids: set[str]) -> None:
        """Delete the texts of these (forgotten) notes from the log: a loose text file is
        removed, a pack holding one is written again without it."""
        rows: list[tuple[str, str]] = []
        for chunk in db.chunks(sorted(note_ids)):
            rows += self.conn.execute(f"SELECT note, file FROM texts WHERE note IN ({db.marks(chunk)})", chunk).fetchall()
        done: set[str] = set()  # a pack holding several of them is rewritten once
        for note_id, name in rows:
            self.index.blanked.add(note_id)
            if name in done:
                continue
            done.add(name)
            if name.startswith(f"{PACKS}/"):
                self._repack_without(name, note_ids)
            else:
                self.tree.remove(name)
            self.conn.execute("DELETE FROM texts WHERE file = ?", (name,))
            self.conn.execute("DELETE FROM files WHERE name = ?", (name,))

    def _repack_without(self, name: str, note_ids: set[str]) -> None:
        _, texts = self.tree.read(name)
        kept = [t for t in texts if t.note not in note_ids]
        if kept:
            new = self.tree.write_pack("t", [pack_text_line(t) for t in kept])
            self.index.record_file(new)
            self.index.add_records(new, [], kept)
        self.tree.remove(name)

    def _loose(self) -> int:
        return self._read(f"SELECT count(*) FROM files WHERE name >= '{EVENTS}/' AND name < '{EVENTS}0'"
                          f" OR name >= '{TEXTS}/' AND name < '{TEXTS}0'")[0][0]

    def forgotten_texts(self) -> list[tuple[str, str]]:
        """(note, file) for every text the log still holds of a forgotten note (a branch
        merged in after the forget can bring one back)."""
        return self._read("SELECT t.note, t.file FROM notes n INDEXED BY notes_forgotten CROSS JOIN texts t ON t.note = n.id"
                          " WHERE n.state = 'forgotten' ORDER BY t.note")

    # -- reading -----------------------------------------------------------------------

    def head(self) -> int:
        """The index's generation: it moves whenever the log it reflects does."""
        return self._guarded(lambda: self.index.generation)

    def log_stamp(self) -> str | None:
        """The log's fingerprint (qem_edit.storage.stamp) as the index last caught up with it."""
        return self._guarded(lambda: self.index.meta("stamp"))

    def moment(self, generation: int) -> str:
        """`generation` of this very index (not one rebuilt since) as one string: a
        rendering made at it is the rendering for as long as `moment(head())` equals it."""
        return f"{self._guarded(lambda: self.index.meta('index_id'))}:{generation}"

    def note(self, note_id: str) -> Note:
        rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes WHERE id = ?", (note_id,))
        if not rows:
            raise errors.NoSuchNote(f"no note #{note_id} in this memory")
        note = note_from_row(rows[0])
        if note.session is not None and note.id in self.hidden():
            raise errors.NoSuchNote(f"note #{note.shown} is a session note of another agent session; it holds only"
                                    " there", hint="read it in its session (QEM_SESSION=ID, as its hooks do)")
        return note

    def session_notes(self, session: str | None = None) -> list[Note]:
        """This clone's session notes in force (of one session, where named), in order."""
        rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes INDEXED BY notes_sessions WHERE scope = 'session'"
                          f" AND {IN_FORCE} ORDER BY kind_rank, id")
        return [n for n in map(note_from_row, rows) if session is None or n.session == session]

    def resolve(self, given: str | int) -> str:
        """The note a person means by `given`: a short id or any unambiguous prefix of an
        id (with or without `#`), or the number of a note from a converted store."""
        text = str(given).strip().lstrip("#").lower()
        if text.startswith("vectr:"):  # a note imported from vectr, by its vectr id
            return self._resolve_vectr(text)
        if text.isascii() and text.isdigit():  # (a number past SQLite's integers is no note's)
            rows = self._read("SELECT id FROM notes WHERE alias = ?", (int(text),)) if len(text) < 19 else []
            if len(rows) == 1:
                return rows[0][0]
            if not rows:
                raise errors.NoSuchNote(f"no note #{text} in this memory")
            return self._ambiguous(text, [r[0] for r in rows])
        text = text.translate(str.maketrans("ilo", "110"))
        if not ids.is_prefix(text):
            raise errors.NoSuchNote(f"#{given} is not a note id (ids are letters and digits, e.g. #k3f9)")
        rows = self._read("SELECT id, short FROM notes WHERE id >= ? AND id < ? ORDER BY id LIMIT 12", (text, text + "{"))
        shown = [r for r in rows if r[1] == text]
        if len(rows) == 1 or len(shown) == 1:  # a short id names its note (a team note's may prefix a private one's)
            return (shown or rows)[0][0]
        if not rows:
            raise errors.NoSuchNote(f"no note #{text} in this memory")
        return self._ambiguous(text, [r[0] for r in rows])

    def _resolve_vectr(self, given: str) -> str:
        """`vectr:ID`: the note imported from vectr note ID (qem_edit.transfer.vectr keeps the id
        in the created event's `vectr.id`)."""
        number = given.split(":", 1)[1].strip().lstrip("#")
        if not number.isdigit() or len(number) > 18:
            raise errors.NoSuchNote(f"{given!r}: a vectr note is named vectr:ID, its number (e.g. vectr:12)")
        rows = self.imported_from_vectr(int(number))
        if len(rows) == 1:
            return str(rows[0][0])
        if not rows:
            raise errors.NoSuchNote(f"no note imported from vectr note #{number} in this memory")
        named = "; ".join(f"#{ids.shown(r[0])} (from {r[1]})" for r in rows)
        raise errors.NoSuchNote(f"vectr:{number} names {len(rows)} imported notes: {named}; give the qem id")

    def _ambiguous(self, given: str, candidates: list[str]) -> str:
        notes = self.notes_by_id(candidates)
        named = "; ".join(f"#{n.shown} {((n.text or '(forgotten)').splitlines() or [''])[0][:40]}" for n in notes.values())
        raise errors.NoSuchNote(f"#{given} could be any of {len(candidates)} notes: {named}; give more of the id")

    def notes_by_prefix(self, prefix: str) -> list[str]:
        return [r[0] for r in self._read("SELECT id FROM notes WHERE id >= ? AND id < ? ORDER BY id",
                                         (prefix, prefix + "{"))]

    def notes_by_id(self, note_ids: Iterable[str]) -> dict[str, Note]:
        """The notes with these ids (absent ids are left out)."""
        wanted = sorted(set(note_ids))
        out: dict[str, Note] = {}
        for chunk in db.chunks(wanted):
            rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes WHERE id IN ({db.marks(chunk)})", chunk)
            out.update((n.id, n) for n in map(note_from_row, self._seen(rows)))
        return out

    def notes(self, kinds: Iterable[str] | None = None, states: Iterable[str] | None = None) -> list[Note]:
        """Notes from the index, in the projection's total order (kind rank, id)."""
        clause, params = _where(kinds, states)
        rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes{clause} ORDER BY kind_rank, id", params)
        return [note_from_row(r) for r in self._seen(rows)]

    def select_notes(self, conditions: Sequence[Condition]) -> list[str]:
        """The ids of the notes meeting every condition (`qem query`'s filters, as data), in
        the projection's order; qem_edit.storage.selection builds the SQL, loaded only here."""
        from .selection import selecting

        sql, params = selecting(conditions)
        return [row[0] for row in self._seen(self._read(sql, params))]

    def event(self, event_id: str) -> Event | None:
        """One event by its id (None: not in this log)."""
        rows = self._read(f"SELECT {EVENT_COLUMNS} FROM events WHERE id = ?", (event_id,))
        return event_from_row(rows[0]) if rows else None

    def count(self, kinds: Iterable[str] | None = None, states: Iterable[str] | None = None,
              limit: int | None = None) -> int:
        """The notes of these kinds and states; with `limit`, counted up to it at most."""
        clause, params = _where(kinds, states)
        if limit is not None:
            return self._read(f"SELECT count(*) FROM (SELECT 1 FROM notes{clause} LIMIT ?)", [*params, limit])[0][0]
        return self._read(f"SELECT count(*) FROM notes{clause}", params)[0][0]

    def events(self, note_id: str | None = None, *, until: str | None = None) -> list[Event]:
        """Events in the order every clone agrees on (clock, then id); one note's, or
        those written at or before `until` (a UTC time)."""
        where, params = [], []
        if note_id is not None:
            where.append("note = ?")
            params.append(note_id)
        if until is not None:
            where.append("at <= ?")
            params.append(until)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._read(f"SELECT {EVENT_COLUMNS} FROM events{clause} ORDER BY clock, id", params)
        return [event_from_row(r) for r in rows]

    def texts(self) -> dict[str, str]:
        """Every note's text the log holds (checked against its created event)."""
        return dict(self._read("SELECT t.note, t.text FROM texts t JOIN events e ON e.id = t.note"
                               " WHERE json_extract(e.data, '$.text') = t.digest"))

    def state_at(self, moment: str) -> dict[str, Note]:
        """Every note as it was at `moment` (a UTC time): the events written by then;
        a text forgotten since stays forgotten (another session's session notes left out)."""
        notes = replay(self.events(until=moment), self.texts())
        return {n: note for n, note in notes.items() if note.session is None or note.session == self.session
                or self.every_session}

    def secret_allowed(self, event_id: str) -> bool:
        """Whether a person allowed the secret in what event `event_id` wrote (qem_edit.storage.secrets)."""
        from .verify_reads import secret_allowed

        return self._guarded(lambda: secret_allowed(self.conn, event_id))

    def verify_reads(self) -> VerifyReads:
        """The reads `qem verify` (and a check of removals) makes of this store, loaded when
        asked (qem_edit.storage.verify_reads): a store opened by a hook never loads them."""
        from .verify_reads import VerifyReads

        return VerifyReads(self)

    def shorts(self, note_ids: Iterable[str]) -> dict[str, str]:
        """The short ids of these notes; none where the index cannot be read (a damaged
        index names no note: a message then shows the id's first 8 characters)."""
        try:
            return shorts(self.conn, note_ids)
        except sqlite3.Error:
            return {}

    # -- the index's repair ---------------------------------------------------------------

    def set_aside(self) -> list[str]:
        """Every log file the index could not read, with why."""
        return [problem for (problem,) in self._read("SELECT problem FROM files WHERE problem IS NOT NULL ORDER BY name")]

    def rebuild(self) -> int:
        """Build the index again from the log, in a new file (so a damaged one goes too);
        returns the notes it holds."""
        path = self.index_path
        if path is not None:
            self.conn.close()
            _remove_index(path)
            self.conn = db.patiently(lambda: _open_index(path), path, "open")
            self.index = Index(self.conn, self.tree)

        def work() -> int:
            with db.transaction(self.conn):
                self.index.create()
                self.index.sync()
            return self.count()

        try:
            return db.patiently(work, self.index_path or self.root, "write")
        finally:
            self._moved()


def _start_if_new(root: AnyPath, create: bool) -> str | None:
    """Start a memory at `root` where none is (`starting`): what to tell the user; None
    where one was."""
    if not starting.is_new(root):
        return None
    if not create:
        raise errors.StoreMissing(
            f"no qem memory at {root}", hint="create one with `qem init` (or any write command, e.g. `qem add`)"
        )
    from ..system.files import LockTimeout, locked

    try:
        os.makedirs(root, exist_ok=True)
        with locked(os.path.join(root, START_LOCK_NAME), WRITE_PATIENCE_S):
            # several processes may start it at once: one does, the others find it made
            return starting.start(root) if starting.is_new(root) else None
    except LockTimeout:
        raise errors.StoreBusy(f"{root} stayed locked by another process starting the memory; nothing was written") from None
    except OSError as exc:
        raise errors.StoreUnwritable(f"cannot create {root}: {exc.strerror}") from None


def _where(kinds: Iterable[str] | None, states: Iterable[str] | None) -> tuple[str, list[str]]:
    where, params = [], []
    for column, values in (("kind", kinds), ("state", states)):
        if values is not None:
            values = list(values)
            where.append(f"{column} IN ({db.marks(values)})")
            params.extend(values)
    return (f" WHERE {' AND '.join(where)}" if where else ""), params


def _refuse_legacy(root: AnyPath) -> None:
    legacy = os.path.join(root, LEGACY_NAME)
    if os.path.isfile(legacy) and not os.path.isdir(os.path.join(root, EVENTS)):
        raise errors.BadInput(
            f"{legacy} is a store from an older qem (one SQLite file)",
            hint="convert it once with `qem migrate`: the notes keep their history and their numbers",
        )


def _open_index(path: str) -> sqlite3.Connection:
    new = not os.path.lexists(path)
    conn = db.connect(path)
    try:
        if new:  # (a no-op once the file holds a table: another process's, made meanwhile)
            conn.execute(f"PRAGMA page_size = {db.PAGE_SIZE}")
        conn.execute("PRAGMA journal_mode = WAL")
        _ensure_schema(conn)
        return conn
    except BaseException:
        conn.close()
        raise


def _build_missing(root: AnyPath, path: str) -> Caught | None:
    """A missing index (a fresh clone's first command) built whole from the log in a file
    of its own with no journal, then moved into place complete: in the WAL every page of
    it would be written twice, into the log and again into the file at the checkpoint
    (about a second at 74,900 notes).  Under a lock, so that of processes starting at once
    one builds and the others open what it built.  Returns what the build caught; None
    where it built nothing (an index is there, the log is empty, or no file can be made
    here: the index is then opened as ever)."""
    tree = LogTree(root)
    if os.path.lexists(path) or not tree.names():
        return None
    from contextlib import ExitStack  # (here: every open asks, and a hook loads no contextlib)

    from ..system.files import LockTimeout, locked

    with ExitStack() as stack:
        try:
            stack.enter_context(locked(os.path.join(root, BUILD_LOCK_NAME), WRITE_PATIENCE_S))
        except LockTimeout:
            raise errors.StoreBusy(f"{root} stayed locked by another process building its index for over"
                                   f" {int(WRITE_PATIENCE_S)} s") from None
        except OSError:  # a folder that takes no file: opening the index says so, or reads it in memory
            return None
        if os.path.lexists(path):  # built by the process that held the lock
            return None
        return _build_into(path, tree)
    return None  # (not reached: for the type checker)


def _build_into(path: str, tree: LogTree) -> Caught:
    """`tree`'s index built in a temporary file beside `path` (`.index.db.<pid>.tmp`,
    which qem's .gitignore covers), left in WAL mode as every index is opened, synced
    to disk and renamed to `path`.  The caller holds the build lock, so a temporary file
    of another process is a killed build's, and goes."""
    from ..system.files import fsync_dir

    folder, name = os.path.split(path)
    prefix = f".{name}."
    try:
        names = os.listdir(folder or ".")
    except OSError:  # (as pathlib's glob: nothing found)
        names = []
    for stale in names:
        if stale.startswith(prefix) and stale.endswith(".tmp"):
            _remove_index(os.path.join(folder, stale))
    temp = os.path.join(folder, f"{prefix}{os.getpid()}.tmp")
    try:
        conn = db.connect(temp)
        try:
            conn.execute(f"PRAGMA page_size = {db.PAGE_SIZE}")
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
            index = Index(conn, tree)
            conn.execute("BEGIN")
            index.create()
            caught = index.sync()
            conn.execute("COMMIT")
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()
        _fsync(temp)
        checkpoint("index-built")
        _remove_index(path)  # a write-ahead log left beside no index is not this index's
        os.replace(temp, path)
        fsync_dir(folder or ".")
        return caught
    except sqlite3.Error as exc:
        raise db.translate(exc, path, "write") from None
    except OSError as exc:
        raise errors.StoreUnwritable(f"cannot write {path}: {exc.strerror}") from None
    finally:
        _remove_index(temp)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_index(path: str, links_only: bool = False) -> None:
    """The index's files removed, and what the hooks keep beside it (`links_only`: those
    that are symbolic links, which a clone's commit can put there; the link goes, never what
    it points to)."""
    folder, base = os.path.split(path)
    for name in (base, f"{base}-wal", f"{base}-shm", f"{base}-journal", *KEPT_NAMES):
        doomed = os.path.join(folder, name)
        try:
            if not links_only or os.path.islink(doomed):
                os.unlink(doomed)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise errors.StoreUnwritable(f"cannot remove {doomed}: {exc.strerror}") from None


def _remove_kept_temporaries(root: AnyPath) -> None:
    """What a hook killed while it wrote a file kept beside the index left (files.write_atomic's
    `.NAME.XXXXXXXXXXXX.tmp`): it may hold notes' texts, which a forget must not leave."""
    try:
        names = [n for n in os.listdir(root) if n.endswith(".tmp") and n.startswith(tuple(f".{k}." for k in KEPT_NAMES))]
    except OSError:
        return
    for name in names:
        try:
            os.unlink(os.path.join(root, name))
        except OSError:
            pass


def _open_index_in_memory() -> sqlite3.Connection:
    conn = db.connect(":memory:")
    _ensure_schema(conn)
    return conn


def _ensure_schema(conn: sqlite3.Connection) -> None:
    """The index's tables, made where they are missing or of another version: asked first
    without a write transaction (an index that is ready, as nearly every one is, takes no
    write lock to be read: a hook does not wait on a writer here), then again inside one."""
    index = Index(conn, LogTree("."))
    if index.ready():
        return
    with db.transaction(conn):
        if not index.ready():
            index.create()


def read_gaps(store: Store) -> list[str]:
    """Why the log read is incomplete where it is (files set aside may hold an answer).
    (Here, not in qem_edit.reads.query, which re-exports it: `qem verify --staged` lists late
    requests on every commit, and the query module's dataclasses cost it ~5 ms.)"""
    aside = len(store.set_aside())
    return [f"{aside} log file{'s' if aside != 1 else ''} set aside (`qem verify` names them)"] if aside else []
