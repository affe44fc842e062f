"""The log: immutable, content-addressed files in the working tree, merged by git.

    .qem/events/<id>            one event, canonical JSON; <id> is the hash of its bytes
    .qem/texts/<note id>        one note's text, apart from its events so that forget
                                can delete it; its hash is in the note's created event
    .qem/packs/e-<id>.jsonl     many events, one canonical JSON a line
    .qem/packs/t-<id>.jsonl     many texts
    .qem/config.toml            the memory's id and settings (committed)
    .qem/.gitignore             the local index, kept edits and private/ never travel
    .qem/private/events/<id>    a private or session note's events and texts: this clone's
    .qem/private/texts/<note>   alone, ignored by git (`.qem/private/.gitignore` says `*`),
                                read into the index beside the log, never packed or staged

Two branches never touch the same file in different ways: an event is a new file with a
name nobody else can make for other bytes, a pack is a new file too, and files are only
ever added or deleted.  So git merges the log with no conflict and no configuration, on a
laptop or on a hosting service, and an event that arrives by two paths is one file.

Everything read here comes from other people's clones and is untrusted: a file whose
bytes do not hash to its name, that is not canonical, too large, malformed, of an unknown
type, or not a regular file is set aside with a message naming it (LogFileError), and the
rest is read.  Nothing here writes outside the log directory.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence

from ..base import cjson, errors, ids
from ..base.patterns import Lazy
from ..base.records import Record
from ..base.replay import Event
from ..base.stored_form import (
    ANCHORING,
    actor_problem,
    anchors_problem,
    base_change_problem,
    drift_problem,
    is_timestamp,
    normalize_text,
    reason_problem,
    request_problem,
    scope_problem,
)
from ..base.triggers import triggers_problem
from ..base.vocabulary import EVENT_TYPES, KINDS, PRIORITIES, PROVENANCES, TextError
from ..system.files import fsync_dir, read_text, write_atomic
from .stamp import EVENTS, LOCAL, PACKS, TEXTS
from .stamp import stamp as log_stamp

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..system.files import AnyPath

FORMAT = 1
MAX_EVENT_BYTES = 1 << 20  # an event holds no text: anything near this is not an event
MAX_TEXT_BYTES = 16 << 20  # a note's text as stored (its packed line, the larger form), on write and read
# The largest clock a reader takes.  A writer takes the next clock after the largest in the
# log and refuses to pass this, so no write is ever of an event a reader sets aside; it is
# far above any real log (a billion writes a second for over a hundred days), and far
# below the integers SQLite and JSON readers hold exactly.
MAX_CLOCK = 1 << 53
MAX_PACK_BYTES = 256 << 20
PACK_SPLIT_BYTES = 64 << 20  # a write of more events than this splits them into packs this large
TEXTS_PER_PACK = 1000  # a forget rewrites the pack holding the text: keep packs of texts small
LOCAL_GITIGNORE = "# Written by qem: this clone's private and session notes never travel.\n*\n"
_PACK_NAME = Lazy(rf"([et])-([{ids.ALPHABET}]{{{ids.ID_LENGTH}}})\.jsonl\Z")
GITIGNORE = """\
# Written by qem.  The log (events/, texts/, packs/) and config.toml are committed with
# the code; the index is rebuilt from them by any qem command, and kept edits are private.
/index.db
/index.db-*
/checkouts/
/*.lock
/mirror-base.md
/memory.db*
.*.tmp
/private/
"""
# The line of GITIGNORE that ignores the private folder: a second guard beside the
# folder's own `.gitignore` (which a person may delete), added to a memory started
# before it had the line once the memory has private or session notes.
LOCAL_IGNORE_LINE = f"/{LOCAL}/"
GITATTRIBUTES = """\
# Written by qem: log files are hashed byte for byte; no line-end conversion.  Their diffs
# are one line per event where `qem hooks install` configured the qem-log driver.
events/** -text diff=qem-log
texts/** -text diff=qem-log
packs/** -text diff=qem-log
"""


class LogFileError(ValueError):
    """A log file that cannot be read as what its name says (it is set aside)."""


class TextRecord:
    """A note's text as the log stores it: the note, a random key, the text; its digest
    (the content id the created event names) computed once, when first asked."""

    __slots__ = ("note", "key", "text", "_digest")

    def __init__(self, note: str, key: str, text: str) -> None:
        self.note, self.key, self.text = note, key, text
        self._digest: str | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextRecord) and (self.note, self.key, self.text) == (other.note, other.key, other.text)

    def __hash__(self) -> int:
        return hash((self.note, self.key, self.text))

    def __repr__(self) -> str:
        return f"TextRecord(note={self.note!r}, key={self.key!r}, text={self.text!r})"

    def record_bytes(self) -> bytes:
        return canonical({"key": self.key, "text": self.text})

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = ids.content_id(self.record_bytes())
        return self._digest


# cjson.dumps with these options makes an encoder on every call: one is kept (every record read is re-encoded)
_CANONICAL = cjson.encoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def canonical(obj: object) -> bytes:
    """The one byte form of a JSON value: sorted keys, no spaces, UTF-8, a final newline."""
    return (_CANONICAL(obj) + "\n").encode("utf-8")


# -- events as JSON ---------------------------------------------------------------------------------


def event_object(event: Event) -> dict[str, object]:
    """An event's stored form (its id is the hash of these bytes, so it is not in them)."""
    return {
        "v": FORMAT,
        "type": event.type,
        "note": None if event.type == "created" else event.note,
        "at": event.at,
        "actor": event.actor,
        "reason": event.reason,
        "checkin": event.checkin,
        "clock": event.clock,
        "prev": list(event.prev),
        "data": dict(event.data),
    }


def event_bytes(event: Event) -> bytes:
    return canonical(event_object(event))


def event_from(obj: object, where: str, raw: bytes | None = None, proven: bool = False) -> Event:
    """The event a stored object describes, checked field by field (LogFileError); with
    `raw`, the bytes it was read from, which must be its canonical form (`proven`: already
    shown to be, by `parsed_record`, so not encoded again)."""
    if not isinstance(obj, dict):
        raise LogFileError(f"{where}: not a JSON object")
    missing = {"v", "type", "note", "at", "actor", "reason", "checkin", "clock", "prev", "data"} - set(obj)
    if missing or len(obj) != 10:
        raise LogFileError(f"{where}: the fields of an event are wrong (missing {sorted(missing) or 'none'})")
    if obj["v"] != FORMAT:
        raise LogFileError(f"{where}: log format {obj['v']!r}; this qem reads format {FORMAT}")
    if obj["type"] not in EVENT_TYPES:
        raise LogFileError(f"{where}: unknown event type {obj['type']!r}")
    _check_fields(obj, where)
    if proven and raw is not None:
        bytes_ = raw
    else:
        try:
            bytes_ = canonical(obj)
        except UnicodeEncodeError:
            raise LogFileError(f"{where}: holds a string that is not UTF-8 (a lone surrogate)") from None
        except RecursionError:  # (nesting the parser's stack took, the encoder's, a few frames deeper, does not)
            raise LogFileError(f"{where}: not JSON (nested too deeply)") from None
        if raw is not None and raw != bytes_:
            raise LogFileError(f"{where}: not in canonical form")
    _check_nesting(bytes_, obj, where)
    event_id = ids.content_id(bytes_)
    note = event_id if obj["type"] == "created" else obj["note"]
    return Event(event_id, note, obj["type"], obj["at"], obj["actor"], obj["reason"], obj["checkin"],
                 obj["data"], obj["clock"], tuple(obj["prev"]))


def _check_fields(obj: dict, where: str) -> None:
    if obj["type"] == "created":
        if obj["note"] is not None:
            raise LogFileError(f"{where}: a created event names no note (its id is the note's)")
    elif not ids.is_id(obj["note"]):
        raise LogFileError(f"{where}: note {obj['note']!r} is not a note id")
    if not is_timestamp(obj["at"]):
        raise LogFileError(f"{where}: at must be a UTC time like 2026-07-27T10:00:00Z")
    problem = _actor_problem(obj["actor"]) or reason_problem(obj["reason"])
    if problem:
        raise LogFileError(f"{where}: {problem}")
    if obj["checkin"] is not None and not isinstance(obj["checkin"], str):
        raise LogFileError(f"{where}: checkin must be a string or null")
    clock = obj["clock"]
    if not isinstance(clock, int) or isinstance(clock, bool) or not 0 < clock <= MAX_CLOCK:
        raise LogFileError(f"{where}: clock must be a positive integer no larger than {MAX_CLOCK}")
    prev = obj["prev"]
    if not isinstance(prev, list) or not all(ids.is_id(p) for p in prev) or len(set(prev)) != len(prev):
        raise LogFileError(f"{where}: prev must be a list of distinct event ids")
    if (obj["type"] == "created") != (not prev):
        raise LogFileError(f"{where}: a created event, and only it, has no prev")
    if not isinstance(obj["data"], dict):
        raise LogFileError(f"{where}: data must be an object")
    problem = _data_problem(obj["type"], obj["data"])
    if problem:
        raise LogFileError(f"{where}: {obj['type']} event: {problem}")


_FINE_ACTORS: set[str] = set()  # names found fine in this process: a log has few writers and many events


def _actor_problem(actor: object) -> str | None:
    """`actor_problem`, asked once per name: its check is a character at a time.  A name
    of printable ASCII with no spaces at its ends is fine without asking (for ASCII,
    `isprintable` is false exactly for the control characters, the only ones of the rule's
    categories there): a log of many sessions has more names than the set keeps."""
    if type(actor) is str and (actor in _FINE_ACTORS or actor.isascii() and actor.isprintable()
                               and actor and actor == actor.strip()):
        return None
    problem = actor_problem(actor)
    if problem is None and len(_FINE_ACTORS) < 4096:
        _FINE_ACTORS.add(actor)  # type: ignore[arg-type]
    return problem


def _data_problem(type_: str, data: dict) -> str | None:
    """What is wrong with an event's data for its type (None: nothing)."""
    if "anchors" in data and type_ not in ANCHORING:
        return f"a {type_} event carries no anchors (only {', '.join(ANCHORING)} do)"
    if "anchors" in data and anchors_problem(data["anchors"]):  # never followed unchecked
        return str(anchors_problem(data["anchors"]))
    if drift_problem(type_, data) or base_change_problem(type_, data):
        return drift_problem(type_, data) or base_change_problem(type_, data)
    if "triggers" in data and (type_ != "created" or triggers_problem(data["triggers"])):
        return f"a {type_} event carries no triggers" if type_ != "created" else str(triggers_problem(data["triggers"]))
    if type_ == "created":
        if data.get("kind") not in KINDS or data.get("priority") not in PRIORITIES:
            return "unknown kind or priority"
        if data.get("provenance") not in PROVENANCES:
            return "unknown provenance"
        if not ids.is_id(data.get("text")) or not isinstance(data.get("nonce"), str):
            return "no text hash or nonce"
        if data.get("supersedes") is not None and not ids.is_id(data["supersedes"]):
            return f"supersedes {data['supersedes']!r} is not a note id"
        if "expires" in data and not is_timestamp(data["expires"]):
            return f"expires {data['expires']!r} is not a UTC time like 2026-07-27T10:00:00Z"
        return request_problem(data) or scope_problem(data.get("scope"), data.get("session"))
    if {"scope", "session"} & set(data):
        return f"a {type_} event carries no scope or session (only a created event does)"
    if {"to", "due", "answers"} & set(data):
        return f"a {type_} event carries no to, due or answers (only a created event does)"
    if type_ == "superseded" and not ids.is_id(data.get("by")):
        return "superseded by what? ('by' is not a note id)"
    if type_ == "disputed" and not (isinstance(data.get("dispute"), str) and ids.is_id(data.get("with"))):
        return "a dispute needs its id and the other note"
    if type_ == "ruled" and not (ids.is_id(data.get("keep")) or isinstance(data.get("dispute"), str)):
        return "a ruling names the side it keeps"
    if type_ == "ruled" and any(key in data and not ids.is_id(data[key]) for key in ("keep", "kept")):
        return "a ruling names the side it keeps by its id"  # (as every ruling is written: the replay looks it up)
    return None


def text_from(obj: object, where: str) -> TextRecord:
    if not isinstance(obj, dict) or set(obj) != {"key", "text"}:
        raise LogFileError(f"{where}: a text record holds exactly a key and a text")
    if not isinstance(obj["key"], str) or not isinstance(obj["text"], str) or not obj["text"]:
        raise LogFileError(f"{where}: key and text must be strings, the text not empty")
    return TextRecord("", obj["key"], obj["text"])


def text_problem(record: TextRecord, size: int | None = None) -> str | None:
    """What keeps `record` from being a note's stored text (None: nothing), by the rules
    every write stores a text by, so that a reader applies them too: the text is what
    `normalize_text` makes of it (no CR, no NUL, no spaces at a line's end, no blank line
    at either end, not empty), and its packed line (`size` bytes, where it is known) is
    within MAX_TEXT_BYTES."""
    text = record.text
    try:
        (record.key + text).encode("utf-8")
        size = size or len(pack_text_line(TextRecord(record.note or "0" * ids.ID_LENGTH, record.key, text)))
    except UnicodeEncodeError:
        return "the text is not UTF-8 (it holds a lone surrogate)"
    if size > MAX_TEXT_BYTES:
        return f"the text is {size} bytes stored, over the {MAX_TEXT_BYTES}-byte limit for a note's text"
    try:
        normal = normalize_text(text)
    except TextError as exc:
        return str(exc)
    if normal != text:
        what = "a CR" if "\r" in text else "spaces at a line's end or blank lines at its ends"
        return f"the text holds {what}, which no write stores (texts are normalized)"
    return None


def _stored_text(record: TextRecord, where: str, size: int | None = None) -> TextRecord:
    problem = text_problem(record, size)
    if problem:
        raise LogFileError(f"{where}: {problem}")
    return record


# -- the tree -------------------------------------------------------------------------------------


class LogTree:
    """The log files under one memory directory (`<workspace>/.qem`)."""

    def __init__(self, root: AnyPath) -> None:
        self.root = root  # a string from a hook, a Path from a command: each is joined by os.path
        # what this process wrote or deleted here since it last asked (names relative to
        # the root): the one account of a write's files, which qem_edit.mirror.gitstage stages
        self.touched: set[str] = set()

    def take_touched(self) -> set[str]:
        """The names written or deleted since the last call (and forget them)."""
        touched, self.touched = self.touched, set()
        return touched

    def path(self, name: str) -> str:
        return os.path.join(self.root, name)

    # -- listing ----------------------------------------------------------------------------

    def stamp(self) -> tuple:
        """A cheap fingerprint of the file set (qem_edit.storage.stamp)."""
        return log_stamp(self.root)

    def names(self) -> set[str]:
        """Every file's name of the log a commit holds (`events/<id>`, `texts/<id>`,
        `packs/<name>`); this clone's own are `local_names`."""
        return self._names((EVENTS, TEXTS, PACKS))

    def local_names(self) -> set[str]:
        """This clone's own log files (`private/events/<id>`, `private/texts/<note>`)."""
        return self._names((f"{LOCAL}/{EVENTS}", f"{LOCAL}/{TEXTS}"))

    def all_names(self) -> set[str]:
        """What the index reads: the committed log's files and this clone's own."""
        return self.names() | self.local_names()

    def _names(self, folders: tuple[str, ...]) -> set[str]:
        found: set[str] = set()
        for folder in folders:
            try:
                with os.scandir(self.path(folder)) as entries:
                    found.update(f"{folder}/{entry.name}" for entry in entries if not entry.name.startswith("."))
            except (FileNotFoundError, NotADirectoryError):
                continue
        return found

    # -- reading ------------------------------------------------------------------------------

    def read(self, name: str) -> tuple[list[Event], list[TextRecord]]:
        """The events and texts in one log file; LogFileError names what is wrong."""
        folder = (name.partition("/")[2] if is_local(name) else name).partition("/")[0]
        limit = {EVENTS: MAX_EVENT_BYTES, TEXTS: MAX_TEXT_BYTES, PACKS: MAX_PACK_BYTES}.get(folder)
        if limit is None:
            raise LogFileError(f"{name}: not a log file")
        return records_from(name, self._bytes(name, limit))

    def pack(self, name: str) -> "PackReading":
        """A pack, to be read a stretch of lines at a time (`PackReading`); LogFileError
        when its name is not a pack's, or it is no regular file within the limit."""
        folder, _, base = name.partition("/")
        match = _PACK_NAME.match(base)
        if folder != PACKS or not match or "/" in base:
            raise LogFileError(f"{name}: not a pack name (e-<id>.jsonl or t-<id>.jsonl)")
        return PackReading(name, match[1], match[2], self._regular(name, MAX_PACK_BYTES))

    def _regular(self, name: str, limit: int) -> str:
        """The path of a log file that is a regular file within `limit` bytes (LogFileError)."""
        path = self.path(name)
        try:
            info = os.lstat(path)
        except OSError as exc:
            raise LogFileError(f"{name}: cannot be read ({exc.strerror})") from None
        if not stat.S_ISREG(info.st_mode):
            raise LogFileError(f"{name}: not a regular file (a link or a folder is set aside)")
        if info.st_size > limit:
            raise LogFileError(f"{name}: {info.st_size} bytes, over the {limit}-byte limit for such a file")
        return path

    def _bytes(self, name: str, limit: int) -> bytes:
        path = self._regular(name, limit)
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except OSError as exc:
            raise LogFileError(f"{name}: cannot be read ({exc.strerror})") from None

    # -- writing ------------------------------------------------------------------------------

    def ensure(self) -> None:
        """The log directories and qem's .gitignore and .gitattributes."""
        for folder in (EVENTS, TEXTS, PACKS):
            os.makedirs(self.path(folder), exist_ok=True)
            if os.path.islink(self.path(folder)):  # a clone can hold a link to anywhere
                raise errors.StoreUnwritable(f"{self.path(folder)} is a symbolic link; qem writes its log only"
                                             " into folders of its own; nothing was written")
        for name, text in ((".gitignore", GITIGNORE), (".gitattributes", GITATTRIBUTES)):
            path = self.path(name)
            if not os.path.exists(path):
                write_atomic(path, text.encode("utf-8"))
                self.touched.add(name)
        if os.path.isdir(self.path(LOCAL)):  # every write guards this clone's notes again
            self._guard_local()

    def _guard_local(self) -> None:
        """The private folder's own `.gitignore` as qem writes it, and the memory's
        `.gitignore` naming the folder: either alone keeps `git add -A` off it."""
        local = self.path(LOCAL)
        if os.path.islink(local):
            raise errors.StoreUnwritable(f"{local} is a symbolic link; qem writes its private notes only"
                                         " into folders of its own; nothing was written")
        ignore = os.path.join(local, ".gitignore")
        if not os.path.isfile(ignore) or read_text(ignore, "replace") != LOCAL_GITIGNORE:
            write_atomic(ignore, LOCAL_GITIGNORE.encode("utf-8"))
        memory = self.path(".gitignore")
        lines = read_text(memory, "replace").splitlines() if os.path.isfile(memory) else []
        if LOCAL_IGNORE_LINE not in (line.strip() for line in lines):
            kept = "".join(f"{line}\n" for line in lines)
            write_atomic(memory, (kept + LOCAL_IGNORE_LINE + "\n").encode("utf-8"))
            self.touched.add(".gitignore")

    def ensure_local(self) -> None:
        """This clone's own folder, ignored by git before anything is written in it."""
        local = self.path(LOCAL)
        for folder in (local, os.path.join(local, EVENTS), os.path.join(local, TEXTS)):
            os.makedirs(folder, exist_ok=True)
            if os.path.islink(folder):
                raise errors.StoreUnwritable(f"{folder} is a symbolic link; qem writes its private notes only"
                                             " into folders of its own; nothing was written")
        self._guard_local()

    def write_event(self, event: Event, local: bool = False) -> str:
        name = f"{LOCAL}/{EVENTS}/{event.id}" if local else f"{EVENTS}/{event.id}"
        path = self.path(name)
        if not os.path.exists(path):
            write_atomic(path, event_bytes(event))
        if not local:  # this clone's own files are never staged
            self.touched.add(name)
        return name

    def write_text(self, record: TextRecord, local: bool = False) -> str:
        name = f"{LOCAL}/{TEXTS}/{record.note}" if local else f"{TEXTS}/{record.note}"
        write_atomic(self.path(name), record.record_bytes())
        if not local:
            self.touched.add(name)
        return name

    def remove(self, name: str) -> None:
        if not is_local(name):
            self.touched.add(name)
        try:
            os.unlink(self.path(name))
        except FileNotFoundError:
            return
        fsync_dir(os.path.dirname(self.path(name)))

    def write_event_packs(self, events: Sequence[Event]) -> list[tuple[str, list[Event]]]:
        """`events` (in their order) as packs of at most PACK_SPLIT_BYTES each, so that no
        pack passes the limit every reader holds a pack to (a load of a big dump would):
        each pack's name with the events it holds."""
        return self._write_packs("e", events, event_bytes, None)

    def write_text_packs(self, texts: Sequence[TextRecord], per_pack: int) -> list[tuple[str, list[TextRecord]]]:
        """`texts` (in their order) as packs of at most `per_pack` texts and PACK_SPLIT_BYTES
        each (a check-in of twenty 15 MiB texts is not one pack over the reader's limit)."""
        return self._write_packs("t", texts, pack_text_line, per_pack)

    def _write_packs(self, kind: str, records: Sequence, line_of, per_pack: int | None) -> list[tuple[str, list]]:  # type: ignore[no-untyped-def]
        out: list[tuple[str, list]] = []
        chunk: list = []
        lines: list[bytes] = []
        size = 0
        for record in records:
            line = line_of(record)
            if lines and (size + len(line) > PACK_SPLIT_BYTES or len(lines) == per_pack):
                out.append((self.write_pack(kind, lines), chunk))
                chunk, lines, size = [], [], 0
            chunk.append(record)
            lines.append(line)
            size += len(line)
        if lines:
            out.append((self.write_pack(kind, lines), chunk))
        return out

    def write_pack(self, kind: str, lines: list[bytes]) -> str:
        """A pack of `lines` (each canonical, newline-ended), named by its hash."""
        import hashlib

        ordered = sorted(set(lines))
        digest = hashlib.sha256()
        for line in ordered:
            digest.update(line)
        name = f"{PACKS}/{kind}-{ids.encode(digest.digest())}.jsonl"
        if not os.path.exists(self.path(name)):
            write_atomic(self.path(name), ordered)
        self.touched.add(name)
        return name


def is_local(name: str) -> bool:
    """Whether a log file's name is one of this clone's own (under `private/`)."""
    return name.startswith(LOCAL + "/")


def records_from(name: str, data: bytes) -> tuple[list[Event], list[TextRecord]]:
    """The events and texts a log file named `name` holds, given its bytes (from the
    work tree, or from a git revision); LogFileError names what is wrong.  A note's
    scope says where its created event may be: a private or session note only in this
    clone's own folder (one in a committed file came from another clone, whose private
    notes are not this clone's to read), a team note never there."""
    events, texts = _records_from(name.partition("/")[2] if is_local(name) else name, data, name)
    for event in events:
        placed(event, name, is_local(name))
    return events, texts


def placed(event: Event, where: str, local: bool) -> Event:
    """`event`, where its note's scope lets it be (LogFileError, which sets its file aside)."""
    if event.type == "created" and ("scope" in event.data) != local:
        scope = event.data.get("scope")
        raise LogFileError(f"{where}: a {scope} note's event in the shared log; private and session notes"
                           " never travel (another clone's are not this clone's to read)" if not local else
                           f"{where}: a team note's event in this clone's private folder")
    return event


def _records_from(name: str, data: bytes, shown: str) -> tuple[list[Event], list[TextRecord]]:
    folder, _, base = name.partition("/")
    limit = {EVENTS: MAX_EVENT_BYTES, TEXTS: MAX_TEXT_BYTES, PACKS: MAX_PACK_BYTES}.get(folder)
    if limit is None or "/" in base or (shown != name and folder == PACKS):
        raise LogFileError(f"{shown}: not a log file")
    if len(data) > limit:
        raise LogFileError(f"{shown}: {len(data)} bytes, over the {limit}-byte limit for such a file")
    if folder == EVENTS:
        return [_event_file(shown, base, data)], []
    if folder == TEXTS:
        return [], [_text_file(shown, base, data)]
    return _pack_file(shown, base, data)


def _event_file(name: str, base: str, data: bytes) -> Event:
    if not ids.is_id(base):
        raise LogFileError(f"{name}: not an event file name (26 base32 characters)")
    if ids.content_id(data) != base:
        raise LogFileError(f"{name}: its bytes do not hash to its name (changed by hand, or damaged)")
    return event_from(_json(data, name), name, data)

def _text_file(name: str, base: str, data: bytes) -> TextRecord:
    if not ids.is_id(base):
        raise LogFileError(f"{name}: not a text file name (a note id)")
    read = text_from(_json(data, name), name)
    record = _stored_text(TextRecord(base, read.key, read.text), name)
    if record.record_bytes() != data:
        raise LogFileError(f"{name}: not in canonical form")
    return record

def _pack_file(name: str, base: str, data: bytes) -> tuple[list[Event], list[TextRecord]]:
    match = _PACK_NAME.match(base)
    if not match:
        raise LogFileError(f"{name}: not a pack name (e-<id>.jsonl or t-<id>.jsonl)")
    fault = _pack_fault(name, ids.content_id(data) == match[2], bool(data) and not data.endswith(b"\n"))
    if fault is not None:
        raise fault
    part = pack_part(name, match[1], data, 1)
    if part.problem is not None:
        raise part.problem
    return (part.records, []) if match[1] == "e" else ([], part.records)


PART_BYTES = 1 << 22  # a pack read whole lines at a time, about this many bytes of them


class PackPart(Record):
    """A stretch of a pack's lines, read (`pack_part`)."""

    records: list  # the records of its lines up to its first fault
    number: int  # its first line's number in the pack
    first: bytes  # that line
    first_read: bool  # that line is a record (so it is held to the line before it)
    last: bytes  # its last line read
    problem: LogFileError | None  # its first fault: a line that is no record, or out of order


def pack_part(name: str, kind: str, data: bytes, number: int) -> PackPart:
    """The records of `data`, whole lines of the pack `name` (`kind` e or t) from its line
    `number` on, each checked as every reader checks a pack's line: a record in canonical
    form, greater than the line before it (`_in_order`).  Reading stops at the first
    fault, which is kept: a pack of one line repeated costs that line, not its repeats.
    Pure, so a worker process can read one stretch while another reads the next."""
    lines = data.split(b"\n")[:-1]
    records: list = []
    before = b""
    for i, body in enumerate(lines):
        line, where = body + b"\n", f"{name}:{number + i}"
        try:
            obj, proven = parsed_record(body, where)
            records.append(placed(event_from(obj, where, line, proven), where, False) if kind == "e"
                           else _pack_text(obj, where, line, proven))
            _in_order(before, line, where)
        except LogFileError as exc:
            return PackPart(records[:i], number, lines[0] + b"\n", bool(records), before, exc)
        before = line
    return PackPart(records, number, lines[0] + b"\n" if lines else b"", bool(lines), before, None)


class PackReading:
    """A pack read from its file a stretch of whole lines at a time (`parts`: hashed and
    measured as they are read, each to be checked by `pack_part`, here or in a worker),
    the checked stretches taken back in order (`take`: the line that starts a stretch is
    held to the one that ended the stretch before), and the file's verdict once all are
    taken (`end`).  The faults are named as `LogTree.read` names them: the size, the hash,
    a cut-short end, then the first line that is no record or out of order.  Memory:
    a stretch, whatever the pack's size."""

    def __init__(self, name: str, kind: str, digest: str, path: str) -> None:
        self.name, self.kind, self.digest, self.path = name, kind, digest, path
        self.fault: LogFileError | None = None  # the file's own: unreadable, or grew past the limit
        self.problem: LogFileError | None = None  # a line's
        self.before, self.tail, self.hashed = b"", b"", ""

    def parts(self) -> Iterator[tuple[str, str, bytes, int]]:
        """`pack_part`'s arguments for each stretch of the file's whole lines, in order."""
        import hashlib  # here, not at the top: OpenSSL's start-up is paid only by what hashes

        digest, size, number, carry = hashlib.sha256(), 0, 1, b""
        try:
            with open(self.path, "rb") as handle:
                while block := handle.read(PART_BYTES):
                    digest.update(block)
                    size += len(block)
                    if size > MAX_PACK_BYTES:
                        self.fault = LogFileError(f"{self.name}: {size} bytes, over the {MAX_PACK_BYTES}-byte limit for such a file")
                        return
                    data = carry + block
                    cut = data.rfind(b"\n") + 1
                    carry = data[cut:]
                    if cut:
                        yield self.name, self.kind, data[:cut], number
                        number += data.count(b"\n", 0, cut)
        except OSError as exc:
            self.fault = LogFileError(f"{self.name}: cannot be read ({exc.strerror})")
            return
        self.tail, self.hashed = carry, ids.encode(digest.digest())

    def take(self, part: PackPart) -> list:
        """The records of a stretch `pack_part` read, in their turn: none once a line
        before them was at fault."""
        if self.problem is not None:
            return []
        try:
            if part.first_read:
                _in_order(self.before, part.first, f"{self.name}:{part.number}")
        except LogFileError as exc:
            self.problem = exc
            return []
        self.problem, self.before = part.problem, part.last
        return part.records

    def end(self) -> None:
        """After every stretch is taken: LogFileError if the file is at fault."""
        fault = self.fault or _pack_fault(self.name, self.hashed == self.digest, bool(self.tail)) or self.problem
        if fault is not None:
            raise fault


def _pack_fault(name: str, hashes_to_name: bool, cut_short: bool) -> LogFileError | None:
    """A pack's fault as a whole file, named before any of its lines' (whether read whole
    or in stretches)."""
    if not hashes_to_name:
        return LogFileError(f"{name}: its bytes do not hash to its name (changed by hand, or damaged)")
    if cut_short:
        return LogFileError(f"{name}: does not end with a newline (cut short)")
    return None


def _in_order(last: bytes, line: bytes, where: str) -> None:
    """A pack's lines are sorted and distinct (`write_pack`): a line repeated or out of
    order was not written by qem, and its file is set aside."""
    if last and line <= last:
        raise LogFileError(f"{where}: {'repeats the line before' if line == last else 'out of order'}"
                           " (a pack's lines are sorted and distinct, as every write makes them)")


def pack_text_line(record: TextRecord) -> bytes:
    return canonical({"key": record.key, "note": record.note, "text": record.text})


def _pack_text(obj: object, where: str, line: bytes, proven: bool = False) -> TextRecord:
    if not isinstance(obj, dict) or set(obj) != {"key", "note", "text"} or not ids.is_id(obj.get("note")):
        raise LogFileError(f"{where}: a packed text holds exactly a key, a note id and a text")
    read = text_from({"key": obj["key"], "text": obj["text"]}, where)
    record = _stored_text(TextRecord(obj["note"], read.key, read.text), where, len(line))
    if not proven and pack_text_line(record) != line:  # (proven: `line` is already the canonical form of obj)
        raise LogFileError(f"{where}: not in canonical form")
    # Its digest is the hash of the record's form without the note: the canonical line with
    # `,"note":"<id>"` cut out (no key's JSON holds `,"note":"`: a quote in a string is escaped).
    cut = line.index(b',"note":"')
    record._digest = ids.content_id(line[:cut] + line[cut + len(b',"note":""') + ids.ID_LENGTH:])
    return record


def _json(data: bytes, where: str) -> object:
    try:
        obj = cjson.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise LogFileError(f"{where}: not JSON ({exc})") from None
    except RecursionError:  # a hostile file's nesting, deeper than the parser's stack
        raise LogFileError(f"{where}: not JSON (nested too deeply)") from None
    if (b"NaN" in data or b"Infinity" in data) and _holds_not_a_number(obj):
        # Python's json reads and writes them; JSON has no such number, nor do SQLite's JSON
        # functions (the index's reads of an event's data failed on the row), nor any qem write
        raise LogFileError(f"{where}: not JSON qem reads (NaN or Infinity, which JSON has no number for;"
                           " no qem write holds one)")
    return obj


def _holds_not_a_number(value: object) -> bool:
    """Whether a JSON value holds a NaN or an infinity (walked without recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is float and item - item != 0.0:  # (NaN and the infinities only: x - x is NaN)
            return True
        if type(item) is dict:
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return False


# Levels of arrays and objects an event may hold: qem's own hold a few.  Far below the parser's
# and the encoder's stacks, so whether an event is read does not hang on how deep the call
# reading it is (the index's sync and verify's fresh replay read from different depths).
MAX_NESTING = 64


def _check_nesting(body: bytes, obj: object, where: str) -> None:
    """LogFileError where `obj` (read from, or written as, `body`) nests past MAX_NESTING."""
    if body.count(b"[") + body.count(b"{") > MAX_NESTING and nests_past(obj, MAX_NESTING):
        # (no deeper than its brackets, strings' among them: most records are not walked)
        raise LogFileError(f"{where}: not JSON qem reads (nested more than {MAX_NESTING} levels deep;"
                           " no qem write nests so)")


def nests_past(value: object, levels: int) -> bool:
    """Whether a JSON value holds arrays and objects more than `levels` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        value, depth = stack.pop()
        inner = value.values() if type(value) is dict else value if type(value) is list else None
        if inner is not None:
            if depth > levels:
                return True
            stack.extend((v, depth + 1) for v in inner)
    return False


def parsed_record(body: bytes, where: str) -> tuple[object, bool]:
    """A record's line (`body`, its newline cut) parsed, and whether `body` is proven to be
    its canonical form, so that nothing encodes it again.  orjson (C) reads it and writes
    it back with sorted keys; where that is `body` byte for byte and it holds no float,
    `canonical` writes the very same bytes (tests/test_canonical_fast.py holds the two to
    one verdict on every JSON value, strings of any characters, integers of any size,
    floats); a float is the one value orjson writes otherwise (1e-05 as 0.00001).  Any
    other line (not JSON to orjson, not canonical, a float) is read by the standard
    library and judged as it always was, its message the same.  Every field is still
    checked by the caller: this vouches for the bytes, not for what they say."""
    orjson = _orjson()
    try:
        obj = orjson.loads(body)
        if orjson.dumps(obj, option=orjson.OPT_SORT_KEYS) == body and not (_may_hold_float(body) and _holds_float(obj)):
            return obj, True
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError):  # (a nesting _holds_float cannot walk)
        pass
    return _json(body, where), False


def _orjson():  # type: ignore[no-untyped-def]
    """orjson, imported when a log is first read, not by every command that loads this module."""
    import orjson

    return orjson


def _may_hold_float(body: bytes) -> bool:
    """Whether a float could be in `body`: each float orjson writes has a point or a signed
    exponent (`1.5`, `1e+16`, `5e-324`); most lines have neither, and are not walked."""
    return b"." in body or b"e+" in body or b"e-" in body


def _holds_float(value: object) -> bool:
    if type(value) is float:
        return True
    if type(value) is dict:
        return any(_holds_float(v) for v in value.values())
    if type(value) is list:
        return any(_holds_float(v) for v in value)
    return False
