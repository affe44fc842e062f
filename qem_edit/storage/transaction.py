"""The write transaction: a write's decisions made events, written to the log and the index."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable

from ..base import errors, ids, resting
from ..base.decisions import (
    NEW_NOTE,
    Draft,
    Drifted,
    NewNote,
    decide_create,
    decide_dispute,
    decide_drift,
    decide_forget,
    decide_fork,
    decide_move,
    decide_rule,
    decide_settle,
)
from ..base.faults import checkpoint
from ..base.records import Record
from ..base.replay import Event, Note, after_event, note_from_created
from ..base.stored_form import actor_problem, reason_problem
from ..base.vocabulary import TextError, TransitionError
from .logtree import (
    MAX_CLOCK,
    MAX_TEXT_BYTES,
    PACK_SPLIT_BYTES,
    TEXTS_PER_PACK,
    TextRecord,
    event_bytes,
    pack_text_line,
    text_problem,
)

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import TypeVar

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

    def __init__(self, store: "Store", at: str) -> None:  # (qem_edit.storage.store.Store, which imports this module)
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
        `anchors`: a reinstated note's anchors as they are now (decisions.decide_move)."""
        [event] = self.record([_decided(decide_move, self.note(note_id), type_, reason, anchors)], actor, checkin)
        return event

    def drift(self, note_id: str, drifted: list[Drifted], actor: str, checkin: str | None = None) -> list[Event]:
        """A note whose anchored content drifted: re-anchored where it moved, flagged stale
        where it changed or went (decisions.decide_drift)."""
        return self.record(_decided(decide_drift, self.note(note_id), drifted), actor, checkin)

    def create(self, new: NewNote, actor: str, reason: str | None = None, checkin: str | None = None) -> Note:
        old = self.note(new.supersedes) if new.supersedes is not None else None
        events = self.record(_decided(decide_create, new, old, reason, self._answered(new, old), self._bases(new),
                                      self.at), actor, checkin)
        return self._notes[events[0].id]

    def share(self, note_id: str, provenance: str, actor: str, reason: str, twin: Note | None = None) -> Note:
        """A private note made a team note (decisions.decide_share; `twin`: the team note in
        force with its text already, which then supersedes it); returns the team note."""
        from ..base.decisions import decide_share

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


def as_writer(work: Callable[[Transaction], T], agent: bool, allow_secret: bool = False) -> Callable[[Transaction], T]:
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


class WriteMark(Record):
    """What this process's last write changed in the index: the generation before and
    after it, each touched note's item as it was before (None: it had none), and whether
    no note was disputed or forked before it (then every item stands alone, and the
    mirror can be patched by the changed items; see renderer.patch)."""

    before: int
    after: int
    replaced: dict[str, tuple[int, bytes] | None]
    calm: bool
