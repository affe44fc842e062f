"""`qem dump` and `qem load`: the log as JSON Lines (docs/DUMP.md).

The first line names the memory (`{"memory": ID}`); a memory with no events yet takes
that name on load, so a restored memory's MEMORY.md is its own.  Every other line is an event as the log stores it, with its id and, for a note's creation,
the note's text (unless forgotten).  Load checks every line first (an event whose bytes do
not hash to its id, a text that does not match its hash, a malformed line: the line is
named and nothing is written), then writes the events as one pack (packs of at most
PACK_SPLIT_BYTES for a big dump).  The dump is read a line at a time into a temporary
SQLite file (Staged) and checked from there, a note at a time, so a load holds a batch of
lines whatever the dump's size.  A dump from before
memory lived in git (numbered notes, `seq` lines) is converted (qem_edit.storage.convert).
"""

from __future__ import annotations

import io
import itertools
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from ..base import errors, ids
from ..base.replay import Event
from ..base.stored_form import actor_problem, reason_problem
from ..storage.convert import convert, json_line, read_old_dump
from ..storage.logtree import MAX_CLOCK, LogFileError, TextRecord, event_from, event_object, text_problem
from ..storage.staging import StagedLines
from ..storage.starting import ensure_memory_id
from ..storage.store import Store

BULK_AT = 2000  # a load of more new events than this is written and indexed streamed
_BATCH = 5000  # dump lines staged at a time


def dump_lines(store: Store) -> Iterator[str]:
    """The memory's id, then every event, in the order every clone agrees on (clock, then id)."""
    yield json.dumps({"memory": store.memory_id()}) + "\n"
    with store.reading():  # one event at a time: the log is never held whole
        for event, key_and_text in store.events_with_texts():
            yield dump_line(event, key_and_text)


def dump_line(event: Event, key_and_text: str | None = None) -> str:
    obj: dict[str, object] = {"id": event.id, **event_object(event)}
    if key_and_text is not None:
        key, _, text = key_and_text.partition("\0")
        obj["text"] = {"key": key, "text": text}
    return json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n"


def read_dump(raw: bytes, name: str) -> tuple[list[Event], list[TextRecord], int | None]:
    """The events and texts of a dump (converted, if it is an old numbered one), and, for
    an old one, the memory id its conversion gives; BadInput names the first bad line."""
    with stage_dump(io.BytesIO(raw), name) as staged:
        return list(staged.events()), list(staged.texts()), staged.memory_id  # type: ignore[return-value]


class Staged(StagedLines):
    """A dump's events and texts, checked line by line and kept in a temporary SQLite
    file (so a dump of any size is held a line at a time), in the dump's order."""

    def __init__(self) -> None:
        import tempfile

        self._folder = tempfile.TemporaryDirectory(prefix="qem-load-")
        self.path = Path(self._folder.name) / "staged.db"
        super().__init__(str(self.path))
        self.memory_id: str | int | None = None
        self.count = 0

    def __enter__(self) -> "Staged":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        super().close()
        self._folder.cleanup()

    def add(self, events: Iterable[Event], texts: Iterable[TextRecord]) -> None:
        """Events and texts, checked: what a reader would set aside (qem_edit.storage.logtree's
        rules for a stored text, an actor, a reason, a clock) is refused (BadInput), as
        every write refuses it (a dump's lines are checked whole as they are read; an
        import of vectr's store makes its events here)."""
        events, texts = list(events), list(texts)
        for event in events:
            problem = actor_problem(event.actor) or reason_problem(event.reason)
            if problem or not 0 < event.clock <= MAX_CLOCK:
                raise errors.BadInput(f"event {ids.shown(event.id)}: {problem or f'clock {event.clock} is past {MAX_CLOCK}'};"
                                      " nothing was loaded")
        for text in texts:
            problem = text_problem(text)
            if problem:
                raise errors.BadInput(f"the text of note {ids.shown(text.note)}: {problem}; nothing was loaded")
        super().add(events, texts)
        self.count += len(events)


def stage_dump(source: BinaryIO, name: str) -> Staged:
    """A dump read a line at a time (converted, if it is an old numbered one) into a
    Staged; BadInput names the first bad line, as read whole it would be: a line that is
    not UTF-8 first, then the first malformed one."""
    staged = Staged()
    try:
        _stage(source, name, staged)
        staged.done()
    except BaseException:
        staged.close()
        raise
    return staged


def _stage(source: BinaryIO, name: str, staged: Staged) -> None:
    head: list[bytes] = []
    for raw in source:
        head.append(raw)
        if raw.strip():
            break
    first = head[-1].strip() if head else b""
    if b'"seq"' in first and b'"note_id"' in first:
        converted = convert(read_old_dump(b"".join(head) + source.read(), name))
        staged.add(converted.events, converted.texts)
        staged.memory_id = converted.memory_id
        return
    problem: errors.BadInput | None = None
    events: list[Event] = []
    texts: list[TextRecord] = []
    for number, raw in enumerate(itertools.chain(head, source), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise errors.BadInput(f"{name}:{number}: not UTF-8 text") from None
        if problem is not None or not line.strip():
            continue
        line = line[:-1] if line.endswith("\n") else line
        try:
            if number == 1 and line.startswith('{"memory": '):
                staged.memory_id = _memory_line(line, f"{name}:{number}")
                continue
            event, record = _line(line, f"{name}:{number}")
        except errors.BadInput as exc:
            problem = exc  # named once every line is known to be UTF-8 text
            continue
        events.append(event)
        if record is not None:
            texts.append(record)
        if len(events) >= _BATCH:
            staged.add(events, texts)
            events, texts = [], []
    if problem is not None:
        raise problem
    staged.add(events, texts)


def _memory_line(line: str, where: str) -> str:
    """The dump's first line: `{"memory": ID}`, the memory it was dumped from."""
    obj = json_line(line, where)
    memory = obj.get("memory") if isinstance(obj, dict) and set(obj) == {"memory"} else None
    if not isinstance(memory, str) or not re.fullmatch(r"[0-9a-z-]{1,64}", memory):
        raise errors.BadInput(f"{where}: the first line must name the memory: {{\"memory\": ID}}")
    return memory


def _line(line: str, where: str) -> tuple[Event, TextRecord | None]:
    obj = json_line(line, where)
    if not isinstance(obj, dict):
        raise errors.BadInput(f"{where}: a line must be a JSON object")
    given, text = obj.pop("id", None), obj.pop("text", None)
    try:
        event = event_from(obj, where)
    except LogFileError as exc:
        raise errors.BadInput(str(exc)) from None
    if given != event.id:
        raise errors.BadInput(f"{where}: id {given!r} is not the hash of the event ({event.id}); the line was changed")
    if "scope" in event.data:  # a dump holds the team's notes alone: one claiming another scope is refused
        raise errors.BadInput(f"{where}: note {ids.shown(event.id)} is created as a {event.data['scope']} note; a dump"
                              " carries only team notes (private and session notes never leave their clone)")
    if text is None:
        return event, None
    if not isinstance(text, dict) or set(text) != {"key", "text"} or event.type != "created":
        raise errors.BadInput(f"{where}: text must be {{key, text}} on a created event")
    record = TextRecord(event.id, str(text["key"]), str(text["text"]))
    if record.digest != event.data.get("text"):
        raise errors.BadInput(f"{where}: the text does not match the hash its event holds")
    return event, record


def load(store: Store, events: list[Event], texts: list[TextRecord], memory_id: str | int | None, *,
         allow_secret: bool = False) -> int:
    """Write loaded events and texts to the log; returns how many were new."""
    with Staged() as staged:
        staged.add(events, texts)
        staged.memory_id = memory_id
        staged.done()
        return load_staged(store, staged, allow_secret=allow_secret)


def load_staged(store: Store, staged: Staged, *, allow_secret: bool = False) -> int:
    """Write a staged dump's events (in packs) and texts to the log; returns how many
    were new.  A load of many events is written and indexed streamed, a batch at a time.
    A secret in what is new refuses the load (qem_edit.storage.secrets), unless `allow_secret`."""
    with store.attached(staged.path) as new:
        if new:
            _refuse_what_does_not_replay(store, staged)
        if staged.memory_id is not None:
            _adopt_memory_id(store, staged.memory_id)  # type: ignore[arg-type]
        if not new:
            return 0

        def work(tx) -> int:  # type: ignore[no-untyped-def]
            if new <= BULK_AT:
                tx.events, tx.texts = list(staged.events(new=True)), list(staged.texts(new=True))
            else:
                tx.bulk = (lambda: staged.events(new=True), lambda: staged.texts(new=True))
            return new

        return store.write(work, allow_secret=allow_secret)


def _adopt_memory_id(store: Store, memory_id: str) -> None:
    """A converted log names its memory (the same id on every clone that converts it); a
    memory that holds no events yet (made by this load) takes that name."""
    current = ensure_memory_id(store.root, memory_id)
    if current == memory_id or store.max_clock():
        return
    from ..system.files import write_atomic
    from ..system.workspace import CONFIG_NAME

    path = Path(store.root, CONFIG_NAME)
    config = path.read_text("utf-8")
    write_atomic(path, config.replace(f'id = "{current}"', f'id = "{memory_id}"', 1).encode("utf-8"))
    store.tree.touched.add(CONFIG_NAME)
    store.__dict__.pop("_memory", None)


def _prev_elsewhere(store: Store, staged: Staged, events: list[Event], group: list[Event]) -> str | None:
    """An event of `group` whose `prev` names an event of another note (in the memory or
    in the dump): the index would set its pack aside (qem_edit.storage.index), so it is refused.
    A `prev` the memory and the dump both lack is a dangling one, which the fold names."""
    own = {e.id for e in events}
    for event in group:
        for prev in (p for p in event.prev if p not in own):
            found = store.note_of_event(prev) or staged.note_of(prev)
            if found and found != event.note:
                return f"event {ids.shown(event.id)} follows event {ids.shown(prev)} of another note; nothing was loaded"
    return None


def _refuse_what_does_not_replay(store: Store, staged: Staged) -> None:
    """A loaded event that does not apply to its note (a second revocation of a revoked
    note in one line of history, an event for a note the log never created) is refused,
    with the whole load.  A note at a time (the staged events by note); of several
    refusals, the one for the note the dump names first is given."""
    from ..base.replay import fold
    from ..base.vocabulary import LogError

    empty = not store.max_clock()
    refused: tuple[int, str] | None = None
    group: list[Event] = []
    first = 0

    def check() -> None:
        nonlocal refused
        if refused is not None and refused[0] < first:
            return
        note_id = group[0].note
        events = group if empty else store.events(note_id) + group
        problem = None
        if not any(e.type == "created" for e in events):
            problem = (f"event {ids.shown(group[0].id)} ({group[0].type}) is for note {ids.shown(note_id)},"
                       " which neither the dump nor this memory created; nothing was loaded")
        else:
            try:
                problems = fold(events).problems
            except LogError as exc:
                problems = [str(exc)]
            if problems:
                problem = f"{problems[0]}; nothing was loaded"
        problem = problem or _prev_elsewhere(store, staged, events, group)
        if problem is not None:
            refused = (first, problem)

    for seq, event in staged.new_by_note():
        if group and event.note != group[0].note:
            check()
            group = []
        if not group:
            first = seq
        group.append(event)
    if group:
        check()
    if refused is not None:
        raise errors.BadInput(refused[1])
