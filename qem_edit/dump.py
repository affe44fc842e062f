"""`qem dump` and `qem load`: the event log as JSON Lines (docs/DUMP.md).

Load checks every line before it writes anything, names the first bad line, and appends
the whole log in one transaction, or nothing.
"""

from __future__ import annotations

import json
from typing import Iterator

from . import errors
from .model import EVENT_TYPES, Event, TextError, is_timestamp, normalize_text
from .store import MAX_ID, Store, Transaction

_FIELDS = ("seq", "note_id", "type", "at", "actor", "reason", "checkin", "data")


def dump_line(event: Event) -> str:
    return json.dumps(event.to_json(), ensure_ascii=False) + "\n"


def dump_lines(store: Store) -> Iterator[str]:
    with store.reading():
        for event in store.iter_events():
            yield dump_line(event)


def read_dump(raw: bytes, name: str, *, lines: list[str] | None = None) -> list[Event]:
    """Parse and check a dump; raises BadInput naming the first bad line.

    `lines`, when given, receives each event's `FILE:LINE`, for `load_events` to name.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise errors.BadInput(f"{name}:{line}: not UTF-8 text") from None
    events: list[Event] = []
    last_seq = 0
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise errors.BadInput(f"{where}: not JSON ({exc.msg})") from None
        event = _event(obj, where)
        if event.seq <= last_seq:
            raise errors.BadInput(f"{where}: seq {event.seq} does not follow {last_seq}")
        last_seq = event.seq
        events.append(event)
        if lines is not None:
            lines.append(where)
    return events


def _event(obj: object, where: str) -> Event:
    if not isinstance(obj, dict):
        raise errors.BadInput(f"{where}: a line must be a JSON object")
    missing = [f for f in _FIELDS if f not in obj]
    if missing:
        raise errors.BadInput(f"{where}: missing field(s) {', '.join(missing)}")
    extra = sorted(set(obj) - set(_FIELDS))
    if extra:
        raise errors.BadInput(f"{where}: unknown field(s) {', '.join(extra)}")
    for key in ("seq", "note_id"):
        value = obj[key]
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_ID:
            raise errors.BadInput(f"{where}: {key} must be a positive integer (at most 2^63-1)")
    if obj["type"] not in EVENT_TYPES:
        raise errors.BadInput(f"{where}: unknown event type {obj['type']!r}")
    if not is_timestamp(obj["at"]):
        raise errors.BadInput(f"{where}: at must be a UTC time like 2026-07-27T10:00:00Z")
    if not isinstance(obj["actor"], str) or not obj["actor"]:
        raise errors.BadInput(f"{where}: actor must be a non-empty string")
    for key in ("reason", "checkin"):
        if obj[key] is not None and not isinstance(obj[key], str):
            raise errors.BadInput(f"{where}: {key} must be a string or null")
    if not isinstance(obj["data"], dict):
        raise errors.BadInput(f"{where}: data must be an object")
    text = obj["data"].get("text")
    if obj["type"] == "created" and text is not None:
        if not isinstance(text, str):
            raise errors.BadInput(f"{where}: data.text must be a string or null")
        try:
            if normalize_text(text) != text:
                raise errors.BadInput(f"{where}: data.text is not normalized (see docs/DUMP.md)")
        except TextError as exc:
            raise errors.BadInput(f"{where}: {exc}") from None
    return Event(
        obj["seq"], obj["note_id"], obj["type"], obj["at"], obj["actor"],
        obj["reason"], obj["checkin"], obj["data"],
    )


def load_events(store: Store, events: list[Event], where: list[str] | None = None) -> int:
    """Append `events` to `store` in one transaction, renumbering seq after its head.

    `where` (from `read_dump`) names each event's line in refusals.
    """
    labels = where if where is not None and len(where) == len(events) else [
        f"seq {e.seq}" for e in events
    ]
    forgotten = {e.note_id for e in events if e.type == "forgotten"}
    for label, e in zip(labels, events):
        if e.type == "created" and e.data.get("text") is None and e.note_id not in forgotten:
            raise errors.BadInput(
                f"{label}: note #{e.note_id} has no text but is never forgotten; nothing was loaded"
            )

    def work(tx: Transaction) -> int:
        head = tx.head
        for offset, (label, e) in enumerate(zip(labels, events), start=1):
            renumbered = Event(head + offset, e.note_id, e.type, e.at, e.actor, e.reason, e.checkin, e.data)
            try:
                tx.append(renumbered)
            except errors.QemError as exc:
                raise errors.BadInput(f"{label} (seq {e.seq}, note #{e.note_id}): {exc}; nothing was loaded") from None
        return len(events)

    return store.write(work)
