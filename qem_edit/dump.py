"""`qem dump` and `qem load`: the log as JSON Lines (docs/DUMP.md).

The first line names the memory (`{"memory": ID}`); a memory with no events yet takes
that name on load, so a restored memory's MEMORY.md is its own.  Every other line is an event as the log stores it, with its id and, for a note's creation,
the note's text (unless forgotten).  Load checks every line first (an event whose bytes do
not hash to its id, a text that does not match its hash, a malformed line: the line is
named and nothing is written), then writes the events as one pack.  A dump from before
memory lived in git (numbered notes, `seq` lines) is converted (qem_edit.convert).
"""

from __future__ import annotations

import json
import re
from typing import Iterator

from . import errors
from .convert import convert, read_old_dump
from .logtree import LogFileError, TextRecord, event_from, event_object
from .model import Event
from .store import Store, ensure_memory_id


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
    first = raw.lstrip().split(b"\n", 1)[0]
    if b'"seq"' in first and b'"note_id"' in first:
        converted = convert(read_old_dump(raw, name))
        return converted.events, converted.texts, converted.memory_id  # type: ignore[return-value]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise errors.BadInput(f"{name}:{line}: not UTF-8 text") from None
    events, texts = [], []
    memory = None
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip() and number == 1 and line.startswith('{"memory": '):
            memory = _memory_line(line, f"{name}:{number}")
        elif line.strip():
            event, record = _line(line, f"{name}:{number}")
            events.append(event)
            if record is not None:
                texts.append(record)
    return events, texts, memory


def _memory_line(line: str, where: str) -> str:
    """The dump's first line: `{"memory": ID}`, the memory it was dumped from."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise errors.BadInput(f"{where}: not JSON ({exc.msg})") from None
    memory = obj.get("memory") if isinstance(obj, dict) and set(obj) == {"memory"} else None
    if not isinstance(memory, str) or not re.fullmatch(r"[0-9a-z-]{1,64}", memory):
        raise errors.BadInput(f"{where}: the first line must name the memory: {{\"memory\": ID}}")
    return memory


def _line(line: str, where: str) -> tuple[Event, TextRecord | None]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise errors.BadInput(f"{where}: not JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise errors.BadInput(f"{where}: a line must be a JSON object")
    given, text = obj.pop("id", None), obj.pop("text", None)
    try:
        event = event_from(obj, where)
    except LogFileError as exc:
        raise errors.BadInput(str(exc)) from None
    if given != event.id:
        raise errors.BadInput(f"{where}: id {given!r} is not the hash of the event ({event.id}); the line was changed")
    if text is None:
        return event, None
    if not isinstance(text, dict) or set(text) != {"key", "text"} or event.type != "created":
        raise errors.BadInput(f"{where}: text must be {{key, text}} on a created event")
    record = TextRecord(event.id, str(text["key"]), str(text["text"]))
    if record.digest != event.data.get("text"):
        raise errors.BadInput(f"{where}: the text does not match the hash its event holds")
    return event, record


def load(store: Store, events: list[Event], texts: list[TextRecord], memory_id: str | None) -> int:
    """Write loaded events (one pack) and texts to the log; returns how many were new."""
    known = {e for (e,) in store._read("SELECT id FROM events")}
    new = [e for e in events if e.id not in known]
    if new:
        _refuse_what_does_not_replay(store, new)
    if memory_id is not None:
        _adopt_memory_id(store, memory_id)
    if not new:
        return 0

    def work(tx) -> int:  # type: ignore[no-untyped-def]
        created = {e.id for e in new}
        tx.events, tx.texts = new, [t for t in texts if t.note in created]
        return len(new)

    return store.write(work)


def _adopt_memory_id(store: Store, memory_id: str) -> None:
    """A converted log names its memory (the same id on every clone that converts it); a
    memory that holds no events yet (made by this load) takes that name."""
    current = ensure_memory_id(store.root, memory_id)
    if current == memory_id or store.max_clock():
        return
    from .files import write_atomic
    from .store import CONFIG_NAME

    path = store.root / CONFIG_NAME
    config = path.read_text("utf-8")
    write_atomic(path, config.replace(f'id = "{current}"', f'id = "{memory_id}"', 1).encode("utf-8"))
    store.__dict__.pop("_memory", None)


def _refuse_what_does_not_replay(store: Store, new: list[Event]) -> None:
    """A loaded event that does not apply to its note (a second revocation of a revoked
    note in one line of history, an event for a note the log never created) is refused,
    with the whole load."""
    from .model import LogError, fold

    by_note: dict[str, list[Event]] = {}
    for event in new:
        by_note.setdefault(event.note, []).append(event)
    empty = not store.max_clock()
    for note_id, group in by_note.items():
        events = group if empty else store.events(note_id) + group
        if not any(e.type == "created" for e in events):
            raise errors.BadInput(f"event {group[0].id[:8]} ({group[0].type}) is for note {note_id[:8]},"
                                  " which neither the dump nor this memory created; nothing was loaded")
        try:
            problems = fold(events).problems
        except LogError as exc:
            raise errors.BadInput(f"{exc}; nothing was loaded") from None
        if problems:
            raise errors.BadInput(f"{problems[0]}; nothing was loaded")
