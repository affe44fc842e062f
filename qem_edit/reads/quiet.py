"""What a tool call or a prompt can fire, kept beside the index: nothing due opens no index.

Before every edit, read and command an agent makes, and at every prompt, a hook asks what
the moment fires.  Nearly always the answer is nothing new: the file has no note, or its
notes were given already.  This module keeps beside the index (`.qem/index.db-moments.json`,
ignored by git as SQLite's own files are) what any tool call or prompt can fire: the notes
declaring the edit, read, command and prompt moments, every anchor in force, every
`when-path` and `when-run` pattern, the keys of the backticked terms (a prompt holding one
as a word is read in full), and whether a request is in force (a prompt gives what is late:
then every prompt is read in full), and how many notes the memory holds.  From it and the
session's ledger a hook knows, without loading SQLite or the store, that nothing is due:
every note the call fires was given whole in this context window, and the session's last
full reply, which said every change of a note given, was read at the very moment of the
index the digest was (so no note given changed since); a prompt is then recorded in the
ledger as heard, as a full read records it.  A context window's first tool call (no ledger
yet: a subagent's, or a session whose harness fires no start) that fires nothing begins its
ledger as the full read would, with the notes the memory holds and the digest's moment.
Anything else (a note to give, a log or an index that moved, a ledger or a digest that
cannot be read, is too large or is another version's) is answered by the full read
(qem_edit.reads.session), which writes the digest again.

The digest names the log's fingerprint (qem_edit.storage.stamp) and the index's moment
(its id and generation) it was read at.  It is used only while the log's fingerprint is
that one (a pull moved no file), and the store removes it after every change it makes to
the index (a write, a catch-up, a rebuild); it is written under the write lock, only
while the index is at its moment.  So a change within one tick of a coarse file clock,
which leaves the folders' times as they were, moves the moment and leaves no digest
behind.  The rules it is read by are the index's own (qem_edit.base.triggers:
`declaring`, `by_paths`, `by_command`, `by_prompt`).  A digest brought from elsewhere (a commit forcing
an ignored file in) names a fingerprint no other checkout has, and is never used; it is
read as untrusted all the same (no link, no device, its size bounded, its shape checked).
"""

from __future__ import annotations

import os

from .. import __version__
from ..base import cjson
from ..base.errors import QemError
from ..base.harness import TOOL, Asked
from ..base.triggers import BUNDLES, bundle_at, by_command, by_paths, by_prompt, declaring, from_cwd
from ..storage.stamp import stamp
from ..system import files, ledger
from ..system.workspace import MOMENTS_NAME, work_top

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..storage.store import Store

VERSION = 3  # of the digest's form: a digest of another form (or another qem's) is written again
TOOL_MOMENTS = ("edit", "read", "shell")  # the moments a tool call gives
KEPT_MOMENTS = (*TOOL_MOMENTS, "prompt")  # the moments whose declared notes the digest names
MAX_BYTES = 1 << 20  # a digest larger (some 15,000 anchors) is not kept: reading it would cost what it spares
TOO_LARGE = b'{"too_large":true}'  # the body kept in its place, so that no full read makes it again
HEADER_BYTES = 4096  # what a digest's first line may take (its header is a few hundred bytes)


def nothing_due(ask: Asked, state: str, window: str) -> bool:
    """Whether this tool call fires nothing the context window `window` (a ledger key) was
    not given whole, and no note it was given changed since: True only when the digest,
    the ledger and the log all say so; False (read it in full) on any doubt.  A window's
    first call (no ledger yet) that fires nothing begins its ledger as a full read would
    (`_begun`)."""
    if ask.moment not in TOOL_MOMENTS:
        return False
    try:
        digest = _digest(state)
        if digest is None:
            return False
        fired = _fired(ask, state, digest)
        book = ledger.peek(state, window)
        if book is None:
            return not fired and _begun(state, window, digest, ask.does == TOOL)
        return _nothing_new(book, digest, fired)
    except Exception:  # noqa: BLE001 - a digest, a ledger or a link that cannot be read: read in full
        return False


def _begun(state: str, window: str, digest: dict, replied: bool) -> bool:
    """A context window's first tool call, which fires nothing: its ledger begun as the
    full read begins it, with the notes the memory holds (what the Stop hook compares
    with) and, where the call is `replied` to (a hold that holds nothing, before a tool
    where no context goes, is not: Gemini CLI's BeforeTool), the index's moment the reply
    was of (nothing was given in the window, so no note given can have changed since).
    Where a hook beside this one began it meanwhile, its ledger answers as any other's does."""
    with ledger.session(state, window) as book:
        if book.notes_then < 0 and not book.given:
            book.notes_then, book.seen = digest["count"], digest["moment"] if replied else ""
            return True
        return _nothing_new(book, digest, set())


def prompt_heard(ask: Asked, state: str, window: str) -> bool:
    """Whether a prompt fires nothing the context window `window` was not given whole, and
    no note it was given changed since (as `nothing_due` asks of a tool call), with no
    compaction's notes pending and no request in force (a deadline passing makes one late,
    which a prompt gives); then the prompt is recorded in the ledger as heard, as a full
    read records it.  False (read it in full) on any doubt: a word of the prompt that is a
    term's key among them."""
    try:
        digest = _digest(state)
        if digest is None or digest["requests"]:
            return False

        def terms(words: set[str]) -> list[tuple[str, str]]:
            if words & digest["keys"]:
                raise _Doubt  # (the digest holds the keys, not the terms: read in full)
            return []
        fired = set(digest["on"]["prompt"]) | set(by_prompt(ask.prompt, str(work_top(state)), _anchored(digest),
                                                             lambda: digest["paths"], terms))
        with ledger.session(state, window) as book:
            if book.pending_compact or not _nothing_new(book, digest, fired):
                return False
            book.heard(ask.prompt)
        return True
    except Exception:  # noqa: BLE001 - a digest, a ledger or a link that cannot be read: read in full
        return False


class _Doubt(Exception):
    """What the digest cannot say (a prompt naming a term's key): read in full."""


def _nothing_new(book: ledger.Ledger, digest: dict, fired: set[str]) -> bool:
    """Whether the context window of `book` was given every note of `fired` whole, and its
    last full reply was read at the digest's moment, leaving nothing unsaid (so no note
    it was given changed since)."""
    return book.notes_then >= 0 and book.seen == digest["moment"] and all(book.was_given(n, True) for n in fired)


def _anchored(digest: dict):  # type: ignore[no-untyped-def]
    """(note, path) of the anchors in force on `paths`, by the digest: by_paths' and by_prompt's `anchored`."""
    return lambda paths: ((note, path) for path in paths for note in digest["anchors"].get(path, ()))


def _digest(state: str) -> dict | None:
    """The digest, where it is this qem's and names the log as it is now; else None.  A
    body that is not what a digest holds is removed, for the next full read to write
    (unless another hook wrote a new one meanwhile)."""
    kept = read_kept(state, MOMENTS_NAME, VERSION, stale_goes=True)
    if kept is None:
        return None
    moment, body, inode = kept
    try:
        data = cjson.loads(body)
        checked = {"on": {m: [str(n) for n in data["on"][m]] for m in KEPT_MOMENTS},
                   "anchors": _by_path((str(p), str(n)) for p, n in data["anchors"]),
                   "paths": [(str(p), str(n)) for p, n in data["paths"]],
                   "runs": [(str(p), str(n)) for p, n in data["runs"]],
                   "keys": frozenset(str(k) for k in data["keys"]), "requests": data["requests"] is not False,
                   "count": _count(data["count"])}
    except (ValueError, KeyError, TypeError, RecursionError):
        unlink_if(os.path.join(state, MOMENTS_NAME), inode)
        return None
    return {"moment": moment, **checked}


def _count(value: object) -> int:
    """The notes the memory holds, as the digest names them (a whole number, none below 0)."""
    if type(value) is not int or value < 0:
        raise ValueError(f"not a count of notes: {value!r}")
    return value


def _by_path(anchors) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """The notes anchored to each path, from (path, note) pairs."""
    out: dict[str, list[str]] = {}
    for path, note in anchors:
        out.setdefault(path, []).append(note)
    return out


def read_kept(state: str, name: str, version: int, stale_goes: bool = False) -> tuple[str, bytes, int] | None:
    """A file a hook keeps beside the index (`name`, of form `version`), where it is this
    qem's and names the log as it is now: the index's moment it names, its body, and the
    file's inode (for `unlink_if`); None where there is none, or it is another's, or it is
    kept as too large.  Read as untrusted: no link, no device, at most MAX_BYTES.
    `stale_goes`: one that is not this qem's or not of the log as it is now is removed
    (unless another hook wrote a new one meanwhile), for a file holding notes' texts that
    a write by a qem that does not know it left behind."""
    handle = files.open_regular(os.path.join(state, name))  # (refuses a link, a folder, a device)
    if handle is None:
        return None
    with handle:
        raw, read = handle.read(MAX_BYTES + 1), os.fstat(handle.fileno())
    if len(raw) > MAX_BYTES:
        return None
    head, _, body = raw.partition(b"\n")
    try:
        header = cjson.loads(head)
        current = header == _header(cjson.dumps(stamp(state)), header.get("moment"), version)
    except (ValueError, AttributeError, RecursionError):
        current = False
    if not current:
        if stale_goes:
            unlink_if(os.path.join(state, name), read.st_ino)
        return None
    return (header["moment"], body, read.st_ino) if body != TOO_LARGE else None


def unlink_if(path: str, inode: int) -> None:
    """A kept file found damaged or stale removed, unless another hook wrote a new one since."""
    try:
        if os.stat(path).st_ino == inode:
            os.unlink(path)
    except OSError:  # (gone already, or a folder that takes no change)
        pass


def _fired(ask: Asked, state: str, digest: dict) -> set[str]:
    """Every note the call's moments fire by the digest (as qem_edit.reads.session's
    `_moments` makes them: the call's own, then a command's edits and reads)."""
    top = str(work_top(state))
    fired: set[str] = set()
    for event, named in ((ask.moment, ask.paths), *ask.also):
        paths = from_cwd(named, ask.cwd or top, top)
        if not paths and event != ask.moment:
            continue
        for moment in declaring(event):
            fired.update(digest["on"][moment])
        if event in ("edit", "read"):
            fired.update(by_paths(paths, _anchored(digest), digest["paths"]))
        elif event == "shell" and ask.command and event == ask.moment:
            fired.update(by_command(ask.command, digest["runs"]))
    return fired


def _header(log_stamp: str | None, moment: object, version: int = VERSION) -> dict[str, object]:
    """What a kept file is of: its form, the qem and the bundles (the moments each kind
    fires at, which it read the notes by) that wrote it, the log's fingerprint and the
    index's moment (its id and generation: qem_edit.storage.store.Store.moment) it was
    read at."""
    return {"v": version, "qem": __version__, "bundles": cjson.dumps(BUNDLES), "stamp": log_stamp, "moment": moment}


def header_line(store: Store, moment: str, version: int = VERSION) -> str:
    """The first line of a file kept beside the index as `store` reads it now, at `moment`."""
    return cjson.dumps(_header(store.log_stamp(), moment, version), separators=(",", ":"))


def written(store: Store, moment: str) -> bytes | None:
    """The digest of the index as `store` reads it now (inside its read snapshot, at
    `moment`), or None where the one beside it is of this very index (or there is no file
    to keep it in)."""
    if store.index_path is None:
        return None
    header = header_line(store, moment)
    try:
        handle = files.open_regular(os.path.join(store.root, MOMENTS_NAME))
    except QemError:
        handle = None  # (a link or a device where the digest goes: written over, never read)
    if handle is not None:
        with handle:
            if handle.readline(HEADER_BYTES).rstrip(b"\n") == header.encode():
                return None
    with store.seeing_every_session():  # every session's notes: a digest serves them all
        body = {"on": {m: [n for n, *_ in store.due_at_moment(m, bundle_at(m))] for m in KEPT_MOMENTS},
                "anchors": [(path, note) for note, path, _ in store.anchors_in_force()],
                "paths": store.patterns_in_force("path"), "runs": store.patterns_in_force("run"),
                "keys": store.term_keys(), "requests": store.any_request_in_force(), "count": store.count()}
    return (header + "\n" + cjson.dumps(body, separators=(",", ":"))).encode()  # (ASCII: any text escaped)


def moment_of(digest: bytes) -> str:
    """The index's moment a digest `written` made names."""
    return cjson.loads(digest.partition(b"\n")[0])["moment"]


def keep(store: Store, digest: bytes | None, name: str = MOMENTS_NAME,
         merged: Callable[[bytes | None], bytes | None] | None = None,
         still: Callable[[], bool] = lambda: True) -> None:
    """Write the digest `written` made (after the read it was made in) while no write of
    qem's can land (its write lock, tried once: a writer at work leaves it for a later
    read), and only while the index is still at the moment it names; taken back if a
    catch-up moved the index meanwhile (which removes the digest after its commit, so one
    written after that removal is seen here).  One too large to read fast is kept as its
    header alone (TOO_LARGE), which no hook answers from and no full read makes again until
    the index moves; one that cannot be written is not kept: the hooks then read in full.
    Another file kept beside the index (`name`) is written by the same rules; `merged`,
    where given, makes what is written, under the lock, from the body kept there now at
    the same moment (None: none), else nothing is written; `still`, where given, says
    whether the store still reads the index in its place, asked with the moment."""
    from ..storage.store import LOCK_NAME

    if digest is None:
        return
    path = os.path.join(store.root, name)
    try:
        with files.locked(os.path.join(store.root, LOCK_NAME), 0):
            if merged is not None:
                header = digest.partition(b"\n")[0]
                handle = files.open_regular(path)
                there = None
                if handle is not None:
                    with handle:
                        head, _, there = handle.read(MAX_BYTES + 1).partition(b"\n")
                    if head != header:
                        there = None  # another moment's: written over
                    elif there == TOO_LARGE:
                        return  # (this moment's, too large: made again only when the index moves)
                body = merged(there)
                if body is None:
                    return
                digest = header + b"\n" + body
            if len(digest) > MAX_BYTES:
                digest = digest.partition(b"\n")[0] + b"\n" + TOO_LARGE
            if moment_of(digest) != store.moment(store.head()) or not still():
                return
            files.write_atomic(path, digest, mode=0o600, durable=False)
            if moment_of(digest) != store.moment(store.head()) or not still():
                os.unlink(path)
    except (QemError, OSError, ValueError):
        pass
