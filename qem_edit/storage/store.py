"""A memory: its log in the working tree (qem_edit.storage.logtree) and its local index.

`Store.open` finds the memory directory (`<workspace>/.qem`), opens the index beside it
(or, where nothing can be written, one in memory) and catches it up with the log.  Reads
go to the index.  A write (`Store.write`) holds the memory's write lock, catches up, lets
the caller decide through a `Transaction`, writes the new events as files (one event as
one file, several as one pack, so a check-in lands whole or not at all), then records
them in the index.  The log is append-only by construction: files are added, and only a
forget deletes one (a text).
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence, TypeVar

from ..base import errors, ids, resting
from ..base.faults import checkpoint
from ..base.model import (
    KIND_RANK,
    LIVE_STATES,
    NEW_NOTE,
    Draft,
    Drifted,
    Event,
    NewNote,
    Note,
    TextError,
    TransitionError,
    actor_problem,
    after_event,
    decide_create,
    decide_dispute,
    decide_drift,
    decide_forget,
    decide_fork,
    decide_move,
    decide_rule,
    decide_settle,
    note_from_created,
    reason_problem,
    replay,
)
from ..base.times import utc_now
from ..system import db
from ..system.workspace import CONFIG_NAME, INDEX_NAME
from . import starting
from .index import (
    EVENT_COLUMNS,
    NOTE_COLUMNS,
    Caught,
    Index,
    event_from_row,
    note_from_row,
    shorts,
)
from .logtree import (
    EVENTS,
    MAX_CLOCK,
    MAX_TEXT_BYTES,
    PACK_SPLIT_BYTES,
    PACKS,
    TEXTS,
    LogFileError,
    LogTree,
    TextRecord,
    event_bytes,
    pack_text_line,
    text_problem,
)
from .starting import COMMITTED, read_memory_id, remember

LIVE = ("active", "stale")  # the states of a note in force (model.LIVE_STATES), as bound into SQL
TEXTS_PER_PACK = 1000  # a forget rewrites the pack holding the text: keep packs of texts small
PACK_AT = 1000  # loose log files that make a write pack them (`qem pack` does it at will)
LEGACY_NAME = "memory.db"
LOCK_NAME = "write.lock"
START_LOCK_NAME = "start.lock"  # (ignored by .gitignore's /*.lock, as the write lock is)
BUILD_LOCK_NAME = "build.lock"  # held while a missing index is built whole (`_build_missing`)
WRITE_PATIENCE_S = db.WRITE_PATIENCE_S
T = TypeVar("T")


def _decided(decide: Callable[..., T], *args: object) -> T:
    """Run a domain decision; its refusal becomes the user's."""
    try:
        return decide(*args)
    except (TransitionError, TextError) as exc:
        raise errors.Refused(str(exc)) from None


class Transaction:
    """One write: reads the notes it decides on and turns decided drafts into events, which
    `flush` then writes to the log (one event as one file, several as one pack: they all
    land, or none) and records in the index."""

    def __init__(self, store: "Store", at: str) -> None:
        self.store = store
        self.at = at
        self.generation = store.index.generation
        self._notes: dict[str, Note] = {}
        self._tips: dict[str, list[str]] = {}
        self._clock = store.max_clock()
        self._new_short: int | None = None
        self._created: set[str] = set()  # the notes this write creates
        self._drafted: set[str] = set()  # the events recorded from drafts (checked for secrets as recorded)
        self.events: list[Event] = []
        self.texts: list[TextRecord] = []
        # many events (a load of a big dump): read when written, a batch at a time, from
        # these (events, texts); the index then catches up with the log streamed
        self.bulk: tuple[Callable[[], Iterable[Event]], Callable[[], Iterable[TextRecord]]] | None = None
        self.landed = False  # the events are in the log: the write stands, whatever follows
        self.agent = False  # the writer says it is an agent (qem_edit.storage.protect)
        self.allow_secret = False  # a person allows a secret in what is written (qem_edit.storage.secrets)

    def note(self, note_id: str) -> Note:
        if note_id not in self._notes:
            self._notes[note_id] = self.store.note(note_id)
        return self._notes[note_id]

    # -- acts -------------------------------------------------------------------------------

    def emit(self, note_id: str, type_: str, actor: str, reason: str | None = None,
             checkin: str | None = None, anchors: tuple[tuple[str, str], ...] | None = None) -> Event:
        """A lifecycle move (revoke, flag stale, reinstate, expire, promote) on one note;
        `anchors`: a reinstated note's anchors as they are now (model.decide_move)."""
        [event] = self.record([_decided(decide_move, self.note(note_id), type_, reason, anchors)], actor, checkin)
        return event

    def drift(self, note_id: str, drifted: list[Drifted], actor: str, checkin: str | None = None) -> list[Event]:
        """A note whose anchored content drifted: re-anchored where it moved, flagged stale
        where it changed or went (model.decide_drift)."""
        return self.record(_decided(decide_drift, self.note(note_id), drifted), actor, checkin)

    def create(self, new: NewNote, actor: str, reason: str | None = None, checkin: str | None = None) -> Note:
        old = self.note(new.supersedes) if new.supersedes is not None else None
        events = self.record(_decided(decide_create, new, old, reason, self._answered(new, old), self._bases(new),
                                      self.at), actor, checkin)
        return self._notes[events[0].id]

    def share(self, note_id: str, provenance: str, actor: str, reason: str, twin: Note | None = None) -> Note:
        """A private note made a team note (model.decide_share; `twin`: the team note in
        force with its text already, which then supersedes it); returns the team note."""
        from ..base.model import decide_share

        note = self.note(note_id)
        pointed = {i: self._held(i) for i in (note.answers, *note.rests_on) if i is not None}
        local = frozenset(i for i, n in pointed.items() if n is not None and n.local)
        successor = self._held(note.superseded_by) if note.superseded_by else None
        events = self.record(_decided(decide_share, note, provenance, reason, twin, local, successor), actor)
        return twin if twin is not None else self._notes[events[0].id]

    def _bases(self, new: NewNote) -> tuple[Note, ...]:
        """The notes a new note rests on that the log holds (a pointer to a note of a
        branch not merged here stands)."""
        found = (self._held(base) for base in new.rests_on)
        return tuple(n for n in found if n is not None)

    def _held(self, note_id: str) -> Note | None:
        """The note `note_id` where the log holds it, another session's note too (a write
        naming one is judged by its scope; None: not in this log)."""
        with self.store.seeing_every_session():
            try:
                return self.note(note_id)
            except errors.NoSuchNote:
                return None

    def _answered(self, new: NewNote, old: Note | None) -> Note | None:
        """The note a new note's `answers` names anew (not kept from its predecessor),
        where the log holds it (a pointer to a note of a branch not merged here stands)."""
        if new.answers is None or (old is not None and old.answers == new.answers):
            return None
        return self._held(new.answers)

    def forget(self, note_id: str, actor: str, reason: str) -> Event:
        [event] = self.record([_decided(decide_forget, self.note(note_id), reason)], actor)
        return event

    def dispute(self, a: str, b: str, actor: str, reason: str) -> str:
        """Record a dispute between two live notes (neither is edited); returns its id."""
        dispute_id = ids.nonce()
        self.record(_decided(decide_dispute, self.note(a), self.note(b), dispute_id, reason), actor)
        return dispute_id

    def rule(self, dispute_id: str, keep: str, actor: str, reason: str) -> None:
        """Close a dispute between two notes: `keep` stands, the other is revoked."""
        sides = self.store.dispute_sides(dispute_id)
        full = self.store.dispute_id(dispute_id)
        self.record(_decided(decide_rule, full, (self.note(sides[0]), self.note(sides[1])), keep, reason), actor)

    def rule_fork(self, parent: str, keep: str, actor: str, reason: str) -> None:
        """Settle a fork of `parent`: the successor `keep` stands, the other live ones are revoked."""
        successors = [self.note(n.id) for n in self.store.notes() if n.supersedes == parent]
        self.record(_decided(decide_fork, self.note(parent), successors, keep, reason), actor)

    def settle(self, note_id: str, keep: str, actor: str, reason: str) -> None:
        """Settle a note's concurrent changes: the side ending in event `keep` stands."""
        self.record([_decided(decide_settle, self.note(note_id), keep, reason)], actor)

    def flag_dependents(self) -> None:
        """Every note resting, transitively, on a note this write took out of plain force,
        flagged stale in this same write, its cause named (qem_edit.base.resting); and with them
        the notes the log owed a flag already (their base changed on another clone, or they
        came from one resting on a base out of force), unless that change is settled for
        them (resting.settled).  A level at a time: a flag's own event is the change the
        next level names."""
        if not self.events or self.bulk is not None:
            return
        # Another session's note resting on a base changed here is this clone's note too:
        # its flag is the change's consequence, not the writer's reading of that note.
        with self.store.seeing_every_session():
            self._flag_levels()

    def _flag_levels(self) -> None:
        new = {e.id: e for e in self.events}
        pending = self.store.owed_flags()
        pending += self._resting_on({e.note for e in self.events if e.type in resting.CHANGES})
        while pending:
            self._read_notes(n for pair in pending for n in pair)
            drafts: dict[str, Draft] = {}
            checkin = None
            for dependent, base_id in sorted(set(pending)):
                note, base = self.note(dependent), self.note(base_id)
                cause = (new.get(str(base.state_event)) or self.store.event(str(base.state_event))
                         if resting.owed(note, base) else None)
                if cause is None or dependent in drafts or (cause.id not in new and resting.settled(
                        itertools.chain(self.store.events(dependent), self._own(dependent)), base.id, cause)):
                    continue
                drafts[dependent] = resting.decide_flag(note, base, resting.root_of(base, cause), self._shown)
                checkin = checkin or (cause.checkin if cause.id in new else None)  # a change it made: its check-in
            if not drafts:
                return
            # the writer of this write flags, a level in one record
            new.update((e.id, e) for e in self.record(drafts.values(), self.events[0].actor, checkin))
            pending = self._resting_on(drafts)

    def _resting_on(self, base_ids: Iterable[str]) -> list[tuple[str, str]]:
        """The notes resting on `base_ids`: the index's, and those this write creates."""
        bases = set(base_ids)
        made = [(n, b) for n in sorted(self._created) for b in self._notes[n].rests_on if b in bases]
        return self.store.dependents(bases) + made

    def _read_notes(self, note_ids: Iterable[str]) -> None:
        """The notes this write has not read yet, read at once (a level of dependents)."""
        wanted = {n for n in note_ids if n not in self._notes}
        self._notes.update(self.store.notes_by_id(wanted))
        self._tips.update(self.store.tips_of(n for n in wanted if n not in self._tips))  # (a flag follows them)

    def _own(self, note_id: str) -> list[Event]:
        return [e for e in self.events if e.note == note_id]

    def _shown(self, note_id: str) -> str:
        try:
            return ids.shown(note_id, self.note(note_id).short or None)
        except errors.NoSuchNote:
            return ids.shown(note_id)

    # -- recording -----------------------------------------------------------------------------

    def _short_length(self) -> int:
        """The short-id length of a note created here: by the memory's size before this
        transaction (its index takes the new notes only when it is flushed), counted once."""
        if self._new_short is None:
            self._new_short = _created_short(self.store.count())
        return self._new_short

    def record(self, drafts: Iterable[Draft], actor: str, checkin: str | None = None) -> list[Event]:
        """Decided drafts as events (a created note's text beside), folded into the notes
        this transaction sees; written by `flush`."""
        from . import protect, secrets  # here: only a write reads the protection rule

        drafts = list(drafts)
        self._refuse_unreadable(drafts, actor)
        agent = protect.guarded_writer(self, drafts, actor)
        if self.allow_secret and agent:
            raise secrets.agent_may_not_allow(actor)
        created: str | None = None
        out = []
        for draft in drafts:
            if draft.note == NEW_NOTE:  # a move on the note this batch creates (its expiry, when born past its end)
                draft = draft._replace(note=created)
            data = {k: (created if v == NEW_NOTE else v) for k, v in draft.data.items()}
            if agent:
                data[protect.WRITER] = "agent"
            text = None
            if draft.type == "created":
                text = TextRecord("", ids.nonce(), draft.text or "")
                data.update(text=text.digest, nonce=ids.nonce(), short=self._short_length())
            self._clock += 1
            event = _event(draft, data, self.at, actor, checkin, self._clock, self._prev(draft.note))
            if secrets.checked(event, draft.text, self.allow_secret, agent):  # every field, the text a person allowed
                data[secrets.ALLOWED] = "allowed"
                event = _event(draft, data, self.at, actor, checkin, self._clock, self._prev(draft.note))
            if text is not None:
                created = event.id
                self.texts.append(TextRecord(event.id, text.key, text.text))
            self._fold_in(event, text)
            self._drafted.add(event.id)
            out.append(event)
            checkpoint("append")
        self.events += out
        return out

    def _refuse_unreadable(self, drafts: list[Draft], actor: str) -> None:
        """Refuse (BadInput) drafts whose events or texts a reader would set aside: the
        reader's rules (qem_edit.storage.logtree) are the writer's, so no write lands in the log
        only to be lost to the next fresh index."""
        problem = actor_problem(actor) or next(filter(None, (reason_problem(d.reason) for d in drafts)), None)
        if problem:
            raise errors.BadInput(f"{problem}; nothing was written")
        for draft in drafts:
            text = text_problem(TextRecord("", "0" * ids.ID_LENGTH, draft.text or "")) if draft.type == "created" else None
            if text:
                first = (draft.text or "")[:40].partition("\n")[0]
                raise errors.BadInput(f"note text {first!r}...: {text}; nothing was written")
        if self._clock + len(drafts) > MAX_CLOCK:
            held = self.store.clock_holder(self._clock)
            raise errors.BadInput(
                f"the log's latest clock is {self._clock} ({held or 'an event'}): a write takes the"
                f" next, past the {MAX_CLOCK} every reader takes; nothing was written",
                hint="no qem write makes such a clock: remove that file (`git rm`) if it came from another clone")

    def _prev(self, note_id: str | None) -> tuple[str, ...]:
        if note_id is None:
            return ()
        if note_id not in self._tips:
            self._tips[note_id] = self.store.tips(note_id)
        return tuple(self._tips[note_id])

    def _fold_in(self, event: Event, text: TextRecord | None) -> None:
        self._tips[event.note] = [event.id]
        if event.type == "created":
            self._notes[event.id] = note_from_created(event, text.text if text else None)
            self._created.add(event.id)
        else:
            self._notes[event.note] = after_event(self.note(event.note), event)._replace(rivals=())

    def flush(self) -> None:
        """Write the events (texts first; one event as its own file, several as one pack,
        whose rename is the moment they all exist) and record them in the index."""
        from .secrets import refuse_loaded

        if self.bulk is not None:
            if not self.allow_secret:  # loaded events: checked here, before a file is written
                refuse_loaded(self.bulk[0](), self.bulk[1]())
            self._flush_bulk(*self.bulk)
            return
        if not self.events:
            return
        if not self.allow_secret:  # drafted ones were checked as recorded; loaded ones here
            refuse_loaded([e for e in self.events if e.id not in self._drafted],
                          [t for t in self.texts if t.note not in self._drafted])
        tree, index = self.store.tree, self.store.index
        tree.ensure()
        local = {n for n, note in self._notes.items() if note.local}
        team_events, team_texts = [e for e in self.events if e.note not in local], [t for t in self.texts if t.note not in local]
        names: dict[str, tuple[list, list]] = {}
        if len(team_texts) == 1:
            names[tree.write_text(team_texts[0])] = ([], team_texts)
        for name, chunk in tree.write_text_packs(team_texts, TEXTS_PER_PACK) if len(team_texts) > 1 else ():
            names[name] = ([], chunk)
        checkpoint("write-before-commit")
        if len(team_events) == 1:
            names[tree.write_event(team_events[0])] = (team_events, [])
        elif team_events:
            for name, events in tree.write_event_packs(team_events):  # (one pack but for a load of a big dump)
                names[name] = (events, [])
        names.update(self._write_local(local))
        self.landed = True
        checkpoint("write-after-commit")
        touched: set[str] = set()
        for name, (events, texts) in names.items():
            index.record_file(name)
            touched |= index.add_records(name, events, texts)
        if any(e.type == "forgotten" for e in self.events):
            self.store.purge_texts({e.note for e in self.events if e.type == "forgotten"})
        index.refold(touched)
        index.bump()

    def _write_local(self, local: set[str]) -> dict[str, tuple[list, list]]:
        """The events and texts of this clone's own notes (private, session), each in a
        file of its own under the folder git ignores; never staged (qem_edit.storage.logtree)."""
        tree, names = self.store.tree, {}
        texts = [t for t in self.texts if t.note in local]
        events = [e for e in self.events if e.note in local]
        if texts or events:
            checkpoint("write-before-local")  # (a share's team note written, the private one's end not yet)
            tree.ensure_local()
        for text in texts:
            names[tree.write_text(text, local=True)] = ([], [text])
        for event in events:
            names[tree.write_event(event, local=True)] = ([event], [])
        return names

    def _flush_bulk(self, events: Callable[[], Iterable[Event]], texts: Callable[[], Iterable[TextRecord]]) -> None:
        """Many events, written as `flush` writes them (texts first, in packs of
        TEXTS_PER_PACK; the events in packs of at most PACK_SPLIT_BYTES) but read a batch
        at a time, each batch staged for the index as it is written; then the index takes
        them in, streamed (qem_edit.storage.index)."""
        tree, index = self.store.tree, self.store.index
        tree.ensure()
        index.start_staging()
        names: list[str] = []
        chunk: list[TextRecord] = []
        size = 0
        for text in itertools.chain(texts(), [None]):
            if text is not None:
                chunk.append(text)
                size += len(pack_text_line(text))  # (each within MAX_TEXT_BYTES: a pack within PACK_SPLIT_BYTES)
            if len(chunk) == TEXTS_PER_PACK or size > PACK_SPLIT_BYTES - MAX_TEXT_BYTES or (text is None and chunk):
                alone = text is None and not names and len(chunk) == 1
                names.append(tree.write_text(chunk[0]) if alone else
                             tree.write_pack("t", [pack_text_line(t) for t in chunk]))
                index.stage_written(names[-1], [], chunk)
                chunk, size = [], 0
        checkpoint("write-before-commit")
        names += self._write_staged_packs(events())
        self.landed = True
        checkpoint("write-after-commit")
        index.take_staged(names)
        leftover = self.store.forgotten_texts()  # a loaded forget of a note whose text is here
        if leftover:
            self.store.purge_texts({note for note, _ in leftover})

    def _write_staged_packs(self, events: Iterable[Event]) -> list[str]:
        """`events` as packs of at most PACK_SPLIT_BYTES (as LogTree.write_event_packs
        splits them), each batch staged for the index as it is read."""
        tree, index = self.store.tree, self.store.index
        names: list[str] = []
        lines: list[bytes] = []
        batch: list[Event] = []
        size = 0
        for event in itertools.chain(events, [None]):
            line = event_bytes(event) if event is not None else b""
            if lines and (event is None or size + len(line) > PACK_SPLIT_BYTES):
                index.stage_written(None, batch, [])
                batch = []
                names.append(tree.write_pack("e", lines))
                index.name_staged(names[-1])
                lines, size = [], 0
            if event is None:
                break
            lines.append(line)
            size += len(line)
            batch.append(event)
            if len(batch) >= 5000:
                index.stage_written(None, batch, [])
                batch = []
        return names


def _as_writer(work: Callable[[Transaction], T], agent: bool, allow_secret: bool = False) -> Callable[[Transaction], T]:
    def run(tx: Transaction) -> T:
        tx.agent, tx.allow_secret = agent, allow_secret
        return work(tx)

    return run


def _created_short(count: int) -> int:
    """The short-id length a new note is created with: by the memory's size, or, for
    tests that force short ids to collide, `QEM_SHORT_LENGTH`."""
    forced = os.environ.get("QEM_SHORT_LENGTH", "")
    if forced.isdigit() and int(forced) >= 1:
        return int(forced)
    return ids.short_length(count)


def _event(draft: Draft, data: dict, at: str, actor: str, checkin: str | None, clock: int, prev: tuple) -> Event:
    """An event with its id: the hash of its stored bytes."""
    provisional = Event("", draft.note or "", draft.type, at, actor, draft.reason, checkin, data, clock, prev)
    event_id = ids.content_id(event_bytes(provisional))
    return Event(event_id, draft.note or event_id, draft.type, at, actor, draft.reason, checkin, data, clock, prev)


class WriteMark(NamedTuple):
    """What this process's last write changed in the index: the generation before and
    after it, each touched note's item as it was before (None: it had none), and whether
    no note was disputed or forked before it (then every item stands alone, and the
    mirror can be patched by the changed items; see renderer.patch)."""

    before: int
    after: int
    replaced: dict[str, tuple[int, bytes] | None]
    calm: bool


class Store:
    """One memory.  Open it with `Store.open(memory_dir)`."""

    def __init__(self, root: Path, conn: sqlite3.Connection, index_path: Path | None) -> None:
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
    def open(cls, root: Path, *, create: bool = False, write: bool = False) -> "Store":
        """The memory at `root` (`<workspace>/.qem`); `create` makes a missing one,
        `write` says the command means to write (a memory that can only be read is then
        refused up front)."""
        root = Path(root)
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
    def _with_index(cls, root: Path, write: bool) -> "Store":
        path = root / INDEX_NAME
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
            if write:
                raise errors.StoreUnwritable(f"{root} is read-only here ({exc}); nothing was written") from None
        # Nothing can be written here (a read-only mount): an index in memory, built now.
        return cls(root, _open_index_in_memory(), None)

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
                    f"{self.root / CONFIG_NAME} names no memory id ([memory] id = ...), so no MEMORY.md can be"
                    " told to be this memory's",
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
        from ..system.files import LockTimeout, locked
        from . import protect

        as_agent = protect.writer_is_agent(agent)
        work = _as_writer(work, as_agent, allow_secret)
        try:
            with locked(self.root / LOCK_NAME, WRITE_PATIENCE_S):
                return db.patiently(lambda: self._write_once(work, at or utc_now()), self.index_path or self.root, "write")
        except LockTimeout:
            raise errors.StoreBusy(f"{self.root} stayed locked by another writer for over"
                                   f" {int(WRITE_PATIENCE_S)} s; nothing was written") from None
        except UnicodeEncodeError:
            raise errors.BadInput("an argument holds bytes that are not UTF-8; nothing was written") from None
        except OSError as exc:
            where = exc.filename or self.root
            raise errors.StoreUnwritable(f"cannot write {where}: {exc.strerror or exc}; nothing was written") from None

    def _write_once(self, work: Callable[[Transaction], T], at: str) -> T:
        tx: Transaction | None = None
        try:
            with db.transaction(self.conn):
                checkpoint("write-begin")
                self.index.sync()
                leftover = self.forgotten_texts()  # brought back by a merge: forget still forgets
                if leftover:
                    self.purge_texts({note for note, _ in leftover})
                before, calm = self.index.generation, not self.has_disagreements()
                self.index.replaced = {}
                tx = Transaction(self, at)
                result = work(tx)
                tx.flag_dependents()
                tx.flush()
                if self._loose() > PACK_AT:
                    self._pack_now()
                self.index.note_stamp()
                mark = WriteMark(before, self.index.generation, self.index.replaced or {}, calm and tx.bulk is None)
                self.index.replaced = None
        except Exception:
            self.index.replaced = None
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

    def head(self) -> int:
        """The index's generation: it moves whenever the log it reflects does."""
        return self._guarded(lambda: self.index.generation)

    def moment(self, generation: int) -> str:
        """`generation` of this very index (not one rebuilt since) as one string: a
        rendering made at it is the rendering for as long as `moment(head())` equals it."""
        return f"{self._guarded(lambda: self.index.meta('index_id'))}:{generation}"

    def items_changed_since(self, moment: str) -> list[str] | None:
        """The notes whose rendered items changed since `moment` (a `moment` of this very
        index), in id order; None when that cannot be told (another index, or a replay of
        every note since)."""
        index_id, _, generation = moment.rpartition(":")
        if not generation.isdigit():
            return None
        return self._guarded(lambda: self.index.items_changed_since(int(generation))
                             if self.index.meta("index_id") == index_id else None)

    def items_now(self, note_ids: Iterable[str]) -> dict[str, tuple[str, bytes | None]]:
        """Each of these notes' kind and rendered item now (None: it has none)."""
        notes = self.notes_by_id(note_ids)
        items = self._guarded(lambda: self.index.changed_items(notes))
        return {i: (n.kind, items[i][1] if i in items else None) for i, n in notes.items()}

    def max_clock(self) -> int:
        return self._read("SELECT coalesce(max(clock), 0) FROM events")[0][0]

    def tips(self, note_id: str) -> list[str]:
        """The note's latest events: those no other event of the note follows."""
        return self.tips_of([note_id]).get(note_id, [])

    def tips_of(self, note_ids: Iterable[str]) -> dict[str, list[str]]:
        """Each note's latest events (`tips`), read at once for many notes."""
        rows: dict[str, list[tuple[str, str]]] = {}
        for chunk in db.chunks(sorted(set(note_ids))):
            for event_id, note, prev in self._read(f"SELECT id, note, prev FROM events WHERE note IN ({db.marks(chunk)})", chunk):
                rows.setdefault(note, []).append((event_id, prev))
        out = {}
        for note, events in rows.items():
            followed = {p for _, prev in events for p in json.loads(prev)}
            out[note] = sorted(e for e, _ in events if e not in followed)
        return out

    def note(self, note_id: str) -> Note:
        rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes WHERE id = ?", (note_id,))
        if not rows:
            raise errors.NoSuchNote(f"no note #{note_id} in this memory")
        note = note_from_row(rows[0])
        if note.session is not None and note.id in self.hidden():
            raise errors.NoSuchNote(f"note #{note.shown} is a session note of another agent session; it holds only"
                                    " there", hint="read it in its session (QEM_SESSION=ID, as its hooks do)")
        return note

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

    @contextmanager
    def seeing_every_session(self) -> Iterator[None]:
        """Reads that see every session's notes while it lasts: a write judging a note it
        names by its scope, or flagging this clone's notes whichever session wrote them."""
        every, self.every_session = self.every_session, True
        try:
            yield
        finally:
            self.every_session = every

    def session_notes(self, session: str | None = None) -> list[Note]:
        """This clone's session notes in force (of one session, where named), in order."""
        rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes INDEXED BY notes_sessions WHERE scope = 'session'"
                          f" AND {_IN_FORCE} ORDER BY kind_rank, id")
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
        if not text or not ids.PREFIX_RE.match(text):
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

    def anchors_in_force(self, paths: Iterable[str] | None = None, *, folder: str | None = None,
                         states: tuple[str, ...] = LIVE) -> list[tuple[str, str, str]]:
        """(note, path, object id) of every anchor of the notes in these states (in force,
        unless told), by path, then note; `paths`: only those paths; `folder`: only that
        path and the paths inside the folder it names (their range in the index on paths:
        qem_edit.system.anchors.folder_range)."""
        sql = f"SELECT a.note, a.path, a.oid FROM anchors a JOIN notes n ON n.id = a.note WHERE n.state IN" \
              f" ({db.marks(states)})"
        if folder is not None:
            from ..system.anchors import folder_range

            return self._seen(self._read(sql + " AND (a.path = ? OR (a.path > ? AND a.path < ?)) ORDER BY a.path,"
                                         " a.note", [*states, folder, *folder_range(folder)]))
        if paths is None:
            return self._seen(self._read(sql + " ORDER BY a.path, a.note", states))
        out: list[tuple[str, str, str]] = []
        for chunk in db.chunks(sorted(set(paths))):
            out += self._read(sql + f" AND a.path IN ({db.marks(chunk)})", [*states, *chunk])
        return sorted(self._seen(out), key=lambda row: (row[1], row[0]))

    def due_at_moment(self, moment: str, bundle: Mapping[str, Iterable[str]]) -> list[tuple[str, str, str, bool]]:
        """(id, kind, priority, declared) of the notes in force a lifecycle moment fires
        (qem_edit.base.triggers): those declaring it (`@on:`, declared True), and those of the
        kinds and priorities `bundle` gives ({kind: priorities}) that declare no moment of
        their own.  No text is read."""
        rows = self._read(f"SELECT id, kind, priority, 1 FROM notes WHERE {_IN_FORCE} AND id IN"
                          " (SELECT note FROM triggers WHERE name = 'on' AND value = ?)", (moment,))
        for kind, priorities in bundle.items():
            wanted = list(priorities)
            rows += self._read(
                f"SELECT id, kind, priority, 0 FROM notes INDEXED BY notes_in_order WHERE kind_rank = ? AND {_IN_FORCE}"
                f" AND priority IN ({db.marks(wanted)}) AND (triggers = '[]' OR id NOT IN"
                " (SELECT note FROM triggers WHERE name = 'on'))", (KIND_RANK[kind], *wanted))
        return [(n, k, p, bool(d)) for n, k, p, d in self._seen(rows)]

    def order_keys(self, note_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """Each note's (kind, priority), the fields its order needs (absent ids left out)."""
        out: dict[str, tuple[str, str]] = {}
        for chunk in db.chunks(sorted(set(note_ids))):
            out.update((n, (k, p)) for n, k, p in self._read(
                f"SELECT id, kind, priority FROM notes WHERE id IN ({db.marks(chunk)})", chunk))
        return out

    def last_changes(self, note_ids: Iterable[str]) -> dict[str, str]:
        """Each note's last change as a session ledger compares it: the event that put it in
        its state, else its own id (absent ids are left out)."""
        out: dict[str, str] = {}
        for chunk in db.chunks(sorted(set(note_ids))):
            out.update(self._read(f"SELECT id, coalesce(state_event, id) FROM notes WHERE id IN ({db.marks(chunk)})", chunk))
        return out

    def patterns_in_force(self, name: str) -> list[tuple[str, str]]:
        """(pattern, note) of every `path` or `run` trigger of the notes in force."""
        return self._seen(self._read(f"SELECT t.value, t.note FROM triggers t JOIN notes n ON n.id = t.note"
                                     f" WHERE t.name = ? AND n.{_IN_FORCE}", (name,)), 1)

    def terms_in_force(self, keys: Iterable[str]) -> list[tuple[str, str]]:
        """(term, note) of the backticked terms of the notes in force whose key is one of `keys`."""
        out: list[tuple[str, str]] = []
        for chunk in db.chunks(sorted(set(keys))):
            out += self._read(f"SELECT t.term, t.note FROM terms t JOIN notes n ON n.id = t.note"
                              f" WHERE t.key IN ({db.marks(chunk)}) AND n.{_IN_FORCE}", chunk)
        return self._seen(out, 1)

    def anchors_of_notes(self, note_ids: Iterable[str], *, states: tuple[str, ...] = LIVE) -> list[tuple[str, str, str]]:
        """(note, path, object id) of every anchor of these notes (of those in these states)."""
        out: list[tuple[str, str, str]] = []
        for chunk in db.chunks(sorted(set(note_ids))):
            out += self._read(f"SELECT a.note, a.path, a.oid FROM anchors a JOIN notes n ON n.id = a.note"
                              f" WHERE n.state IN ({db.marks(states)}) AND a.note IN ({db.marks(chunk)})",
                              [*states, *chunk])
        return sorted(out, key=lambda row: (row[1], row[0]))

    def files_of_events(self, event_ids: Iterable[str]) -> set[str]:
        """The log files (paths under the memory's folder) that hold these events."""
        out: set[str] = set()
        for chunk in db.chunks(sorted(set(event_ids))):
            out.update(f for (f,) in self._read(f"SELECT file FROM event_files WHERE event IN ({db.marks(chunk)})", chunk))
        return out

    def files_of_texts(self, note_ids: Iterable[str]) -> set[str]:
        """The log files (paths under the memory's folder) that hold these notes' texts."""
        out: set[str] = set()
        for chunk in db.chunks(sorted(set(note_ids))):
            out.update(f for (f,) in self._read(f"SELECT file FROM texts WHERE note IN ({db.marks(chunk)})", chunk))
        return out

    def due(self, now: str) -> list[Note]:
        """The notes in force past their end at `now` (a UTC time), in the projection's order."""
        rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes INDEXED BY notes_by_end WHERE expires IS NOT NULL"
                          " AND state IN ('active', 'stale') AND expires <= ? ORDER BY kind_rank, id", (now,))
        return [note_from_row(r) for r in rows]

    def requests(self, live: bool = True) -> list[Note]:
        """The requests (notes naming who owes them, or a deadline), in force only where
        `live`, in the projection's order."""
        where = " AND state IN ('active', 'stale')" if live else ""
        rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes INDEXED BY notes_requests"
                          f" WHERE (seat IS NOT NULL OR due IS NOT NULL){where} ORDER BY kind_rank, id")
        return [note_from_row(r) for r in self._seen(rows)]

    def answers_to(self, note_ids: Iterable[str]) -> dict[str, list[Note]]:
        """For each of `note_ids`, the notes whose `answers` names it (any state)."""
        out: dict[str, list[Note]] = {}
        for chunk in db.chunks(sorted(set(note_ids))):
            rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes WHERE answers IN ({db.marks(chunk)})", chunk)
            for note in map(note_from_row, self._seen(rows)):
                out.setdefault(str(note.answers), []).append(note)
        return out

    def dependents(self, base_ids: Iterable[str]) -> list[tuple[str, str]]:
        """The notes resting on any of `base_ids` (qem_edit.base.resting), as (note, base) pairs in
        order."""
        out: list[tuple[str, str]] = []
        for chunk in db.chunks(sorted(set(base_ids))):
            out += self._read(f"SELECT note, base FROM rests WHERE base IN ({db.marks(chunk)})", chunk)
        return sorted(out)

    def owed_flags(self) -> list[tuple[str, str]]:
        """The notes in plain force resting on a note that is not (a base that changed on
        another clone, a note resting on one that came out of force there), as (note, base)
        pairs in order; whether each was flagged for that change already is the caller's
        (resting.flagged_for)."""
        return [tuple(r) for r in self._read(  # type: ignore[misc]
            "SELECT r.note, r.base FROM rests r JOIN notes d ON d.id = r.note JOIN notes b ON b.id = r.base"
            " WHERE d.state = 'active' AND b.state != 'active' ORDER BY r.note, r.base")]

    def event(self, event_id: str) -> Event | None:
        """One event by its id (None: not in this log)."""
        rows = self._read(f"SELECT {EVENT_COLUMNS} FROM events WHERE id = ?", (event_id,))
        return event_from_row(rows[0]) if rows else None

    def dangling_answers(self) -> list[Note]:
        """The answers whose request is not in this log (a branch not merged here)."""
        rows = self._read(f"SELECT {NOTE_COLUMNS} FROM notes AS n INDEXED BY notes_by_answered WHERE answers IS NOT NULL"
                          " AND NOT EXISTS (SELECT 1 FROM notes p WHERE p.id = n.answers) ORDER BY kind_rank, id")
        return [note_from_row(r) for r in rows]

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

    def events_with_texts(self) -> Iterator[tuple[Event, str | None]]:
        """Every event in order (clock, then id), read a row at a time, each creation with
        its note's text as `key NUL text` (None: a forgotten text, or one its note's hash
        disowns, or not a creation).  The team's notes only: this clone's own (private,
        session) never leave it, in a dump as in a commit."""
        cursor = self._guarded(lambda: self.conn.execute(
            f"SELECT {', '.join('e.' + c.strip() for c in EVENT_COLUMNS.split(','))},"
            " CASE WHEN e.type = 'created' THEN (SELECT t.key || char(0) || t.text FROM texts t JOIN notes n"
            " ON n.id = t.note WHERE t.note = e.id AND n.state != 'forgotten'"  # a text a merge brought back stays forgotten
            " AND t.digest = n.text_hash LIMIT 1) END"  # and one its note's hash disowns is not its text
            " FROM events e WHERE e.note NOT IN (SELECT id FROM notes WHERE scope != 'team') ORDER BY e.clock, e.id"))
        while True:
            rows = self._guarded(lambda: cursor.fetchmany(2000))
            if not rows:
                return
            for row in rows:
                yield event_from_row(row[:-1]), row[-1]

    def events_of_checkins(self, checkins: Iterable[str]) -> list[Event]:
        rows: list[tuple] = []
        for chunk in db.chunks(sorted(set(checkins))):
            rows += self._read(f"SELECT {EVENT_COLUMNS} FROM events WHERE checkin IN ({db.marks(chunk)})", chunk)
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

    def dispute_id(self, given: str) -> str:
        rows = self._read(
            "SELECT DISTINCT json_extract(data, '$.dispute') FROM events WHERE type = 'disputed'"
            " AND json_extract(data, '$.dispute') >= ? AND json_extract(data, '$.dispute') < ?", (given, given + "{"))
        if len(rows) != 1:
            what = "no dispute" if not rows else f"{len(rows)} disputes start with"
            raise errors.NoSuchNote(f"{what} {given} in this memory")
        return rows[0][0]

    def dispute_sides(self, given: str) -> tuple[str, str]:
        """The two notes of an open or closed dispute between notes, by its id or a prefix."""
        rows = self._read(
            "SELECT DISTINCT json_extract(data, '$.dispute'), note FROM events WHERE type = 'disputed'"
            " AND json_extract(data, '$.dispute') >= ? AND json_extract(data, '$.dispute') < ? ORDER BY 2",
            (given, given + "{"),
        )
        disputes = sorted({d for d, _ in rows})
        if len(disputes) != 1:
            what = "no dispute" if not disputes else f"{len(disputes)} disputes start with"
            raise errors.NoSuchNote(f"{what} {given} in this memory")
        sides = sorted(n for d, n in rows if d == disputes[0])
        if len(sides) != 2:
            raise errors.NoSuchNote(f"dispute {given} does not have two sides in this memory")
        return sides[0], sides[1]

    # -- the item cache ----------------------------------------------------------------

    def export_items(self, kinds: Iterable[str], *, with_ids: bool = False) -> dict[str, list]:
        from .item_reads import items_by_kind  # here, as every feature's reads: a hook imports none it does not ask

        return self._guarded(lambda: items_by_kind(self.conn, kinds, with_ids=with_ids))

    def iter_items(self, kind: str) -> Iterator[bytes]:
        """One kind's rendered items as UTF-8 bytes, in id order, read a batch at a time
        (inside `reading`, so that every kind comes from one snapshot)."""
        cursor = self._guarded(lambda: self.conn.execute(
            "SELECT CAST(item AS BLOB) FROM items WHERE kind_rank = ? ORDER BY id", (KIND_RANK[kind],)))
        while rows := self._guarded(lambda: cursor.fetchmany(2000)):
            for (item,) in rows:
                yield item

    def items_of_notes(self, note_ids: Iterable[str]) -> dict[str, list[bytes]]:
        from .item_reads import items_of_notes

        return self._guarded(lambda: items_of_notes(self.conn, note_ids))

    def select_notes(self, where: Sequence[str], params: Sequence[object]) -> list[str]:
        """The ids of the notes meeting every condition (SQL over the notes table's
        columns, written by qem_edit.reads.query), in the projection's order."""
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        return [row[0] for row in self._seen(self._read(f"SELECT id FROM notes{clause} ORDER BY kind_rank, id", params))]

    def has_disagreements(self) -> bool:
        """Whether any note is disputed or forked (export then marks them, from the graph).
        Asked once per moment of the index (the answer reads every supersession): a
        command asks it again and again as it renders and compares."""
        moment = self.moment(self.head())
        if self._calm_known is not None and self._calm_known[0] == moment:
            return self._calm_known[1]
        found = bool(self._read(
            "SELECT 1 FROM notes INDEXED BY notes_disagreeing WHERE disputes != '[]' OR rivals != '[]' UNION ALL SELECT 1 FROM"
            " (SELECT supersedes FROM notes WHERE supersedes IS NOT NULL"
            "  GROUP BY supersedes HAVING count(*) > 1) LIMIT 1"))
        if not self.conn.in_transaction or self._reading:  # (inside a write, the index may not match its moment yet)
            self._calm_known = (moment, found)
        return found

    # -- what the other modules ask of the index ---------------------------------------------

    def same_text_in_force(self, note_ids: list[str]) -> Iterator[tuple[str, list[str]]]:
        """(note, the other notes in force whose text is the same) for each of `note_ids`
        (texts are stored normalized, so this is sameness after normalization)."""
        for chunk in db.chunks(sorted(set(note_ids))):
            for note_id, text in self._read(f"SELECT id, text FROM notes WHERE id IN ({db.marks(chunk)})", chunk):
                rows = self._read(f"SELECT id, text FROM notes WHERE substr(text, 1, 48) = ? AND {_IN_FORCE}",
                                  (text[:48],))  # (the index's search: a term on the whole text would make it a scan)
                yield note_id, [other for other, same in rows if same == text and other != note_id]

    def texts_held(self, texts: Iterable[str]) -> set[str]:
        """Which of `texts` (normalized, as texts are stored) some note holds, in any state
        but forgotten (a forgotten note's text is gone): an import proposes none of them again."""
        wanted, held = sorted(set(texts)), set()
        for chunk in db.chunks(wanted):
            held.update(row[0] for row in self._read(f"SELECT DISTINCT text FROM notes WHERE text IN ({db.marks(chunk)})", chunk))
        return held

    def latest_at(self) -> str | None:
        """When the latest event was written (None: the log holds none)."""
        return self._read("SELECT max(at) FROM events")[0][0]

    def forked_in_force(self) -> set[str]:
        """The notes in force that supersede a note another note in force supersedes too."""
        return {note for kids in self.forks_in_force().values() for note in kids}

    def forks_in_force(self) -> dict[str, list[str]]:
        """Each note two or more notes in force supersede → those notes, in id order."""
        out: dict[str, list[str]] = {}
        for note, parent in self._read(
                f"SELECT id, supersedes FROM notes WHERE {_IN_FORCE} AND supersedes IN (SELECT supersedes FROM notes"
                f" INDEXED BY notes_by_parent WHERE supersedes IS NOT NULL AND {_IN_FORCE} GROUP BY supersedes"
                " HAVING count(*) > 1) ORDER BY id"):
            out.setdefault(parent, []).append(note)
        return out

    def forks_among(self, parents: Iterable[str]) -> dict[str, list[str]]:
        """Of these notes, each two or more notes in force supersede → those notes, in id
        order (read by the index on parents: the cost follows the notes asked about)."""
        out: dict[str, list[str]] = {}
        for chunk in db.chunks(sorted(set(parents))):
            for note, parent in self._read(
                    f"SELECT id, supersedes FROM notes INDEXED BY notes_by_parent WHERE supersedes IN"
                    f" ({db.marks(chunk)}) AND {_IN_FORCE} ORDER BY supersedes, id", chunk):
                out.setdefault(parent, []).append(note)
        return {parent: kids for parent, kids in out.items() if len(kids) > 1}

    def disagreeing(self) -> list[Note]:
        """The notes, in any state, with disputes or concurrent changes that disagree (few:
        read by the index made for them), in id order."""
        return [note_from_row(r) for r in self._read(
            f"SELECT {NOTE_COLUMNS} FROM notes INDEXED BY notes_disagreeing WHERE disputes != '[]' OR rivals != '[]'"
            " ORDER BY id")]

    def count_in_force_besides(self, kind: str) -> int:
        """The notes in force of every kind but `kind`."""
        counted = self._read(f"SELECT count(*) FROM notes WHERE kind_rank != ? AND {_IN_FORCE}", (KIND_RANK[kind],))[0][0]
        hidden = self.hidden()
        return counted - sum(1 for n in self.session_notes() if n.id in hidden and n.kind != kind) if hidden else counted

    def rows_in_force(self, kind: str, priority: str) -> Iterator[tuple]:
        """The rows (NOTE_COLUMNS) of the notes in force of one kind and priority, in id
        order, read lazily along the index's (kind rank, id) order (inside `reading`)."""
        hidden = self.hidden()
        for row in self.conn.execute(
                f"SELECT {NOTE_COLUMNS} FROM notes INDEXED BY notes_in_order WHERE kind_rank = ? AND priority = ?"
                f" AND {_IN_FORCE} ORDER BY id", (KIND_RANK[kind], priority)):
            if row[0] not in hidden:
                yield row

    def holders(self, names: list[str]) -> Iterator[tuple[str, str, str]]:
        """For every event and text that one of the log files `names` holds: (the event's
        id, or `t:` and the note for a text; a file holding it; its note), a row per file,
        read a chunk of names at a time."""
        for chunk in db.chunks(names):
            marks = db.marks(chunk)
            yield from self._read(f"SELECT e.event, e.file, v.note FROM event_files e JOIN events v ON v.id = e.event"
                                  f" WHERE e.event IN (SELECT event FROM event_files WHERE file IN ({marks}))", chunk)
            yield from self._read(f"SELECT 't:' || note, file, note FROM texts WHERE note IN"
                                  f" (SELECT note FROM texts WHERE file IN ({marks}))", chunk)

    def shorts_not_shown(self, shorts_json: str) -> list[str]:
        """Of the short ids in `shorts_json` (a JSON array), those no note shows or whose
        note has no item (a note whose text is missing has none): read from covering
        indexes, no note row."""
        return [short for (short,) in self._read(_NOT_SHOWN, (shorts_json,))]

    def text_missing(self, short: str) -> bool | None:
        """Whether the note shown as `short` has lost its text (None: no such note); a short
        id this clone shows longer (or shorter) is taken as a prefix of an id."""
        missing = "text IS NULL AND state != 'forgotten'"
        rows = self._read(f"SELECT {missing} FROM notes WHERE short = ? LIMIT 1", (short,))
        if not rows:
            rows = self._read(f"SELECT {missing} FROM notes WHERE id >= ? AND id < ? LIMIT 1", (short, short + "{"))
        return None if not rows else bool(rows[0][0])

    def note_of_event(self, event_id: str) -> str | None:
        rows = self._read("SELECT note FROM events WHERE id = ?", (event_id,))
        return rows[0][0] if rows else None

    def secret_allowed(self, event_id: str) -> bool:
        """Whether a person allowed the secret in what event `event_id` wrote (qem_edit.storage.secrets)."""
        from .verify_reads import secret_allowed

        return self._guarded(lambda: secret_allowed(self.conn, event_id))

    def shorts(self, note_ids: Iterable[str]) -> dict[str, str]:
        """The short ids of these notes; none where the index cannot be read (a damaged
        index names no note: a message then shows the id's first 8 characters)."""
        try:
            return shorts(self.conn, note_ids)
        except sqlite3.Error:
            return {}

    def imported_from_vectr(self, number: int) -> list[tuple[str, str | None]]:
        """(note, vectr workspace) of every note imported from vectr's note `number`."""
        return self._read("SELECT id, json_extract(data, '$.vectr.workspace') FROM events WHERE type = 'created'"
                          " AND json_extract(data, '$.vectr.id') = ?", (number,))

    def clock_holder(self, clock: int) -> str | None:
        """A log file holding an event with this clock (the first by name)."""
        rows = self._read("SELECT f.file FROM events e JOIN event_files f ON f.event = e.id"
                          " WHERE e.clock = ? ORDER BY f.file LIMIT 1", (clock,))
        return rows[0][0] if rows else None

    @contextmanager
    def attached(self, path: Path) -> Iterator[int]:
        """A staged dump (qem_edit.storage.staging.StagedLines, `path` its file) attached to the index, its lines the index holds
        marked as not new: how many are new."""
        self.conn.execute("ATTACH DATABASE ? AS staged", (str(path),))
        try:
            self.conn.execute("UPDATE staged.lines SET new = 0 WHERE id IN (SELECT id FROM main.events)")
            yield self._read("SELECT count(*) FROM staged.lines WHERE new")[0][0]
        finally:
            self.conn.execute("DETACH DATABASE staged")

    # -- the local caches export keeps in the index (none where it cannot be written) -----------

    def remembered(self, key: str) -> str | None:
        """A cache entry of the index's `meta` (None: none, or the index cannot be read)."""
        try:
            return self.index.meta(key)
        except sqlite3.Error:
            return None

    def remembered_under(self, prefix: str) -> dict[str, str] | None:
        """Every cache entry whose key starts with `prefix` (None: the index cannot be read)."""
        try:
            return dict(self.conn.execute("SELECT key, value FROM meta WHERE key LIKE ?", (prefix + "%",)).fetchall())
        except sqlite3.Error:
            return None

    def remember(self, key: str, value: str) -> None:
        """Keep a cache entry in the index's `meta`; a read-only index keeps nothing."""
        try:
            self.index.set_meta(key, value)
        except sqlite3.Error:
            pass

    def note_rendering(self, digest: str, kept: int) -> None:
        """Record a rendering's hash (the latest `kept` are kept), on a connection of its
        own: the store's may be inside the read transaction the rendering streams from."""
        try:
            conn = db.connect(str(self.index_path)) if self.index_path is not None else self.conn
            try:
                conn.execute("INSERT OR REPLACE INTO renderings (hash) VALUES (?)", (digest,))
                conn.execute("DELETE FROM renderings WHERE rowid <= (SELECT max(rowid) FROM renderings) - ?", (kept,))
            finally:
                if conn is not self.conn:
                    conn.close()
        except sqlite3.Error:
            pass  # then such a file reads as hand-edited: `export --force`

    def rendered(self, digest: str) -> bool:
        """Whether a rendering with this hash was recorded (an index that cannot be read knows nothing)."""
        try:
            return self.conn.execute("SELECT 1 FROM renderings WHERE hash = ?", (digest,)).fetchone() is not None
        except sqlite3.Error:
            return False

    @contextmanager
    def reading(self) -> Iterator["Store"]:
        """A read transaction: every read inside sees one snapshot of the index."""
        self.conn.execute("BEGIN")
        self._reading = True
        try:
            yield self
        except sqlite3.DatabaseError as exc:
            raise db.translate(exc, self.index_path or self.root, "read") from None
        finally:
            self._reading = False
            try:
                self.conn.execute("COMMIT")
            except sqlite3.DatabaseError:
                pass

    # -- checking ----------------------------------------------------------------------

    def set_aside(self) -> list[str]:
        """Every log file the index could not read, with why."""
        return [problem for (problem,) in self._read("SELECT problem FROM files WHERE problem IS NOT NULL ORDER BY name")]

    def differences_from(self, fresh: sqlite3.Connection) -> list[str]:
        """Where the index differs from `fresh`, an index of the log replayed afresh
        (qem_edit.storage.verify_reads.differences); a damaged index, or one that cannot be read, says so."""
        try:
            damage = self.conn.execute("PRAGMA quick_check").fetchone()[0]
            if damage != "ok":
                return [f"the index is damaged ({damage}); `qem verify --repair` rebuilds it"]
            from .verify_reads import differences

            return differences(self.conn, fresh)
        except sqlite3.DatabaseError as exc:
            return [f"the index cannot be read ({exc}); `qem verify --repair` rebuilds it"]

    def note_problems(self) -> list[tuple[str, str]]:
        """(short id, its problems as a JSON array) of every note the fold found problems in, in id order."""
        return self._read("SELECT short, problems FROM notes WHERE problems != '[]' ORDER BY id")

    def events_without_note(self) -> list[tuple[str, str]]:
        """(event, note) of every event whose note's creation the log does not hold, in id order."""
        return self._read(
            "SELECT e.id, e.note FROM events e LEFT JOIN notes n ON n.id = e.note WHERE n.id IS NULL ORDER BY e.id")

    def textless(self) -> list[str]:
        """The short ids of the notes whose text is missing (and not forgotten), in id order."""
        return [short for (short,) in self._read(
            "SELECT n.short FROM notes n WHERE n.state != 'forgotten' AND n.text IS NULL ORDER BY n.id")]

    def claimed_numbers(self) -> list[tuple[int, int]]:
        """(old number, how many notes claim it) for every old number more than one note claims."""
        return self._read("SELECT alias, count(*) FROM notes WHERE alias IS NOT NULL GROUP BY alias HAVING count(*) > 1")

    def texts_without_note(self) -> list[tuple[str, str]]:
        """(note, file) of every text whose note's creation the log does not hold, by file."""
        return self._read("SELECT t.note, t.file FROM texts t LEFT JOIN notes n ON n.id = t.note"
                          " WHERE n.id IS NULL ORDER BY t.file")

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

        return db.patiently(work, self.index_path or self.root, "write")

    # -- what qem_edit.mirror.verify and qem_edit.reads.context ask of storage ----------------------

    def notes_in_force(self, kind: str, priority: str) -> Iterator[Note]:
        """The notes in force of one kind and priority, in id order, read lazily (inside `reading`)."""
        return map(note_from_row, self.rows_in_force(kind, priority))

    def graph_problems(self, scratch: sqlite3.Connection) -> list[str]:
        """The supersession graph's problems (qem_edit.storage.supersession); `scratch`: a database of its own."""
        from .supersession import graph_problems

        return self._guarded(lambda: graph_problems(self.conn, scratch))

    def set_aside_in(self, fresh: sqlite3.Connection) -> list[str]:
        """Every log file `fresh` (the log replayed afresh) could not read, with why, by name."""
        from .verify_reads import set_aside_problems

        return set_aside_problems(fresh)

    def has_event_in(self, fresh: sqlite3.Connection, event_id: object) -> bool:
        """Whether `fresh` (the log replayed afresh) holds event `event_id`."""
        from .verify_reads import has_event

        return has_event(fresh, event_id)

    def kind_text_state_in(self, fresh: sqlite3.Connection, note_id: str) -> tuple[str | None, str | None, str | None]:
        """A note's kind, text and state in `fresh` (the log replayed afresh; all None: no such note)."""
        from .verify_reads import kind_text_state

        return kind_text_state(fresh, note_id)

    def was_forgotten_in(self, fresh: sqlite3.Connection, note_id: str) -> bool:
        """Whether `fresh` (the log replayed afresh) holds a forget of the note."""
        from .verify_reads import was_forgotten

        return was_forgotten(fresh, note_id)




def _start_if_new(root: Path, create: bool) -> str | None:
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
        root.mkdir(parents=True, exist_ok=True)
        with locked(root / START_LOCK_NAME, WRITE_PATIENCE_S):
            # several processes may start it at once: one does, the others find it made
            return starting.start(root) if starting.is_new(root) else None
    except LockTimeout:
        raise errors.StoreBusy(f"{root} stayed locked by another process starting the memory; nothing was written") from None
    except OSError as exc:
        raise errors.StoreUnwritable(f"cannot create {root}: {exc.strerror}") from None


_IN_FORCE = "state IN ('active', 'stale')"
assert LIVE_STATES == {"active", "stale"}  # _IN_FORCE spells them out for the index's SQL
# of the short ids of a block of MEMORY.md's items (a JSON array), those no note shows or whose
# note has no item (a note whose text is missing has none): both read from covering indexes
_NOT_SHOWN = ("SELECT j.value FROM json_each(?) j WHERE NOT EXISTS (SELECT 1 FROM notes n INDEXED BY"
              " notes_by_short JOIN items i INDEXED BY items_by_id ON i.id = n.id WHERE n.short = j.value)")


def _where(kinds: Iterable[str] | None, states: Iterable[str] | None) -> tuple[str, list[str]]:
    where, params = [], []
    for column, values in (("kind", kinds), ("state", states)):
        if values is not None:
            values = list(values)
            where.append(f"{column} IN ({db.marks(values)})")
            params.extend(values)
    return (f" WHERE {' AND '.join(where)}" if where else ""), params


def _refuse_legacy(root: Path) -> None:
    if (root / LEGACY_NAME).is_file() and not (root / EVENTS).is_dir():
        raise errors.BadInput(
            f"{root / LEGACY_NAME} is a store from an older qem (one SQLite file)",
            hint="convert it once with `qem migrate`: the notes keep their history and their numbers",
        )


def _open_index(path: Path) -> sqlite3.Connection:
    conn = db.connect(str(path))
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        _ensure_schema(conn)
        return conn
    except BaseException:
        conn.close()
        raise


def _build_missing(root: Path, path: Path) -> Caught | None:
    """A missing index (a fresh clone's first command) built whole from the log in a file
    of its own with no journal, then moved into place complete: in the WAL every page of
    it would be written twice, into the log and again into the file at the checkpoint
    (about a second at 74,900 notes).  Under a lock, so that of processes starting at once
    one builds and the others open what it built.  Returns what the build caught; None
    where it built nothing (an index is there, the log is empty, or no file can be made
    here: the index is then opened as ever)."""
    from contextlib import ExitStack

    from ..system.files import LockTimeout, locked

    tree = LogTree(root)
    if os.path.lexists(path) or not tree.names():
        return None
    with ExitStack() as stack:
        try:
            stack.enter_context(locked(root / BUILD_LOCK_NAME, WRITE_PATIENCE_S))
        except LockTimeout:
            raise errors.StoreBusy(f"{root} stayed locked by another process building its index for over"
                                   f" {int(WRITE_PATIENCE_S)} s") from None
        except OSError:  # a folder that takes no file: opening the index says so, or reads it in memory
            return None
        if os.path.lexists(path):  # built by the process that held the lock
            return None
        return _build_into(path, tree)
    return None  # (not reached: for the type checker)


def _build_into(path: Path, tree: LogTree) -> Caught:
    """`tree`'s index built in a temporary file beside `path` (`.index.db.<pid>.tmp`,
    which qem's .gitignore covers), left in WAL mode as every index is opened, synced
    to disk and renamed to `path`.  The caller holds the build lock, so a temporary file
    of another process is a killed build's, and goes."""
    from ..system.files import fsync_dir

    prefix = f".{path.name}."
    for stale in path.parent.glob(f"{prefix}*.tmp"):
        _remove_index(stale)
    temp = path.with_name(f"{prefix}{os.getpid()}.tmp")
    try:
        conn = db.connect(str(temp))
        try:
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
        fsync_dir(path.parent)
        return caught
    except sqlite3.Error as exc:
        raise db.translate(exc, path, "write") from None
    except OSError as exc:
        raise errors.StoreUnwritable(f"cannot write {path}: {exc.strerror}") from None
    finally:
        _remove_index(temp)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_index(path: Path, links_only: bool = False) -> None:
    """The index's files removed (`links_only`: those that are symbolic links, which a
    clone's commit can put there; the link goes, never what it points to)."""
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm", f"{path.name}-journal"):
        try:
            if not links_only or (path.parent / name).is_symlink():
                (path.parent / name).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise errors.StoreUnwritable(f"cannot remove {path.parent / name}: {exc.strerror}") from None


def _open_index_in_memory() -> sqlite3.Connection:
    conn = db.connect(":memory:")
    _ensure_schema(conn)
    return conn


def _ensure_schema(conn: sqlite3.Connection) -> None:
    index = Index(conn, LogTree(Path(".")))
    with db.transaction(conn):
        if not index.ready():
            index.create()


def read_gaps(store: Store) -> list[str]:
    """Why the log read is incomplete where it is (files set aside may hold an answer).
    (Here, not in qem_edit.reads.query, which re-exports it: `qem verify --staged` lists late
    requests on every commit, and the query module's dataclasses cost it ~5 ms.)"""
    aside = len(store.set_aside())
    return [f"{aside} log file{'s' if aside != 1 else ''} set aside (`qem verify` names them)"] if aside else []
