"""Logs from before memory lived in git, read to be converted.

Logs from before memory lived in git: numbered notes and a global seq, in one SQLite
file (`.qem/memory.db`) or in a dump of it (`seq`, `note_id` lines).

Conversion keeps every event's type, time, actor, reason, check-in and data, in seq
order; each note gets a content-hashed id, and its old number is kept in its created
event (`alias`), so `qem show 12` still finds it.  It is deterministic: the nonces are
derived from the old log itself, so converting the same log twice (on two clones, say)
makes the same files, which git then sees as one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..base import errors, ids
from ..base.replay import Event
from ..base.shown import progress
from ..base.stored_form import is_timestamp, normalize_text
from ..base.vocabulary import EVENT_TYPES, TextError
from ..system.db import sqlite3
from .logtree import LogFileError, TextRecord, event_bytes, event_from, event_object


@dataclass(frozen=True)
class OldEvent:
    seq: int
    note_id: int
    type: str
    at: str
    actor: str
    reason: str | None
    checkin: str | None
    data: dict


@dataclass
class Converted:
    events: list[Event] = field(default_factory=list)
    texts: list[TextRecord] = field(default_factory=list)
    ids: dict[int, str] = field(default_factory=dict)  # old number → note id
    numbers: set[int] = field(default_factory=set)  # every number the old log creates
    memory_id: str = ""


def seed_of(old: list[OldEvent]) -> bytes:
    """What makes this log's conversion its own: a hash of its first event."""
    first = old[0] if old else None
    return hashlib.sha256(json.dumps(first.__dict__ if first else {}, sort_keys=True).encode()).digest()


def _derived(seed: bytes, *parts: object) -> str:
    return ids.encode(hashlib.sha256(seed + json.dumps(parts).encode()).digest())


def convert(old: list[OldEvent]) -> Converted:
    """The old events (in seq order) as new events and texts."""
    seed = seed_of(old)
    out = Converted(memory_id=_derived(seed, "memory")[:12])
    tips: dict[int, str] = {}
    disputes: dict[int, str] = {}
    forgotten = {e.note_id for e in old if e.type == "forgotten"}
    out.numbers = {e.note_id for e in old if e.type == "created"}
    tick = progress("converting the numbered log", len(old))
    for event in old:
        tick()
        if event.type == "created" and event.note_id in forgotten:
            event = OldEvent(event.seq, event.note_id, event.type, event.at, event.actor, event.reason,
                             event.checkin, {**event.data, "text": None})  # a forgotten text is not carried over
        if event.type == "created" and event.note_id in out.ids:
            raise errors.BadInput(f"seq {event.seq}: note #{event.note_id} already exists (created twice)")
        if event.type == "created" and not isinstance(event.data.get("text"), str) and event.note_id not in forgotten:
            raise errors.BadInput(f"seq {event.seq}: note #{event.note_id} has no text but is never forgotten")
        data = _data(event, seed, out, disputes)
        prev = () if event.type == "created" else (tips[event.note_id],) if event.note_id in tips else None
        if prev is None:
            raise errors.BadInput(f"seq {event.seq}: {event.type} for note #{event.note_id}, which the log never created")
        note = "" if event.type == "created" else out.ids[event.note_id]
        provisional = Event("", note, event.type, event.at, event.actor, event.reason, event.checkin, data, event.seq, prev)
        event_id = ids.content_id(event_bytes(provisional))
        new = Event(event_id, note or event_id, event.type, event.at, event.actor, event.reason, event.checkin,
                    data, event.seq, prev)
        try:  # what load writes, the log must read back (else the file would be set aside)
            event_from(event_object(new), f"seq {event.seq}")
        except LogFileError as exc:
            raise errors.BadInput(str(exc)) from None
        if event.type == "created":
            out.ids[event.note_id] = event_id
            text = event.data.get("text")
            if isinstance(text, str):
                out.texts.append(TextRecord(event_id, _derived(seed, "key", event.note_id), text))
        tips[event.note_id] = event_id
        out.events.append(new)
    tick.end()
    return out


def _data(event: OldEvent, seed: bytes, out: Converted, disputes: dict[int, str]) -> dict:
    data = dict(event.data)
    if event.type == "created":
        text = data.pop("text", None)
        record = TextRecord("", _derived(seed, "key", event.note_id), text) if isinstance(text, str) else None
        old_parent = data.get("supersedes")
        number = isinstance(old_parent, int) and not isinstance(old_parent, bool)
        data["supersedes"] = out.ids.get(old_parent) if number else None
        if number and data["supersedes"] is None and old_parent in out.numbers:
            # a note created later (a cycle): its old number, which the graph reads back
            data["supersedes"] = ids.numbered_pointer(old_parent)
        elif old_parent is not None and data["supersedes"] is None:
            # dangling, as it was; a malformed pointer (not a note number) stays a pointer
            # to no note too, never dropped: its note stays unknown, as it was
            data["supersedes"] = _derived(seed, "missing note", old_parent)
        if isinstance(data.get("answers"), int):  # the request it answers, by its number, as supersedes
            data["answers"] = out.ids.get(data["answers"]) or _derived(seed, "missing note", data["answers"])
        if isinstance(data.get("rests_on"), list) and all(isinstance(n, int) for n in data["rests_on"]):  # by their numbers
            data["rests_on"] = sorted({out.ids.get(n) or _derived(seed, "missing note", n) for n in data["rests_on"]})
        data.update(text=record.digest if record else _derived(seed, "forgotten", event.note_id),
                    nonce=_derived(seed, "nonce", event.note_id), short=ids.short_length(len(out.ids)),
                    alias=event.note_id)
    elif event.type == "superseded":
        data["by"] = out.ids.get(data.get("by")) or _derived(seed, "missing note", data.get("by"))  # type: ignore[arg-type]
    elif event.type in ("disputed", "ruled"):
        number = data.get("dispute")
        dispute = disputes.setdefault(number, _derived(seed, "dispute", number))  # type: ignore[arg-type]
        data["dispute"] = dispute
        for key in ("with", "kept"):
            if isinstance(data.get(key), int):
                data[key] = out.ids.get(data[key]) or _derived(seed, "missing note", data[key])
    return data


# -- reading old logs ---------------------------------------------------------------------------


def read_old_dump(raw: bytes, name: str) -> list[OldEvent]:
    """An old-format dump (`seq` and `note_id` lines); BadInput names the first bad line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise errors.BadInput(f"{name}:{line}: not UTF-8 text") from None
    out: list[OldEvent] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            out.append(_old_event(line, f"{name}:{number}", out[-1].seq if out else 0))
    return out


def json_line(line: str, where: str) -> object:
    """A line of a JSON Lines file a person gave (a dump), parsed; BadInput naming the
    line where it is not JSON, nesting deeper than the parser goes included."""
    try:
        return json.loads(line, parse_constant=finite, parse_float=finite)
    except json.JSONDecodeError as exc:
        raise errors.BadInput(f"{where}: not JSON ({exc.msg})") from None
    except RecursionError:  # nesting deeper than the parser's stack
        raise errors.BadInput(f"{where}: not JSON (nested too deeply)") from None
    except NotANumber:  # (the log's reader sets aside a record holding one: logtree._json)
        raise errors.BadInput(f"{where}: not JSON qem reads (NaN or Infinity, which JSON has no number for;"
                              " no qem write holds one)") from None


class NotANumber(ValueError):
    """A JSON text's number that JSON has not: NaN, an infinity (`Infinity`, `1e999`)."""


def finite(text: str) -> float:
    """A JSON text's number or constant (json.loads' `parse_float`, `parse_constant`) as a
    float; NotANumber where it is NaN or an infinity, which Python's json reads and JSON has not."""
    number = float(text)
    if number - number != 0.0:  # (NaN and the infinities only: x - x is NaN)
        raise NotANumber(f"{text} is not a finite number")
    return number


def _old_event(line: str, where: str, last_seq: int) -> OldEvent:
    obj = json_line(line, where)
    fields = ("seq", "note_id", "type", "at", "actor", "reason", "checkin", "data")
    if not isinstance(obj, dict) or set(obj) != set(fields):
        raise errors.BadInput(f"{where}: an old-format line holds exactly {', '.join(fields)}")
    for key in ("seq", "note_id"):
        if not isinstance(obj[key], int) or isinstance(obj[key], bool) or not 0 < obj[key] < 2**62:
            raise errors.BadInput(f"{where}: {key} must be a positive integer (below 2**62)")
    if obj["seq"] <= last_seq:
        raise errors.BadInput(f"{where}: seq {obj['seq']} does not follow {last_seq}")
    if obj["type"] not in EVENT_TYPES or not is_timestamp(obj["at"]) or not isinstance(obj["data"], dict):
        raise errors.BadInput(f"{where}: unknown event type, a bad time, or data that is not an object")
    if not isinstance(obj["actor"], str) or not obj["actor"] or "\n" in obj["actor"]:
        raise errors.BadInput(f"{where}: actor must be one non-empty line")
    for key in ("reason", "checkin"):
        if obj[key] is not None and not isinstance(obj[key], str):
            raise errors.BadInput(f"{where}: {key} must be a string or null")
    text = obj["data"].get("text") if obj["type"] == "created" else None
    if isinstance(text, str):
        try:
            if normalize_text(text) != text:
                raise errors.BadInput(f"{where}: data.text is not normalized (see docs/DUMP.md)")
        except TextError as exc:
            raise errors.BadInput(f"{where}: {exc}") from None
    return OldEvent(obj["seq"], obj["note_id"], obj["type"], obj["at"], obj["actor"], obj["reason"], obj["checkin"], obj["data"])


def read_old_store(path: Path) -> list[OldEvent]:
    """Every event of an old single-file store, in seq order."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute("SELECT seq, note_id, type, at, actor, reason, checkin, data FROM events ORDER BY seq").fetchall()
        conn.close()
    except sqlite3.DatabaseError as exc:
        raise errors.NotAStore(f"{path} cannot be read as an old qem store: {exc}") from None
    forgotten = {note for seq, note, type_, *_ in rows if type_ == "forgotten"}
    out = []
    for seq, note, type_, at, actor, reason, checkin, data in rows:
        loaded = json.loads(data)
        if type_ == "created" and note in forgotten:
            loaded["text"] = None  # erased by forget (a text a faulty load left is not carried over)
        out.append(OldEvent(seq, note, type_, at, actor, reason, checkin, loaded))
    return out
