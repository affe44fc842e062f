"""The local index: an SQLite file beside the log (`.qem/index.db`, never committed).

The log (qem_edit.storage.logtree) is the truth; the index is what makes reading it fast: every
event and text, every note as replayed, its short id, and its rendered MEMORY.md item.
Every command catches the index up first (`sync`): the log directories' modification
times are compared with the ones the index last saw, and only when they moved are the
file names listed; files that appeared are read (a `git pull`, `git switch`, a write by
another process), files that went away are forgotten (a `git reset`, `git stash`), and
only the notes they touch are replayed.  Nothing needs a hook, and a fresh clone builds
its index on its first command.

The reads of it that serve one feature stand apart: `qem verify`'s in
qem_edit.storage.verify_reads and .supersession, export's items in .item_reads; SQLite
files other than the index (a fresh replay, a staged dump) in .staging.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence

from ..base import cjson, ids
from ..base.records import Record
from ..base.replay import Event, Note, Rival, fold
from ..base.vocabulary import EVENT_TYPES, KIND_RANK
from ..renderer.version import FORMAT_VERSION
from ..system import db
from ..system.db import sqlite3
from .logtree import PACKS, PART_BYTES, LogFileError, LogTree, PackPart, PackReading, TextRecord, pack_part
from .reading import Scope

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import ContextManager

    from ..system import cores
    from ..system.files import AnyPath

INDEX_VERSION = "16"  # bump when the schema or what it caches changes: every index is rebuilt
_EVENT_TYPES_SQL = ", ".join(f"'{t}'" for t in EVENT_TYPES)
SCHEMA = f"""
CREATE TABLE files (name TEXT PRIMARY KEY, problem TEXT) WITHOUT ROWID;
CREATE TABLE events (
    id      TEXT PRIMARY KEY,
    note    TEXT NOT NULL,
    type    TEXT NOT NULL CHECK (type IN ({_EVENT_TYPES_SQL})),
    at      TEXT NOT NULL,
    actor   TEXT NOT NULL,
    reason  TEXT,
    checkin TEXT,
    clock   INTEGER NOT NULL,
    prev    TEXT NOT NULL,
    data    TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX events_by_note ON events (note);
CREATE INDEX events_in_order ON events (clock, id);
CREATE INDEX events_by_checkin ON events (checkin) WHERE checkin IS NOT NULL;
CREATE TABLE event_files (event TEXT NOT NULL, file TEXT NOT NULL, PRIMARY KEY (event, file)) WITHOUT ROWID;
CREATE INDEX event_files_by_file ON event_files (file);
-- A note's text may be megabytes, and a table clustered by its key (WITHOUT ROWID) can lift a
-- row into a page above its leaves, where every search passing it reads the whole row again
-- (a 4.5 MB note among 2,000 made each search of the notes read it: a check-in took 90 s, not
-- 2).  So the tables holding texts (texts, notes) are keyed by rowid, whose upper pages hold
-- numbers only: their key is a unique index, and the indexes that answered from the key alone
-- carry the id.  The items stay clustered, read in order by export (as a rowid table they
-- took twice as long to read), a long item kept in long_items and its row's item NULL.
CREATE TABLE texts (
    note   TEXT NOT NULL,
    file   TEXT NOT NULL,
    key    TEXT NOT NULL,
    text   TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (note, file)
);
CREATE INDEX texts_by_file ON texts (file, note);
CREATE TABLE notes (
    id            TEXT PRIMARY KEY,
    short         TEXT NOT NULL,
    kind_rank     INTEGER NOT NULL,
    kind          TEXT NOT NULL,
    priority      TEXT NOT NULL,
    text          TEXT,
    provenance    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    actor         TEXT NOT NULL,
    supersedes    TEXT,
    superseded_by TEXT,
    state         TEXT NOT NULL,
    state_at      TEXT,
    state_reason  TEXT,
    state_actor   TEXT,
    state_event   TEXT,
    bad_pointer   TEXT,
    disputes      TEXT NOT NULL,
    rivals        TEXT NOT NULL,
    alias         INTEGER,
    short_len     INTEGER NOT NULL,
    text_hash     TEXT,
    problems      TEXT NOT NULL,
    anchors       TEXT NOT NULL,
    expires       TEXT,
    triggers      TEXT NOT NULL,
    terms         TEXT NOT NULL,
    seat          TEXT,
    due           TEXT,
    answers       TEXT,
    scope         TEXT NOT NULL,
    session       TEXT,
    rests_on      TEXT NOT NULL
);
CREATE INDEX notes_in_order ON notes (kind_rank, id);
-- A session's start (qem_edit.storage.delivery_reads.due_at_moment): the notes in force that
-- declare no trigger, by kind and priority, read from the index alone (every directive at
-- 74,900 notes: from the table's rows, six times as long).
CREATE INDEX notes_by_bundle ON notes (kind_rank, priority, state, triggers, id) WHERE state IN ('active', 'stale') AND triggers = '[]';
CREATE INDEX notes_by_parent ON notes (supersedes, id) WHERE supersedes IS NOT NULL;
CREATE INDEX notes_by_alias ON notes (alias, id) WHERE alias IS NOT NULL;
CREATE INDEX notes_by_short ON notes (short, id);
-- A query's since=/until= (`qem edit since=... until=...`): its cost follows the answer.
CREATE INDEX notes_by_created ON notes (created_at);
CREATE INDEX notes_forgotten ON notes (id) WHERE state = 'forgotten';
CREATE INDEX notes_disagreeing ON notes (id) WHERE disputes != '[]' OR rivals != '[]';
-- A write's repeat (qem_edit.writes.acts.repeats): the notes in force by their text's start.
CREATE INDEX notes_in_force_by_text ON notes (substr(text, 1, 48)) WHERE state IN ('active', 'stale');
-- `qem expire --due`: the notes in force with an end, by their end.
CREATE INDEX notes_by_end ON notes (expires) WHERE expires IS NOT NULL AND state IN ('active', 'stale');
-- `qem owed`: the requests (a note owed by a seat, or with a deadline), and the answers by
-- the request they name.
CREATE INDEX notes_requests ON notes (id) WHERE seat IS NOT NULL OR due IS NOT NULL;
CREATE INDEX notes_by_answered ON notes (answers, id) WHERE answers IS NOT NULL;
-- Session notes: few, read whole by every read (a reader in another session keeps them out)
-- and by a session's end.
CREATE INDEX notes_sessions ON notes (session, id) WHERE scope = 'session';
-- Which notes each note's item names (a link, a dispute, a rival's successor): when a
-- note's short id moves, the items that show it are rendered again.
CREATE TABLE links (other TEXT NOT NULL, note TEXT NOT NULL, PRIMARY KEY (other, note)) WITHOUT ROWID;
CREATE INDEX links_by_note ON links (note);
-- Each note's rendered MEMORY.md item, clustered in the file's order: export joins them.  A
-- long item (_long_item) is in long_items, its row's item NULL (ITEM reads either).
CREATE TABLE items (kind_rank INTEGER NOT NULL, id TEXT NOT NULL, item TEXT,
                    PRIMARY KEY (kind_rank, id)) WITHOUT ROWID;
CREATE INDEX items_by_id ON items (id);
CREATE TABLE long_items (id TEXT PRIMARY KEY, item TEXT NOT NULL);
-- The generation at which each note's item last changed (rendered again, or dropped):
-- a check-in whose memory moved since its checkout reads only the items that changed
-- since the checkout's generation, from `item_log_from` (meta) on (a replay of every note
-- moves that floor instead of writing a row per note).
CREATE TABLE item_log (id TEXT PRIMARY KEY, gen INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX item_log_by_gen ON item_log (gen);
-- Each note's anchors (the files and folders it is about, with the object id each held
-- when the note was written): `anchor=PATH` and the drift check read them by path.  Kept
-- by the triggers below from the notes' own `anchors` column, whichever way a note is
-- written or dropped (a replay of every note fills it at once instead: _DECLARED).
CREATE TABLE anchors (note TEXT NOT NULL, path TEXT NOT NULL, oid TEXT NOT NULL,
                      PRIMARY KEY (note, path)) WITHOUT ROWID;
CREATE INDEX anchors_by_path ON anchors (path);
-- Each note's declared triggers (qem_edit.base.triggers): a moment (`on`), a path pattern, a
-- command pattern, and the terms its text names in backticks, by their longest word
-- (`key`), so a prompt's words find the notes naming them.  Kept like the anchors table.
CREATE TABLE triggers (name TEXT NOT NULL, value TEXT NOT NULL, note TEXT NOT NULL,
                       PRIMARY KEY (name, value, note)) WITHOUT ROWID;
CREATE INDEX triggers_by_note ON triggers (note);
CREATE TABLE terms (key TEXT NOT NULL, term TEXT NOT NULL, note TEXT NOT NULL,
                    PRIMARY KEY (key, term, note)) WITHOUT ROWID;
CREATE INDEX terms_by_note ON terms (note);
-- What each note rests on (qem_edit.base.resting), by the base: the notes a base's change flags,
-- found a level at a time.  Kept like the anchors table.
CREATE TABLE rests (base TEXT NOT NULL, note TEXT NOT NULL, PRIMARY KEY (base, note)) WITHOUT ROWID;
CREATE INDEX rests_by_note ON rests (note);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
-- The hashes of the latest renderings export wrote here: such a file is no one's edit.
CREATE TABLE renderings (hash TEXT PRIMARY KEY);
"""
_LONG_ITEMS_OUT = ("CREATE TRIGGER long_items_out AFTER DELETE ON items WHEN OLD.item IS NULL BEGIN"
                   " DELETE FROM long_items WHERE id = OLD.id; END")
# What each note declares, kept in its table by a trigger as a note goes in (anchors, triggers,
# terms, rests), and the same rows for every note at once: a replay of every note sets the
# triggers aside and fills each table once, in its key order, at the end (row by row, each
# key lands at random in its table: a fresh clone's 74,900 notes went in in 0.54 s with the
# triggers, 0.31 s without them, and the fills took 0.09 s).  Each trigger and its fill are
# made from one line, so that they write the same rows: (the insert, what it takes of the note
# and of each element of its JSON, the notes column it reads, the table's key order).
_DECLARED_FROM = {
    "anchors_in": ("INSERT INTO anchors (note, path, oid)",
                   "{note}.id, json_extract({value}, '$[0]'), json_extract({value}, '$[1]')", "anchors", "1, 2"),
    "triggers_in": ("INSERT INTO triggers (name, value, note)",
                    "json_extract({value}, '$[0]'), json_extract({value}, '$[1]'), {note}.id", "triggers", "1, 2, 3"),
    "terms_in": ("INSERT OR IGNORE INTO terms (key, term, note)",
                 "json_extract({value}, '$[0]'), json_extract({value}, '$[1]'), {note}.id", "terms", "1, 2, 3"),
    "rests_in": ("INSERT OR IGNORE INTO rests (base, note)", "{value}, {note}.id", "rests_on", "1, 2"),
}
_DECLARED = {  # trigger name: (the trigger, the fill)
    name: (f"CREATE TRIGGER {name} AFTER INSERT ON notes WHEN NEW.{column} != '[]' BEGIN {insert} SELECT"
           f" {taken.format(note='NEW', value='value')} FROM json_each(NEW.{column}); END",
           f"{insert} SELECT {taken.format(note='n', value='j.value')} FROM notes n, json_each(n.{column}) j"
           f" WHERE n.{column} != '[]' ORDER BY {order}")
    for name, (insert, taken, column, order) in _DECLARED_FROM.items()
}
TRIGGERS = (
    _DECLARED["anchors_in"][0],
    "CREATE TRIGGER anchors_out AFTER DELETE ON notes WHEN OLD.anchors != '[]' BEGIN"
    " DELETE FROM anchors WHERE note = OLD.id; END",
    _DECLARED["triggers_in"][0],
    "CREATE TRIGGER triggers_out AFTER DELETE ON notes WHEN OLD.triggers != '[]' BEGIN"
    " DELETE FROM triggers WHERE note = OLD.id; END",
    _DECLARED["terms_in"][0],
    "CREATE TRIGGER terms_out AFTER DELETE ON notes WHEN OLD.terms != '[]' BEGIN"
    " DELETE FROM terms WHERE note = OLD.id; END",
    _DECLARED["rests_in"][0],
    "CREATE TRIGGER rests_out AFTER DELETE ON notes WHEN OLD.rests_on != '[]' BEGIN"
    " DELETE FROM rests WHERE note = OLD.id; END",
    _LONG_ITEMS_OUT,
)
# An items row's item, wherever it is kept (a long one in long_items: SCHEMA says why).
ITEM = "coalesce(item, (SELECT l.item FROM long_items l WHERE l.id = items.id))"
NOTE_COLUMNS = (
    "id, kind, priority, text, provenance, created_at, actor, supersedes, superseded_by, state, state_at,"
    " state_reason, state_actor, state_event, bad_pointer, disputes, rivals, short, alias, short_len, text_hash,"
    " anchors, expires, triggers, seat, due, answers, scope, session, rests_on"
)
EVENT_COLUMNS = "id, note, type, at, actor, reason, checkin, data, clock, prev"


# -- rows ------------------------------------------------------------------------------------------


def note_from_row(row: Sequence[object]) -> Note:
    (id_, kind, priority, text, provenance, created_at, actor, supersedes, superseded_by, state, state_at,
     state_reason, state_actor, state_event, bad_pointer, disputes, rivals, short, alias, short_len, text_hash,
     anchors, expires, triggers, seat, due, answers, scope, session, rests_on) = row
    pairs = tuple(tuple(p) for p in cjson.loads(disputes)) if disputes != "[]" else ()  # type: ignore[arg-type]
    rival = tuple(Rival(**r) for r in cjson.loads(rivals)) if rivals != "[]" else ()  # type: ignore[arg-type]
    anchored = tuple(tuple(a) for a in cjson.loads(anchors)) if anchors != "[]" else ()  # type: ignore[arg-type]
    declared = tuple(tuple(t) for t in cjson.loads(triggers)) if triggers != "[]" else ()  # type: ignore[arg-type]
    return Note(id_, kind, priority, text, provenance, created_at, actor, supersedes, superseded_by,  # type: ignore[arg-type]
                state, state_at, state_reason, state_actor, state_event, bad_pointer, pairs, rival,  # type: ignore[arg-type]
                short, alias, short_len, text_hash, anchors=anchored, expires=expires,  # type: ignore[arg-type]
                triggers=declared, to=seat, due=due, answers=answers, scope=scope, session=session,  # type: ignore[arg-type]
                rests_on=tuple(cjson.loads(rests_on)) if rests_on != "[]" else ())  # type: ignore[arg-type]


def _note_values(note: Note, problems: list[str]) -> tuple[object, ...]:
    return (
        note.id, note.shown, KIND_RANK[note.kind], note.kind, note.priority, note.text, note.provenance,
        note.created_at, note.actor, note.supersedes, note.superseded_by, note.state, note.state_at,
        note.state_reason, note.state_actor, note.state_event, note.bad_pointer,
        cjson.dumps([list(p) for p in note.disputes]) if note.disputes else "[]",
        cjson.dumps([r._asdict() for r in note.rivals]) if note.rivals else "[]",
        note.alias, note.short_len, note.text_hash, cjson.dumps(problems) if problems else "[]",
        cjson.dumps([list(a) for a in note.anchors], ensure_ascii=False) if note.anchors else "[]", note.expires,
        cjson.dumps([list(t) for t in note.triggers], ensure_ascii=False) if note.triggers else "[]",
        _terms_json(note.text), note.to, note.due, note.answers, note.scope, note.session,
        cjson.dumps(list(note.rests_on)) if note.rests_on else "[]",
    )


def _terms_json(text: str | None) -> str:
    """The terms a note's text names in backticks, as the terms table stores them."""
    if not text or "`" not in text:
        return "[]"
    from ..base.triggers import terms_of

    found = terms_of(text)
    return cjson.dumps([list(t) for t in found], ensure_ascii=False) if found else "[]"


def event_from_row(row: Sequence[object]) -> Event:
    id_, note, type_, at, actor, reason, checkin, data, clock, prev = row
    return Event(id_, note, type_, at, actor, reason, checkin, cjson.loads(data), clock,  # type: ignore[arg-type]
                 () if prev == "[]" else tuple(cjson.loads(prev)))  # type: ignore[arg-type]


_DATA_JSON = cjson.encoder(ensure_ascii=False, sort_keys=True)  # made once: see logtree.canonical


def event_values(event: Event) -> tuple[object, ...]:
    return (event.id, event.note, event.type, event.at, event.actor, event.reason, event.checkin,
            _DATA_JSON(dict(event.data)), event.clock,
            cjson.dumps(list(event.prev)) if event.prev else "[]")


class Caught:
    """What a sync found: whether anything changed, and the log files it set aside."""

    def __init__(self) -> None:
        self.changed = False
        self.set_aside: list[str] = []
        self.forgotten: set[str] = set()  # notes a forget that arrived took the text of


# -- the index -------------------------------------------------------------------------------------


class Index:
    """The index's tables, read and kept in step with the log; callers hold the
    transaction (a write transaction for `sync` and every `save_*`)."""

    def __init__(self, conn: sqlite3.Connection, tree: LogTree) -> None:
        self.conn = conn
        self.tree = tree
        self.blanked: set[str] = set()  # forgotten notes whose text rows this index blanked
        # each re-rendered note's item as it was first seen (kind rank, bytes; None: none),
        # kept from `keep_replaced` (a write's start) until `take_replaced`
        self._replaced: dict[str, tuple[int, bytes] | None] | None = None

    # -- the schema --------------------------------------------------------------------------

    def ready(self) -> bool:
        row = self.conn.execute("SELECT name FROM sqlite_master WHERE name = 'meta'").fetchone()
        return row is not None and self.meta("index_version") == INDEX_VERSION

    def create(self) -> None:
        """(Re)create every table: the index is derived, so an old one is simply dropped."""
        for (name,) in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            self.conn.execute(f"DROP TABLE IF EXISTS {name}")
        for statement in SCHEMA.split(";"):  # not executescript: it would commit the caller's transaction
            if statement.strip():
                self.conn.execute(statement)
        for statement in TRIGGERS:
            self.conn.execute(statement)
        self.set_meta("index_version", INDEX_VERSION)
        self.set_meta("format_version", FORMAT_VERSION)
        self.set_meta("generation", "0")
        self.set_meta("item_log_from", "0")
        self.set_meta("index_id", os.urandom(8).hex())  # a rebuilt index is another index

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    @property
    def generation(self) -> int:
        return int(self.meta("generation") or 0)

    def bump(self) -> None:
        self.set_meta("generation", str(self.generation + 1))

    # -- catching up with the log ---------------------------------------------------------------

    def stale(self) -> bool:
        """Whether the log may have changed since the index last looked (cheap: three
        stat calls and one read)."""
        return self.meta("stamp") != cjson.dumps(self.tree.stamp()) or self.meta("format_version") != FORMAT_VERSION

    def sync(self) -> Caught:
        """Catch up with the log: read the files that appeared, drop the ones that went."""
        caught = Caught()
        stamp = cjson.dumps(self.tree.stamp())
        if self.meta("format_version") != FORMAT_VERSION:
            self._rerender_all()
            caught.changed = True
        if self.meta("stamp") == stamp:
            return caught
        now = self.tree.all_names()
        known = {name for (name,) in self.conn.execute("SELECT name FROM files")}
        if not known and now:
            self._build(sorted(now), caught)  # a fresh clone: everything at once, streamed
            self.set_meta("stamp", stamp)
            caught.forgotten = set(self.blanked)
            return caught
        touched: set[str] = set()
        for name in sorted(known - now):
            touched |= self._drop_file(name)
        added = sorted(now - known)
        if len(added) > _STREAM_FILES or any(name.startswith(f"{PACKS}/") for name in added):
            with _spread(_worth_spreading(self.tree, added)) as spread:  # a pull of packs
                self._stage_files(added, caught, spread)
                if self._fold_staged(empty=False, also=touched, caught=caught, spread=spread):
                    caught.changed = True
                    self.bump()
            touched = set()
        else:
            for name in added:
                touched |= self._add_file(name, caught)
            for chunk in db.chunks(added):
                touched |= self._set_aside_crossings(
                    "SELECT f.file, e.id, e.note, e.prev FROM event_files f JOIN events e ON e.id = f.event"
                    f" WHERE f.file IN ({db.marks(chunk)})", chunk, caught)
        if touched:
            self.refold(touched)
            caught.changed = True
            self.bump()
        self.set_meta("stamp", stamp)
        caught.forgotten = set(self.blanked)
        return caught

    def _build(self, names: list[str], caught: Caught) -> None:
        """The whole index from the whole log, streamed: each file read a record at a time
        into staging tables, the tables filled from them in key order with their secondary
        indexes made once at the end (several times faster than keeping them up to date
        row by row), then every note folded in id order.  Memory stays at a batch of rows
        whatever the size of the log: SQLite does the sorting, on disk."""
        with _spread(_worth_spreading(self.tree, names)) as spread:
            self._stage_files(names, caught, spread)
            self._fold_staged(empty=True, caught=caught, spread=spread)
        caught.changed = True
        self.bump()

    def _bigger_cache(self) -> Scope:
        """Pages for SQLite's sorts and copies while the whole log is read: bounded, not
        the log's size."""
        conn, cache = self.conn, []

        def begin() -> None:
            cache[:] = [conn.execute(f"PRAGMA {schema}.cache_size").fetchone()[0] for schema in ("main", "temp")]
            for schema in ("main", "temp"):
                conn.execute(f"PRAGMA {schema}.cache_size = {_BUILD_CACHE_KIB}")

        def end(error: BaseException | None) -> None:
            for schema, size in zip(("main", "temp"), cache):
                conn.execute(f"PRAGMA {schema}.cache_size = {int(size)}")
        return Scope(begin, end)

    # -- streamed: staging log files, folding every note -----------------------------------------

    def _stage_files(self, names: list[str], caught: Caught, spread: cores.Spread) -> None:
        """Read these log files into the staging tables, in order, a file at a time (a
        file found bad part way is rolled back whole and set aside).  Their records are
        read and checked by `spread`'s workers: a pack a stretch of lines at a time, loose
        files a batch at a time."""
        from ..base.shown import progress  # (a build's: no read that finds the index current loads it)

        conn = self.conn
        self.start_staging()
        tick = progress("reading the log", len(names))
        reading: PackReading | None = None
        for got in spread.in_order(self._reading_pieces(names)):
            if isinstance(got, PackReading):  # a pack starts
                tick()
                reading = got
                conn.execute("SAVEPOINT staging")
            elif isinstance(got, PackPart):
                assert reading is not None
                conn.executemany(_STAGE_EVENT if reading.kind == "e" else _STAGE_TEXT, reading.take(got))
            elif isinstance(got, _PackEnd):
                self._pack_read(got.reading, caught)
            elif isinstance(got, list):  # a batch of loose files
                for name, events, texts, problem in got:
                    tick()
                    if problem is None:
                        conn.executemany(_STAGE_EVENT, events)
                        conn.executemany(_STAGE_TEXT, texts)
                    self._file_read(name, problem, caught)
        tick.end()

    def _reading_pieces(self, names: list[str]) -> Iterator[cores.Piece]:
        """The work of reading `names`, in their order: loose files in batches; each pack
        announced (its `PackReading`, or its fault), its stretches, then its end."""
        loose: list[str] = []
        for name in names:
            if not name.startswith(f"{PACKS}/"):
                loose.append(name)
                if len(loose) == _LOOSE_BATCH:
                    yield _staged_loose, (self.tree.root, loose)
                    loose = []
                continue
            if loose:
                yield _staged_loose, (self.tree.root, loose)
                loose = []
            try:
                reading = self.tree.pack(name)
            except LogFileError as exc:
                yield None, [(name, [], [], str(exc))]
                continue
            yield None, reading
            for args in reading.parts():
                if reading.problem is None:  # a stretch after a fault is hashed, not read
                    yield _staged_part, args
            yield None, _PackEnd(reading)
        if loose:
            yield _staged_loose, (self.tree.root, loose)

    def _pack_read(self, reading: PackReading, caught: Caught) -> None:
        """A pack read to its end: kept, or its records rolled back and the file set aside."""
        try:
            reading.end()
        except LogFileError as exc:
            self.conn.execute("ROLLBACK TO staging")
            self.conn.execute("RELEASE staging")
            self._file_read(reading.name, str(exc), caught)
            return
        self.conn.execute("RELEASE staging")
        self._file_read(reading.name, None, caught)

    def _file_read(self, name: str, problem: str | None, caught: Caught) -> None:
        self.conn.execute("INSERT OR REPLACE INTO files (name, problem) VALUES (?, ?)", (name, problem))
        if problem is not None:
            caught.set_aside.append(problem)

    def start_staging(self) -> None:
        """Empty staging tables, for log files' records on their way into the index."""
        conn = self.conn
        conn.execute("DROP TABLE IF EXISTS temp.staged_events")
        conn.execute("DROP TABLE IF EXISTS temp.staged_texts")
        conn.execute(f"CREATE TEMP TABLE staged_events ({EVENT_COLUMNS}, file)")
        conn.execute("CREATE TEMP TABLE staged_texts (note, file, key, text, digest)")

    def stage_written(self, name: str | None, events: Iterable[Event], texts: Iterable[TextRecord]) -> None:
        """Records this process has just written to the log, staged (their file's name
        None while it is not known yet: `name_staged` gives it)."""
        self.conn.executemany(_STAGE_EVENT, _staged_events(name, events))
        self.conn.executemany(_STAGE_TEXT, _staged_texts(name, texts))

    def name_staged(self, name: str) -> None:
        """The file the staged records with no file yet were written to."""
        self.conn.execute("UPDATE temp.staged_events SET file = ? WHERE file IS NULL", (name,))
        self.conn.execute("UPDATE temp.staged_texts SET file = ? WHERE file IS NULL", (name,))

    def take_staged(self, names: list[str]) -> None:
        """The staged records of the log files `names`, which this process wrote, into the
        index (as a sync that read them would: the whole index built streamed when it held
        nothing, every note replayed when they touch many, else the touched ones)."""
        conn = self.conn
        empty = conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is None
        conn.executemany("INSERT OR REPLACE INTO files (name, problem) VALUES (?, NULL)", [(n,) for n in sorted(names)])
        self._fold_staged(empty)
        self.bump()

    def _fold_staged(self, empty: bool, also: Iterable[str] = (), caught: Caught | None = None,
                     spread: cores.Spread | None = None) -> bool:
        """The staged records into the index, and the notes they touch (and the notes
        `also`) replayed: every note, streamed, when the index held nothing (`empty`: its
        secondary indexes made once at the end) or when they touch many; else only those.
        Returns whether any note was replayed."""
        conn = self.conn
        touched = set() if empty and spread is not None else {n for (n,) in conn.execute(  # (a build: every note)
            "SELECT note FROM temp.staged_events UNION SELECT note FROM temp.staged_texts LIMIT ?",
            (_REFOLD_ALL + 1,))}
        if empty or len(touched) > _REFOLD_ALL:
            from contextlib import nullcontext  # (a build's: cores, which it spreads with, loads contextlib too)

            spreading = nullcontext(spread) if spread is not None else _spread(len(touched) > _SPREAD_NOTES)
            with self._bigger_cache(), spreading as spread:
                for name in _MADE_AFTER if empty else ():
                    conn.execute(f"DROP INDEX IF EXISTS {name}")
                self._insert_staged(caught)
                local = self._fold_everything(spread)
                for statement in _MADE_AFTER.values() if empty else ():
                    conn.execute(statement)
            if local:  # folded beside this clone's own notes: the team's short ids as every clone has them
                self._reshort(local)
            return True
        self._insert_staged(caught)
        touched.update(also)
        self.refold(touched)
        return bool(touched)

    def _insert_staged(self, caught: Caught | None = None) -> None:
        """The staged rows into the index's tables, each in its key order (SQLite sorts);
        then the files holding an event whose `prev` crosses to another note set aside."""
        conn = self.conn
        conn.execute(f"INSERT OR IGNORE INTO events ({EVENT_COLUMNS}) SELECT {EVENT_COLUMNS}"
                     " FROM temp.staged_events ORDER BY id")
        conn.execute("INSERT OR IGNORE INTO event_files (event, file) SELECT id, file FROM temp.staged_events"
                     " ORDER BY id, file")
        # several rows for one (note, file): the last in sorted order stands, as it always did,
        # chosen before the insert (a row replaced again and again beside a large one costs
        # the large one's bytes each time: a hostile pack made that quadratic); asked first,
        # as the choice sorts every text by its bytes (a third of a fresh clone's copies)
        several = conn.execute("SELECT EXISTS (SELECT 1 FROM temp.staged_texts GROUP BY note, file"
                               " HAVING count(*) > 1)").fetchone()[0]
        conn.execute("INSERT OR REPLACE INTO texts (note, file, key, text, digest) SELECT note, file, key, text,"
                     " digest FROM (SELECT *, row_number() OVER (PARTITION BY note, file ORDER BY key DESC,"
                     " text DESC, digest DESC) AS last FROM temp.staged_texts) WHERE last = 1 ORDER BY note, file"
                     if several else "INSERT OR REPLACE INTO texts (note, file, key, text, digest) SELECT note,"
                     " file, key, text, digest FROM temp.staged_texts ORDER BY note, file")
        self._set_aside_crossings("SELECT file, id, note, prev FROM temp.staged_events", (), caught)
        conn.execute("DROP TABLE temp.staged_events")
        conn.execute("DROP TABLE temp.staged_texts")

    def _fold_everything(self, spread: cores.Spread) -> list[str]:
        """Every note replayed from the events table, in id order, a batch of notes at a
        time (by `spread`'s workers: `_folded`), their rows written here as they come
        back; the items that show other notes rendered once every short id is known;
        forgotten notes' texts blanked.  Returns the notes that are not the team's (this
        clone's own, a session's), as the rows went by."""
        from ..base.shown import progress

        conn = self.conn
        self._start_over()
        tick = progress("replaying the notes", lambda: conn.execute("SELECT count(DISTINCT note) FROM events").fetchone()[0])
        local: list[str] = []
        for name in _DECLARED:
            conn.execute(f"DROP TRIGGER {name}")
        for forms, items, links, later, own in spread.in_order(self._folding_pieces(tick)):
            local.extend(own)
            for form, values in forms:
                conn.executemany(_note_insert(form), values)
            _insert_items(conn, items)
            conn.executemany("INSERT OR IGNORE INTO links (other, note) VALUES (?, ?)", sorted(links))
            conn.executemany("INSERT INTO temp.showing_others (id) VALUES (?)", later)
        for trigger, fill in _DECLARED.values():  # (what the triggers would have written, at once)
            conn.execute(fill)
            conn.execute(trigger)
        tick.end()
        self._render_showing_others()
        self._blank_all_forgotten()
        return local

    def _folding_pieces(self, tick) -> Iterator[cores.Piece]:  # type: ignore[no-untyped-def]
        """The notes in id order, in batches, each batch with the notes on either side of
        it (a short id depends on its neighbours) and the texts of its stretch of ids; a
        note whose creation is not in the log is no note, and no one's neighbour.  (Grouped
        by SQLite and itertools, the texts fetched a batch at a time: this process writes
        every batch's rows too, and was the build's slowest part.)"""
        from itertools import groupby
        from operator import itemgetter

        batch: list[tuple[str, list[tuple]]] = []
        before: str | None = None
        for note_id, group in groupby(self.conn.execute(f"SELECT {EVENT_COLUMNS} FROM events ORDER BY note"),
                                      itemgetter(1)):
            rows = list(group)
            tick()
            if not (rows[0][2] == "created" if len(rows) == 1 else any(row[2] == "created" for row in rows)):
                continue
            if len(batch) == _FOLD_BATCH:
                yield _folded, (batch, self._texts_from(batch[0][0], batch[-1][0]), before, note_id)
                before, batch = batch[-1][0], []
            batch.append((note_id, rows))
        if batch:
            yield _folded, (batch, self._texts_from(batch[0][0], batch[-1][0]), before, None)

    def _texts_from(self, first: str, last: str) -> list[tuple[str, str, str]]:
        """The texts (note, digest, text) of the notes from `first` to `last` in id order
        whose creation is in the log (a note's id is its created event's), each note's in
        the order of its files: none of a note that is no note, which a clone may hold
        any number of."""
        return self.conn.execute(
            "SELECT t.note, t.digest, t.text FROM texts t WHERE t.note BETWEEN ? AND ? AND EXISTS"
            " (SELECT 1 FROM events e WHERE e.id = t.note AND e.type = 'created') ORDER BY t.note, t.file",
            (first, last)).fetchall()

    def _start_over(self) -> None:
        """Every note, item and link dropped, to be made again; which notes were shown
        (not forgotten) kept aside for `_blank_all_forgotten`."""
        conn = self.conn
        conn.execute("DROP TABLE IF EXISTS temp.was_shown")
        conn.execute("CREATE TEMP TABLE was_shown (id TEXT PRIMARY KEY) WITHOUT ROWID")
        conn.execute("INSERT INTO temp.was_shown SELECT id FROM notes WHERE state != 'forgotten' ORDER BY id")
        for table in ("notes", "links", "anchors"):
            conn.execute(f"DELETE FROM {table}")
        _clear_items(conn)
        self._log_everything()
        conn.execute("DROP TABLE IF EXISTS temp.showing_others")
        conn.execute("CREATE TEMP TABLE showing_others (id TEXT PRIMARY KEY) WITHOUT ROWID")

    def _render_showing_others(self) -> None:
        """The items that show other notes, once every short id is known."""
        last = ""
        while True:
            chunk = [i for (i,) in self.conn.execute(
                "SELECT id FROM temp.showing_others WHERE id > ? ORDER BY id LIMIT ?", (last, db.CHUNK))]
            if not chunk:
                break
            self.render_items(chunk, new=True)
            last = chunk[-1]
        self.conn.execute("DROP TABLE temp.showing_others")

    def _blank_all_forgotten(self) -> None:
        """Forgotten notes' texts blanked; `blanked` names those that had text here, or
        that were not forgotten before (temp.was_shown)."""
        conn = self.conn
        for (note_id,) in conn.execute(
                "SELECT n.id FROM notes n WHERE n.state = 'forgotten' AND (n.id IN temp.was_shown"
                " OR EXISTS (SELECT 1 FROM texts t WHERE t.note = n.id AND t.text != '')) ORDER BY n.id").fetchall():
            self.blanked.add(note_id)
        conn.execute("UPDATE texts SET text = '' WHERE text != '' AND note IN"
                     " (SELECT id FROM notes WHERE state = 'forgotten')")
        conn.execute("DROP TABLE temp.was_shown")

    def _drop_file(self, name: str) -> set[str]:
        conn = self.conn
        notes = {n for (n,) in conn.execute(
            "SELECT e.note FROM event_files f JOIN events e ON e.id = f.event WHERE f.file = ?", (name,))}
        notes |= {n for (n,) in conn.execute("SELECT note FROM texts WHERE file = ?", (name,))}
        gone = [e for (e,) in conn.execute("SELECT event FROM event_files WHERE file = ?", (name,))]
        conn.execute("DELETE FROM event_files WHERE file = ?", (name,))
        for event_id in gone:
            if conn.execute("SELECT 1 FROM event_files WHERE event = ?", (event_id,)).fetchone() is None:
                conn.execute("DELETE FROM events WHERE id = ?", (event_id,))
        conn.execute("DELETE FROM texts WHERE file = ?", (name,))
        conn.execute("DELETE FROM files WHERE name = ?", (name,))
        return notes

    def _set_aside_crossings(self, source: str, params: Sequence[object], caught: Caught | None) -> set[str]:
        """Set aside each log file of `source` (SQL giving file, id, note, prev of events
        just read) that holds an event whose `prev` names an event of another note: no
        write makes one (an event follows the events of its own note), and counted, it
        would make one note's history answer for another's.  Returns the notes touched."""
        found: dict[str, str] = {}
        # (each event's prevs looked up in the events table's own order: in the order the
        # files hold them, each lookup lands on another page, read again once the table
        # outgrows SQLite's cache; `LIMIT -1`, no limit, keeps the sorted subquery whole); a
        # file is named by its first such event, and the first other note's event in its prev
        for name, event_id, other, _ in self.conn.execute(
                f"SELECT DISTINCT s.file, s.id, p.id, s.at FROM (SELECT s.file, s.id, s.note, j.value AS prev,"
                f" j.key AS at FROM ({source}) s, json_each(s.prev) j ORDER BY j.value LIMIT -1) s CROSS JOIN events p"
                " ON p.id = s.prev WHERE p.note != s.note ORDER BY 1, 2, 4", params).fetchall():
            found.setdefault(name, f"{name}: event {event_id} follows event {other} of another note"
                                   " (an event's prev names events of its own note only)")
        touched: set[str] = set()
        for name, problem in found.items():
            touched |= self._drop_file(name)
            self.conn.execute("INSERT OR REPLACE INTO files (name, problem) VALUES (?, ?)", (name, problem))
            if caught is not None:
                caught.set_aside.append(problem)
        return touched

    def _add_file(self, name: str, caught: Caught) -> set[str]:
        try:
            events, texts = self.tree.read(name)
        except LogFileError as exc:
            self.conn.execute("INSERT OR REPLACE INTO files (name, problem) VALUES (?, ?)", (name, str(exc)))
            caught.set_aside.append(str(exc))
            return set()
        self.conn.execute("INSERT OR REPLACE INTO files (name, problem) VALUES (?, NULL)", (name,))
        return self.add_records(name, events, texts)

    def add_records(self, name: str, events: Iterable[Event], texts: Iterable[TextRecord]) -> set[str]:
        """Record what one log file holds; returns the notes it touches."""
        conn, events = self.conn, list(events)
        touched: set[str] = {event.note for event in events}
        conn.executemany(f"INSERT OR IGNORE INTO events ({EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [event_values(event) for event in events])  # (one statement: a write's pack lands at once)
        conn.executemany("INSERT OR IGNORE INTO event_files (event, file) VALUES (?, ?)", [(e.id, name) for e in events])
        for text in texts:
            conn.execute("INSERT OR REPLACE INTO texts (note, file, key, text, digest) VALUES (?, ?, ?, ?, ?)",
                         (text.note, name, text.key, text.text, text.digest))
            touched.add(text.note)
        return touched

    def record_file(self, name: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO files (name, problem) VALUES (?, NULL)", (name,))

    def note_stamp(self) -> None:
        """After a write that recorded its own files: the log as it now is, seen."""
        self.set_meta("stamp", cjson.dumps(self.tree.stamp()))

    # -- notes from events ----------------------------------------------------------------------

    def refold(self, note_ids: Iterable[str]) -> None:
        """Replay these notes from their events, then fix the short ids around them and
        the items that show them.  In batches: a pull of many events costs by the notes
        it touches, not by the notes in the memory times those."""
        changed = sorted(set(note_ids))
        answered = self._answered(changed)  # (before: an answer that goes takes its row with it)
        came_or_went: set[str] = set()
        for chunk in db.chunks(changed):
            self._refold_chunk(chunk, came_or_went)
        self._reshort(changed, answered, came_or_went)

    def _refold_chunk(self, chunk: list[str], came_or_went: set[str]) -> None:
        """Replay the notes of `chunk`; those that appeared or left the index are added to
        `came_or_went` (the short ids they move are `_reshort`'s)."""
        conn, marks = self.conn, db.marks(chunk)
        events: dict[str, list[Event]] = {}
        for row in conn.execute(f"SELECT {EVENT_COLUMNS} FROM events WHERE note IN ({marks})", chunk):
            events.setdefault(row[1], []).append(event_from_row(row))
        texts = {(n, d): t for n, d, t in conn.execute(
            f"SELECT note, digest, text FROM texts WHERE note IN ({marks}) ORDER BY note, file", chunk)}
        old = {row[0]: row for row in conn.execute(f"SELECT {_NOTE_ROW} FROM notes WHERE id IN ({marks})", chunk)}
        self._remember_items(chunk)
        self._log_items(chunk)
        for table, column in (("items", "id"), ("links", "note")):
            conn.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", chunk)
        rows: dict[str, tuple[object, ...] | None] = {}
        links = []
        for note_id in chunk:
            folded = _fold_one(note_id, events.get(note_id, []), texts)
            before = old.get(note_id)
            if (folded is None) != (before is None):
                came_or_went.add(note_id)
            if folded is None:
                rows[note_id] = None
                continue  # a text, or events, whose note's creation is not (or no longer) in the log
            note = folded.note
            if note.state == "forgotten":
                self._blank(note_id, arrived=before is not None and before[11] != "forgotten")
            if before is not None:
                note = _with_short(note, str(before[1]))
            rows[note_id] = _note_values(note, folded.problems)
            links += [(other, note_id) for other in _linked(note) - {note_id}]
        self._store_notes(old, rows)
        conn.executemany("INSERT OR IGNORE INTO links (other, note) VALUES (?, ?)", links)

    def _store_notes(self, old: dict[str, tuple], rows: dict[str, tuple[object, ...] | None]) -> None:
        """The notes' rows as folded (None: gone): a row whose changed columns the side tables
        (anchors, triggers, terms, rests) do not follow is updated in place, those columns
        alone (a flag changes a note's state: its other indexes stay as they are); any other
        row is replaced whole, its triggers keeping the side tables."""
        replaced, updates = [], {}
        for note_id, values in rows.items():
            before = old.get(note_id)
            if values is None or before is None:
                replaced.append(note_id)
                continue
            changed = tuple(i for i, (a, b) in enumerate(zip(before, values)) if a != b)
            if set(changed) & _FOLLOWED_COLUMNS:
                replaced.append(note_id)
            elif changed:
                updates.setdefault(changed, []).append(tuple(values[i] for i in changed) + (note_id,))
        for chunk in db.chunks(sorted(n for n in replaced if n in old)):
            self.conn.execute(f"DELETE FROM notes WHERE id IN ({db.marks(chunk)})", chunk)
        self.conn.executemany(_INSERT_NOTE, [rows[n] for n in replaced if rows[n] is not None])
        for changed, values in updates.items():
            sets = ", ".join(f"{_NOTE_ROW_COLUMNS[i]} = ?" for i in changed)
            self.conn.executemany(f"UPDATE notes SET {sets} WHERE id = ?", values)

    def _blank(self, note_id: str, arrived: bool) -> None:
        """A forgotten note's text leaves the index at once (its rows stay while a log file
        still holds it: `verify` names the file, the next write removes it).  `arrived`:
        the note was not forgotten when the index last looked."""
        if self.conn.execute("UPDATE texts SET text = '' WHERE note = ? AND text != ''", (note_id,)).rowcount or arrived:
            self.blanked.add(note_id)

    def _reshort(self, changed: list[str], answered: Iterable[str] = (), came_or_went: set[str] | None = None) -> None:
        """Short ids of the changed notes and of their neighbours in id order (a new note
        can lengthen only the notes it shares a prefix with; where the notes that came or
        went are known, only theirs: a note whose state alone changed moves no short id),
        or of every note when many changed; the items of the changed notes, of every note whose short id moved, and of
        the notes that show one of them (a note that appeared or went changes how an item
        pointing to it reads: by short id, or by full id when it is not in the log) are
        rendered again, and the requests the changed notes answered before (`answered`)."""
        if len(changed) > _RESHORT_ALL:
            rows = self.conn.execute("SELECT id, short_len, short, scope FROM notes").fetchall()
            now = ids.short_ids({i: length for i, length, _, _ in rows})
            now.update(ids.short_ids({i: length for i, length, _, scope in rows if scope == "team"}))
            moved = {i for i, _, short, _ in rows if now[i] != short}
        else:
            affected: set[str] = set(changed if came_or_went is None else came_or_went)
            for note_id in sorted(affected):
                affected.update(self._neighbours(note_id), self._neighbours(note_id, team=True))
            now, moved = {}, set()
            for note_id in sorted(affected):
                row = self.conn.execute("SELECT short, short_len, scope FROM notes WHERE id = ?", (note_id,)).fetchone()
                if row is not None:
                    now[note_id] = ids.short_of(note_id, row[1], self._neighbours(note_id, team=row[2] == "team"))
                    if now[note_id] != row[0]:
                        moved.add(note_id)
        self.conn.executemany("UPDATE notes SET short = ? WHERE id = ?", [(now[i], i) for i in sorted(moved)])
        self.render_items(set(changed) | moved | set(answered) | self._showing(set(changed) | moved))

    def _neighbours(self, note_id: str, team: bool = False) -> list[str]:
        """The notes next to `note_id` in id order; `team`: the team's notes only.  A team
        note's short id is made among the team's notes alone, so this clone's own notes
        never change MEMORY.md's bytes (a private note's own is made among all)."""
        only = " AND scope = 'team'" if team else ""
        before = self.conn.execute(f"SELECT id FROM notes WHERE id < ?{only} ORDER BY id DESC LIMIT 1", (note_id,)).fetchall()
        after = self.conn.execute(f"SELECT id FROM notes WHERE id > ?{only} ORDER BY id LIMIT 1", (note_id,)).fetchall()
        return [r[0] for r in before + after]

    def _showing(self, note_ids: set[str]) -> set[str]:
        """The notes whose items show one of `note_ids` (a link, a dispute, a rival, an
        answer: a request shows the notes that answer it)."""
        out: set[str] = set()
        for chunk in db.chunks(sorted(note_ids)):
            out.update(r[0] for r in self.conn.execute(f"SELECT note FROM links WHERE other IN ({db.marks(chunk)})", chunk))
        return out | self._answered(note_ids)

    def _answered(self, note_ids: Iterable[str]) -> set[str]:
        """The notes of this log some of `note_ids` answer (their items show their answers)."""
        out: set[str] = set()
        for chunk in db.chunks(sorted(set(note_ids))):
            out.update(r[0] for r in self.conn.execute(
                f"SELECT r.id FROM notes a JOIN notes r ON r.id = a.answers WHERE a.id IN ({db.marks(chunk)})", chunk))
        return out

    # -- items ------------------------------------------------------------------------------

    def shorts(self, note_ids: Iterable[str]) -> dict[str, str]:
        return shorts(self.conn, note_ids)

    def render_items(self, note_ids: Iterable[str], new: bool = False) -> None:
        """These notes' items rendered again; `new`: they have none (a replay of every
        note, which started over, left them for now), so none is deleted first: in a
        fresh build the items table is without its index on ids until the end, and each
        delete would read the whole table."""
        from ..renderer import item_text  # here: a command that renders nothing imports no renderer

        for chunk in db.chunks(sorted(set(note_ids))):
            marks = db.marks(chunk)
            notes = [note_from_row(r) for r in self.conn.execute(f"SELECT {NOTE_COLUMNS} FROM notes WHERE id IN ({marks})", chunk)]
            answered = self._answers_shown(notes)
            shorts = self.shorts(set().union(*(_linked(n) for n in notes), *answered.values()) if notes else ())
            self._remember_items(chunk)
            self._log_items(chunk)
            if not new:
                self.conn.execute(f"DELETE FROM items WHERE id IN ({marks})", chunk)
            _insert_items(self.conn, [(KIND_RANK[n.kind], n.id, item_text(n, None, shorts, answered.get(n.id, ())))
                                      for n in notes if not n.text_missing and not n.local])  # MEMORY.md: the team's notes

    def _answers_shown(self, notes: list[Note]) -> dict[str, tuple[str, ...]]:
        """The answers that speak for each request among `notes` (its item shows them)."""
        from ..base.owing import answered_by, is_request

        asked = [n.id for n in notes if is_request(n) and n.state != "forgotten"]
        given: list[Note] = []
        for chunk in db.chunks(asked):
            given += [note_from_row(r) for r in self.conn.execute(
                f"SELECT {NOTE_COLUMNS} FROM notes WHERE answers IN ({db.marks(chunk)}) AND scope = 'team'",
                chunk)]  # (this clone's own answers are never in MEMORY.md)
        return answered_by(given)

    def keep_replaced(self) -> None:
        """Keep, from now, each re-rendered note's item as it was first seen (a write's start)."""
        self._replaced = {}

    def take_replaced(self) -> dict[str, tuple[int, bytes] | None]:
        """The items kept since `keep_replaced` (none where it was not called); keeping stops."""
        replaced, self._replaced = self._replaced or {}, None
        return replaced

    def _remember_items(self, chunk: list[str]) -> None:
        if self._replaced is None:
            return
        found = {i: (rank, bytes(item)) for i, rank, item in self.conn.execute(
            f"SELECT id, kind_rank, CAST({ITEM} AS BLOB) FROM items WHERE id IN ({db.marks(chunk)})", chunk)}
        for note_id in chunk:
            self._replaced.setdefault(note_id, found.get(note_id))

    def changed_items(self, note_ids: Iterable[str]) -> dict[str, tuple[int, bytes]]:
        """The items of these notes now (note id → kind rank, bytes)."""
        out: dict[str, tuple[int, bytes]] = {}
        for chunk in db.chunks(sorted(set(note_ids))):
            out.update({i: (rank, bytes(item)) for i, rank, item in self.conn.execute(
                f"SELECT id, kind_rank, CAST({ITEM} AS BLOB) FROM items WHERE id IN ({db.marks(chunk)})", chunk)})
        return out

    def _log_items(self, chunk: list[str]) -> None:
        """The items of `chunk` change in this write: logged at the generation it ends at
        (every write that changes an item bumps the generation once it is done)."""
        after = self.generation + 1
        if self.meta("item_log_from") != str(after):  # (else this write already changed every item)
            self.conn.executemany("INSERT OR REPLACE INTO item_log (id, gen) VALUES (?, ?)",
                                  [(note_id, after) for note_id in chunk])

    def _log_everything(self) -> None:
        """Every item changes in this write: the log starts again after it (no moment
        before it can be told from the log), and the rows of this write are not kept."""
        self.conn.execute("DELETE FROM item_log")
        self.set_meta("item_log_from", str(self.generation + 1))

    def items_changed_since(self, generation: int) -> list[str] | None:
        """The notes whose items changed after `generation` (None: the log does not reach
        back that far)."""
        if generation < int(self.meta("item_log_from") or 0) or generation > self.generation:
            return None
        return [i for (i,) in self.conn.execute("SELECT id FROM item_log WHERE gen > ? ORDER BY id", (generation,))]

    def _rerender_all(self) -> None:
        _clear_items(self.conn)
        self._log_everything()
        self.render_items([r[0] for r in self.conn.execute("SELECT id FROM notes")])
        self.set_meta("format_version", FORMAT_VERSION)


# The secondary indexes by name, each with the statement that makes it.
_SECONDARY = {line.split()[2]: line.rstrip(";") for line in SCHEMA.splitlines() if line.startswith("CREATE INDEX")}
# Kept up to date as a build's rows go in: the partial indexes that hold a few rows (a note
# forgotten, superseded, disputed, with an end, a request or an answer, a session's; a
# check-in's events).  Each index made at the end reads its whole table, a page at a time
# beyond SQLite's cache (the notes' are 25 MB at 74,900 notes): these eight are eight such
# reads fewer.
_KEPT_UP = {"notes_by_parent", "notes_forgotten", "notes_disagreeing", "notes_by_end", "notes_requests",
            "notes_by_answered", "notes_sessions", "events_by_checkin"}
_MADE_AFTER = {name: statement for name, statement in _SECONDARY.items() if name not in _KEPT_UP}
_RESHORT_ALL = 2000  # more changed notes than this: every short id is computed at once
_STAGE_EVENT = f"INSERT INTO temp.staged_events ({EVENT_COLUMNS}, file) VALUES ({', '.join('?' * 11)})"
_STAGE_TEXT = "INSERT INTO temp.staged_texts (note, file, key, text, digest) VALUES (?, ?, ?, ?, ?)"
_BUILD_CACHE_KIB = -16384  # the page cache the streamed build gives SQLite (KiB, negated)
_STREAM_FILES = 256  # a sync that adds more log files than this (or any pack) streams them
_REFOLD_ALL = 20000  # a sync touching more notes than this replays every note, streamed
_NOTE_ROW = ("id, short, kind_rank, kind, priority, text, provenance, created_at, actor,"
             " supersedes, superseded_by, state, state_at, state_reason, state_actor, state_event, bad_pointer,"
             " disputes, rivals, alias, short_len, text_hash, problems, anchors, expires, triggers, terms, seat, due, answers,"
             " scope, session, rests_on")  # a notes row as _note_values gives it
_NOTE_ROW_COLUMNS = tuple(c.strip() for c in _NOTE_ROW.split(","))
_SCOPE = _NOTE_ROW_COLUMNS.index("scope")
_FOLLOWED_COLUMNS = {_NOTE_ROW_COLUMNS.index(c) for c in ("id", "anchors", "triggers", "terms", "rests_on")}
_INSERT_NOTE = f"INSERT INTO notes ({_NOTE_ROW}) VALUES (" + ", ".join("?" * len(_NOTE_ROW_COLUMNS)) + ")"


def _long_item(conn: sqlite3.Connection) -> int:
    """The bytes of an item over which it is kept in long_items: a fifth of a page (3,276 at
    16 KiB pages, 819 at the 4 KiB of an index made before those), where a row of items,
    its key and header added, still fits the page with no overflow (SQLite keeps about a
    quarter of a page of an index's cell in the page)."""
    return int(conn.execute("PRAGMA page_size").fetchone()[0]) // 5


def _clear_items(conn: sqlite3.Connection) -> None:
    """Every item gone, the long ones with them: the trigger set aside meanwhile, as SQLite
    empties a table that has a trigger a row at a time (74,900 items: 246 ms, against 54)."""
    conn.execute("DROP TRIGGER long_items_out")
    conn.execute("DELETE FROM items")
    conn.execute("DELETE FROM long_items")
    conn.execute(_LONG_ITEMS_OUT)


def _insert_items(conn: sqlite3.Connection, rows: list[tuple[int, str, str]]) -> None:
    """Items (kind rank, note id, item) into the items table, a long one's item into
    long_items (SCHEMA says why)."""
    most = _long_item(conn)
    long = [(note_id, item) for _, note_id, item in rows if len(item) > most // 4 and len(item.encode()) > most]
    if not long:
        conn.executemany("INSERT INTO items (kind_rank, id, item) VALUES (?, ?, ?)", rows)
        return
    spilled = {note_id for note_id, _ in long}
    conn.executemany("INSERT OR REPLACE INTO long_items (id, item) VALUES (?, ?)", long)
    conn.executemany("INSERT INTO items (kind_rank, id, item) VALUES (?, ?, ?)",
                     [(rank, note_id, None if note_id in spilled else item) for rank, note_id, item in rows])


_LOOSE_BATCH = 256  # loose log files read by a worker at a time
_FOLD_BATCH = 1000  # notes replayed by a worker at a time
_SPREAD_BYTES = 2 * PART_BYTES  # log files to read (about) over this: read by worker processes
_SPREAD_NOTES = 4000  # notes to replay over this: replayed by worker processes
_LOOSE_GUESS = 1024  # what a loose log file is taken to hold, not to stat each


def _spread(worth: bool) -> ContextManager[cores.Spread]:
    """qem_edit.system.cores' spread, imported only when a build or a big catch-up needs
    it: a hook's catch-up never does, and does not pay for loading it."""
    from ..system import cores

    return cores.spread(worth)


def _worth_spreading(tree: LogTree, names: list[str]) -> bool:
    """Whether reading `names` is work enough to start worker processes for."""
    size = 0
    for name in names:
        try:
            size += os.stat(tree.path(name)).st_size if name.startswith(f"{PACKS}/") else _LOOSE_GUESS
        except OSError:
            continue  # named as it is read
        if size > _SPREAD_BYTES:
            return True
    return False


class _PackEnd(Record):
    """The end of a pack's pieces: its verdict is due."""

    reading: PackReading


def _staged_part(name: str, kind: str, data: bytes, number: int) -> PackPart:
    """A stretch of a pack read and checked (`logtree.pack_part`), its records as the
    staging tables' rows."""
    part = pack_part(name, kind, data, number)
    return part._replace(records=(_staged_events if kind == "e" else _staged_texts)(name, part.records))


def _staged_loose(root: AnyPath, names: list[str]) -> list[tuple[str, list, list, str | None]]:
    """Loose log files read and checked: each as its staging rows, or its fault."""
    tree, out = LogTree(root), []
    for name in names:
        try:
            events, texts = tree.read(name)
        except LogFileError as exc:
            out.append((name, [], [], str(exc)))
            continue
        out.append((name, _staged_events(name, events), _staged_texts(name, texts), None))
    return out


def _staged_events(name: str | None, events: Iterable[Event]) -> list[tuple[object, ...]]:
    """Events as the staging table's rows, from the log file `name` (None: not known yet)."""
    return [event_values(e) + (name,) for e in events]


def _staged_texts(name: str | None, texts: Iterable[TextRecord]) -> list[tuple[object, ...]]:
    return [(t.note, name, t.key, t.text, t.digest) for t in texts]


def _folded(batch: list[tuple[str, list[tuple]]], texts: list[tuple[str, str, str]], before: str | None,
            after: str | None) -> tuple[list, list, list, list, list]:
    """A batch of notes (id, event rows), in id order, replayed with the texts of its
    stretch of ids (note, digest, text; of one digest, the later file's stands): their
    rows for the notes table, the items that show no other note, the links of those that
    do and their ids (rendered once every short id is known), and the notes that are not
    the team's.  The rows come by their form (`_forms`).  `before` and `after`: the notes
    on either side of the batch, which its first and last notes' short ids depend on.
    Pure."""
    from ..base.owing import is_request
    from ..renderer import item_text

    rows: list = []
    items: list = []
    links: list = []
    later: list = []
    held: dict[str, dict[tuple[str, str], str]] = {}
    for note, digest, text in texts:
        held.setdefault(note, {})[(note, digest)] = text
    for i, (note_id, event_rows) in enumerate(batch):
        folded = _fold_one(note_id, [event_from_row(r) for r in event_rows], held.get(note_id, {}))
        beside = (batch[i - 1][0] if i else before, batch[i + 1][0] if i + 1 < len(batch) else after)
        note = _with_short(folded.note, ids.short_of(note_id, folded.note.short_len, [b for b in beside if b]))
        rows.append(_note_values(note, folded.problems))
        linked = set() if note.text_missing or note.local else _linked(note)  # no item until its text arrives
        if len(linked) == 1 and not is_request(note):  # (a request shows its answers, anywhere in the log)
            items.append((KIND_RANK[note.kind], note.id, item_text(note, None, {note.id: note.shown})))
        elif linked:
            later.append((note.id,))
            links.extend((other, note.id) for other in linked - {note.id})
    return _forms(rows), items, links, later, [row[0] for row in rows if row[_SCOPE] != "team"]


def _forms(rows: list[tuple]) -> list[tuple[tuple, list[tuple]]]:
    """Notes rows by their form (which columns hold NULL, which '[]'), each with the
    values of its other columns: most of a row's 33 columns are one of the two, written
    into the statement (`_note_insert`) rather than bound a value at a time (binding was
    most of what the building process did while its workers replayed)."""
    from itertools import compress

    forms: dict[tuple, list[tuple]] = {}
    kept: dict[tuple, tuple[bool, ...]] = {}
    for row in rows:
        form = tuple(map(_UNBOUND.get, row))
        chosen = kept.get(form)
        if chosen is None:
            chosen = kept[form] = tuple(f is None for f in form)
        forms.setdefault(form, []).append(tuple(compress(row, chosen)))
    return list(forms.items())


_UNBOUND = {None: "NULL", "[]": "'[]'"}  # a notes row's values written into its statement, as SQL
_NOTE_INSERTS: dict[tuple, str] = {}


def _note_insert(form: tuple) -> str:
    """The statement inserting notes rows of `form` (`_forms`)."""
    sql = _NOTE_INSERTS.get(form)
    if sql is None:
        sql = f"INSERT INTO notes ({_NOTE_ROW}) VALUES ({', '.join('?' if f is None else f for f in form)})"
        if len(_NOTE_INSERTS) < 256:
            _NOTE_INSERTS[form] = sql
    return sql


def _fold_one(note_id: str, events: list[Event], texts: dict[tuple[str, str], str]):  # type: ignore[no-untyped-def]
    """One note folded from its events (None: its creation is not in the log)."""
    created = next((e for e in events if e.type == "created"), None)
    if created is None:
        return None
    return fold(events, texts.get((note_id, str(created.data.get("text")))))


def _linked(note: Note) -> set[str]:
    linked = {note.id}
    linked.update(x for x in (note.supersedes, note.superseded_by, note.answers) if x)
    linked.update(note.rests_on)
    linked.update(other for _, other in note.disputes)
    linked.update(r.superseded_by for r in note.rivals if r.superseded_by)
    return linked


def _with_short(note: Note, short: str) -> Note:
    if note.short == short:
        return note
    return note._replace(short=short)


# -- short ids, and the meta of an index file --------------------------------------------------


def shorts(conn: sqlite3.Connection, note_ids: Iterable[str]) -> dict[str, str]:
    """The short ids of these notes (absent ids are left out)."""
    out: dict[str, str] = {}
    for chunk in db.chunks(sorted(set(note_ids))):
        out.update(conn.execute(f"SELECT id, short FROM notes WHERE id IN ({db.marks(chunk)})", chunk).fetchall())
    return out



def read_meta(path: "os.PathLike[str] | str", prefix: str) -> dict[str, str]:
    """The `meta` entries whose key starts with `prefix` of the index file at `path`, read
    through a read-only connection of its own (none: it cannot be read)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE ?", (prefix + "%",)).fetchall())
        finally:
            conn.close()
    except sqlite3.Error:
        return {}

