"""What a new session's start is given, kept beside the index: the next new session opens no index.

A session's start (and a subagent's) reads the memory in full: the notes due at a start,
ordered and fitted to the harness's budget.  Every new session at the same moment of the
index is given the same reply, so the first one keeps it beside the index
(`.qem/index.db-starts.json`, ignored by git as SQLite's own files are), with what its
ledger recorded (the notes given, whole or as a line, and their last change; how many notes
the memory held; the index's moment it read at), and the next new session is answered
from it and writes the same ledger, without loading SQLite or the store.

Kept only where the reply is a function of the index's moment and of nothing else a later
start could differ in: a context window with no ledger yet (nothing given, nothing
counted; a start after a compaction or a clear is read in full), a reply that said
everything it read (no change left unsaid, no hook beside it giving meanwhile), no request
in force (what is owed and late moves with the clock and with the seat asking), and
answered only for a session with no session note of its own (another session's are hidden
alike from every session but theirs).  It holds from the time it was read until the
first end of a note in force after that (where that note's standing changes), for the
same harness, event, guest and work tree.  It names the log's fingerprint and the index's
moment as the hooks' digest does (qem_edit.reads.quiet), is written by the same rules
(under the write lock, only while the index is at its moment) and removed by every change
qem makes to the index; anything else reads in full.
"""

from __future__ import annotations

import os

from ..base import cjson
from ..base.harness import START, SUBAGENT, Asked, Harness, session_key, window_key
from ..system import ledger
from ..system.workspace import STARTS_NAME, work_top
from . import quiet

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..storage.store import Store

VERSION = 1  # of the file's form
MOST = 8  # replies kept for one moment (one per harness, event, guest and work tree)


def asks(ask: Asked) -> bool:
    """Whether a hook is a start whose reply may be kept: a session's start that is not
    after a compaction or a clear, or a subagent's."""
    return ask.does == SUBAGENT or (ask.does == START and ask.source not in ("clear", "compact"))


def fresh(book: ledger.Ledger) -> bool:
    """Whether a context window's ledger is a new one: nothing given, counted, held or
    heard, no compaction."""
    return book.to_bytes() == ledger.Ledger(book.path).to_bytes()


def _key(harness: Harness, event: str, ask: Asked, state: str) -> str:
    return "\0".join((harness.name, event, ask.does, ask.guest, str(work_top(state))))


def answer(harness: Harness, event: str, ask: Asked, state: str) -> str | None:
    """The reply kept for this start, its ledger written as the full read writes it; None
    (read in full) where none is kept for it, or it does not hold for this session or now,
    or the context window has a ledger already, or anything cannot be read."""
    from ..base.times import utc_now

    if not asks(ask):
        return None
    try:
        kept = quiet.read_kept(state, STARTS_NAME, VERSION, stale_goes=True)
        if kept is None:
            return None
        moment, body, inode = kept
        try:
            entries = cjson.loads(body)
            found = entries.get(_key(harness, event, ask, state))  # (AttributeError: not an object)
            entry = _checked(found) if found is not None else None
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            quiet.unlink_if(os.path.join(state, STARTS_NAME), inode)
            return None
        if entry is None:
            return None
        now = utc_now()
        if ask.session in entry["sessions"] or not entry["from"] <= now < (entry["until"] or "~"):
            return None
        key, window = session_key(harness, ask), window_key(harness, ask)
        if window != key and ask.does == SUBAGENT:  # its session's ledger names it, to end with it (first, as
            with ledger.session(state, key) as book:  # a full read: one that fails leaves its window's untouched)
                book.started(window)
        with ledger.session(state, window) as book:
            if not fresh(book):
                return None
            book.notes_then = entry["notes"]
            for note, full, last in entry["given"]:
                book.give(note, full, last)
            book.seen = moment
        return entry["reply"]
    except Exception:  # noqa: BLE001 - a kept reply or a ledger that cannot be read: read in full
        return None


def _checked(entry: dict) -> dict:
    """An entry as read, its shape checked (TypeError, ValueError where it is not one)."""
    given = [(str(n), bool(f), str(t)) for n, f, t in entry["given"]]
    until = entry["until"]
    if not isinstance(entry["reply"], str) or not isinstance(entry["from"], str) or not (
            until is None or isinstance(until, str)) or type(entry["notes"]) is not int or entry["notes"] < 0:
        raise TypeError("not a kept start")
    return {"reply": entry["reply"], "given": given, "notes": entry["notes"], "from": entry["from"],
            "until": until, "sessions": [str(s) for s in entry["sessions"]]}


def _identity(store: Store) -> tuple[int, int] | None:
    """The index file in its place (device, inode), or None where there is none."""
    try:
        there = os.stat(store.index_path) if store.index_path is not None else None
    except OSError:
        return None
    return (there.st_dev, there.st_ino) if there is not None else None


class Bounds:
    """What a start's read holds for, read in its snapshot: when (the time its standings
    are of, and the first end of a note in force after it), for whom (the sessions holding
    session notes), and whether anything in it moves with the clock or the seat (a request
    in force).  It holds the store it was read from, open, for `keep` (an index opened
    once a start); `close` lets it go."""

    def __init__(self, store: Store, now: str) -> None:
        self.at = now  # (the time the read's standings are of: one reading of the clock for both)
        self.requests, self.until, self.sessions = store.start_bounds(now)
        self.store: Store | None = store
        self.index = _identity(store)  # the index file read: one put in its place since is another index

    def read_from_the_index_there(self) -> bool:
        """Whether the index in its place is still the file this read was made from (a
        rebuild puts a new one there: its moments are not this one's)."""
        return self.store is not None and self.index is not None and _identity(self.store) == self.index

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None


def keep(state: str, harness: Harness, event: str, ask: Asked, reply: str, book: ledger.Ledger,
         moment: str, bounds: Bounds) -> None:
    """Keep the reply a start's full read gave (at `moment`, within `bounds`, through the
    store it was read from) and what its ledger `book`, new before it, recorded; not where
    it holds for no other start (a request in force, or this session's own session notes)."""
    store = bounds.store
    if bounds.requests or ask.session in bounds.sessions or store is None:
        return
    entry = {"reply": reply, "given": [[n, full, last] for n, (_, full, last) in book.given.items()],
             "notes": book.notes_then, "from": bounds.at, "until": bounds.until, "sessions": sorted(bounds.sessions)}
    key = _key(harness, event, ask, state)

    def merged(there: bytes | None) -> bytes | None:
        try:
            entries = cjson.loads(there) if there is not None else {}
            if not isinstance(entries, dict):
                entries = {}
        except (ValueError, RecursionError):
            entries = {}
        if entries.get(key) == entry:
            return None  # (kept already)
        entries.pop(key, None)
        entries[key] = entry
        while len(entries) > MOST:
            entries.pop(next(iter(entries)))
        return cjson.dumps(entries, separators=(",", ":")).encode()  # (ASCII: any text escaped)

    try:
        line = quiet.header_line(store, moment, VERSION)
    except Exception:  # noqa: BLE001 - not kept: the next start reads in full
        return
    quiet.keep(store, line.encode() + b"\n", STARTS_NAME, merged, bounds.read_from_the_index_there)
