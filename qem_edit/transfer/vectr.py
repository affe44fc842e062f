"""`qem import vectr`: a vectr working-memory store (its SQLite file) brought into qem.

vectr (docs/VECTR.md has the mapping table; the fixture and its schema are in
fixtures/vectr/) keeps notes as rows and their history as `note_events`, ordered by the
events' ids.  Each note of the chosen vectr workspace becomes a qem note whose created
event keeps its kind, priority, provenance (as it was before any promotion to human),
creation time, writer and the vectr note's id (`data.vectr.id`, so `qem show vectr:ID`
finds it); each vectr event becomes the qem event of the same name, at its time, by its
actor, with its reason.  What qem's lifecycle cannot hold (an expiry or a revocation of a
note already superseded, a second stale flag) is not applied: it is named in the report
and kept in the created event's data (`vectr.not_applied`), never dropped silently.

vectr's anchors (`[[path, sha256(content)[:16] or null], ...]`, from the workspace's
root) become qem anchors only where the work tree holds that path now with the content
vectr hashed: the object id is then git's id of that content, the same on every clone
that has it.  Every other anchor (no hash, gone, changed, a folder, a path out of the
tree, which is never read) is named in the report and kept in `data.vectr.anchors`, which
keeps vectr's list as it was.

A store holding what vectr never writes where qem needs a value (a time that is not epoch
seconds, an id that is not an integer, a writer's name no reader takes) is refused before
anything is written, naming the note, the column and the value, and every event is read
back as each clone's log reader reads it first (`_refuse_malformed`, `read_back`): an event
a reader sets aside would hide the whole pack, every imported note, on every clone.

The conversion is deterministic (ids and nonces derived from the vectr rows; a note
imported before keeps the anchors its first import gave it, whatever the work tree holds
now), and the events are added by `qem load`'s code (qem_edit.transfer.dump.load: checked to
replay, written as one pack under the write lock), so importing the same store twice adds
nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..base import errors, ids
from ..base.replay import Event
from ..base.stored_form import actor_problem, anchor_path_problem, anchors_of, normalize_text, reason_problem
from ..base.times import stamp
from ..base.triggers import trigger_data, trigger_problem, triggers_of
from ..base.vocabulary import KINDS, MOVE_BY_EVENT, PRIORITIES, PROVENANCES, TRIGGER_ATTRIBUTES, TextError, Trigger
from ..storage.convert import finite
from ..storage.logtree import (
    MAX_CLOCK,
    MAX_NESTING,
    LogFileError,
    TextRecord,
    event_bytes,
    event_from,
    nests_past,
    parsed_record,
    text_problem,
)
from ..system import anchors
from ..system.db import sqlite3

# vectr's created actor → the provenance a note had at creation (vectr's promote
# overwrites the column; SCHEMA.md section 7)
CREATED_BY = {"system": "auto", "human": "human", "agent": "agent"}
EVENTS = ("created", "superseded", "revoked", "reinstated", "stale_flagged", "promoted", "expired")


@dataclass
class VectrNote:
    row: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> int:
        return int(self.row["note_id"])


@dataclass
class Report:
    """What an import did: notes and events imported, what was mapped (and how), what
    was skipped (and why), and what qem does not carry."""

    workspace: str
    notes: int = 0
    events: int = 0
    new: int = 0  # events the memory did not hold yet
    mapped: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    not_carried: list[str] = field(default_factory=list)
    anchored: int = 0  # vectr anchors imported as qem anchors
    unmatched: list[str] = field(default_factory=list)  # the others, each with why

    def text(self) -> str:
        again = f"{self.new} new events" + (f" ({self.events - self.new} already here)" if self.new < self.events else "")
        lines = [f"imported {self.notes} notes, {self.events} events from vectr workspace {self.workspace}: {again}"]
        if self.anchored or self.unmatched:
            lines.append(f"anchors: {self.anchored} anchored (each file held the content vectr hashed),"
                         f" {len(self.unmatched)} not matched" + (": kept in data.vectr.anchors" if self.unmatched else ""))
            lines += [f"  {item}" for item in self.unmatched]
        for title, items in (("mapped", self.mapped), ("skipped", self.skipped), ("not carried", self.not_carried)):
            lines += [f"{title} ({len(items)}):"] + [f"  {item}" for item in items] if items else []
        from ..storage.secrets import withheld  # a note not imported is named with what it holds: never a secret

        return withheld("\n".join(lines))


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# The columns each vectr table must have: those the import reads without a default.
NEEDED = {"notes": ("note_id", "workspace", "content", "created_at"),
          "note_events": ("id", "workspace", "note_id", "event", "actor", "payload", "ts")}
FIX_ROW = "correct that row in vectr's store (or forget the note in vectr), then import again"


def utc(ts: float) -> str:
    """vectr's REAL epoch seconds as qem's UTC time (to the second, its fraction cut off).
    Counted from the epoch rather than asked of the platform's time functions, so every
    machine gives the same time (and so the same event ids) for any time qem can write."""
    return stamp(EPOCH + timedelta(seconds=int(ts)))


def time_problem(value: object) -> str | None:
    """Why a vectr time column's value is not a time qem can write (None: it is): vectr
    writes epoch seconds, a number; qem's times run from the year 1 to 9999."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "is not a time (epoch seconds)"
    if not math.isfinite(value):
        return "is not a time (epoch seconds, a finite number)"
    try:
        utc(value)
    except OverflowError:
        return "is not a time qem can write (epoch seconds within the years 1 to 9999)"
    return None


def shown(value: object) -> str:
    """A column's value as a refusal names it: its repr, cut short (a column may hold anything)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:50]}... ({len(text)} characters)"


def _derived(*parts: object) -> str:
    return ids.encode(hashlib.sha256(json.dumps(["vectr", *parts]).encode()).digest())


# -- reading the vectr file ---------------------------------------------------------------------


def read_store(path: Path) -> tuple[dict[str, dict[int, VectrNote]], dict[str, list[dict[str, Any]]]]:
    """The notes of every vectr workspace in the file (with their events, in vectr's
    order) and, per workspace, the events of notes the file no longer holds.  The file
    (and its write-ahead log) is read from a private copy: vectr's own store is never
    touched, and a read-only one needs no -shm beside it."""
    if not path.is_file():
        raise errors.BadInput(f"{path}: no such file (a vectr store is its working_context.sqlite)")
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "vectr.sqlite"
        for suffix in ("", "-wal"):
            if Path(f"{path}{suffix}").is_file():
                shutil.copyfile(f"{path}{suffix}", f"{copy}{suffix}")
        try:
            conn = sqlite3.connect(copy)
            conn.row_factory = sqlite3.Row
            try:
                _refuse_missing_columns(path, conn)
                notes = [dict(r) for r in conn.execute("SELECT * FROM notes ORDER BY note_id")]
                events = [dict(r) for r in conn.execute("SELECT * FROM note_events ORDER BY id")]
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise errors.NotAStore(f"{path} cannot be read as a vectr store ({exc}): it needs the tables"
                                   " notes and note_events") from None
    _refuse_bad_ids(path, notes, events)
    by_workspace: dict[str, dict[int, VectrNote]] = {}
    for row in notes:
        by_workspace.setdefault(str(row["workspace"]), {})[row["note_id"]] = VectrNote(row)
    orphans: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        note = by_workspace.get(str(event["workspace"]), {}).get(event["note_id"])
        if note is None:
            orphans.setdefault(str(event["workspace"]), []).append(event)
        else:
            note.events.append(event)
    return by_workspace, orphans


def _refuse_missing_columns(path: Path, conn: Any) -> None:
    """A file whose tables lack a column vectr has always written (NEEDED) is not a vectr
    store the import can read: refused, naming the column, before a row is read."""
    for table, needed in NEEDED.items():
        held = {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}
        missing = [column for column in needed if column not in held]
        if held and missing:
            raise errors.NotAStore(f"{path} cannot be read as a vectr store: its table {table} has no column"
                                   f" {', '.join(missing)}; nothing was imported")


def _is_id(value: object, top: int | None = None) -> bool:
    """An integer (vectr's ids; with `top`, from 1 to `top`)."""
    return isinstance(value, int) and not isinstance(value, bool) and (top is None or 0 < value <= top)


def _refuse_bad_ids(path: Path, notes: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    """The ids that tie vectr's rows together are integers (vectr's INTEGER columns; an
    event's id is the qem event's clock, so at most MAX_CLOCK): a row that holds anything
    else cannot be placed, and the import is refused, naming it, before anything is
    decided.  (A note id that names no note is vectr's forget, and is named, not refused.)"""
    for row in notes:
        if not _is_id(row["note_id"]):
            raise errors.BadInput(f"{path}: a vectr note's note_id {shown(row['note_id'])} is not a note id (an"
                                  " integer); nothing was imported", hint=FIX_ROW)
    for event in events:
        if not _is_id(event["id"], MAX_CLOCK):
            raise errors.BadInput(f"{path}: a vectr event's id {shown(event['id'])} is not an event id (a positive"
                                  f" integer no larger than {MAX_CLOCK}); nothing was imported", hint=FIX_ROW)
        if not _is_id(event["note_id"]):
            raise errors.BadInput(f"{path}: vectr event {event['id']} ({shown(event['event'])}): note_id"
                                  f" {shown(event['note_id'])} is not a note id (an integer); nothing was imported",
                                  hint=FIX_ROW)


def pick_workspace(workspaces: dict[str, dict[int, VectrNote]], name: str | None, path: Path) -> str:
    """The vectr workspace to import: NAME (its path, or the path's last part), or the
    file's only one."""
    listed = "; ".join(f"{w} ({len(n)} notes)" for w, n in sorted(workspaces.items()))
    if name is not None:
        found = [w for w in workspaces if name in (w, Path(w).name)]
        if len(found) == 1:
            return found[0]
        what = "no" if not found else "more than one"
        raise errors.BadInput(f"--workspace-name {name!r} names {what} vectr workspace in {path}: {listed or 'none'}")
    if len(workspaces) == 1:
        return next(iter(workspaces))
    if not workspaces:
        raise errors.BadInput(f"{path} holds no vectr notes")
    raise errors.BadInput(f"{path} holds {len(workspaces)} vectr workspaces: {listed}",
                          hint="pick one with --workspace-name NAME (its path, or its last part)")


# -- deciding what each note and event becomes ---------------------------------------------------


def refusal(note: VectrNote) -> str | None:
    """Why a vectr note cannot become a qem note (None: it can)."""
    row = note.row
    content = row.get("content")
    if not isinstance(content, str):
        return "its content is not text"
    if content.startswith("gAAAAA"):
        return "its content is encrypted (VECTR_ENCRYPT_KEY); export it decrypted from vectr first"
    for column, allowed in (("kind", KINDS), ("priority", PRIORITIES), ("provenance", PROVENANCES)):
        if row.get(column) not in allowed:
            return f"{column} {row.get(column)!r} is not a qem {column} ({', '.join(allowed)})"
    try:
        text = normalize_text(content)
    except TextError as exc:
        return str(exc)
    # stored as every text is (its key as long as the import's): a text the log's readers refuse is no note
    return text_problem(TextRecord("", _derived("key", "", note.id), text))


def first_provenance(note: VectrNote) -> tuple[str, list[dict[str, Any]]]:
    """The provenance the note had before any promotion to human, and the promotions to
    something else (which qem has no event for) that it folds in."""
    row = note.row
    promotions = [e for e in note.events if e["event"] == "promoted"]
    if not promotions:
        return str(row["provenance"]), []
    created = next((e for e in note.events if e["event"] == "created"), None)
    start = CREATED_BY.get(str(created["actor"]) if created else "", str(row["provenance"]))
    if start == "agent" and row.get("user_quote"):
        start = "user-stated"
    folded = []
    for event in promotions:
        if event["payload"] == "human":
            break
        if event["payload"] in PROVENANCES:
            start = str(event["payload"])
            folded.append(event)
    return start, folded


@dataclass
class Step:
    """A qem event decided from vectr: on which vectr note, of what type, when, by whom,
    why, in what order (`clock`: the vectr event's id), and what of vectr it keeps."""

    note: int
    type: str
    ts: float
    actor: str
    reason: str | None
    clock: int
    vectr: dict[str, Any]
    by: int | None = None  # superseded: the successor's vectr id
    from_: str | None = None  # promoted: the provenance before


def _actor(*candidates: object) -> str:
    for value in candidates:
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return "vectr"


def _kept(event: dict[str, Any]) -> dict[str, Any]:
    return {"event": event["id"], "ts": event["ts"], "payload": _plain(event.get("payload"))}


def _plain(value: object) -> object:
    """A column's value as data.vectr keeps it: as it is, but bytes read as UTF-8 text, and
    a float JSON has no number for (SQLite keeps an infinity) as its text; the log is JSON
    that every reader, and the index's SQLite JSON functions, read."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


class Planner:
    """Walks the workspace's vectr events in vectr's order, tracking each note's qem
    state, and decides which become qem events; the rest is named, with why."""

    def __init__(self, workspace: str, notes: dict[int, VectrNote], orphans: list[dict[str, Any]]) -> None:
        self.report = Report(workspace)
        self.all = notes
        self.notes: dict[int, VectrNote] = {}
        for note_id, note in notes.items():
            why = refusal(note)
            if why is None:
                self.notes[note_id] = note
            else:
                self.report.skipped.append(f"vectr #{note_id}: not imported: {why}")
        if orphans:
            named = ", ".join(f"#{n}" for n in sorted({int(e["note_id"]) for e in orphans}))
            self.report.skipped.append(f"{len(orphans)} events of vectr notes the file no longer holds ({named}):"
                                       " no note to attach them to")
        self.state: dict[int, str] = {}
        self.provenance: dict[int, str] = {}
        self.links: dict[int, int] = {}
        self.consumed: set[int] = set()
        self.not_applied: dict[int, list[dict[str, Any]]] = {n: [] for n in self.notes}
        self.steps: list[Step] = []

    def plan(self) -> list[Step]:
        items = []
        for note in self.notes.values():
            created = [e for e in note.events if e["event"] == "created"]
            if not created:  # not in the fixture; kept rather than dropped
                self.report.mapped.append(f"vectr #{note.id}: no created event; created at its created_at")
                first = min((int(e["id"]) for e in note.events), default=1)
                items.append((first, 0, {"id": first, "note_id": note.id, "event": "created", "actor": "vectr",
                                         "reason": None, "payload": None, "ts": note.row["created_at"]}))
            items += [(int(e["id"]), 1, e) for e in note.events]
        for _, _, event in sorted(items, key=lambda item: item[:2]):
            self.event(self.notes[int(event["note_id"])], event)
        return self.steps

    def provenance_at_creation(self, note: VectrNote) -> str:
        return first_provenance(note)[0]

    def skip(self, note: VectrNote, event: dict[str, Any], why: str) -> None:
        self.not_applied[note.id].append({**_kept(event), "type": _plain(event["event"]),
                                          "actor": _plain(event["actor"]), "reason": _plain(event.get("reason")),
                                          "why": why})
        reason = f" ({event['reason']})" if event.get("reason") else ""
        self.report.skipped.append(f"vectr #{note.id}: {event['event']} of {utc(event['ts'])[:10]} by"
                                   f" {event['actor']}{reason} not applied: {why}")

    def event(self, note: VectrNote, event: dict[str, Any]) -> None:
        kind = str(event["event"])
        if note.id not in self.state and kind != "created":
            return self.skip(note, event, "it comes before the note's created event (in vectr's order, its ids)")
        if kind == "created":
            if note.id in self.state:
                return self.skip(note, event, "the note was created already (a second created event)")
            return self.created(note, event)
        if int(event["id"]) in self.consumed:
            return None  # a supersession, applied with its successor's creation
        if kind not in EVENTS:
            return self.skip(note, event, f"qem has no {kind!r} event")
        if kind == "superseded":
            return self.skip(note, event, f"the note was {self.state[note.id]} by then, or its successor"
                                          f" (vectr #{event.get('payload')}) was not imported")
        if kind == "promoted":
            return self.promoted(note, event)
        move = MOVE_BY_EVENT[kind]
        if self.state[note.id] not in move.sources:
            return self.skip(note, event, f"qem cannot {move.refusal} a note that is {self.state[note.id]}")
        self.state[note.id] = str(move.target)
        self.steps.append(Step(note.id, kind, event["ts"], _actor(event["actor"]), event.get("reason"),
                               int(event["id"]), _kept(event)))
        return None

    def promoted(self, note: VectrNote, event: dict[str, Any]) -> None:
        if event.get("payload") != "human":
            if any(e is event for e in first_provenance(note)[1]):
                return None  # folded into the provenance it was created with (reported there)
            return self.skip(note, event, f"qem promotes only to human, not to {event.get('payload')!r}")
        if self.provenance[note.id] == "human":
            return self.skip(note, event, "the note is already provenance human")
        self.steps.append(Step(note.id, "promoted", event["ts"], _actor(event["actor"]), event.get("reason"),
                               int(event["id"]), _kept(event), from_=self.provenance[note.id]))
        self.provenance[note.id] = "human"
        return None

    def created(self, note: VectrNote, event: dict[str, Any]) -> None:
        provenance, folded = first_provenance(note)
        for promotion in folded:
            self.report.mapped.append(
                f"vectr #{note.id}: promoted to {promotion['payload']} on {utc(promotion['ts'])[:10]}: qem promotes"
                f" only to human, so the note is {promotion['payload']} from its creation")
        self.state[note.id], self.provenance[note.id] = "active", provenance
        clock = int(event["id"])
        self.steps.append(Step(note.id, "created", note.row["created_at"],
                               _actor(note.row.get("author_id"), event["actor"]), None, clock, _kept(event)))
        old = self.predecessor(note)
        if old is None:
            return None
        self.links[note.id] = old.id
        done = next((e for e in old.events if e["event"] == "superseded" and str(e.get("payload")) == str(note.id)
                     and int(e["id"]) not in self.consumed), None)
        if done is not None:
            self.consumed.add(int(done["id"]))
        source = done or {"id": None, "ts": note.row["created_at"], "payload": None,  # code_hash: no event
                          "actor": old.row.get("superseded_by") or event["actor"], "link": "code_hash"}
        self.steps.append(Step(old.id, "superseded", source["ts"], _actor(source["actor"]), None,
                               max(clock, int(source["id"] or 0)),
                               {**_kept(source), **({"link": "code_hash"} if done is None else {})}, by=note.id))
        self.state[old.id] = "superseded"
        return None

    def predecessor(self, note: VectrNote) -> VectrNote | None:
        """The note this one supersedes in qem: vectr's `supersedes` link, or, where
        vectr superseded by `code_hash` (no event, no link), the live note with the same
        hash whose `superseded_at` is this note's creation."""
        row, live = note.row, ("active", "stale")
        if row.get("supersedes") is not None:
            old = self.notes.get(row["supersedes"])
            where = ("a note the file no longer holds (vectr forgot it)" if row["supersedes"] not in self.all
                     else "a note not imported" if old is None else "itself" if old is note
                     else "a note created after it" if old.id not in self.state
                     else f"a note already {self.state[old.id]}")
            if old is not None and old is not note and self.state.get(old.id) in live:
                return old
            self.report.mapped.append(f"vectr #{note.id}: supersedes vectr #{row['supersedes']}, {where}: imported"
                                      " superseding nothing (data.vectr.supersedes keeps the link)")
            return None
        if not row.get("code_hash"):
            return None
        same = [n for n in self.notes.values() if n.id != note.id and n.row.get("code_hash") == row["code_hash"]
                and n.row.get("superseded_by") and n.row.get("superseded_at") == row["created_at"]
                and self.state.get(n.id) in live]
        for other in same[1:]:
            self.report.mapped.append(f"vectr #{other.id}: superseded by #{note.id} through code_hash, as"
                                      f" #{same[0].id} was; a qem note supersedes one note: left in force")
        if same:
            self.report.mapped.append(f"vectr #{same[0].id}: superseded by #{note.id} ({same[0].row['superseded_by']})"
                                      " through their code_hash, with no event or link in vectr: imported as a"
                                      " supersession")
        return same[0] if same else None


# -- the qem events ---------------------------------------------------------------------------------


def _json(value: object) -> object:
    """A JSON column's value (its text where it is not JSON; bytes read as UTF-8 text).
    JSON here is what the log holds: no NaN or infinity (`Infinity`, `1e999`; the index's
    SQLite JSON functions refuse them) and no string UTF-8 cannot hold (`"\\ud800"`)."""
    value = _plain(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value, parse_float=finite, parse_constant=finite)
        except (ValueError, RecursionError):
            return value
        # kept as its text where it nests past what an event holds around it (the event, its data,
        # `vectr`): a log reader sets such an event aside, as it does another clone's
        if nests_past(parsed, MAX_NESTING - 3):
            return value
        try:
            json.dumps(parsed, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return value
        return parsed
    return value


# -- anchors --------------------------------------------------------------------------------------

_HASHED = re.compile(r"[0-9a-f]{16}\Z")  # vectr's hash of a file: sha256(content)[:16]


def anchor_pairs(value: object) -> list[tuple[str, object]] | None:
    """vectr's `anchors` (read as JSON) as (path, hash) pairs; None when it is not the list
    of [path, hash or null] pairs vectr writes."""
    if not isinstance(value, list):
        return None
    if not all(isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) for item in value):
        return None
    return [(item[0], item[1]) for item in value]


def matched(tree: anchors.WorkTree, path: str, hashed: object) -> tuple[str | None, str]:
    """(git's object id, "") of a vectr anchor whose file the work tree holds now with the
    content vectr hashed; else (None, why).  A path no anchor may have is never read."""
    if hashed is None:
        return None, "vectr recorded no hash of it"
    if not isinstance(hashed, str) or not _HASHED.match(hashed):
        return None, f"its hash {hashed!r} is not vectr's (16 hex digits of a sha256)"
    problem = anchor_path_problem(path)
    if problem:
        return None, f"{problem} (not read)"
    try:
        checked = anchors.checked_path(tree, path, tree.top)
    except errors.BadInput as exc:
        return None, str(exc).split(": ", 1)[-1]
    found = anchors.file_digests(tree, checked, "sha256")
    if found is None:
        return None, "not a file (vectr hashes a file's content)"
    oid, digest = found
    return (oid, "") if digest[:16] == hashed else (None, "its content is not the content vectr hashed")


def _first_import(store: Any, workspace: str, number: int) -> Mapping[str, Any] | None:
    """The created event's data of the note an earlier import made of vectr note `number`
    (None: none)."""
    for note_id, where in store.imported_from_vectr(number):
        if where == workspace:
            created = next((e for e in store.events(note_id) if e.type == "created"), None)
            if created is not None:
                return created.data
    return None


# vectr's trigger events that are qem moments (docs/VECTR.md); its others (pre-commit, a
# symbol, a similarity, a cooldown, ...) have no exact counterpart and stay in data.vectr.
VECTR_MOMENTS = {"session-start": "start", "session_start": "start", "start": "start", "post-compact": "compact",
                 "compact": "compact", "prompt": "prompt", "user-prompt": "prompt", "pre-edit": "edit", "edit": "edit",
                 "pre-read": "read", "read": "read", "pre-command": "shell", "shell": "shell"}


def triggering(store: Any, planner: Planner) -> dict[int, tuple[Trigger, ...]]:
    """Each note's qem triggers: vectr's `event` (a qem moment), `path` and `command`
    triggers that qem's rules take, or, for a note imported before, those its first
    import gave it (so importing again adds nothing).  The others are named."""
    out: dict[int, tuple[Trigger, ...]] = {}
    for note in planner.notes.values():
        earlier = _first_import(store, planner.report.workspace, note.id)
        if earlier is not None:
            out[note.id] = triggers_of(earlier)
            continue
        given = _json(note.row.get("triggers", "[]"))
        found: set[Trigger] = set()
        for rule in given if isinstance(given, list) else [given]:
            pairs = _trigger_pairs(rule)
            if pairs is None:
                planner.report.skipped.append(f"vectr #{note.id}: trigger {json.dumps(rule)} has no exact qem"
                                              " counterpart: kept in data.vectr.triggers")
            found.update(pairs or ())
        if found:
            out[note.id] = tuple(sorted(found))
            planner.report.mapped.append(f"vectr #{note.id}: triggers " + ", ".join(
                f"@{TRIGGER_ATTRIBUTES[name]}: {value}" for name, value in out[note.id]))
    return out


def _trigger_pairs(rule: object) -> list[Trigger] | None:
    """One vectr trigger as qem's (None: it has something qem does not match exactly)."""
    if not isinstance(rule, dict) or not rule or set(rule) - {"event", "path", "command"}:
        return None
    pairs = [("on", VECTR_MOMENTS.get(str(rule.get("event")), "")) if "event" in rule else None,
             ("path", rule["path"]) if "path" in rule else None, ("run", rule["command"]) if "command" in rule else None]
    kept = [p for p in pairs if p is not None]
    if len(kept) != 1 or trigger_problem(*kept[0]) is not None:  # a rule joining two conditions has no counterpart
        return None
    return kept


def anchoring(store: Any, planner: Planner, tree: anchors.WorkTree) -> dict[int, list[tuple[str, str]]]:
    """Each note's qem anchors (path, object id), in path order: the vectr anchors the work
    tree holds with the content vectr hashed, or, for a note imported before, those its
    first import found (so importing again adds nothing).  The others are named."""
    report, out = planner.report, {}
    for note in planner.notes.values():
        pairs = anchor_pairs(_json(note.row.get("anchors", "[]")))
        if pairs is None:
            report.skipped.append(f"vectr #{note.id}: its anchors are not vectr's list of [path, hash] pairs:"
                                  " kept in data.vectr.anchors, none anchored")
            continue
        first = _first_import(store, report.workspace, note.id)
        earlier = dict(anchors_of(first)) if first is not None else None
        found: dict[str, str] = {}
        for path, hashed in pairs:
            if earlier is not None:
                oid, why = earlier.get(path), "not matched when the note was first imported"
            else:
                oid, why = matched(tree, path, hashed)
            if oid is None:
                report.unmatched.append(f"vectr #{note.id}: {path!r}: {why}")
            else:
                found.setdefault(path, oid)
        out[note.id] = sorted(found.items())
        report.anchored += len(found)
    return out


def created_data(planner: Planner, note: VectrNote, qid: dict[int, str], short: int,
                 anchored: list[tuple[str, str]], triggers: tuple[Trigger, ...] = ()) -> dict[str, Any]:
    row = note.row
    vectr = {
        "id": note.id, "workspace": planner.report.workspace, "created_at": row["created_at"],
        "event": next((int(e["id"]) for e in note.events if e["event"] == "created"), None),
        "author_id": _plain(row.get("author_id") or None), "session_id": _plain(row.get("session_id")),
        "tags": _json(row.get("tags", "[]")), "scope": _plain(row.get("scope")),
        "branch": _plain(row.get("branch") or None),
        "anchors": _json(row.get("anchors", "[]")), "triggers": _json(row.get("triggers", "[]")),
        "pinned": bool(row.get("pinned")), "code_hash": _plain(row.get("code_hash") or None),
        "supersedes": row.get("supersedes"), "user_quote_bound": bool(row.get("user_quote")),
        "not_applied": planner.not_applied[note.id],
        "promotions_folded": [{**_kept(e), "to": _plain(e["payload"])} for e in first_provenance(note)[1]],
    }
    old = planner.links.get(note.id)
    data = {"kind": row["kind"], "priority": row["priority"], "provenance": planner.provenance_at_creation(note),
            "supersedes": qid[old] if old is not None else None, "nonce": _derived("nonce", vectr["workspace"], note.id),
            "short": short, "vectr": vectr}
    if anchored:  # only then: a note with none keeps the bytes it had before anchors were imported
        data["anchors"] = [{"path": path, "oid": oid} for path, oid in anchored]
    if triggers:  # the same: only a note with some carries them
        data["triggers"] = trigger_data(triggers)
    return data


def build(planner: Planner, steps: list[Step], anchored: dict[int, list[tuple[str, str]]],
          triggered: Mapping[int, tuple[Trigger, ...]] | None = None) -> tuple[list[Event], list[TextRecord]]:
    """The steps as qem events (ids derived from vectr's rows, so the same store gives
    the same events) and the notes' texts; `anchored`: each note's anchors (`anchoring`)."""
    qid: dict[int, str] = {}
    tips: dict[int, str] = {}
    events: list[Event] = []
    texts: list[TextRecord] = []
    short = ids.short_length(len(planner.notes))
    for step in steps:
        note = planner.notes[step.note]
        text = None
        if step.type == "created":
            text = TextRecord("", _derived("key", planner.report.workspace, note.id), normalize_text(note.row["content"]))
            data = {**created_data(planner, note, qid, short, anchored.get(note.id, []),
                                   (triggered or {}).get(note.id, ())), "text": text.digest}
        else:
            data = {"vectr": step.vectr}
            if step.by is not None:
                data["by"] = qid[step.by]
            if step.from_ is not None:
                data["from"] = step.from_
        on = "" if step.type == "created" else qid[step.note]
        prev = () if step.type == "created" else (tips[step.note],)
        draft = Event("", on, step.type, utc(step.ts), step.actor, step.reason, None, data, step.clock, prev)
        event_id = read_back(draft, step)
        events.append(Event(event_id, on or event_id, step.type, draft.at, step.actor, step.reason, None, data,
                            step.clock, prev))
        if text is not None:
            qid[note.id] = event_id
            texts.append(TextRecord(event_id, text.key, text.text))
            problem = text_problem(texts[-1])  # (`refusal` skips such a note: this stands behind it)
            if problem:
                raise errors.BadInput(f"vectr #{note.id}: its text: {problem}; nothing was imported")
        tips[step.note] = event_id
    return events, texts


def read_back(draft: Event, step: Step) -> str:
    """The id of the event `draft` (of the vectr note and event `step`), once its line is
    read back as every qem reader reads a pack's line (parsed, then each field checked:
    logtree.event_from): an event a reader would set aside hides the whole pack, every
    note imported, on every clone, so it is refused (BadInput) before anything is written.
    `_refuse_malformed` names the columns qem needs; this stands behind it."""
    where = f"vectr #{step.note}: its {step.type} event (vectr event {step.vectr.get('event')})"
    try:
        line = event_bytes(draft)
        obj, proven = parsed_record(line[:-1], where)
        return event_from(obj, where, line, proven).id
    except LogFileError as exc:
        problem = str(exc)
    except (TypeError, ValueError, RecursionError) as exc:  # (a value JSON cannot hold)
        problem = f"{where}: {exc}"
    raise errors.BadInput(f"{problem}: every qem reader would set it aside; nothing was imported")


# -- the import ---------------------------------------------------------------------------------------


def not_carried(notes: dict[int, VectrNote]) -> list[str]:
    """What of vectr qem does not keep, named (the rest is in each created event's data)."""
    out = []
    for note in notes.values():
        title, content = note.row.get("title") or "", str(note.row.get("content") or "")
        derived = next((line.strip() for line in content.splitlines() if line.strip()), "")[:80]
        if title and title != derived:
            out.append(f"vectr #{note.id}: its title {title!r} (a qem note's title is its text's first line)")
    quoted = [f"#{n.id}" for n in notes.values() if n.row.get("user_quote")]
    if quoted:
        out.append(f"the user quotes of vectr {', '.join(quoted)} (the provenance they bound is kept; qem keeps no"
                   " text outside a note's own, which forget erases)")
    out.append("times below the second (data.vectr.created_at and each event's data.vectr.ts keep them), and"
               " vectr's ranking and access fields (decay_score, last_accessed, last_fired, author_trust_score),"
               " snapshots and author_trust")
    return out


@dataclass
class Prepared:
    """An import planned, not yet written: the steps each vectr note and event become,
    and its report (the anchors are decided against the memory and the work tree)."""

    report: Report
    planner: Planner
    steps: list[Step]


def prepare(path: Path, workspace_name: str | None) -> Prepared:
    """Read the vectr store and plan the qem events (nothing is written)."""
    workspaces, orphans = read_store(path)
    workspace = pick_workspace(workspaces, workspace_name, path)
    planner = Planner(workspace, workspaces[workspace], orphans.get(workspace, []))
    _refuse_secrets(planner)
    _refuse_malformed(planner)  # (after the secrets: its refusal shows the value)
    steps = planner.plan()
    build(planner, steps, {})  # every event checked as a reader reads it, before any memory is opened
    report = planner.report
    for note in planner.notes.values():
        if normalize_text(note.row["content"]) != note.row["content"]:
            report.mapped.append(f"vectr #{note.id}: text normalized as qem stores every text (CR LF → LF,"
                                 " trailing whitespace and blank lines at either end dropped)")
    report.mapped.sort(key=_by_note)
    report.skipped.sort(key=_by_note)
    report.not_carried = not_carried(planner.notes)
    report.notes, report.events = len(planner.notes), len(steps)
    return Prepared(report, planner, steps)


def _refuse_secrets(planner: Planner) -> None:
    """A secret in any column of a vectr note the import brings, or of its events (its
    content, title, tags, triggers, anchors, author, an event's actor or reason...),
    refuses the import before anything is written, naming the note and the column, never
    the secret: what qem keeps of a note reaches the committed log, and what it does not
    keep is named in the report (SecretRefused; the load's own check stands behind it)."""
    from ..storage.secrets import SecretRefused, described, scan

    for note in planner.notes.values():
        for where, row in [("", note.row)] + [(f"its {e.get('event')} event's ", e) for e in note.events]:
            for column, value in row.items():
                found = scan(value.decode("utf-8", "replace") if isinstance(value, bytes) else
                             value if isinstance(value, str) else None)
                if found:
                    raise SecretRefused(
                        f"vectr #{note.id}: {where}{column} holds a secret ({described(found)}): qem would keep it in"
                        " the committed log, or print it; nothing was imported",
                        hint="remove the secret from that vectr note (a placeholder such as <token> keeps its"
                             " sense), or forget the note in vectr, then import again")


def _refuse_malformed(planner: Planner) -> None:
    """A column of a vectr note the import brings, or of its events, that holds what vectr
    never writes where qem needs a value (a time that is not epoch seconds, a `supersedes`
    that is not a note id, a writer's name or a reason no log reader takes) refuses the
    import before anything is written, naming the note, the column and the value: each
    such event would be set aside by every clone's reader, and with it the whole pack,
    every note imported.  (A column qem only keeps, in data.vectr, is kept as it is; a
    note qem cannot hold is skipped by `refusal`, named.)  The time of the note's created
    event is its created_at, so that event's ts is not read, nor asked to be a time."""
    for note in planner.notes.values():
        creation = next((e for e in note.events if e["event"] == "created"), None)
        for where, row in [("", note.row)] + [(f"its {e['event']} event's ", e) for e in note.events]:
            problem = _row_problem(row, where == "", row is not creation)
            if problem:
                column, why = problem
                event = "" if where == "" else f" (vectr event {row['id']})"
                raise errors.BadInput(f"vectr #{note.id}: {where}{column} {shown(row.get(column))}{event} {why};"
                                      " nothing was imported", hint=FIX_ROW)


def _row_problem(row: dict[str, Any], is_note: bool, timed: bool) -> tuple[str, str] | None:
    """(column, why) of the first column of a note's row (`is_note`) or of an event's row
    that qem cannot write (None: none); `timed`: its time is read."""
    time = "created_at" if is_note else "ts"
    if timed and (why := time_problem(row[time])):
        return time, why
    if is_note and row.get("supersedes") is not None and not _is_id(row["supersedes"]):
        return "supersedes", "is not a vectr note id (an integer)"
    name = "author_id" if is_note else "actor"
    if isinstance(row.get(name), str) and row[name].strip() and (why := actor_problem(_actor(row[name]))):
        return name, f"is not a writer's name qem takes ({why})"
    if not is_note and reason_problem(row.get("reason")):
        return "reason", "is not a reason qem takes (text with no NUL, or none)"
    return None


def _by_note(line: str) -> int:
    return int(line.split(":")[0][len("vectr #"):]) if line.startswith("vectr #") else 0


def import_vectr(store: Any, prepared: Prepared, tree: anchors.WorkTree, *, allow_secret: bool = False) -> Report:
    """Decide the anchors (against the memory and the work tree `tree`), make the events
    and add them with `qem load`'s code; the report, with how many were new."""
    from .dump import load

    events, texts = build(prepared.planner, prepared.steps, anchoring(store, prepared.planner, tree),
                          triggering(store, prepared.planner))
    prepared.report.skipped.sort(key=_by_note)
    prepared.report.new = load(store, events, texts, None, allow_secret=allow_secret)
    return prepared.report
