"""A session's ledger: which notes one agent session was given, so each comes once.

One private file per context window (`.qem/sessions/<hash of its key>.json`, mode 0600,
in a folder that ignores itself in git): a session's, keyed by its id, and a subagent's,
keyed by the agent's id alone (a subagent has a context window of its own, so it is given
its notes itself and never takes the main thread's; its id is unique, whatever session id
its hooks carry), written atomically under a lock, since a harness runs hooks of one
session side by side.  It holds, for each note given: the compaction epoch it was given
in, whether whole or as a line, and the note's last event then (its `tip`); the tool
calls it held (by a digest of what each was about), so the same call made again passes;
and a session's, the subagents it started.  A compaction starts a new epoch: what the
agent was given before it is gone from its context, so it may be given again.  A note
given and changed since is said again, as its change.  A damaged ledger is read as a new
one, marked as not knowing what its epoch gave: no call is held in that epoch (what was
held before might be held again).  So a ledger is replaced atomically, and synced to disk
only where it says a compaction (a hook pays no fsync otherwise): a power cut that loses a
write, or tears it, or brings back the ledger before it, costs notes given again or a call
held again; the one loss that would keep notes from the agent is a compaction's new epoch
(its notes then taken for given), which is synced.  Bounded: at most MAX_NOTES notes a session (the
oldest given go first), and sessions not touched for MAX_AGE_DAYS, or past MAX_SESSIONS,
are swept when a session starts (once an hour at most); a session's end removes its file
and its subagents'.
"""

from __future__ import annotations

import os
import stat
import time

from ..base import cjson
from ..base.errors import QemError
from . import files

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from .files import AnyPath

FOLDER = "sessions"
MAX_NOTES = 5000
MAX_HELD = 500  # the calls held a session remembers (the oldest go first)
MAX_SESSIONS = 200
MAX_AGE_DAYS = 14
LOCK_SECONDS = 5.0
_IGNORE_ALL = "# Written by qem: session ledgers are private to this clone.\n*\n"


def folder(state_dir: AnyPath) -> str:
    return os.path.join(state_dir, FOLDER)


def _name(session: str) -> str:
    from ..base.ids import sha256_hex  # (not hashlib: every hook names its session's ledger)

    return sha256_hex(session.encode("utf-8", "surrogatepass"))[:32]


def _file(where: AnyPath, session: str) -> str:
    """The ledger file of a context window in the ledgers' folder `where` (its `.lock` beside it)."""
    return os.path.join(where, f"{_name(session)}.json")


def lock_of(path: str) -> str:
    """The lock beside a ledger file (`NAME.json`: `NAME.lock`)."""
    return path[:-len(".json")] + ".lock"


def _digest(about: str) -> str:
    from ..base.ids import sha256_hex

    return sha256_hex(about.encode("utf-8", "surrogatepass"))[:24]


def tip(note) -> str:  # type: ignore[no-untyped-def]
    """What a note's last change is, as the ledger compares it: its state's event, else
    its creation."""
    return note.state_event or note.id


class Ledger:
    """One session's record.  (A plain class: every hook reads one, and a dataclass costs a
    hook's start-up `dataclasses` and `inspect`.)"""

    def __init__(self, path: str, unsure: int = -1) -> None:
        self.path = path
        self.notes_then = -1  # the notes the memory held when the session began (-1: not known yet)
        self.epoch = 0
        self.pending_compact = False  # a compaction began; the next moment that can give context gives `compact`
        self.stop_asked = False
        self.prompts: list[str] = []  # what the user typed (bounded), for user-stated quotes
        self.given: dict[str, list] = {}  # note → [epoch, full, tip]
        self.held: dict[str, int] = {}  # a held call's digest → the epoch it was held in
        self.unsure = unsure  # an epoch whose record was lost (a damaged ledger): no call is held in it
        self.agents: list[str] = []  # the keys of the subagents this session started
        # The index's moment (its id and generation) the last reply read in full saw, where
        # that reply left no change of a note given unsaid: while the hooks' digest is of
        # that very moment, no note given has changed since, which is what lets a hook
        # answer from it (qem_edit.reads.quiet); "" where not known.
        self.seen = ""

    def started(self, agent_key: str) -> None:
        """A subagent of this session started: its ledger goes when the session ends."""
        if agent_key not in self.agents:
            self.agents = (self.agents + [agent_key])[-MAX_AGENTS:]

    def given_now(self) -> dict[str, list]:
        """What this epoch gave: note → [epoch, full, tip]."""
        return {n: entry for n, entry in self.given.items() if entry[0] == self.epoch}

    def was_given(self, note_id: str, full: bool) -> bool:
        entry = self.given.get(note_id)
        return entry is not None and entry[0] == self.epoch and (entry[1] or not full)

    def give(self, note_id: str, full: bool, last: str) -> None:
        self.given.pop(note_id, None)  # re-inserted: the dict's order is the order given
        self.given[note_id] = [self.epoch, full, last]
        while len(self.given) > MAX_NOTES:
            self.given.pop(next(iter(self.given)))

    def may_hold(self) -> bool:
        """Whether this epoch's record is whole (a damaged ledger's epoch holds nothing)."""
        return self.unsure != self.epoch

    def was_held(self, about: str) -> bool:
        """Whether a call about `about` (its moment, paths, command) was held this epoch."""
        return self.held.get(_digest(about)) == self.epoch

    def hold(self, about: str) -> None:
        key = _digest(about)
        self.held.pop(key, None)
        self.held[key] = self.epoch
        while len(self.held) > MAX_HELD:
            self.held.pop(next(iter(self.held)))

    def heard(self, prompt: str) -> None:
        """What the user typed (the last MAX_PROMPTS, each cut at MAX_PROMPT_CHARS)."""
        if prompt:
            self.prompts = (self.prompts + [prompt[:MAX_PROMPT_CHARS]])[-MAX_PROMPTS:]

    def compacted(self) -> None:
        self.epoch += 1
        self.pending_compact = True

    def to_bytes(self) -> bytes:
        return cjson.dumps({"v": 1, "notes_then": self.notes_then, "epoch": self.epoch,
                           "pending_compact": self.pending_compact, "stop_asked": self.stop_asked,
                           "prompts": self.prompts, "given": self.given, "held": self.held,
                           "unsure": self.unsure, "agents": self.agents, "seen": self.seen},
                          separators=(",", ":")).encode()  # ASCII: a lone surrogate is kept as its escape


MAX_PROMPTS = 50
MAX_AGENTS = 500  # subagents a session's ledger remembers to remove at its end (the sweep takes the rest)
MAX_PROMPT_CHARS = 20_000


def _read(path: str) -> Ledger:
    raw = files.read_regular(path)
    ledger = Ledger(path)
    if raw is None:
        return ledger
    try:
        data = cjson.loads(raw)
        ledger.epoch = int(data["epoch"])
        ledger.notes_then = int(data.get("notes_then", -1))
        ledger.pending_compact = bool(data.get("pending_compact"))
        ledger.stop_asked = bool(data.get("stop_asked"))
        ledger.prompts = [p for p in data.get("prompts", []) if isinstance(p, str)][-MAX_PROMPTS:]
        ledger.agents = [a for a in data.get("agents", []) if isinstance(a, str)][-MAX_AGENTS:]
        ledger.given = {str(k): list(v) for k, v in dict(data["given"]).items()
                        if isinstance(v, list) and len(v) == 3}
        ledger.held = {str(k): int(v) for k, v in dict(data.get("held", {})).items()}
        ledger.unsure = int(data.get("unsure", -1))
        seen = data.get("seen", "")
        ledger.seen = seen if isinstance(seen, str) else ""
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError):
        # A damaged ledger is a new one: a note given twice, never a hook that fails.
        return Ledger(path, unsure=0)
    return ledger


class session:
    """The ledger of a context window (`session_id`: the harness's name and its session
    id, or a subagent's key), read under its lock and written back atomically when the
    block ends (not where it raises).  (A class, not contextlib's: qem_edit.system.files.)"""

    def __init__(self, state_dir: AnyPath, session_id: str) -> None:
        self.state_dir, self.session_id = state_dir, session_id

    def __enter__(self) -> Ledger:
        self.path = _file(prepared(self.state_dir), self.session_id)
        self.lock = files.locked(lock_of(self.path), LOCK_SECONDS)
        try:
            self.lock.__enter__()
            self.ledger = _read(self.path)
            self.before, self.epoch = self.ledger.to_bytes(), self.ledger.epoch
            return self.ledger
        except BaseException:  # (a Ctrl-C among them: let go)
            self.lock.let_go()
            raise

    def __exit__(self, kind: object, *exc: object) -> None:
        try:
            after = self.ledger.to_bytes() if kind is None else self.before
            if after != self.before:  # synced only where it says a compaction (above)
                files.write_atomic(self.path, after, mode=0o600, durable=self.ledger.epoch != self.epoch)
        finally:
            self.lock.let_go()


def peek(state_dir: AnyPath, session_id: str) -> Ledger | None:
    """The ledger of a context window as it is now, read without its lock (it is replaced
    whole, never written in place: a reader sees the old one or the new), None where it
    has none; nothing is made or written."""
    where = folder(state_dir)
    if os.path.islink(where):  # (as `prepared` refuses it: a clone's commit could point it anywhere)
        return None
    path = _file(where, session_id)
    return _read(path) if os.path.isfile(path) else None


def prepared(state_dir: AnyPath) -> str:
    """The ledgers' folder: a private folder of this clone (a link is refused: a clone's
    commit could point it anywhere), ignoring itself in git by a `.gitignore` that is
    qem's (one a commit brought is put back to qem's before any ledger is written)."""
    where = folder(state_dir)
    files.private_dir(where)
    ignore = os.path.join(where, ".gitignore")
    if files.read_regular(ignore) != _IGNORE_ALL.encode():
        files.write_atomic(ignore, _IGNORE_ALL.encode(), mode=0o644)
    return where


def _listed(state_dir: AnyPath) -> list[os.DirEntry]:
    """The ledgers' folder's entries; none where it is not a folder of its own (a link)."""
    where = folder(state_dir)
    try:
        if not os.path.isdir(where) or os.path.islink(where):
            return []
        return list(os.scandir(where))
    except OSError:
        return []


RECENT_HOURS = 24


def recent_prompts(state_dir: AnyPath, now: float | None = None) -> list[str]:
    """What the user typed in this clone's sessions of the last RECENT_HOURS, as the prompt
    hooks heard it (none without them)."""
    now = time.time() if now is None else now
    out: list[str] = []
    entries = [e.path for e in _listed(state_dir) if e.name.endswith(".json") and e.is_file(follow_symlinks=False)
               and now - e.stat(follow_symlinks=False).st_mtime <= RECENT_HOURS * 3600]
    for path in entries:
        out += _read(path).prompts
    return out


def end(state_dir: AnyPath, session_id: str) -> None:
    """A session ended: its ledger goes, and its subagents'."""
    where = folder(state_dir)
    if os.path.islink(where):
        return
    keys = [session_id] + _read(_file(where, session_id)).agents
    for key in keys:
        for doomed in (_file(where, key), lock_of(_file(where, key))):
            try:
                os.unlink(doomed)
            except FileNotFoundError:
                pass


SWEEP_EVERY_S = 3600  # a start sweeps where no start swept for this long
SWEPT = ".swept"  # the folder's file whose time is the last sweep's


def sweep(state_dir: AnyPath, now: float | None = None) -> int:
    """Ledgers of sessions untouched for MAX_AGE_DAYS, and the oldest past MAX_SESSIONS,
    removed; returns how many.  Once SWEEP_EVERY_S at most: a start pays one look at a
    file's time, not a listing of the folder and a look at every ledger's (a clone's busy
    fortnight holds hundreds, subagents' included), and the folder holds MAX_SESSIONS
    ledgers after a sweep, and those an hour's sessions add until the next."""
    now = time.time() if now is None else now
    swept = os.path.join(folder(state_dir), SWEPT)
    try:
        marker = os.lstat(swept)
        last = marker.st_mtime if stat.S_ISREG(marker.st_mode) else None  # (a folder or a link there: no mark)
    except OSError:
        last = None
    if last is not None and 0 <= now - last < SWEEP_EVERY_S:
        return 0
    listed = _listed(state_dir)
    entries = [(e.stat(follow_symlinks=False).st_mtime, e.path) for e in listed if e.name.endswith(".json")]
    entries.sort(reverse=True)
    gone = [p for i, (mtime, p) in enumerate(entries) if i >= MAX_SESSIONS or now - mtime > MAX_AGE_DAYS * 86400]
    for path in gone:
        for doomed in (path, lock_of(path)):
            try:
                os.unlink(doomed)
            except FileNotFoundError:
                pass
    if listed:
        try:
            files.write_atomic(swept, b"", mode=0o600, durable=False)
        except (OSError, QemError):
            pass  # (a link or a folder there, or none can be written: swept again at the next start)
    return len(gone)


def exists(state_dir: AnyPath, session_id: str) -> bool:
    """Whether the ledger of a context window is here (its session has not ended, nor
    been swept as stale)."""
    return os.path.isfile(_file(folder(state_dir), session_id))
